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
// the quantization methods are). A pattern selecting no layer is an error.
std::vector<std::string> selected_layers(torch::nn::Module& model, const std::string& output_layer,
                                         const QuantizationConfig& config);

// Sets the spec on every selected QuantLinear of `model` and returns their names. Layers not
// selected get no quantization.
std::vector<std::string> apply_quantization(torch::nn::Module& model, const std::string& output_layer,
                                            const QuantizationConfig& config);

}  // namespace trit::quantizers
