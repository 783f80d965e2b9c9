// Activation fake-quant of the training forward against the bit-exact CPU reference
// (act_int8_quantize_ref, which the CUDA kernel also matches), and its straight-through gradient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "core/act_int8.h"
#include "core/act_quant.h"

namespace trit {
namespace {

TEST(ActQuant, Int8PerTokenMatchesReferenceBitExactly) {
    torch::manual_seed(5);
    for (auto shape : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {3, 784}, {33, 130}}) {
        auto x = torch::rand({shape.first, shape.second}) * 2 - 1;
        x.slice(0, 0, 1) *= 1e-3;  // a small-magnitude row
        auto a = act_int8_quantize(x);
        std::vector<int8_t> q(x.numel());
        std::vector<float> scale(shape.first);
        act_int8_quantize_ref(x.data_ptr<float>(), shape.first, shape.second, q.data(), scale.data());
        auto q_ref = torch::from_blob(q.data(), {shape.first, shape.second}, torch::kInt8).to(torch::kFloat32);
        auto s_ref = torch::from_blob(scale.data(), {shape.first, 1}, torch::kFloat32);
        EXPECT_TRUE(torch::equal(a.q, q_ref)) << "shape " << shape.first << "x" << shape.second;
        EXPECT_TRUE(torch::equal(a.scale, s_ref)) << "shape " << shape.first << "x" << shape.second;
    }
}

TEST(ActQuant, FakeQuantIsDequantizedCodesWithIdentityGradient) {
    torch::manual_seed(6);
    auto x = torch::randn({4, 16}, torch::requires_grad());
    auto y = act_fake_quant(x, ActQuantMethod::kInt8PerToken);
    auto a = act_int8_quantize(x);
    EXPECT_TRUE(torch::equal(y.detach(), a.q * a.scale));
    auto g = torch::randn({4, 16});
    y.backward(g);
    EXPECT_TRUE(torch::equal(x.grad(), g));  // straight through, unchanged
    // At most half a step of error per element.
    EXPECT_TRUE(((y.detach() - x.detach()).abs() <= a.scale * 0.5 + 1e-7).all().item<bool>());
}

TEST(ActQuant, NoneIsIdentityAndNonFiniteRowsDequantizeToNaN) {
    auto x = torch::randn({2, 5});
    EXPECT_TRUE(act_fake_quant(x, ActQuantMethod::kNone).is_same(x));
    auto bad = torch::tensor({{1.0f, std::nanf(""), 0.5f}, {0.25f, -0.5f, 1.0f}});
    auto y = act_fake_quant(bad, ActQuantMethod::kInt8PerToken);
    EXPECT_TRUE(torch::isnan(y[0]).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(y[1]).all().item<bool>());
}

TEST(ActQuant, ParsesMethodNames) {
    EXPECT_EQ(parse_act_quant_method("int8_per_token"), ActQuantMethod::kInt8PerToken);
    EXPECT_THROW(parse_act_quant_method("int4"), std::exception);
}

}  // namespace
}  // namespace trit
