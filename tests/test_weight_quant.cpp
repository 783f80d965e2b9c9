// Ternary weight quantizers: values against hand-computed cases for every granularity, and the
// straight-through gradient: exactly the gradient with respect to the effective weight, with no
// term through the scale (the blog seed's cosine-0.29 bug).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "core/quant_linear.h"
#include "core/weight_quant.h"

namespace trit {
namespace {

WeightQuantSpec spec(WeightQuantMethod m, ScaleGranularity g, int64_t group = 64, double thr = 0.05) {
    WeightQuantSpec s;
    s.method = m;
    s.granularity = g;
    s.group_size = group;
    s.threshold = thr;
    return s;
}

// Element-wise identical, including the sign of zero.
void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
    ASSERT_EQ(a.sizes(), b.sizes());
    auto ac = a.contiguous().to(torch::kFloat32), bc = b.contiguous().to(torch::kFloat32);
    const int32_t* pa = reinterpret_cast<const int32_t*>(ac.data_ptr<float>());
    const int32_t* pb = reinterpret_cast<const int32_t*>(bc.data_ptr<float>());
    int shown = 0;
    for (int64_t i = 0; i < ac.numel(); ++i) {
        if (pa[i] != pb[i] && shown++ < 5)
            ADD_FAILURE() << "first mismatches: index " << i << ": " << ac.data_ptr<float>()[i]
                          << " vs " << bc.data_ptr<float>()[i];
    }
}

TEST(WeightQuant, AbsmeanPerTensorHandComputed) {
    // mean|W| = (0.9 + 0.1 + 0.5 + 1.3 + 0.3 + 0.6) / 6 = 3.7 / 6 = 0.61667
    auto w = torch::tensor({{0.9f, -0.1f, 0.5f}, {-1.3f, 0.3f, -0.6f}});
    auto t = quantize_weight(w, spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kTensor));
    EXPECT_NEAR(t.scale.item<float>(), 3.7f / 6, 1e-6);
    // W / 0.61668 = 1.46, -0.16, 0.81, -2.11, 0.486, -0.973
    auto expected = torch::tensor({{1.f, 0.f, 1.f}, {-1.f, 0.f, -1.f}});
    EXPECT_TRUE(torch::equal(t.q, expected)) << t.q;
}

TEST(WeightQuant, AbsmeanPerChannelHandComputed) {
    // row 0: mean|w| = (0.2 + 0.4 + 0.6 + 0.0) / 4 = 0.3 -> w/g = 0.67, -1.33, 2.0, 0 -> 1, -1, 1, 0
    // row 1: mean|w| = (1 + 1 + 4 + 2) / 4 = 2 -> 0.5 (just under), -0.5, 2, -1 -> 0, 0, 1, -1
    auto w = torch::tensor({{0.2f, -0.4f, 0.6f, 0.0f}, {1.0f, -1.0f, 4.0f, -2.0f}});
    auto t = quantize_weight(w, spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kChannel));
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{0.3f}, {2.0f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, -1.f, 1.f, 0.f}, {0.f, 0.f, 1.f, -1.f}})))
        << t.q;
    auto eff = dequantize(t, spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kChannel));
    EXPECT_TRUE(torch::allclose(eff, torch::tensor({{0.3f, -0.3f, 0.3f, 0.f}, {0.f, 0.f, 2.f, -2.f}})));
}

TEST(WeightQuant, AbsmeanPerGroupWithPartialLastGroup) {
    // in = 5, group 2: groups {0,1}, {2,3}, {4} (partial: its mean divides by 1, not 2).
    auto w = torch::tensor({{1.0f, -3.0f, 0.5f, 0.5f, -0.8f}});
    auto s = spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kGroup, /*group=*/2);
    auto t = quantize_weight(w, s);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{2.0f, 0.5f, 0.8f}}))) << t.scale;
    // 1/2 = 0.5 (just under) -> 0; -3/2 -> -1; 0.5/0.5 -> 1; 1; -0.8/0.8 -> -1
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{0.f, -1.f, 1.f, 1.f, -1.f}}))) << t.q;
    EXPECT_TRUE(torch::allclose(dequantize(t, s), torch::tensor({{0.f, -2.f, 0.5f, 0.5f, -0.8f}})));
}

TEST(WeightQuant, AbsmaxThresholdPerChannelHandComputed) {
    // row 0: alpha = 2.0, threshold 0.05 * 2 = 0.1: |0.1| is not above it -> 0
    // row 1: alpha = 0.5, threshold 0.025
    auto w = torch::tensor({{2.0f, -0.1f, 0.11f, -1.5f}, {0.02f, -0.03f, 0.5f, 0.0f}});
    auto s = spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kChannel);
    auto t = quantize_weight(w, s);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{2.0f}, {0.5f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, 0.f, 1.f, -1.f}, {0.f, -1.f, 1.f, 0.f}})))
        << t.q;
    // Masked negatives are +0, not -0 (packers and bit-exact comparisons rely on it).
    EXPECT_FALSE(std::signbit(t.q[0][1].item<float>()));
}

TEST(WeightQuant, AbsmaxThresholdLambdaAndGroups) {
    auto w = torch::tensor({{1.0f, 0.3f, -0.2f, 0.05f}});
    auto t = quantize_weight(
        w, spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kGroup, /*group=*/2, 0.25));
    // groups {1.0, 0.3}: alpha 1, thr 0.25 -> 1, 1; {-0.2, 0.05}: alpha 0.2, thr 0.05 -> -1, 0
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{1.0f, 0.2f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, 1.f, -1.f, 0.f}}))) << t.q;
}

TEST(WeightQuant, BinaryPerChannelHandComputed) {
    // row 0: mu = 0.5, w - mu = 0.5, -1.5, 2.5, -1.5 -> s = 6 / 4 = 1.5, codes +1 -1 +1 -1
    // row 1: all zero: w - mu = 0 counts as non-negative -> +1, s = 0
    auto w = torch::tensor({{1.0f, -1.0f, 3.0f, -1.0f}, {0.f, 0.f, 0.f, 0.f}});
    auto t = quantize_weight(w, spec(WeightQuantMethod::kBinary, ScaleGranularity::kChannel));
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{1.5f}, {0.0f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, -1.f, 1.f, -1.f}, {1.f, 1.f, 1.f, 1.f}}))) << t.q;
}

TEST(WeightQuant, BalancedDepth2PerGroupHandComputed) {
    // d = 2: L = 4. in = 5, group 4: {0.8, -0.4, 0.1, 0} s = 0.8 / 4 = 0.2 -> 4, -2, 0.5 -> 0
    // (ties to even), 0; partial group {0.3}: s = 0.075 -> 4.
    auto s = spec(WeightQuantMethod::kBalanced, ScaleGranularity::kGroup, /*group=*/4);
    s.depth = 2;
    EXPECT_EQ(weight_quant_levels(s), 4);
    auto t = quantize_weight(torch::tensor({{0.8f, -0.4f, 0.1f, 0.0f, 0.3f}}), s);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{0.2f, 0.075f}}))) << t.scale;
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{4.f, -2.f, 0.f, 0.f, 4.f}}))) << t.q;
    s.depth = 4;
    EXPECT_EQ(weight_quant_levels(s), 40);
}

TEST(WeightQuant, Sparse24KeepsTwoLargestPerFour) {
    // absmax_threshold, alpha = 0.9, threshold 0.045: codes 1 -1 1 1 | 1 1 -1 0.
    // group 1 keeps |0.9|, |0.8|; group 2 has a three-way tie: the two lowest indices stay.
    auto s = spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kChannel);
    s.sparse24 = true;
    auto w = torch::tensor({{0.9f, -0.8f, 0.7f, 0.1f, 0.5f, 0.5f, -0.5f, 0.0f, 0.3f, -0.6f}});
    auto t = quantize_weight(w, s);
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, -1.f, 0.f, 0.f, 1.f, 1.f, 0.f, 0.f, 1.f, -1.f}})))
        << t.q;
    s.method = WeightQuantMethod::kBalanced;
    EXPECT_THROW(quantize_weight(w, s), Error);
}

TEST(WeightQuant, Fp16ScalesAreRoundedBeforeCodes) {
    // d = 1 (L = 1), s = 0.1: 0.05 / 0.1 = 0.5 rounds to 0; with s rounded to fp16
    // (0.0999755859375) the ratio is 0.50012 and rounds to 1.
    auto s = spec(WeightQuantMethod::kBalanced, ScaleGranularity::kChannel);
    s.depth = 1;
    auto w = torch::tensor({{0.1f, 0.05f, -0.1f}});
    EXPECT_TRUE(torch::equal(quantize_weight(w, s).q, torch::tensor({{1.f, 0.f, -1.f}})));
    s.fp16_scales = true;
    auto t = quantize_weight(w, s);
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, 1.f, -1.f}}))) << t.q;
    EXPECT_EQ(t.scale.item<float>(), 0.0999755859375f);
}

TEST(WeightQuant, AllZeroWeightsStayFinite) {
    auto w = torch::zeros({3, 8});
    for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold,
                   WeightQuantMethod::kBinary, WeightQuantMethod::kBalanced}) {
        auto s = spec(m, ScaleGranularity::kChannel);
        auto eff = dequantize(quantize_weight(w, s), s);
        EXPECT_TRUE(torch::isfinite(eff).all().item<bool>());
        EXPECT_EQ(eff.abs().sum().item<float>(), 0.0f);
    }
}

TEST(WeightQuant, CodesStayInRangeOnRandomShapes) {
    torch::manual_seed(7);
    for (auto g : {ScaleGranularity::kTensor, ScaleGranularity::kChannel, ScaleGranularity::kGroup}) {
        for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold,
                       WeightQuantMethod::kBinary, WeightQuantMethod::kBalanced}) {
            for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 63}, {5, 130}, {17, 64}}) {
                auto w = torch::randn({shape.first, shape.second});
                auto s = spec(m, g, 64);
                s.depth = 3;
                auto t = quantize_weight(w, s);
                const double levels = static_cast<double>(weight_quant_levels(s));
                EXPECT_TRUE((t.q.abs() <= levels).all().item<bool>());
                EXPECT_TRUE(torch::equal(t.q, t.q.round()));
                if (m == WeightQuantMethod::kBinary) {
                    EXPECT_TRUE((t.q.abs() == 1).all().item<bool>());
                }
                EXPECT_FALSE(t.q.requires_grad());
                EXPECT_FALSE(t.scale.requires_grad());
                const int64_t groups = g == ScaleGranularity::kGroup ? (shape.second + 63) / 64 : 1;
                EXPECT_EQ(t.scale.size(1), groups);
            }
        }
    }
}

TEST(WeightQuant, RejectsNon2DWeights) {
    EXPECT_THROW(quantize_weight(torch::randn({4}), spec(WeightQuantMethod::kAbsmean,
                                                          ScaleGranularity::kChannel)),
                 Error);
}

// The STE gradient of the latent weight must equal dL/dW_eff exactly: the effective weight used
// as a leaf in the same computation gives the reference.
TEST(WeightQuant, StraightThroughGradientEqualsEffectiveWeightGradient) {
    torch::manual_seed(3);
    for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold,
                   WeightQuantMethod::kBinary, WeightQuantMethod::kBalanced}) {
        for (auto g : {ScaleGranularity::kTensor, ScaleGranularity::kChannel, ScaleGranularity::kGroup}) {
            const auto s = spec(m, g, 16);
            auto w = torch::randn({12, 40}, torch::requires_grad());
            auto x = torch::randn({9, 40});
            auto target = torch::randn({9, 12});

            auto loss = (torch::linear(x, weight_fake_quant(w, s)) - target).pow(2).sum();
            loss.backward();

            auto w_eff = dequantize(quantize_weight(w, s), s).clone().requires_grad_(true);
            auto ref = (torch::linear(x, w_eff) - target).pow(2).sum();
            ref.backward();

            expect_bitwise_equal(w.grad(), w_eff.grad());
            EXPECT_TRUE(torch::equal(loss, ref));
        }
    }
}

// With the scale on the autograd graph (the bug), W's gradient gains a term through max|W| or
// mean|W|; this builds that wrong gradient and shows the test above would see it.
TEST(WeightQuant, ScaleGradientWouldBeVisible) {
    torch::manual_seed(4);
    auto w = torch::randn({8, 16}, torch::requires_grad());
    auto x = torch::randn({5, 16});
    auto scale = w.abs().amax(1, true);  // not detached: the bug
    auto q = quantize_weight(w, spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kChannel)).q;
    auto buggy = (q * scale - w).detach() * 0 + q * scale + (w - w.detach());
    torch::linear(x, buggy).pow(2).sum().backward();
    auto bug_grad = w.grad().clone();

    w.grad().zero_();
    torch::linear(x, weight_fake_quant(w, spec(WeightQuantMethod::kAbsmaxThreshold,
                                               ScaleGranularity::kChannel)))
        .pow(2).sum().backward();
    EXPECT_FALSE(torch::allclose(bug_grad, w.grad()));
}

TEST(QuantLinear, MatchesTorchLinearWhenNotQuantized) {
    torch::manual_seed(11);
    QuantLinear ql(20, 7);
    torch::manual_seed(11);
    torch::nn::Linear ref(20, 7);
    EXPECT_TRUE(torch::equal(ql->weight, ref->weight));  // same initialisation
    EXPECT_TRUE(torch::equal(ql->bias, ref->bias));
    auto x = torch::randn({3, 20});
    EXPECT_TRUE(torch::equal(ql->forward(x), ref->forward(x)));
}

TEST(QuantLinear, QuantizedForwardUsesEffectiveWeightAndNoScaleParameter) {
    torch::manual_seed(12);
    QuantLinear ql(32, 6);
    LinearQuantSpec s;
    s.weight = spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kChannel);
    ql->set_quant(s);
    auto x = torch::randn({4, 32});
    auto eff = dequantize(quantize_weight(ql->weight, s.weight), s.weight);
    EXPECT_TRUE(torch::allclose(ql->forward(x), torch::linear(x, eff, ql->bias)));
    // Only the latent weight and the bias are parameters: no scale can receive a gradient.
    EXPECT_EQ(ql->parameters().size(), 2u);
}

// int8 activations + quantized weights: the integer-exact forward equals the fake-quant linear
// up to float reassociation, and its gradients are exactly the straight-through ones.
TEST(QuantLinear, Int8PathMatchesFakeQuantAndHasStraightThroughGradients) {
    torch::manual_seed(13);
    for (auto g : {ScaleGranularity::kChannel, ScaleGranularity::kGroup, ScaleGranularity::kTensor}) {
        QuantLinear ql(70, 9);
        LinearQuantSpec s;
        s.weight = spec(WeightQuantMethod::kAbsmean, g, /*group=*/16);
        s.activation = ActQuantMethod::kInt8PerToken;
        ql->set_quant(s);
        auto x = torch::randn({2, 3, 70}, torch::requires_grad());
        auto y = ql->forward(x);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 9}));

        auto x_hat = act_fake_quant(x.detach(), ActQuantMethod::kInt8PerToken).requires_grad_(true);
        auto w_eff = dequantize(quantize_weight(ql->weight, s.weight), s.weight).requires_grad_(true);
        auto ref = torch::linear(x_hat, w_eff, ql->bias.detach());
        EXPECT_TRUE(torch::allclose(y, ref, /*rtol=*/1e-5, /*atol=*/1e-6));

        auto gy = torch::randn_like(y);
        y.backward(gy);
        ref.backward(gy);
        EXPECT_TRUE(torch::allclose(ql->weight.grad(), w_eff.grad(), 1e-6, 1e-7));
        EXPECT_TRUE(torch::allclose(x.grad(), x_hat.grad(), 1e-6, 1e-7));
        EXPECT_TRUE(torch::allclose(ql->bias.grad(), gy.sum(std::vector<int64_t>{0, 1})));
    }
}

TEST(QuantLinear, RejectsWrongInputWidth) {
    QuantLinear ql(8, 2);
    EXPECT_THROW(ql->forward(torch::randn({3, 9})), Error);
}

// Frozen codes replace the quantization of the latent weight in both forward paths; the latent
// weight still gets its straight-through gradient; shapes and the missing quantizer are errors.
TEST(QuantLinear, FrozenWeightsDriveTheForward) {
    torch::manual_seed(4);
    for (auto act : {ActQuantMethod::kNone, ActQuantMethod::kInt8PerToken}) {
        QuantLinear layer(16, 8, /*bias=*/false);
        LinearQuantSpec spec;
        spec.weight.method = WeightQuantMethod::kAbsmean;
        spec.activation = act;
        layer->set_quant(spec);
        const torch::Tensor x = torch::randn({5, 16});
        const QuantizedWeights own = quantize_weight(layer->weight, spec.weight);
        const torch::Tensor y0 = layer->forward(x).detach();
        layer->freeze_weights(own);
        EXPECT_TRUE(torch::equal(layer->forward(x).detach(), y0));  // same codes, same output
        // Other codes: the output follows them, not the latent weight.
        const QuantizedWeights flipped{-own.q, own.scale};
        layer->freeze_weights(flipped);
        EXPECT_TRUE(torch::allclose(layer->forward(x).detach(), -y0, 1e-5, 1e-5));
        layer->weight.mutable_grad() = torch::Tensor();
        layer->forward(x).sum().backward();
        ASSERT_TRUE(layer->weight.grad().defined());
        layer->freeze_weights({});
        EXPECT_FALSE(layer->weights_frozen());
    }
    QuantLinear plain(16, 8);
    EXPECT_THROW(plain->freeze_weights({torch::zeros({8, 16}), torch::ones({8, 1})}), Error);
    QuantLinear q(16, 8);
    LinearQuantSpec spec;
    spec.weight.method = WeightQuantMethod::kAbsmean;
    q->set_quant(spec);
    try {
        q->freeze_weights({torch::zeros({8, 15}), torch::ones({8, 1})});
        ADD_FAILURE() << "wrong shape accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("do not match the layer (8, 16)"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace trit
