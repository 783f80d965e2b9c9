// Training-time quantizers on the GPU, fused: the QAT forward of an int8-activation ternary linear
// needs codes, dequantized values and scales of its input and of its weight, which LibTorch
// computes with ~8 tensor ops each (and on a small model each op costs more in launch and
// dispatch than in work). One launch each here, same arithmetic as the tensor ops:
//   act_int8_fake_quantize: per row, the int8 per-token codes and scale of core/act_int8.h (as
//     float), and x_hat = code * scale;
//   weight_absmean_channel: per output row, s = sum|w| / cols (rounded to fp16 if asked),
//     code = clamp(rint(w / (s + eps)), -1, 1), w_eff = code * s (eps: core's kAbsmeanEps).
// Contract: row-major float32 device memory, rows >= 1, cols >= 1, no overlap between inputs
// and outputs; async on `stream`. Violations throw trit::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace trit::kernels {

// x (rows, cols) -> q, x_hat (rows, cols), scale (rows). A row holding a NaN or an infinity gets
// codes 0 and scale NaN (so x_hat is NaN), as the CPU reference.
void act_int8_fake_quantize(const float* x, int64_t rows, int64_t cols, float* q, float* x_hat,
                            float* scale, cudaStream_t stream);

// w (rows, cols) -> q, w_eff (rows, cols), scale (rows). The sum's order is a tree's, so a scale
// can differ from another reduction's by an ulp.
void weight_absmean_channel(const float* w, int64_t rows, int64_t cols, bool fp16_scale, float eps,
                            float* q, float* w_eff, float* scale, cudaStream_t stream);

}  // namespace trit::kernels
