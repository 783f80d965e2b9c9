// ViT for flattened square grey images (Fashion-MNIST: (B, 784)): non-overlapping patch x patch
// patches -> QuantLinear `patch` -> a learned class token in front, learned positions -> `depth`
// bidirectional blocks (no RoPE) -> RmsNorm `norm` -> QuantLinear `head` on the class token.
// QuantLinear names: patch, blocks.<i>.attn.{q,k,v,o}, blocks.<i>.mlp.{up,gate,down}, head.
#pragma once

#include <torch/nn/modules/container/modulelist.h>

#include <string>
#include <vector>

#include "core/model.h"
#include "core/transformer.h"

namespace trit {

class Vit : public Model {
  public:
    // Checks the config (check_model_config) with errors naming the model key.
    explicit Vit(const ModelConfig& config);

    // (B, input) float -> (B, classes) logits.
    torch::Tensor forward(const torch::Tensor& x) override;
    // The logits and every block's output (B, tokens, dim).
    torch::Tensor forward_hidden(const torch::Tensor& x, std::vector<torch::Tensor>& hidden) override;
    bool input_nonnegative(const std::string& name) const override;  // mlp.down after relu2
    std::string output_layer() const override { return "head"; }
    Task task() const override { return Task::kClassification; }

    // Patches per image plus the class token.
    int64_t tokens() const { return pos_.size(1); }
    const std::vector<TransformerBlock>& blocks() const { return blocks_; }

  private:
    torch::Tensor run(const torch::Tensor& x, std::vector<torch::Tensor>* hidden);

    bool relu2_;          // the blocks' MLP activation is relu2
    int64_t side_;        // image side (sqrt(input))
    int64_t patch_size_;  // patch side
    QuantLinear patch_{nullptr};
    torch::Tensor cls_;  // (1, 1, dim) class token
    torch::Tensor pos_;  // (1, tokens, dim) positions, class token first
    torch::nn::ModuleList block_list_{nullptr};
    std::vector<TransformerBlock> blocks_;
    RmsNorm norm_{nullptr};
    QuantLinear head_{nullptr};
};

}  // namespace trit
