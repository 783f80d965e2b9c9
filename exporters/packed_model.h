// A model in packed form, as the container stores it and the CPU reference runtime runs it: per
// linear layer either packed integer codes + scales (+ bias) or float weights; the model's other
// tensors (embeddings, norms, class token, positions) in float; and the resolved recipe that
// describes the architecture.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/act_quant.h"
#include "core/recipe.h"
#include "core/weight_quant.h"
#include "exporters/format_table.h"

namespace trit::exporters {

inline constexpr const char* kModelFileFormat = "trit-model";
inline constexpr int64_t kModelFileVersion = 1;

enum class FloatDType { kF32, kF16, kBF16 };
const char* float_dtype_name(FloatDType d);  // "float32", "float16", "bfloat16"
FloatDType parse_float_dtype(const std::string& name);

struct PackedLayer {
    std::string name;
    FormatId format;  // kFloat: `weight` holds the weights
    int64_t out = 0, in = 0;
    // Packed layers: what the codes and scales mean (method, granularity, group, depth, ...), and
    // how the runtime quantizes this layer's input.
    WeightQuantSpec spec;
    ActQuantMethod activation = ActQuantMethod::kNone;
    Arrays packed;               // as packed_arrays(format, in)
    std::vector<float> scale;    // (scale_rows, scale_cols): fp16-rounded when spec.fp16_scales
    int64_t scale_rows = 0, scale_cols = 0;
    std::vector<float> weight;   // float layers: (out, in), values as stored (rounded to the dtype)
    FloatDType weight_dtype = FloatDType::kF32;
    std::vector<float> bias;     // (out), or empty without bias

    int64_t scale_bytes() const { return scale_rows * scale_cols * (spec.fp16_scales ? 2 : 4); }
    // Bytes of the weight itself: packed arrays + scales, or the float weights.
    int64_t weight_bytes() const;
};

// A model tensor outside the linear layers: a parameter or buffer such as `embed.weight`,
// `blocks.0.norm1.weight`, `cls`, `pos`.
struct PackedTensor {
    std::string name;            // dotted name in the model
    std::vector<int64_t> shape;  // () for a scalar
    std::vector<float> values;   // row-major, as stored (rounded to dtype)
    FloatDType dtype = FloatDType::kF32;

    int64_t numel() const;
    int64_t bytes() const { return numel() * (dtype == FloatDType::kF32 ? 4 : 2); }
};

struct PackedModel {
    std::string recipe_yaml;  // the resolved recipe of the run the weights came from
    Recipe recipe;
    std::string producer;     // "trit <version>"
    std::vector<PackedLayer> layers;    // registration order (the mlp's forward order)
    std::vector<PackedTensor> tensors;  // registration order; none for the mlp
    const PackedLayer& layer(const std::string& name) const;
    const PackedTensor& tensor(const std::string& name) const;
};

// Scale granularity as (rows, cols) of the scale matrix for an (out, in) weight.
std::pair<int64_t, int64_t> scale_shape(const WeightQuantSpec& spec, int64_t out, int64_t in);

// The parameters and buffers of `model` that belong to no QuantLinear, by dotted name, in
// registration order: what a model file stores as tensors.
std::vector<std::pair<std::string, torch::Tensor>> model_tensors(torch::nn::Module& model);

// Copies the file's float values into `model` (built from packed.recipe.model, on any device):
// every tensor, and the weights and biases of the float layers, whose QuantLinears get no
// quantization. Packed layers are left alone. A name or shape the model does not have is an error.
void load_float_values(torch::nn::Module& model, const PackedModel& packed);

}  // namespace trit::exporters
