// PackedModel helpers: see packed_model.h.
#include "exporters/packed_model.h"

#include "core/error.h"

namespace trit::exporters {

const char* float_dtype_name(FloatDType d) {
    switch (d) {
        case FloatDType::kF32: return "float32";
        case FloatDType::kF16: return "float16";
        case FloatDType::kBF16: return "bfloat16";
    }
    return "?";
}

FloatDType parse_float_dtype(const std::string& name) {
    for (auto d : {FloatDType::kF32, FloatDType::kF16, FloatDType::kBF16})
        if (name == float_dtype_name(d)) return d;
    TRIT_FAIL("unknown float dtype '", name, "'; known: float32, float16, bfloat16");
}

int64_t PackedLayer::weight_bytes() const {
    if (!format.packed()) return out * in * (weight_dtype == FloatDType::kF32 ? 4 : 2);
    int64_t bytes = scale_bytes();
    for (const auto& a : packed) bytes += static_cast<int64_t>(a.size());
    return bytes;
}

const PackedLayer& PackedModel::layer(const std::string& name) const {
    for (const auto& l : layers)
        if (l.name == name) return l;
    TRIT_FAIL("packed model has no layer '", name, "'");
}

std::pair<int64_t, int64_t> scale_shape(const WeightQuantSpec& spec, int64_t out, int64_t in) {
    switch (spec.granularity) {
        case ScaleGranularity::kTensor: return {1, 1};
        case ScaleGranularity::kChannel: return {out, 1};
        case ScaleGranularity::kGroup: break;
    }
    return {out, (in + spec.group_size - 1) / spec.group_size};
}

}  // namespace trit::exporters
