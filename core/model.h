// Models trit trains: a common interface (forward to logits, the name of the output layer) and a
// factory keyed by model.type. Every linear layer is a QuantLinear so recipes can quantize it.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "core/recipe.h"

namespace trit {

class Model : public torch::nn::Module {
public:
    // (batch, features) -> (batch, classes) logits.
    virtual torch::Tensor forward(const torch::Tensor& x) = 0;
    // Name of the output layer (kept in float unless a recipe names it).
    virtual std::string output_layer() const = 0;
};

// Builds model.type with fresh parameters from the current torch RNG; unknown types list the
// known ones.
std::shared_ptr<Model> make_model(const ModelConfig& config);

}  // namespace trit
