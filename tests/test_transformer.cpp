// Transformer models: shapes and layer names, the causal mask, KV-cache decoding against the full
// forward, rotary positions, gradients, SubLN, the MLP activations, the ActPoints on the attention
// matmuls, config and input errors, and tiny overfit runs showing that the ViT and GPT learn.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/activation.h>
#include <torch/optim/adam.h>

#include <torch/nn/functional/loss.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gpt.h"
#include "core/model.h"
#include "core/transformer.h"
#include "core/vit.h"
#include "tests/support/error_of.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::error_of;
using Names = std::vector<std::string>;

// KV-cache decoding multiplies matrices of other shapes than the full forward, so float sums run
// in another order: a few ulps on logits of magnitude ~1, far below 1e-5.
constexpr double kCacheTol = 1e-5;
// Rotations of the same position computed in separate calls are bit-identical (angles in double);
// the relative-position identity holds up to float rounding of the rotated products.
constexpr double kRopeTol = 1e-5;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>();
}

ModelConfig tiny(const std::string& type, const std::string& activation = "gelu",
                 bool subln = false) {
    ModelConfig c = model_defaults(type);
    c.dim = 32;
    c.depth = 2;
    c.heads = 4;
    c.activation = activation;
    c.subln = subln;
    c.context = 32;
    return c;
}

std::shared_ptr<Gpt> tiny_gpt(const std::string& activation = "gelu", bool subln = false) {
    return std::make_shared<Gpt>(tiny("gpt", activation, subln));
}

Names linear_names(torch::nn::Module& m) {
    Names out;
    for (auto& [name, layer] : quant_linears(m))
        out.push_back(name);
    return out;
}

Names block_linears(int64_t blocks, bool swiglu) {
    Names out;
    for (int64_t i = 0; i < blocks; ++i) {
        const std::string p = "blocks." + std::to_string(i) + ".";
        for (const char* n : {"attn.q", "attn.k", "attn.v", "attn.o", "mlp.up"})
            out.push_back(p + n);
        if (swiglu) out.push_back(p + "mlp.gate");
        out.push_back(p + "mlp.down");
    }
    return out;
}


int64_t parameter_count(torch::nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.parameters())
        n += p.numel();
    return n;
}

TEST(Vit, ShapesNamesAndTask) {
    torch::manual_seed(1);
    auto model = make_model(tiny("vit"));
    EXPECT_EQ(model->forward(torch::randn({5, 784})).sizes(), (std::vector<int64_t>{5, 10}));
    EXPECT_EQ(model->output_layer(), "head");
    EXPECT_EQ(model->task(), Task::kClassification);
    EXPECT_EQ(dynamic_cast<Vit&>(*model).tokens(), 17);  // (28/7)^2 patches + class token
    Names want = {"patch"};
    for (const auto& n : block_linears(2, false))
        want.push_back(n);
    want.push_back("head");
    EXPECT_EQ(linear_names(*model), want);
}

TEST(Gpt, ShapesNamesAndTask) {
    torch::manual_seed(2);
    auto model = make_model(tiny("gpt", "swiglu"));
    auto tokens = torch::randint(0, 256, {3, 20}, torch::kLong);
    EXPECT_EQ(model->forward(tokens).sizes(), (std::vector<int64_t>{3, 20, 256}));
    EXPECT_EQ(model->task(), Task::kLanguageModel);
    Names want = block_linears(2, true);
    want.push_back("head");
    EXPECT_EQ(linear_names(*model), want);
    EXPECT_EQ(MlpActivation::kSwiglu, parse_mlp_activation("swiglu"));
}

TEST(Transformer, DefaultSizesAreTheDocumentedOnes) {
    auto vit = make_model(model_defaults("vit"));
    auto gpt = make_model(model_defaults("gpt"));
    // docs/recipes.md quotes these counts.
    EXPECT_EQ(parameter_count(*vit), 450624);
    EXPECT_EQ(parameter_count(*gpt), 853120);
    EXPECT_EQ(dynamic_cast<Gpt&>(*gpt).context(), 256);
}

TEST(Transformer, MlpHiddenWidth) {
    EXPECT_EQ(mlp_hidden_width(64, 0, MlpActivation::kGelu), 256);
    EXPECT_EQ(mlp_hidden_width(64, 0, MlpActivation::kRelu2), 256);
    EXPECT_EQ(mlp_hidden_width(64, 0, MlpActivation::kSwiglu), 176);  // 8*64/3 = 170 -> 176
    EXPECT_EQ(mlp_hidden_width(96, 0, MlpActivation::kSwiglu), 256);
    EXPECT_EQ(mlp_hidden_width(64, 100, MlpActivation::kSwiglu), 100);
}

// Each activation computes what its formula says, with the layers it names.
TEST(Transformer, MlpActivations) {
    torch::manual_seed(3);
    torch::Tensor x = torch::randn({2, 5, 16});
    for (const char* name : {"gelu", "relu2", "swiglu"}) {
        BlockOptions o;
        o.dim = 16;
        o.activation = parse_mlp_activation(name);
        o.mlp_hidden = mlp_hidden_width(o.dim, 0, o.activation);
        FeedForward mlp(o);
        torch::Tensor up = mlp->up->forward(x), want;
        if (o.activation == MlpActivation::kGelu) want = mlp->down->forward(torch::gelu(up));
        if (o.activation == MlpActivation::kRelu2)
            want = mlp->down->forward(torch::relu(up) * torch::relu(up));
        if (o.activation == MlpActivation::kSwiglu) {
            EXPECT_EQ(mlp->up->weight.size(0), 48) << name;  // 8*16/3 = 42 -> 48
            want = mlp->down->forward(torch::silu(mlp->gate->forward(x)) * up);
        } else {
            EXPECT_FALSE(mlp->gate) << name;
            EXPECT_EQ(mlp->up->weight.size(0), 64) << name;
        }
        EXPECT_LT(max_diff(mlp->forward(x), want), 1e-6) << name;
    }
    EXPECT_THAT(error_of([] { parse_mlp_activation("tanh"); }),
                HasSubstr("model.activation: expected one of {gelu, relu2, swiglu}"));
}

TEST(Transformer, SublnAddsNormsBeforeOAndDown) {
    for (bool subln : {false, true}) {
        auto model = make_model(tiny("gpt", "relu2", subln));
        auto modules = model->named_modules();
        for (const char* n : {"blocks.0.attn.o_norm", "blocks.1.mlp.down_norm"})
            EXPECT_EQ(modules.contains(n), subln) << n;
        EXPECT_EQ(parameter_count(*model) - parameter_count(*make_model(tiny("gpt", "relu2"))),
                  subln ? 2 * (32 + 128) : 0);
    }
    // With SubLN the norm really sits before o: scaling v's weight leaves the output unchanged.
    torch::manual_seed(4);
    BlockOptions o;
    o.dim = 16;
    o.subln = true;
    o.causal = o.rope = true;
    Attention attn(o);
    torch::Tensor x = torch::randn({1, 6, 16});
    torch::Tensor before = attn->forward(x);
    {
        torch::NoGradGuard no_grad;
        attn->v->weight.mul_(7.0);
    }
    EXPECT_LT(max_diff(attn->forward(x), before), 1e-3);  // up to eps in the norm
}

TEST(Gpt, CausalMaskHidesTheFuture) {
    torch::manual_seed(5);
    auto model = tiny_gpt();
    torch::NoGradGuard no_grad;
    torch::Tensor tokens = torch::randint(0, 256, {2, 12}, torch::kLong);
    torch::Tensor changed = tokens.clone();
    changed.select(1, 8).fill_(7);
    torch::Tensor a = model->forward(tokens), b = model->forward(changed);
    EXPECT_LT(max_diff(a.narrow(1, 0, 8), b.narrow(1, 0, 8)), 1e-6);  // before the change: equal
    EXPECT_GT(max_diff(a.narrow(1, 8, 4), b.narrow(1, 8, 4)), 1e-3);  // from it on: not
}

TEST(Vit, EveryPatchReachesTheClassToken) {
    torch::manual_seed(6);
    auto model = make_model(tiny("vit"));
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::randn({1, 784});
    torch::Tensor y = x.clone();
    y.index_put_({0, 783}, 5.0);  // the last pixel: the last patch only
    EXPECT_GT(max_diff(model->forward(x), model->forward(y)), 1e-4);
}

// Prefill and decoding in chunks of 1, 3, 7 and the whole sequence give the full forward's logits.
TEST(Gpt, KvCacheMatchesFullForward) {
    for (const auto& [activation, subln] :
         std::vector<std::pair<std::string, bool>>{{"gelu", false}, {"swiglu", true}}) {
        torch::manual_seed(7);
        auto model = tiny_gpt(activation, subln);
        torch::NoGradGuard no_grad;
        torch::Tensor tokens = torch::randint(0, 256, {2, 20}, torch::kLong);
        torch::Tensor full = model->forward(tokens);
        for (int64_t chunk : {1, 3, 7, 20}) {
            KvCache cache = model->make_cache(2);
            std::vector<torch::Tensor> parts;
            for (int64_t s = 0; s < 20; s += chunk) {
                const int64_t n = std::min<int64_t>(chunk, 20 - s);
                parts.push_back(model->forward_cached(tokens.narrow(1, s, n), cache));
            }
            EXPECT_EQ(cache.length, 20);
            EXPECT_EQ(cache.layers[1].k.sizes(), (std::vector<int64_t>{2, 4, 20, 8}));
            EXPECT_LT(max_diff(torch::cat(parts, 1), full), kCacheTol)
                << activation << " chunk " << chunk;
        }
        // A prefill of 13 tokens, then single tokens.
        KvCache cache = model->make_cache(2);
        std::vector<torch::Tensor> parts = {model->forward_cached(tokens.narrow(1, 0, 13), cache)};
        for (int64_t s = 13; s < 20; ++s)
            parts.push_back(model->forward_cached(tokens.narrow(1, s, 1), cache));
        EXPECT_LT(max_diff(torch::cat(parts, 1), full), kCacheTol) << activation;
    }
}

TEST(Gpt, KvCacheCapacityIsTheContext) {
    auto model = tiny_gpt();  // context 32
    torch::NoGradGuard no_grad;
    KvCache cache = model->make_cache(1);
    EXPECT_EQ(cache.capacity, 32);
    model->forward_cached(torch::zeros({1, 30}, torch::kLong), cache);
    EXPECT_THAT(error_of([&] {
                    model->forward_cached(torch::zeros({1, 3}, torch::kLong), cache);
                }),
                HasSubstr("30 cached + 3 new tokens exceed the context of 32 (model.context)"));
    model->forward_cached(torch::zeros({1, 2}, torch::kLong), cache);
    EXPECT_EQ(cache.length, 32);
    EXPECT_THAT(error_of([&] {
                    model->forward_cached(torch::zeros({2, 1}, torch::kLong), cache);
                }),
                HasSubstr("the KV cache holds 1 sequences, the tokens 2"));
    EXPECT_THAT(error_of([&] {
                    model->forward(torch::zeros({1, 33}, torch::kLong));
                }),
                HasSubstr("33 tokens exceed the context of 32"));
    KvCache other = tiny_gpt()->make_cache(1);
    other.layers.pop_back();
    EXPECT_THAT(error_of([&] {
                    model->forward_cached(torch::zeros({1, 1}, torch::kLong), other);
                }),
                HasSubstr("not made by this model"));
}

TEST(Gpt, InputErrorsNameWhatWasExpected) {
    auto model = tiny_gpt();
    auto err = [&](const torch::Tensor& t) { return error_of([&] { model->forward(t); }); };
    EXPECT_THAT(err(torch::zeros({2, 4})),
                HasSubstr("expected int64 bytes (batch, tokens), got Float"));
    EXPECT_THAT(err(torch::zeros({2, 4}, torch::kInt)), HasSubstr("got Int"));
    EXPECT_THAT(err(torch::zeros({4}, torch::kLong)),
                HasSubstr("expected int64 bytes (batch, tokens)"));
    EXPECT_THAT(err(torch::zeros({1, 2, 3}, torch::kLong)), HasSubstr("[1, 2, 3]"));
    EXPECT_THAT(err(torch::zeros({1, 0}, torch::kLong)),
                HasSubstr("at least one sequence and one token"));
    EXPECT_THAT(err(torch::full({1, 3}, 256, torch::kLong)),
                HasSubstr("expected bytes in [0, 255], got values in [256, 256]"));
    EXPECT_THAT(err(torch::tensor({{3, -1}}, torch::kLong)), HasSubstr("got values in [-1, 3]"));
    KvCache cache = model->make_cache(1);
    EXPECT_THAT(error_of([&] {
                    model->forward_cached(torch::zeros({1, 1}), cache);
                }),
                HasSubstr("gpt forward_cached: expected int64 bytes"));
    EXPECT_THAT(error_of([&] { model->make_cache(0); }), HasSubstr("expected batch >= 1"));
}

TEST(Vit, InputErrorsNameWhatWasExpected) {
    auto model = make_model(tiny("vit"));
    EXPECT_THAT(error_of([&] {
                    model->forward(torch::zeros({2, 783}));
                }),
                HasSubstr("vit: expected float input (batch, 784) (28x28 images flattened)"));
    EXPECT_THAT(error_of([&] {
                    model->forward(torch::zeros({2, 784}, torch::kLong));
                }),
                HasSubstr("got Long"));
}

TEST(Vit, PatchMustDivideTheImageSide) {
    ModelConfig c = tiny("vit");
    c.patch = 5;
    EXPECT_THAT(
        error_of([&] { make_model(c); }),
        HasSubstr(
            "model.patch: expected a divisor of the image side 28 (model.input = 784), got 5"));
    c.patch = 4;
    EXPECT_EQ(dynamic_cast<Vit&>(*make_model(c)).tokens(), 50);
    c.input = 780;
    EXPECT_THAT(error_of([&] { make_model(c); }),
                HasSubstr("model.input: vit takes square images"));
}

TEST(Transformer, ConfigErrorsNameTheKey) {
    ModelConfig c = tiny("gpt");
    c.heads = 5;
    EXPECT_THAT(error_of([&] { make_model(c); }),
                HasSubstr("model.heads: expected a divisor of model.dim = 32, got 5"));
    c.dim = 36;
    c.heads = 4;  // head dim 9
    EXPECT_THAT(error_of([&] { make_model(c); }),
                HasSubstr("model.heads: rotary positions need an even head dim"));
    c = tiny("vit");
    c.dim = 36;  // odd head dim is fine without RoPE
    EXPECT_NO_THROW(make_model(c));
    c.activation = "relu";
    EXPECT_THAT(error_of([&] { make_model(c); }),
                HasSubstr("model.activation: expected one of {gelu, relu2, swiglu} for vit"));
    c.type = "cnn";
    EXPECT_THAT(error_of([&] { make_model(c); }),
                HasSubstr("model.type: unknown model 'cnn'; known: mlp, vit, gpt"));
    EXPECT_THAT(error_of([] { model_defaults("rnn"); }), HasSubstr("known: mlp, vit, gpt"));
}

TEST(Transformer, RopeOffsetAndRelativePositions) {
    torch::manual_seed(8);
    torch::Tensor x = torch::randn({2, 3, 10, 8});
    torch::Tensor full = apply_rope(x, 0);
    // A chunk at offset 4 turns exactly as positions 4.. of the whole sequence.
    EXPECT_EQ(max_diff(apply_rope(x.narrow(2, 4, 6), 4), full.narrow(2, 4, 6)), 0.0);
    EXPECT_EQ(max_diff(full.narrow(2, 0, 1), x.narrow(2, 0, 1)), 0.0);  // position 0: identity
    EXPECT_LT(max_diff(full.norm(2, -1), x.norm(2, -1)), kRopeTol);     // a rotation
    // <rope(q, m), rope(k, n)> depends on m - n only.
    torch::Tensor q = torch::randn({1, 1, 1, 8}), k = torch::randn({1, 1, 1, 8});
    auto dot = [&](int64_t m, int64_t n) {
        return (apply_rope(q, m) * apply_rope(k, n)).sum().item<double>();
    };
    EXPECT_NEAR(dot(3, 1), dot(40, 38), kRopeTol);
    EXPECT_GT(std::abs(dot(3, 1) - dot(3, 2)), 1e-3);
    EXPECT_THAT(error_of([&] {
                    apply_rope(torch::randn({1, 1, 2, 7}), 0);
                }),
                HasSubstr("even head dim"));
}

TEST(Transformer, GradientsReachEveryParameter) {
    LinearQuantSpec ternary;  // also through the bias-free int8 path
    ternary.weight.method = WeightQuantMethod::kAbsmean;
    ternary.activation = ActQuantMethod::kInt8PerToken;
    for (bool quantized : {false, true}) {
        for (const char* type : {"vit", "gpt"}) {
            torch::manual_seed(9);
            auto model = make_model(tiny(type, "swiglu", /*subln=*/true));
            if (quantized)
                for (auto& [name, layer] : quant_linears(*model))
                    if (name != "head") layer->set_quant(ternary);
            torch::Tensor logits =
                std::string(type) == "vit"
                    ? model->forward(torch::randn({4, 784}))
                    : model->forward(torch::randint(0, 256, {2, 9}, torch::kLong));
            logits.pow(2).mean().backward();
            for (const auto& p : model->named_parameters()) {
                ASSERT_TRUE(p.value().grad().defined()) << type << " " << p.key();
                EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
                EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0)
                    << type << (quantized ? " ternary " : " ") << p.key();
            }
        }
    }
}

TEST(Transformer, ActPointsAreNamed) {
    auto model = tiny_gpt();
    Names names;
    for (auto& [name, point] : act_points(*model)) {
        names.push_back(name);
        EXPECT_FALSE(point->active());
    }
    EXPECT_EQ(names, (Names{"blocks.0.attn.q_act", "blocks.0.attn.k_act", "blocks.0.attn.probs_act",
                            "blocks.0.attn.v_act", "blocks.1.attn.q_act", "blocks.1.attn.k_act",
                            "blocks.1.attn.probs_act", "blocks.1.attn.v_act"}));
}

// The hooks see Q and K after RoPE, the probabilities and V, at the matmul inputs, with the
// whole cached K and V when decoding; what they return is what the matmuls use.
TEST(Transformer, ActPointsSitAtTheMatmulInputs) {
    torch::manual_seed(10);
    BlockOptions o;
    o.dim = 16;
    o.heads = 2;
    o.causal = o.rope = true;
    Attention attn(o);
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::randn({3, 5, 16});
    std::map<std::string, torch::Tensor> seen;
    attn->q_act->set([&](const torch::Tensor& t) { return seen["q"] = t; });
    attn->k_act->set([&](const torch::Tensor& t) { return seen["k"] = t; });
    attn->probs_act->set([&](const torch::Tensor& t) { return seen["p"] = t; });
    attn->v_act->set([&](const torch::Tensor& t) { return seen["v"] = t; });
    torch::Tensor plain = attn->forward(x);
    auto heads = [](const torch::Tensor& y) { return y.view({3, 5, 2, 8}).transpose(1, 2); };
    EXPECT_EQ(max_diff(seen["q"], apply_rope(heads(attn->q->forward(x)), 0)), 0.0);
    EXPECT_EQ(max_diff(seen["k"], apply_rope(heads(attn->k->forward(x)), 0)), 0.0);
    EXPECT_EQ(max_diff(seen["v"], heads(attn->v->forward(x))), 0.0);
    EXPECT_EQ(seen["p"].sizes(), (std::vector<int64_t>{3, 2, 5, 5}));
    EXPECT_LT(max_diff(seen["p"].sum(-1), torch::ones({3, 2, 5})), 1e-6);
    EXPECT_EQ(seen["p"].triu(1).abs().max().item<double>(), 0.0);  // causal

    // Decoding: K and V over the cache and the new tokens, Q and probabilities for the new ones.
    LayerKv cache;
    attn->forward(x.narrow(1, 0, 3), &cache);
    attn->forward(x.narrow(1, 3, 2), &cache);
    EXPECT_EQ(seen["q"].sizes(), (std::vector<int64_t>{3, 2, 2, 8}));
    EXPECT_EQ(seen["k"].sizes(), (std::vector<int64_t>{3, 2, 5, 8}));
    EXPECT_EQ(seen["v"].sizes(), (std::vector<int64_t>{3, 2, 5, 8}));
    EXPECT_EQ(seen["p"].sizes(), (std::vector<int64_t>{3, 2, 2, 5}));

    // Q zeroed: uniform attention over each token's prefix, so out = o(running mean of V).
    attn->q_act->set([](const torch::Tensor& t) { return torch::zeros_like(t); });
    attn->k_act->set(nullptr);
    attn->probs_act->set(nullptr);
    attn->v_act->set(nullptr);
    torch::Tensor v = attn->v->forward(x);  // (3, 5, 16)
    torch::Tensor mean = v.cumsum(1) / torch::arange(1, 6).to(torch::kFloat).view({1, 5, 1});
    EXPECT_LT(max_diff(attn->forward(x), attn->o->forward(mean)), 1e-5);
    // V zeroed: nothing comes out of a bias-free attention.
    attn->q_act->set(nullptr);
    attn->v_act->set([](const torch::Tensor& t) { return torch::zeros_like(t); });
    EXPECT_EQ(attn->forward(x).abs().max().item<double>(), 0.0);
    attn->v_act->set(nullptr);
    EXPECT_EQ(max_diff(attn->forward(x), plain), 0.0);  // identity again
}

// In the whole GPT: with V zeroed in every block, a position's logits depend on its token only.
TEST(Gpt, ZeroedValuesCutTokenMixing) {
    torch::manual_seed(11);
    auto model = tiny_gpt();
    torch::NoGradGuard no_grad;
    torch::Tensor tokens = torch::randint(0, 256, {1, 8}, torch::kLong);
    torch::Tensor changed = tokens.clone();
    changed.index_put_({0, 0}, (tokens.index({0, 0}).item<int64_t>() + 1) % 256);
    auto last = [&](const torch::Tensor& t) { return model->forward(t).select(1, 7); };
    EXPECT_GT(max_diff(last(tokens), last(changed)), 1e-4);
    for (auto& [name, point] : act_points(*model))
        if (name.size() > 5 && name.substr(name.size() - 5) == "v_act")
            point->set([](const torch::Tensor& t) { return torch::zeros_like(t); });
    EXPECT_EQ(max_diff(last(tokens), last(changed)), 0.0);
}

TEST(Gpt, MemorisesAStringAndDecodesIt) {
    torch::manual_seed(12);
    const std::string text = "ternary weights, int8 activations: trit.\n";
    std::vector<int64_t> bytes(text.begin(), text.end());
    torch::Tensor all = torch::tensor(bytes, torch::kLong).unsqueeze(0);  // (1, n)
    const int64_t n = all.size(1);
    torch::Tensor input = all.narrow(1, 0, n - 1), target = all.narrow(1, 1, n - 1);
    ModelConfig c = tiny("gpt");
    c.context = 64;
    auto model = std::make_shared<Gpt>(c);
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
    double loss_value = 0;
    for (int step = 0; step < 100; ++step) {
        opt.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->forward(input).reshape({-1, kByteVocab}), target.reshape({-1}));
        loss.backward();
        opt.step();
        loss_value = loss.item<double>();
    }
    EXPECT_LT(loss_value, 0.05);
    // Greedy decoding through the KV cache from the first byte gives the string back.
    torch::NoGradGuard no_grad;
    KvCache cache = model->make_cache(1);
    std::string decoded(1, text[0]);
    torch::Tensor next = all.narrow(1, 0, 1);
    for (int64_t i = 1; i < n; ++i) {
        next = model->forward_cached(next, cache).argmax(-1);  // (1, 1)
        decoded.push_back(static_cast<char>(next.item<int64_t>()));
    }
    EXPECT_EQ(decoded, text);
}

TEST(Vit, Fits64Images) {
    torch::manual_seed(13);
    torch::Tensor x = torch::randn({64, 784});
    torch::Tensor y = torch::randint(0, 10, {64}, torch::kLong);
    auto model = make_model(tiny("vit"));
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
    for (int step = 0; step < 100; ++step) {
        opt.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();
        opt.step();
    }
    torch::NoGradGuard no_grad;
    EXPECT_EQ(model->forward(x).argmax(1).eq(y).sum().item<int64_t>(), 64);
}

}  // namespace
}  // namespace trit
