// CPU reference for int8 per-token absmax activation quantization (semantics in act_int8.h).
// Scalar on purpose: it defines the result bit for bit; speed is the CUDA kernel's job.
// Assumes the default floating-point environment (round-to-nearest-even, no -ffast-math).
#include "core/act_int8.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace trit {

void act_int8_quantize_ref(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scale) {
    TRIT_CHECK(rows >= 1 && cols >= 1,
               "act_int8_quantize_ref: rows and cols must be >= 1 (got rows=", rows,
               ", cols=", cols, ")");
    TRIT_CHECK(x != nullptr && q != nullptr && scale != nullptr,
               "act_int8_quantize_ref: x, q and scale must be non-null (rows=", rows,
               ", cols=", cols, ")");
    constexpr float kInf = std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        int8_t* qr = q + r * cols;
        // NaN and +-Inf count as +Inf, so one max finds both the absmax and a non-finite row
        // (a NaN compares false). std::fmax is exact and order-independent on these values,
        // which is what lets the kernel reduce in any order and still match.
        float amax = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            const float a = std::fabs(xr[j]);
            amax = std::fmax(amax, a <= std::numeric_limits<float>::max() ? a : kInf);
        }
        if (amax == kInf) {
            std::memset(qr, 0, static_cast<size_t>(cols));
            scale[r] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        amax = std::fmax(amax, kAct8Eps);
        const float qs = 127.0f / amax;
        for (int64_t j = 0; j < cols; ++j) {
            float v = std::nearbyint(xr[j] * qs);
            v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
            qr[j] = static_cast<int8_t>(v);
        }
        scale[r] = amax / 127.0f;
    }
}

}  // namespace trit
