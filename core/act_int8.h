// int8 per-token absmax activation quantization: the bit-exact CPU reference every kernel and the
// training forward match. x (rows, cols) row-major float32 -> q (rows, cols) int8 + scale (rows).
// Plain C++ (no LibTorch), usable from host and CUDA translation units alike.
#pragma once

#include <cstdint>

namespace trit {

// Floor on a row's absmax so an all-zero (or tiny) row gets a finite scale instead of 127 / 0.
constexpr float kAct8Eps = 1e-5f;

// Per row r, in IEEE float with round-to-nearest-even (the default rounding mode):
//   amax = max(max_j |x[r,j]|, kAct8Eps);  qs = 127.0f / amax;
//   q[r,j] = (int8) clamp(nearbyintf(x[r,j] * qs), -128, 127);  scale[r] = amax / 127.0f.
// Dequantize with q * scale. Codes are in [-127, 127] for finite rows (|x * qs| <= 127).
// Non-finite: a row holding any NaN or +-Inf gets q[r,:] = 0 and scale[r] = quiet NaN
// (0x7fc00000), so q * scale is NaN across the row, as the fake-quant forward gives; other rows
// are unaffected. Contract: rows >= 1, cols >= 1, non-null pointers; else trit::Error.
void act_int8_quantize_ref(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scale);

}  // namespace trit
