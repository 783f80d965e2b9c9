// Byte-level GPT: (B, T) int64 bytes -> Embedding `embed` (256 x dim) -> `depth` causal blocks
// with rotary positions -> RmsNorm `norm` -> QuantLinear `head` (untied) -> (B, T, 256) logits for
// the next byte. T is at most `context`. Decoding goes through a KvCache (make_cache,
// forward_cached). QuantLinear names: blocks.<i>.attn.{q,k,v,o}, blocks.<i>.mlp.{up,gate,down},
// head.
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>

#include <string>
#include <vector>

#include "core/model.h"
#include "core/transformer.h"

namespace trit {

inline constexpr int64_t kByteVocab = 256;

class Gpt : public Model {
  public:
    // Checks the config (check_model_config) with errors naming the model key.
    explicit Gpt(const ModelConfig& config);

    // (B, T) int64 in [0, 255], 1 <= T <= context -> (B, T, 256) logits; position t predicts t + 1.
    torch::Tensor forward(const torch::Tensor& tokens) override;
    // The logits and every block's output (B, T, dim).
    torch::Tensor forward_hidden(const torch::Tensor& tokens, std::vector<torch::Tensor>& hidden) override;
    bool input_nonnegative(const std::string& name) const override;  // mlp.down after relu2
    std::string output_layer() const override { return "head"; }
    Task task() const override { return Task::kLanguageModel; }

    // An empty cache for `batch` sequences, holding up to context() tokens.
    KvCache make_cache(int64_t batch) const;
    // tokens (B, t_new) follow the cache's tokens: appends their K and V and returns their logits
    // (B, t_new, 256), equal to those of forward() on the whole sequence. Meant for inference
    // (under torch::NoGradGuard); more than context() tokens in all is an error.
    torch::Tensor forward_cached(const torch::Tensor& tokens, KvCache& cache);

    int64_t context() const { return context_; }
    const std::vector<TransformerBlock>& blocks() const { return blocks_; }

  private:
    void check_tokens(const torch::Tensor& tokens, const char* where) const;
    torch::Tensor run(const torch::Tensor& tokens, KvCache* cache,
                      std::vector<torch::Tensor>* hidden = nullptr);

    bool relu2_;
    int64_t context_;
    torch::nn::Embedding embed_{nullptr};
    torch::nn::ModuleList block_list_{nullptr};
    std::vector<TransformerBlock> blocks_;
    RmsNorm norm_{nullptr};
    QuantLinear head_{nullptr};
};

}  // namespace trit
