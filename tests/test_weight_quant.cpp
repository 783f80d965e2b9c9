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
    return WeightQuantSpec{m, g, group, thr};
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
    auto t = ternary_quantize(w, spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kTensor));
    EXPECT_NEAR(t.scale.item<float>(), 3.7f / 6, 1e-6);
    // W / 0.61668 = 1.46, -0.16, 0.81, -2.11, 0.486, -0.973
    auto expected = torch::tensor({{1.f, 0.f, 1.f}, {-1.f, 0.f, -1.f}});
    EXPECT_TRUE(torch::equal(t.q, expected)) << t.q;
}

TEST(WeightQuant, AbsmeanPerChannelHandComputed) {
    // row 0: mean|w| = (0.2 + 0.4 + 0.6 + 0.0) / 4 = 0.3 -> w/g = 0.67, -1.33, 2.0, 0 -> 1, -1, 1, 0
    // row 1: mean|w| = (1 + 1 + 4 + 2) / 4 = 2 -> 0.5 (just under), -0.5, 2, -1 -> 0, 0, 1, -1
    auto w = torch::tensor({{0.2f, -0.4f, 0.6f, 0.0f}, {1.0f, -1.0f, 4.0f, -2.0f}});
    auto t = ternary_quantize(w, spec(WeightQuantMethod::kAbsmean, ScaleGranularity::kChannel));
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
    auto t = ternary_quantize(w, s);
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
    auto t = ternary_quantize(w, s);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{2.0f}, {0.5f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, 0.f, 1.f, -1.f}, {0.f, -1.f, 1.f, 0.f}})))
        << t.q;
    // Masked negatives are +0, not -0 (packers and bit-exact comparisons rely on it).
    EXPECT_FALSE(std::signbit(t.q[0][1].item<float>()));
}

TEST(WeightQuant, AbsmaxThresholdLambdaAndGroups) {
    auto w = torch::tensor({{1.0f, 0.3f, -0.2f, 0.05f}});
    auto t = ternary_quantize(
        w, spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kGroup, /*group=*/2, 0.25));
    // groups {1.0, 0.3}: alpha 1, thr 0.25 -> 1, 1; {-0.2, 0.05}: alpha 0.2, thr 0.05 -> -1, 0
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{1.0f, 0.2f}})));
    EXPECT_TRUE(torch::equal(t.q, torch::tensor({{1.f, 1.f, -1.f, 0.f}}))) << t.q;
}

TEST(WeightQuant, AllZeroWeightsStayFinite) {
    auto w = torch::zeros({3, 8});
    for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold}) {
        auto s = spec(m, ScaleGranularity::kChannel);
        auto eff = dequantize(ternary_quantize(w, s), s);
        EXPECT_TRUE(torch::isfinite(eff).all().item<bool>());
        EXPECT_EQ(eff.abs().sum().item<float>(), 0.0f);
    }
}

TEST(WeightQuant, ValuesAreTernaryOnRandomShapes) {
    torch::manual_seed(7);
    for (auto g : {ScaleGranularity::kTensor, ScaleGranularity::kChannel, ScaleGranularity::kGroup}) {
        for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold}) {
            for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 63}, {5, 130}, {17, 64}}) {
                auto w = torch::randn({shape.first, shape.second});
                auto s = spec(m, g, 64);
                auto t = ternary_quantize(w, s);
                EXPECT_TRUE(((t.q == 0) | (t.q == 1) | (t.q == -1)).all().item<bool>());
                EXPECT_FALSE(t.q.requires_grad());
                EXPECT_FALSE(t.scale.requires_grad());
                const int64_t groups = g == ScaleGranularity::kGroup ? (shape.second + 63) / 64 : 1;
                EXPECT_EQ(t.scale.size(1), groups);
            }
        }
    }
}

TEST(WeightQuant, RejectsNon2DWeights) {
    EXPECT_THROW(ternary_quantize(torch::randn({4}), spec(WeightQuantMethod::kAbsmean,
                                                          ScaleGranularity::kChannel)),
                 Error);
}

// The STE gradient of the latent weight must equal dL/dW_eff exactly: the effective weight used
// as a leaf in the same computation gives the reference.
TEST(WeightQuant, StraightThroughGradientEqualsEffectiveWeightGradient) {
    torch::manual_seed(3);
    for (auto m : {WeightQuantMethod::kAbsmean, WeightQuantMethod::kAbsmaxThreshold}) {
        for (auto g : {ScaleGranularity::kTensor, ScaleGranularity::kChannel, ScaleGranularity::kGroup}) {
            const auto s = spec(m, g, 16);
            auto w = torch::randn({12, 40}, torch::requires_grad());
            auto x = torch::randn({9, 40});
            auto target = torch::randn({9, 12});

            auto loss = (torch::linear(x, weight_fake_quant(w, s)) - target).pow(2).sum();
            loss.backward();

            auto w_eff = dequantize(ternary_quantize(w, s), s).clone().requires_grad_(true);
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
    auto q = ternary_quantize(w, spec(WeightQuantMethod::kAbsmaxThreshold, ScaleGranularity::kChannel)).q;
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
    auto eff = dequantize(ternary_quantize(ql->weight, s.weight), s.weight);
    EXPECT_TRUE(torch::allclose(ql->forward(x), torch::linear(x, eff, ql->bias)));
    // Only the latent weight and the bias are parameters: no scale can receive a gradient.
    EXPECT_EQ(ql->parameters().size(), 2u);
}

TEST(QuantLinear, RejectsWrongInputWidth) {
    QuantLinear ql(8, 2);
    EXPECT_THROW(ql->forward(torch::randn({3, 9})), Error);
}

}  // namespace
}  // namespace trit
