// The forward of a linear layer with int8 per-token activations and quantized weights, computed the
// way integer inference computes it: exact integer accumulators per weight-scale group (float32
// matmuls of integer codes are exact while |sums| < 2^24), then y = (sum_g s_w[g] * acc[g]) * s_x + b
// with the sum over g in increasing order. The packed runtimes use the same epilogue, so their
// outputs are bit-identical to the training forward. Backward is the straight-through gradient of
// y = x_hat . W_eff^T + b: dL/dx = g . W_eff, dL/dW = g^T . x_hat, as for the fake-quant linear.
#pragma once

#include <torch/types.h>

#include "core/weight_quant.h"

namespace trit {

// Largest |accumulator| a float32 sum holds exactly.
inline constexpr double kExactFloatSum = 16777216.0;  // 2^24

// The codes, scales and effective weight a quantized forward multiplies by: `frozen` moved to
// the weight's device when given (QuantLinear::freeze_weights), else `weight` quantized by `spec`.
QuantizedWeightsEff forward_weights(const torch::Tensor& weight, const WeightQuantSpec& spec,
                                    const QuantizedWeights* frozen);

// y (m, n) = the exact integer products of codes xq (m, k) (|code| <= x_max, float32) and w.q,
// then (sum over weight-scale groups g of s_w[g] * acc[g]) * sx with sx (m, 1) (or a 0-dim/(1, 1)
// scale for every row): the epilogue above. Checks that the sums stay below 2^24.
torch::Tensor integer_linear_forward(const torch::Tensor& xq, const torch::Tensor& sx,
                                     const QuantizedWeights& w, const WeightQuantSpec& spec,
                                     int64_t x_max);

// x (..., in), weight (out, in), bias (out) or undefined -> (..., out). `frozen`: codes and scales
// to use instead of quantizing `weight` (QuantLinear::freeze_weights); any device.
torch::Tensor int8_quant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, const WeightQuantSpec& spec,
                                const QuantizedWeights* frozen = nullptr);

}  // namespace trit
