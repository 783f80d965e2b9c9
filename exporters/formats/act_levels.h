// Odd-level ("levels") and bool activation codes for binary-weight / low-level-activation layers:
// per-tensor scale, x (rows, cols) float32 -> q (rows, cols) int8 codes that feed the products of
// the weight formats as x. Bit-exact CPU reference; the scale itself is chosen by the caller.
//
// levels = 2L + 1, odd, 3..255 (L = 1..127, so codes fit int8): 3 is ternary {-1, 0, 1}, 5 is
// {-2..2}, ... In IEEE float with round-to-nearest-even (the default rounding mode):
//     q = clamp(nearbyintf(x / scale), -L, L)    (true division, not x * (1 / scale))
//     bool: q = clamp(nearbyintf(x / scale), 0, 1)  (for non-negative x; negative x gives 0)
// Ties go to even: x / scale = +-0.5 -> 0 and 1.5 -> 2 (then clamped), which matches the BWTA
// seed's ternary/bool (|x / s| <= 0.5 -> 0). Non-finite: NaN -> 0; +-Inf -> +-L (bool: +Inf -> 1,
// -Inf -> 0), as the clamp gives. Dequantize with q * scale. Contract: rows >= 1, cols >= 1,
// finite scale > 0, non-null pointers; else trit::Error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kActLevelsMin = 3;
constexpr int kActLevelsMax = 255;  // L = 127, the largest that fits int8 symmetrically

// L of an odd level count: (levels - 1) / 2.
TRIT_HD constexpr int act_levels_max_code(int levels) {
    return (levels - 1) / 2;
}

void act_levels_quantize_ref(const float* x, int64_t rows, int64_t cols, float scale, int levels,
                             int8_t* q);
void act_bool_quantize_ref(const float* x, int64_t rows, int64_t cols, float scale, int8_t* q);

}  // namespace trit::formats
