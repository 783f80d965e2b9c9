// LLM-style layer selection (BWTA seed, C.1): rank linear layers by how much their output changes
// when they alone are quantized, on calibration data, and keep the least sensitive ones.
//
// Each candidate layer sees its real inputs X (the float model's activations on the calibration
// batches; every layer stays float while measuring) and is compared with itself quantized by
// `spec`: weights by spec.weight, activations (ternary) by a scale initialised from the first
// batch's mean |X| (eq. 6) onto the grid of spec.act_levels levels, bool where the model calls the
// input non-negative. Errors over all calibration rows:
//   mse           = mean((X W^T - Q(X) W_q^T)^2)
//   relative_mse  = mse / mean((X W^T)^2)
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/quant_linear.h"

namespace trit::quantizers {

struct LayerSensitivity {
    std::string name;
    double mse = 0;
    double relative_mse = 0;
};

// Sensitivities of the `candidates` (QuantLinear names of `model`), in the candidates' order.
// batch_x(i), i < batches: calibration inputs of the model. No gradients; the model is left as
// it was (mode, weights, no forward overrides).
std::vector<LayerSensitivity> layer_sensitivities(Model& model, const std::vector<std::string>& candidates,
                                                  const LinearQuantSpec& spec,
                                                  const std::function<torch::Tensor(int64_t)>& batch_x,
                                                  int64_t batches);

// The round(fraction * candidates) least sensitive layers by `metric` (mse | relative_mse), at
// least one, in model order (ties: the earlier layer first).
std::vector<std::string> least_sensitive(const std::vector<LayerSensitivity>& sensitivities,
                                         double fraction, const std::string& metric);

}  // namespace trit::quantizers
