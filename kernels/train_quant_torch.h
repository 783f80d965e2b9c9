// LibTorch adapters for the fused training quantizers (kernels/train_quant.h), and their
// registration as core's CUDA implementations (core/act_quant.h, core/weight_quant.h) so that QAT
// on a GPU uses them. Call register_training_quantizers() once at start (trit's CLI does).
#pragma once

#include <torch/types.h>

#include "core/act_quant.h"
#include "core/weight_quant.h"

namespace trit::kernels {

// x: contiguous float32 CUDA (..., cols) -> codes, x_hat (x's shape), scale (..., 1).
Int8FakeQuant act_int8_fake_quantize_cuda(const torch::Tensor& x);
// w: contiguous float32 CUDA (out, in) -> absmean per-channel codes, scale (out, 1), w_eff.
QuantizedWeightsEff weight_absmean_channel_cuda(const torch::Tensor& w, bool fp16_scales);

void register_training_quantizers();

}  // namespace trit::kernels
