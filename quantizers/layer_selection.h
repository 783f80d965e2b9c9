// Which layers a recipe's quantization block applies to: `targets` and `ignore` list layer names
// or `re:<regex>` (full match). The output layer stays float unless `targets` names it exactly.
// A pattern that selects no layer is an error: nothing a user writes is silently ignored.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "core/quant_linear.h"
#include "core/recipe.h"

namespace trit::quantizers {

// True when `pattern` (a name or re:<regex>) selects `name`.
bool pattern_matches(const std::string& pattern, const std::string& name);

// The spec a QuantizationConfig gives every selected layer.
LinearQuantSpec linear_quant_spec(const QuantizationConfig& config);

// Names of the QuantLinears of `model` that `targets` / `ignore` select, in model order (whatever
// the quantization methods are), narrowed to select.layers when the recipe records a finished
// layer selection. A pattern selecting no layer is an error.
std::vector<std::string> selected_layers(torch::nn::Module& model, const std::string& output_layer,
                                         const QuantizationConfig& config);

// Sets the spec on every selected QuantLinear of `model` and returns their names. Layers not
// selected get no quantization. Ternary activations start on the grid of `act_levels` levels
// (the first SMSQ stage; 3 = ternary), bool for inputs the model calls non-negative
// (Model::input_nonnegative); attention = ternary puts a quantizer on every ActPoint (bool on the
// probabilities).
std::vector<std::string> apply_quantization(torch::nn::Module& model, const std::string& output_layer,
                                            const QuantizationConfig& config, int64_t act_levels = 3);

// Every ActLevelQuantizer below `model` (the layers' `act` and the attention points' `quant`),
// with its dotted name, in registration order.
std::vector<std::pair<std::string, ActLevelQuantizer>> act_level_quantizers(torch::nn::Module& model);

}  // namespace trit::quantizers
