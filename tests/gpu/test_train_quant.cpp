// The fused training quantizers (kernels/train_quant.h) against the tensor-op versions they
// replace: activation codes, scales and x_hat bit for bit (non-finite rows NaN); absmean weight
// scales within an ulp and codes equal away from rounding ties; and the int8 QAT linear gives the
// same forward and gradients with and without them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/act_quant.h"
#include "core/int8_linear.h"
#include "core/weight_quant.h"
#include "kernels/train_quant_torch.h"
#include "tests/gpu/gpu_test_util.h"

namespace trit {
namespace {

class TrainQuant : public gputest::RequiresGpu<::testing::Test> {
  protected:
    void TearDown() override { kernels::register_training_quantizers(); }
};

TEST_F(TrainQuant, ActivationsBitExactWithTensorOps) {
    torch::manual_seed(1);
    for (auto shape : {std::vector<int64_t>{1, 1}, {7, 33}, {3, 5, 128}, {300, 1000}, {2, 4097}}) {
        torch::Tensor x = torch::randn(shape, torch::kCUDA) * 3;
        x.view({-1}).index_put_({0}, 0.0f);
        set_act_int8_cuda_impl(nullptr);
        const Int8FakeQuant want = act_int8_fake_quantize(x);
        const Int8FakeQuant got = kernels::act_int8_fake_quantize_cuda(x.contiguous());
        EXPECT_TRUE(torch::equal(got.q, want.q)) << x.sizes();
        EXPECT_TRUE(torch::equal(got.scale, want.scale)) << x.sizes();
        EXPECT_TRUE(torch::equal(got.x_hat, want.x_hat)) << x.sizes();
    }
    torch::Tensor bad = torch::randn({3, 40}, torch::kCUDA);
    bad.index_put_({1, 5}, std::nanf(""));
    bad.index_put_({2, 0}, INFINITY);
    const Int8FakeQuant got = kernels::act_int8_fake_quantize_cuda(bad);
    EXPECT_FALSE(torch::isnan(got.x_hat[0]).any().item<bool>());
    EXPECT_TRUE(torch::isnan(got.x_hat[1]).all().item<bool>());
    EXPECT_TRUE(torch::isnan(got.x_hat[2]).all().item<bool>());
}

TEST_F(TrainQuant, AbsmeanWeightsMatchTensorOps) {
    torch::manual_seed(2);
    for (bool fp16 : {false, true}) {
        for (auto shape : {std::vector<int64_t>{1, 1}, {5, 3}, {128, 512}, {384, 96}, {17, 5000}}) {
            torch::Tensor w = torch::randn(shape, torch::kCUDA) * 0.02;
            WeightQuantSpec spec;
            spec.method = WeightQuantMethod::kAbsmean;
            spec.fp16_scales = fp16;
            set_absmean_channel_cuda_impl(nullptr);
            const QuantizedWeightsEff want = quantize_weight_eff(w, spec);
            const QuantizedWeightsEff got = kernels::weight_absmean_channel_cuda(w, fp16);
            ASSERT_EQ(got.w.scale.sizes(), want.w.scale.sizes());
            const double tol = fp16 ? 1e-3 : 2e-6;  // an ulp of the sum's order (fp16: of the rounding)
            EXPECT_TRUE(torch::allclose(got.w.scale, want.w.scale, tol, 0)) << w.sizes();
            // Codes agree except where w / (s + eps) is within rounding of a tie (+-0.5).
            const torch::Tensor r = (w / (want.w.scale + kAbsmeanEps)).abs();
            const torch::Tensor near_tie = (r - 0.5).abs() < 1e-4;
            EXPECT_EQ((got.w.q.ne(want.w.q) & ~near_tie).sum().item<int64_t>(), 0) << w.sizes();
            EXPECT_TRUE(torch::equal(got.w_eff, got.w.q * got.w.scale)) << w.sizes();
        }
    }
}

TEST_F(TrainQuant, Int8LinearSameWithAndWithoutFusedQuantizers) {
    torch::manual_seed(3);
    WeightQuantSpec spec;
    spec.method = WeightQuantMethod::kAbsmean;
    torch::Tensor x = torch::randn({4, 9, 96}, torch::kCUDA);
    torch::Tensor w = (torch::randn({64, 96}, torch::kCUDA) * 0.05).requires_grad_(true);
    torch::Tensor g = torch::randn({4, 9, 64}, torch::kCUDA);
    torch::Tensor y[2], gw[2], gx[2];
    for (int fused = 0; fused < 2; ++fused) {
        if (fused) {
            kernels::register_training_quantizers();
        } else {
            set_act_int8_cuda_impl(nullptr);
            set_absmean_channel_cuda_impl(nullptr);
        }
        torch::Tensor xi = x.clone().requires_grad_(true);
        w.mutable_grad() = torch::Tensor();
        y[fused] = int8_quant_linear(xi, w, torch::Tensor(), spec);
        y[fused].backward(g);
        gw[fused] = w.grad().clone();
        gx[fused] = xi.grad().clone();
    }
    EXPECT_TRUE(torch::allclose(y[0], y[1], 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(gw[0], gw[1], 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(gx[0], gx[1], 1e-5, 1e-5));
}

}  // namespace
}  // namespace trit
