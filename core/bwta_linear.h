// The forward of a BWTA linear layer (seed 003, eq. 7-8): activations quantized by a learnable
// scale onto a grid (core/bwta_quant.h), weights by any weight quantizer (binary for BWTA),
// computed the way the packed runtimes compute it: exact integer sums of the codes, then
// y = (sum_g s_w[g] * acc[g]) * s_A + b (int8_linear.h's epilogue with one activation scale for
// every row). Backward is that of y = A_hat . W_eff^T + b with A_hat = s_A * codes(A / s_A): the
// clipped straight-through gradient to A, the (scaled) LSQ gradient to s_A, the straight-through
// gradient to the latent weight, as if the product were a float one.
#pragma once

#include <torch/types.h>

#include "core/bwta_quant.h"
#include "core/weight_quant.h"

namespace trit {

// x (..., in), scale a 0-dim learnable s_A (positive), weight (out, in), bias (out) or undefined
// -> (..., out). grad_scale: the LSQ gradient scale of s_A. `frozen`: codes and scales to use
// instead of quantizing `weight` (QuantLinear::freeze_weights).
torch::Tensor bwta_linear(const torch::Tensor& x, const torch::Tensor& scale, const ActGrid& grid,
                          double grad_scale, const torch::Tensor& weight, const torch::Tensor& bias,
                          const WeightQuantSpec& spec, const QuantizedWeights* frozen = nullptr);

}  // namespace trit
