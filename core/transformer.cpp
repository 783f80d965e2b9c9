// Transformer building blocks: see transformer.h. Attention is written out (matmul, mask,
// softmax) because LibTorch 1.13 has no scaled_dot_product_attention, and so that the ActPoints
// sit exactly at the matmul inputs.
#include "core/transformer.h"

#include <torch/nn/functional/activation.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace trit {

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
    TRIT_CHECK(dim >= 1 && eps > 0, "RmsNorm: expected dim >= 1 and eps > 0, got ", dim, " and ",
               eps);
    weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
    TRIT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(0), "RmsNorm: expected input (..., ",
               weight.size(0), "), got ", x.sizes());
    return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_) * weight;
}

std::vector<std::pair<std::string, ActPoint>> act_points(torch::nn::Module& module) {
    std::vector<std::pair<std::string, ActPoint>> out;
    for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
        if (auto p = std::dynamic_pointer_cast<ActPointImpl>(item.value()))
            out.emplace_back(item.key(), ActPoint(p));
    }
    return out;
}

torch::Tensor apply_rope(const torch::Tensor& x, int64_t offset, double base) {
    TRIT_CHECK(x.dim() == 4 && x.size(3) % 2 == 0 && offset >= 0,
               "apply_rope: expected (B, H, T, even head dim) and offset >= 0, got ", x.sizes(),
               " and ", offset);
    const int64_t t = x.size(2), half = x.size(3) / 2;
    const auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(x.device());
    // Angles in double so that a position's rotation does not depend on the chunk it came in.
    torch::Tensor inv_freq = torch::pow(base, torch::arange(half, opts) * (-2.0 / x.size(3)));
    torch::Tensor pos = torch::arange(offset, offset + t, opts);
    torch::Tensor angle = torch::outer(pos, inv_freq);  // (T, hd/2)
    torch::Tensor cos = angle.cos().to(x.scalar_type()), sin = angle.sin().to(x.scalar_type());
    torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
    return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

MlpActivation parse_mlp_activation(const std::string& name) {
    if (name == "gelu") return MlpActivation::kGelu;
    if (name == "relu2") return MlpActivation::kRelu2;
    if (name == "swiglu") return MlpActivation::kSwiglu;
    TRIT_FAIL("model.activation: expected one of {gelu, relu2, swiglu} for a transformer, got '",
              name, "'");
}

int64_t mlp_hidden_width(int64_t dim, int64_t mlp_hidden, MlpActivation activation) {
    if (mlp_hidden > 0) return mlp_hidden;
    if (activation != MlpActivation::kSwiglu) return 4 * dim;
    const int64_t h = 8 * dim / 3;
    return (h + 7) / 8 * 8;
}

BlockOptions block_options(const ModelConfig& c) {
    BlockOptions o;
    o.dim = c.dim;
    o.heads = c.heads;
    o.activation = parse_mlp_activation(c.activation);
    o.mlp_hidden = mlp_hidden_width(c.dim, c.mlp_hidden, o.activation);
    o.causal = o.rope = c.type == "gpt";
    o.subln = c.subln;
    o.bias = c.bias;
    o.norm_eps = c.norm_eps;
    return o;
}

AttentionImpl::AttentionImpl(const BlockOptions& options) : options_(options) {
    TRIT_CHECK(options.heads >= 1 && options.dim % options.heads == 0, "Attention: heads (",
               options.heads, ") must divide dim (", options.dim, ")");
    TRIT_CHECK(!options.rope || (options.dim / options.heads) % 2 == 0,
               "Attention: rotary positions need an even head dim, got ",
               options.dim / options.heads);
    q = register_module("q", QuantLinear(options.dim, options.dim, options.bias));
    k = register_module("k", QuantLinear(options.dim, options.dim, options.bias));
    v = register_module("v", QuantLinear(options.dim, options.dim, options.bias));
    q_act = register_module("q_act", ActPoint());
    k_act = register_module("k_act", ActPoint());
    probs_act = register_module("probs_act", ActPoint());
    v_act = register_module("v_act", ActPoint());
    if (options.subln) o_norm = register_module("o_norm", RmsNorm(options.dim, options.norm_eps));
    o = register_module("o", QuantLinear(options.dim, options.dim, options.bias));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, LayerKv* cache) {
    TRIT_CHECK(x.dim() == 3 && x.size(2) == options_.dim, "Attention: expected input (B, T, ",
               options_.dim, "), got ", x.sizes());
    TRIT_CHECK(cache == nullptr || options_.causal, "Attention: a KV cache needs causal attention");
    const int64_t b = x.size(0), t = x.size(1), h = options_.heads, hd = options_.dim / h;
    auto heads = [&](const torch::Tensor& y) { return y.view({b, t, h, hd}).transpose(1, 2); };
    torch::Tensor qh = heads(q->forward(x)), kh = heads(k->forward(x)), vh = heads(v->forward(x));

    const bool cached = cache != nullptr && cache->k.defined();
    const int64_t offset = cached ? cache->k.size(2) : 0;
    if (options_.rope) {
        qh = apply_rope(qh, offset);
        kh = apply_rope(kh, offset);
    }
    if (cache != nullptr) {
        if (cached) {
            TRIT_CHECK(cache->k.size(0) == b, "Attention: the KV cache holds ", cache->k.size(0),
                       " sequences, the input ", b);
            kh = torch::cat({cache->k, kh}, 2);
            vh = torch::cat({cache->v, vh}, 2);
        }
        cache->k = kh;
        cache->v = vh;
    }
    const int64_t keys = kh.size(2);

    torch::Tensor scores = torch::matmul(q_act(qh), k_act(kh).transpose(-2, -1)) *
                           (1.0 / std::sqrt(static_cast<double>(hd)));  // (B, H, T, L)
    if (options_.causal) {
        // New token i sits at position offset + i and sees keys 0 .. offset + i.
        const auto opts = torch::TensorOptions().dtype(torch::kLong).device(x.device());
        torch::Tensor mask = torch::arange(keys, opts).unsqueeze(0) >
                             torch::arange(offset, offset + t, opts).unsqueeze(1);  // (T, L)
        scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
    }
    torch::Tensor probs = torch::softmax(scores, -1);
    torch::Tensor out = torch::matmul(probs_act(probs), v_act(vh));  // (B, H, T, hd)
    out = out.transpose(1, 2).reshape({b, t, options_.dim});
    if (o_norm) out = o_norm->forward(out);
    return o->forward(out);
}

FeedForwardImpl::FeedForwardImpl(const BlockOptions& options) : activation_(options.activation) {
    const int64_t hidden = options.mlp_hidden;
    up = register_module("up", QuantLinear(options.dim, hidden, options.bias));
    if (activation_ == MlpActivation::kSwiglu)
        gate = register_module("gate", QuantLinear(options.dim, hidden, options.bias));
    if (options.subln) down_norm = register_module("down_norm", RmsNorm(hidden, options.norm_eps));
    down = register_module("down", QuantLinear(hidden, options.dim, options.bias));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
    torch::Tensor hidden;
    switch (activation_) {
        case MlpActivation::kGelu:
            hidden = torch::gelu(up->forward(x));
            break;
        case MlpActivation::kRelu2:
            hidden = torch::relu(up->forward(x)).square();
            break;
        case MlpActivation::kSwiglu:
            hidden = torch::silu(gate->forward(x)) * up->forward(x);
            break;
    }
    if (down_norm) hidden = down_norm->forward(hidden);
    return down->forward(hidden);
}

TransformerBlockImpl::TransformerBlockImpl(const BlockOptions& options) {
    norm1 = register_module("norm1", RmsNorm(options.dim, options.norm_eps));
    attn = register_module("attn", Attention(options));
    norm2 = register_module("norm2", RmsNorm(options.dim, options.norm_eps));
    mlp = register_module("mlp", FeedForward(options));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, LayerKv* cache) {
    torch::Tensor h = x + attn->forward(norm1->forward(x), cache);
    return h + mlp->forward(norm2->forward(h));
}

}  // namespace trit
