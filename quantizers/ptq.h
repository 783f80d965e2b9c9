// Post-training quantization (issue 7): grids and per-group scale selection with round to nearest
// (grid.h), the layer Hessian (hessian.h), GPTQ (gptq.h), 2:4 pruning (prune24.h), and here the
// layer output error that ranks layers and fills the per-layer report. Depends on core only.
#pragma once

#include <torch/types.h>

#include "quantizers/gptq.h"
#include "quantizers/grid.h"
#include "quantizers/hessian.h"
#include "quantizers/prune24.h"

namespace trit::quantizers {

// For calibration inputs X (rows, in), the float weight W and a quantized W_q (both (out, in)),
// computed in float64:
//   mse      = ||X W^T - X W_q^T||^2 / (rows * out)
//   relative = mse / (||X W^T||^2 / (rows * out)): the error against the float output's mean
//              square (0 when both are 0, +inf when only the float output is 0).
struct OutputError {
    double mse = 0.0;
    double relative = 0.0;
};
OutputError layer_output_error(const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& w_q);

}  // namespace trit::quantizers
