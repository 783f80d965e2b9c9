// Activation quantizers for the training forward. int8_per_token (BitNet): per row of the last
// dimension, amax = max(max|x|, kAct8Eps), q = clamp(round(x * (127 / amax)), -128, 127),
// x_hat = q * (amax / 127): on finite rows, codes and scales are bit-identical to
// act_int8_quantize_ref and the CUDA kernel; a row holding NaN or Inf dequantizes to NaN in both.
#pragma once

#include <torch/types.h>

#include <string>

namespace trit {

// kTernary: the BWTA activations, a learnable per-tensor scale onto a grid of levels (ternary at
// the last SMSQ stage, bool where the input is non-negative): an ActLevelQuantizer module
// (core/bwta_quant.h) that the QuantLinear owns, not a function of x alone.
enum class ActQuantMethod { kNone, kInt8PerToken, kTernary };

ActQuantMethod parse_act_quant_method(const std::string& name);  // none | int8_per_token | ternary
const char* act_quant_method_name(ActQuantMethod method);

struct Int8Activations {
    torch::Tensor q;      // same shape as x, int8 values (stored as float32 for the training path)
    torch::Tensor scale;  // x's shape with the last dimension 1: the dequantization multiplier
};

// Quantizes without autograd history.
Int8Activations act_int8_quantize(const torch::Tensor& x);

// Codes, scale and the dequantized activations x_hat = q * scale, without autograd history.
struct Int8FakeQuant {
    torch::Tensor q, x_hat, scale;  // q, x_hat: x's shape; scale: last dimension 1
};
Int8FakeQuant act_int8_fake_quantize(const torch::Tensor& x);

// A fused implementation of act_int8_fake_quantize for contiguous float32 CUDA tensors (one
// launch instead of ~9 tensor ops), registered by the CUDA kernels library
// (kernels::register_training_quantizers, which trit's CLI calls at start when built with CUDA).
// Without one, CUDA tensors take the tensor ops: same values.
using ActInt8CudaImpl = Int8FakeQuant (*)(const torch::Tensor& x);
void set_act_int8_cuda_impl(ActInt8CudaImpl impl);

// Training forward: the dequantized activations, with a straight-through (identity) gradient.
torch::Tensor act_fake_quant(const torch::Tensor& x, ActQuantMethod method);

}  // namespace trit
