// A model in packed form, as the container stores it and the CPU reference runtime runs it: per
// linear layer either packed integer codes + scales (+ bias) or float weights, plus the resolved
// recipe that describes the architecture.
#pragma once

#include <cstdint>
#include <string>
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

struct PackedModel {
    std::string recipe_yaml;  // the resolved recipe of the run the weights came from
    Recipe recipe;
    std::string producer;     // "trit <version>"
    std::vector<PackedLayer> layers;  // forward order
    const PackedLayer& layer(const std::string& name) const;
};

// Scale granularity as (rows, cols) of the scale matrix for an (out, in) weight.
std::pair<int64_t, int64_t> scale_shape(const WeightQuantSpec& spec, int64_t out, int64_t in);

}  // namespace trit::exporters
