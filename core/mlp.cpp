// The MLP: fc1 .. fcN (hidden widths) with an activation between, then `head` to the classes.
#include <torch/nn/functional/activation.h>

#include <vector>

#include "core/error.h"
#include "core/model.h"
#include "core/quant_linear.h"

namespace trit {
namespace {

class Mlp : public Model {
public:
    explicit Mlp(const ModelConfig& c) : gelu_(c.activation == "gelu") {
        TRIT_CHECK(c.activation == "relu" || c.activation == "gelu",
                   "model.activation: expected relu or gelu, got '", c.activation, "'");
        int64_t width = c.input;
        for (size_t i = 0; i < c.hidden.size(); ++i) {
            layers_.push_back(register_module("fc" + std::to_string(i + 1),
                                              QuantLinear(width, c.hidden[i], c.bias)));
            width = c.hidden[i];
        }
        head_ = register_module("head", QuantLinear(width, c.classes, c.bias));
    }

    torch::Tensor forward(const torch::Tensor& input) override {
        return run(input, nullptr);
    }

    torch::Tensor forward_hidden(const torch::Tensor& input, std::vector<torch::Tensor>& hidden) override {
        return run(input, &hidden);
    }

    bool input_nonnegative(const std::string& name) const override {
        return !gelu_ && name != "fc1" && !(name == "head" && layers_.empty());
    }

    std::string output_layer() const override { return "head"; }

private:
    torch::Tensor run(const torch::Tensor& input, std::vector<torch::Tensor>* hidden) {
        torch::Tensor x = input;
        for (auto& layer : layers_) {
            x = layer->forward(x);
            x = gelu_ ? torch::gelu(x) : torch::relu(x);
            if (hidden) hidden->push_back(x);
        }
        return head_->forward(x);
    }

    bool gelu_;
    std::vector<QuantLinear> layers_;
    QuantLinear head_{nullptr};
};

}  // namespace

std::shared_ptr<Model> make_mlp(const ModelConfig& config) {
    return std::make_shared<Mlp>(config);
}

}  // namespace trit
