// Transformer building blocks of the vit and gpt models: RMSNorm, multi-head self-attention
// (optional causal mask, rotary positions and KV cache), the MLP (gelu | relu2 | swiglu) and the
// pre-norm block. Every linear is a QuantLinear, so recipes quantize it by its dotted name, and
// ActPoints mark the inputs of the attention matmuls where activation quantizers go.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/bwta_quant.h"
#include "core/quant_linear.h"
#include "core/recipe.h"

namespace trit {

inline constexpr double kRopeBase = 10000.0;

// x * rsqrt(mean(x^2 over the last dimension) + eps) * weight; weight starts at 1, no bias.
class RmsNormImpl : public torch::nn::Module {
  public:
    RmsNormImpl(int64_t dim, double eps);
    torch::Tensor forward(const torch::Tensor& x);  // (..., dim) -> (..., dim)

    torch::Tensor weight;  // (dim)

  private:
    double eps_;
};
TORCH_MODULE(RmsNorm);

// A named point on an activation: the identity until it gets a quantizer (set_quantizer: a child
// module `quant`, an ActLevelQuantizer with a learnable scale, saved with the model) and/or a
// function (set: a probe in tests, a packed runtime's hook), applied in that order. A point
// without a quantizer has no parameters, so it changes neither checkpoints nor exports.
// Attention holds four, each applied exactly at an input of its two matmuls:
//   q_act      Q after RoPE (B, H, T, hd)          -> scores = q_act(Q) . k_act(K)^T / sqrt(hd)
//   k_act      K after RoPE (B, H, L, hd)
//   probs_act  softmax probabilities (B, H, T, L)  -> out = probs_act(P) . v_act(V)
//   v_act      V (B, H, L, hd)
// T counts the new tokens and L the keys attended: L = T without a KV cache, the cached length
// plus T with one (the hooks then see the whole cached K and V, so a per-token or per-row
// function gives the same result cached and uncached).
class ActPointImpl : public torch::nn::Module {
  public:
    using Fn = std::function<torch::Tensor(const torch::Tensor&)>;

    torch::Tensor forward(const torch::Tensor& x) {
        torch::Tensor y = quant ? quant->forward(x) : x;
        return fn_ ? fn_(y) : y;
    }
    // An empty function makes the point the identity again.
    void set(Fn fn) { fn_ = std::move(fn); }
    bool active() const { return static_cast<bool>(fn_); }
    // Registers (or replaces) the child `quant`.
    void set_quantizer(ActLevelQuantizer q) {
        quant =
            quant ? replace_module("quant", std::move(q)) : register_module("quant", std::move(q));
    }

    ActLevelQuantizer quant{nullptr};

  private:
    Fn fn_;
};
TORCH_MODULE(ActPoint);

// Every ActPoint below `module`, with its dotted name, in registration order.
std::vector<std::pair<std::string, ActPoint>> act_points(torch::nn::Module& module);

// Rotary positions, rotate-half layout (GPT-NeoX, Llama): channels i and i + hd/2 of the token at
// position p turn by the angle p * base^(-2i/hd). x: (B, H, T, hd) with hd even; its token t sits
// at position offset + t, so a chunk decoded after `offset` cached tokens gets the same rotation as
// in the full sequence.
torch::Tensor apply_rope(const torch::Tensor& x, int64_t offset, double base = kRopeBase);

enum class MlpActivation { kGelu, kRelu2, kSwiglu };

// gelu | relu2 | swiglu; anything else is an error naming model.activation.
MlpActivation parse_mlp_activation(const std::string& name);

// The MLP's hidden width: mlp_hidden when positive; else 4 * dim, or for swiglu (three matrices
// instead of two, about the same parameters) 8 * dim / 3 rounded up to a multiple of 8 (Llama).
int64_t mlp_hidden_width(int64_t dim, int64_t mlp_hidden, MlpActivation activation);

struct BlockOptions {
    int64_t dim = 64;          // model width
    int64_t heads = 4;         // attention heads; divide dim
    int64_t mlp_hidden = 256;  // MLP hidden width (resolved, > 0)
    MlpActivation activation = MlpActivation::kGelu;
    bool causal = false;     // token t attends to tokens <= t only
    bool rope = false;       // rotary positions on q and k
    bool subln = false;      // RMSNorm at the inputs of attn.o and mlp.down (BitNet SubLN)
    bool bias = false;       // the QuantLinears carry a bias
    double norm_eps = 1e-5;  // RMSNorm epsilon
};

// A block's options from a validated vit or gpt config (gpt: causal with rotary positions).
BlockOptions block_options(const ModelConfig& config);

// One layer's KV cache: K (after RoPE) and V of every token decoded so far, (B, H, length, hd);
// undefined while empty.
struct LayerKv {
    torch::Tensor k;
    torch::Tensor v;
};

// A model's KV cache for decoding: one LayerKv per block. Gpt::make_cache creates it empty.
struct KvCache {
    int64_t batch = 0;     // sequences decoded together
    int64_t capacity = 0;  // most tokens it may hold: the model's context
    int64_t length = 0;    // tokens cached so far
    std::vector<LayerKv> layers;
};

// Multi-head self-attention. Children, in order: q, k, v (QuantLinear dim -> dim), q_act, k_act,
// probs_act, v_act (ActPoint), o_norm (RmsNorm, subln only), o (QuantLinear dim -> dim).
class AttentionImpl : public torch::nn::Module {
  public:
    explicit AttentionImpl(const BlockOptions& options);
    // x: (B, T, dim) -> (B, T, dim). With `cache`, x holds the tokens after the cached ones: their
    // K and V are appended to it and each new token attends over the cache and the new tokens up
    // to itself (a causal attention only).
    torch::Tensor forward(const torch::Tensor& x, LayerKv* cache = nullptr);

    QuantLinear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
    ActPoint q_act{nullptr}, k_act{nullptr}, probs_act{nullptr}, v_act{nullptr};
    RmsNorm o_norm{nullptr};  // null unless subln

  private:
    BlockOptions options_;
};
TORCH_MODULE(Attention);

// The MLP: down(act(up(x))), relu2 being relu(.)^2, or down(silu(gate(x)) * up(x)) for swiglu.
// Children, in order: up, gate (swiglu only), down_norm (RmsNorm, subln only), down.
class FeedForwardImpl : public torch::nn::Module {
  public:
    explicit FeedForwardImpl(const BlockOptions& options);
    torch::Tensor forward(const torch::Tensor& x);  // (..., dim) -> (..., dim)

    QuantLinear up{nullptr}, gate{nullptr}, down{nullptr};
    RmsNorm down_norm{nullptr};  // null unless subln

  private:
    MlpActivation activation_;
};
TORCH_MODULE(FeedForward);

// Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)). Children: norm1, attn, norm2, mlp.
class TransformerBlockImpl : public torch::nn::Module {
  public:
    explicit TransformerBlockImpl(const BlockOptions& options);
    // (B, T, dim) -> (B, T, dim); `cache` as in AttentionImpl::forward.
    torch::Tensor forward(const torch::Tensor& x, LayerKv* cache = nullptr);

    RmsNorm norm1{nullptr}, norm2{nullptr};
    Attention attn{nullptr};
    FeedForward mlp{nullptr};
};
TORCH_MODULE(TransformerBlock);

}  // namespace trit
