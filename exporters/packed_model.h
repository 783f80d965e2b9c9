// A model in packed form, as the container stores it and the CPU reference runtime runs it: per
// linear layer either packed integer codes + scales (+ bias) or float weights, and for a BWTA layer
// its input's activation quantizer; the model's other tensors (embeddings, norms, class token,
// positions) in float; the attention's activation quantizers; and the resolved recipe that
// describes the architecture.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/act_quant.h"
#include "core/bwta_quant.h"
#include "core/recipe.h"
#include "core/weight_quant.h"
#include "exporters/format_table.h"

namespace trit::exporters {

inline constexpr const char* kModelFileFormat = "trit-model";
// The newest format_version this trit reads and writes. Version 2 adds ternary (BWTA) activation
// quantizers, version 3 the linear layers of a foreign model (ModelArchitecture::kLinears); a file
// is written with the lowest version that holds it, readable by older trits where possible.
inline constexpr int64_t kModelFileVersion = 3;
inline constexpr int64_t kModelFileVersionMin = 1;

enum class FloatDType { kF32, kF16, kBF16 };
const char* float_dtype_name(FloatDType d);  // "float32", "float16", "bfloat16"
FloatDType parse_float_dtype(const std::string& name);

// A BWTA activation quantizer (core/bwta_quant.h) as a file stores it: codes
// clip(round(x / scale), lo, hi) with one float32 scale for the whole tensor, exactly the trained
// value. Only the last SMSQ stage's grids are stored: ternary [-1, 1] (signed) and bool [0, 1].
struct PackedActQuantizer {
    std::string name;  // attention: the ActPoint's dotted name ("blocks.0.attn.q_act"); a
                       // layer's own quantizer: the layer's name
    ActLevelMode mode = ActLevelMode::kSigned;
    ActGrid grid;      // {-1, 1} signed, {0, 1} bool
    float scale = 0;   // s_A > 0, finite
};

// The grid a stored quantizer of `mode` must have: [-1, 1] (signed) or [0, 1] (bool).
ActGrid exported_act_grid(ActLevelMode mode);
// "ternary [-1, 1]" or "bool [0, 1]".
std::string describe_act_quantizer(const PackedActQuantizer& q);

struct PackedLayer {
    std::string name;
    FormatId format;  // kFloat: `weight` holds the weights
    int64_t out = 0, in = 0;
    // Packed layers: what the codes and scales mean (method, granularity, group, depth, ...), and
    // how the runtime quantizes this layer's input.
    WeightQuantSpec spec;
    ActQuantMethod activation = ActQuantMethod::kNone;
    PackedActQuantizer act;      // activation == kTernary: the input's quantizer (name = layer)
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

// What a file's layers and tensors belong to.
enum class ModelArchitecture {
    kRecipe,   // the model of a trit recipe (`recipe`): runnable, every layer and tensor checked
    kLinears,  // a foreign model (a safetensors file) quantized by `trit ptq`: its linear layers
               // and other tensors by their own names, no forward (format_version 3)
};

// `trit ptq`'s account of one layer (the per-layer report).
struct PtqLayerReport {
    std::string name;
    std::string method;          // "bt2+search+fp16, gptq (damp 0.01), 2:4 saliency", "float", ...
    std::string format;          // format name: bt2, tern24, ..., float
    double bits_per_weight = 0;  // stored bits (codes + scales, or the float weights) / weights
    std::string error_basis;     // "output": on calibration inputs, "weight": without them
    double mse = 0;              // output: ||X W^T - X Q^T||^2 / (rows out); weight: mean (W - Q)^2
    double relative_error = 0;   // mse over the float output's (weight's) mean square
    double seconds = 0;          // time spent quantizing the layer
};

// Present in files `trit ptq` wrote.
struct PtqInfo {
    bool present = false;
    std::string recipe_yaml;  // the resolved ptq recipe
    std::string source;       // the model it quantized (run directory, checkpoint, safetensors)
    std::string calibration;  // what the calibration inputs were ("none" without)
    std::vector<PtqLayerReport> layers;  // in the order they were quantized
};

struct PackedModel {
    ModelArchitecture architecture = ModelArchitecture::kRecipe;
    std::string recipe_yaml;  // kRecipe: the resolved recipe of the run the weights came from
    Recipe recipe;            // kRecipe only
    std::string producer;     // "trit <version>"
    std::vector<PackedLayer> layers;    // registration order (the mlp's forward order)
    std::vector<PackedTensor> tensors;  // registration order; none for the mlp
    // The attention's activation quantizers (quantization.attention: ternary), one per ActPoint of
    // the model in act_points order; empty otherwise.
    std::vector<PackedActQuantizer> act_quantizers;
    PtqInfo ptq;
    const PackedLayer& layer(const std::string& name) const;
    const PackedTensor& tensor(const std::string& name) const;
    // Whether any layer or attention point quantizes to ternary / bool levels (format_version 2).
    bool has_level_activations() const;
    // The format_version the file needs: 3 for kLinears, 2 with level activations, else 1.
    int64_t file_version() const;
};

// Throws a trit::Error for a kLinears model: "<what>: <source> holds the linear layers of a foreign
// model (safetensors) without an architecture to run; ...". For commands that run a whole model.
void require_runnable(const PackedModel& model, const std::string& what, const std::string& source);

// Scale granularity as (rows, cols) of the scale matrix for an (out, in) weight.
std::pair<int64_t, int64_t> scale_shape(const WeightQuantSpec& spec, int64_t out, int64_t in);

// The parameters and buffers of `model` that belong to no QuantLinear and no ActLevelQuantizer, by
// dotted name, in registration order: what a model file stores as tensors. (The quantizers'
// scales are stored with their quantizer, PackedActQuantizer; their `initialized` buffers are
// implied: a stored scale is an initialised one.)
std::vector<std::pair<std::string, torch::Tensor>> model_tensors(torch::nn::Module& model);

// Copies the file's float values into `model` (built from packed.recipe.model, on the CPU or any
// device): every tensor, and the weights and biases of the float layers, whose QuantLinears get no
// quantization; and each attention point the file names gets an ActLevelQuantizer (replacing the
// model's own, if any) with the file's grid and scale, marked initialised so that it never
// re-initialises from a batch. Packed layers are left alone. A name or shape the model does not
// have is an error, and so is a model quantizer on a point the file has none for.
void load_float_values(torch::nn::Module& model, const PackedModel& packed);

// A quantizer with the grid and scale of `q`, initialised, on the CPU.
ActLevelQuantizer make_act_quantizer(const PackedActQuantizer& q);

}  // namespace trit::exporters
