// LibTorch adapter for the int8 per-token activation quantizer (kernels/act_int8.h).
// x: CUDA float32 (..., cols), any strides -> (q int8 (..., cols), scale float32 (...)),
// launched on the current CUDA stream of x's device. Semantics: core/act_int8.h.
#pragma once

#include <torch/types.h>

#include <utility>

namespace trit::kernels {

// Throws trit::Error for an undefined, non-CUDA, non-float32 or 0-dim tensor, or cols == 0.
// An empty batch (some leading dim 0) returns empty outputs without a launch.
std::pair<torch::Tensor, torch::Tensor> act_int8_quantize(const torch::Tensor& x);

}  // namespace trit::kernels
