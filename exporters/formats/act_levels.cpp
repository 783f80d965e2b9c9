// CPU reference for the odd-level and bool activation codes (semantics in act_levels.h).
// Scalar on purpose: it defines the result bit for bit. Assumes the default floating-point
// environment (round-to-nearest-even, no -ffast-math, which would break the NaN test).
#include "exporters/formats/act_levels.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace trit::formats {
namespace {

void check_args(const char* who, const float* x, int64_t rows, int64_t cols, float scale,
                const int8_t* q) {
    TRIT_CHECK(rows >= 1 && cols >= 1, who, ": rows and cols must be >= 1 (got rows=", rows,
               ", cols=", cols, ")");
    TRIT_CHECK(x != nullptr && q != nullptr, who, ": x and q must be non-null (rows=", rows,
               ", cols=", cols, ")");
    TRIT_CHECK(std::isfinite(scale) && scale > 0.0f, who, ": scale must be finite and > 0 (got ",
               scale, ")");
}

// Clamps in float before the cast, so +-Inf and huge values never reach an out-of-range
// float -> int conversion (undefined behaviour).
void quantize(const float* x, int64_t count, float scale, float lo, float hi, int8_t* q) {
    for (int64_t e = 0; e < count; ++e) {
        const float v = std::nearbyint(x[e] / scale);
        const float c = std::isnan(v) ? 0.0f : std::min(std::max(v, lo), hi);
        q[e] = static_cast<int8_t>(c);
    }
}

}  // namespace

void act_levels_quantize_ref(const float* x, int64_t rows, int64_t cols, float scale, int levels,
                             int8_t* q) {
    check_args("act_levels_quantize_ref", x, rows, cols, scale, q);
    TRIT_CHECK(levels >= kActLevelsMin && levels <= kActLevelsMax && levels % 2 == 1,
               "act_levels_quantize_ref: levels must be odd in 3..255 (got ", levels,
               "); levels = 2L + 1 gives codes in [-L, L]");
    const float top = static_cast<float>(act_levels_max_code(levels));
    quantize(x, rows * cols, scale, -top, top, q);
}

void act_bool_quantize_ref(const float* x, int64_t rows, int64_t cols, float scale, int8_t* q) {
    check_args("act_bool_quantize_ref", x, rows, cols, scale, q);
    quantize(x, rows * cols, scale, 0.0f, 1.0f, q);
}

}  // namespace trit::formats
