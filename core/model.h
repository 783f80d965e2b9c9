// Models trit trains: a common interface (forward to logits, the name of the output layer, the
// task) and a factory keyed by model.type (mlp, vit, gpt). Every linear layer is a QuantLinear
// so recipes can quantize it.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "core/recipe.h"

namespace trit {

// What forward() takes and returns, and so how a trainer computes the loss.
enum class Task {
    kClassification,  // (batch, features) float -> (batch, classes) logits: mlp, vit
    kLanguageModel,   // (batch, tokens) int64 -> (batch, tokens, vocab) next-token logits: gpt
};

class Model : public torch::nn::Module {
public:
    // The logits; shapes per task().
    virtual torch::Tensor forward(const torch::Tensor& x) = 0;
    // Name of the output layer (kept in float unless a recipe names it).
    virtual std::string output_layer() const = 0;
    virtual Task task() const { return Task::kClassification; }
    // Whether the input of linear layer `name` is non-negative by construction (after a ReLU or
    // squared ReLU): BWTA quantizes such inputs with a bool grid.
    virtual bool input_nonnegative(const std::string& name) const {
        (void)name;
        return false;
    }
    // The logits, and in `hidden` the hidden states distillation matches (the transformer blocks'
    // outputs; the mlp's hidden layers after their activation), in order. A model without
    // hidden states to offer leaves `hidden` empty.
    virtual torch::Tensor forward_hidden(const torch::Tensor& x, std::vector<torch::Tensor>& hidden) {
        (void)hidden;
        return forward(x);
    }
};

// Builds model.type with fresh parameters from the current torch RNG; unknown types list the
// known ones. The vit and gpt models are trit::Vit (core/vit.h) and trit::Gpt (core/gpt.h).
std::shared_ptr<Model> make_model(const ModelConfig& config);

// The MLP (core/mlp.cpp): fc1 .. fcN, head.
std::shared_ptr<Model> make_mlp(const ModelConfig& config);

}  // namespace trit
