// Byte-level GPT: see gpt.h.
#include "core/gpt.h"

#include "core/error.h"

namespace trit {

namespace {

const ModelConfig& checked(const ModelConfig& c) {
    TRIT_CHECK(c.type == "gpt", "Gpt: expected model.type gpt, got '", c.type, "'");
    const ModelConfigProblem p = check_model_config(c);
    TRIT_CHECK(p.key.empty(), "model.", p.key, ": ", p.message);
    return c;
}

}  // namespace

Gpt::Gpt(const ModelConfig& config)
    : relu2_(checked(config).activation == "relu2"), context_(config.context) {
    const BlockOptions options = block_options(config);
    embed_ = register_module("embed", torch::nn::Embedding(kByteVocab, config.dim));
    block_list_ = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < config.depth; ++i) {
        blocks_.emplace_back(options);
        block_list_->push_back(blocks_.back());
    }
    norm_ = register_module("norm", RmsNorm(config.dim, config.norm_eps));
    head_ = register_module("head", QuantLinear(config.dim, kByteVocab, config.bias));
}

void Gpt::check_tokens(const torch::Tensor& tokens, const char* where) const {
    TRIT_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kLong, "gpt ", where,
               ": expected int64 bytes (batch, tokens), got ", tokens.scalar_type(), " ",
               tokens.sizes());
    TRIT_CHECK(tokens.size(0) >= 1 && tokens.size(1) >= 1, "gpt ", where,
               ": expected at least one sequence and one token, got ", tokens.sizes());
    const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
    TRIT_CHECK(lo >= 0 && hi < kByteVocab, "gpt ", where, ": expected bytes in [0, ",
               kByteVocab - 1, "], got values in [", lo, ", ", hi, "]");
}

torch::Tensor Gpt::forward(const torch::Tensor& tokens) {
    check_tokens(tokens, "forward");
    TRIT_CHECK(tokens.size(1) <= context_, "gpt forward: ", tokens.size(1),
               " tokens exceed the context of ", context_, " (model.context)");
    return run(tokens, nullptr);
}

torch::Tensor Gpt::forward_hidden(const torch::Tensor& tokens, std::vector<torch::Tensor>& hidden) {
    check_tokens(tokens, "forward");
    TRIT_CHECK(tokens.size(1) <= context_, "gpt forward: ", tokens.size(1),
               " tokens exceed the context of ", context_, " (model.context)");
    return run(tokens, nullptr, &hidden);
}

bool Gpt::input_nonnegative(const std::string& name) const {
    return relu2_ && name.size() > 9 && name.compare(name.size() - 9, 9, ".mlp.down") == 0;
}

KvCache Gpt::make_cache(int64_t batch) const {
    TRIT_CHECK(batch >= 1, "gpt make_cache: expected batch >= 1, got ", batch);
    KvCache cache;
    cache.batch = batch;
    cache.capacity = context_;
    cache.layers.resize(blocks_.size());
    return cache;
}

torch::Tensor Gpt::forward_cached(const torch::Tensor& tokens, KvCache& cache) {
    check_tokens(tokens, "forward_cached");
    TRIT_CHECK(cache.layers.size() == blocks_.size() && cache.capacity == context_,
               "gpt forward_cached: the KV cache was not made by this model (make_cache)");
    TRIT_CHECK(tokens.size(0) == cache.batch, "gpt forward_cached: the KV cache holds ",
               cache.batch, " sequences, the tokens ", tokens.size(0));
    TRIT_CHECK(cache.length + tokens.size(1) <= cache.capacity,
               "gpt forward_cached: ", cache.length, " cached + ", tokens.size(1),
               " new tokens exceed the context of ", cache.capacity, " (model.context)");
    torch::Tensor logits = run(tokens, &cache);
    cache.length += tokens.size(1);
    return logits;
}

torch::Tensor Gpt::run(const torch::Tensor& tokens, KvCache* cache, std::vector<torch::Tensor>* hidden) {
    torch::Tensor h = embed_->forward(tokens);  // (B, T, dim)
    for (size_t i = 0; i < blocks_.size(); ++i) {
        h = blocks_[i]->forward(h, cache != nullptr ? &cache->layers[i] : nullptr);
        if (hidden) hidden->push_back(h);
    }
    return head_->forward(norm_->forward(h));
}

}  // namespace trit
