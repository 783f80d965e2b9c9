// Launcher for int8 per-token absmax activation quantization (semantics: core/act_int8.h).
// Contract: x (rows, cols) row-major float32 device memory, q (rows, cols) int8, scale (rows);
// rows >= 1, cols >= 1, no overlap; async on `stream`. Violations throw trit::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace trit::kernels {

// One block per row (so rows <= 2^31 - 1). float4 loads when cols % 4 == 0, x is 16-byte and q
// 4-byte aligned; a scalar path otherwise. Bit-exact with trit::act_int8_quantize_ref.
void act_int8_quantize(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scale,
                       cudaStream_t stream);

}  // namespace trit::kernels
