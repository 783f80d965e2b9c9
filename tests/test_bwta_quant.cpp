// BWTA quantizers (seed 003, Appendix B): the activation quantizer's forward on hand-picked
// values (ties round half to even, clipping), its clipped straight-through input gradient (exact
// mask), its LSQ scale gradient (closed form and central finite differences in double), the
// eq. 6 initialisation, checkpoint round trip, stage-transition setters and every error; and the
// binary weight quantizer of eq. 5 (weight_quant.h) where test_weight_quant.cpp leaves a gap.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/bwta_quant.h"
#include "core/error.h"
#include "core/weight_quant.h"
#include "support/error_of.h"

namespace trit {
namespace {

using testing::error_of;

// Sums of the same double terms in another order: a few ulps of the sum of |terms|.
constexpr double kSumRtol = 1e-12;
// Central difference of a function that is linear in s over [s - h, s + h] (no clip boundary
// within reach): only cancellation error, eps * |f| / h ~ 1e-16 * 1e2 / 1e-5 = 1e-9.
constexpr double kFiniteDiffStep = 1e-5;
constexpr double kFiniteDiffAtol = 1e-7;
// Inputs are kept this far (in units of s) from rounding and clip boundaries.
constexpr double kBoundaryMargin = 1e-3;

// Element-wise identical, including the sign of zero; prints the first mismatches.
void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
    ASSERT_EQ(a.sizes(), b.sizes());
    ASSERT_EQ(a.scalar_type(), b.scalar_type());
    auto ac = a.contiguous().to(torch::kDouble), bc = b.contiguous().to(torch::kDouble);
    const double* pa = ac.data_ptr<double>();
    const double* pb = bc.data_ptr<double>();
    int shown = 0;
    for (int64_t i = 0; i < ac.numel(); ++i) {
        if ((pa[i] != pb[i] || std::signbit(pa[i]) != std::signbit(pb[i])) && shown++ < 5)
            ADD_FAILURE() << "mismatch at index " << i << ": " << pa[i] << " vs " << pb[i];
    }
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
    EXPECT_FALSE(message.empty()) << "expected an error";
    for (const auto& p : parts)
        EXPECT_NE(message.find(p), std::string::npos) << message;
}

ActLevelQuantizer make(ActLevelMode mode, int64_t levels, bool lsq_grad_scale = true) {
    return ActLevelQuantizer(ActLevelQuantizerOptions(mode, levels).lsq_grad_scale(lsq_grad_scale));
}

int64_t clip_low(ActLevelMode mode, int64_t levels) {
    return mode == ActLevelMode::kBool ? 0 : -levels;
}

struct ModeLevels {
    ActLevelMode mode;
    int64_t levels;
};
const std::vector<ModeLevels> kCases = {{ActLevelMode::kSigned, 1},
                                        {ActLevelMode::kSigned, 2},
                                        {ActLevelMode::kSigned, 4},
                                        {ActLevelMode::kBool, 1},
                                        {ActLevelMode::kBool, 3}};

// v = A / s chosen on ties (+-0.5, 1.5, 2.5) and beyond every clip range; s = 0.5 keeps A / s
// exact.
const std::vector<double> kV = {-3, -1.5, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1.5, 2.5, 7};
constexpr double kS = 0.5;

torch::Tensor hand_input() {
    return torch::tensor(kV, torch::kFloat32) * kS;
}

TEST(BwtaActQuant, ModeNamesRoundTrip) {
    for (auto m : {ActLevelMode::kSigned, ActLevelMode::kBool})
        EXPECT_EQ(parse_act_level_mode(act_level_mode_name(m)), m);
    expect_contains(error_of([] { parse_act_level_mode("ternary"); }),
                    {"'ternary'", "known: signed, bool"});
}

TEST(BwtaActQuant, ForwardOnHandPickedValues) {
    // torch::round rounds halves to even: -0.5 -> 0, 0.5 -> 0 (eq. 3 and 4 put +-0.5 on 0 too),
    // 1.5 -> 2, 2.5 -> 2 (not 3); then the clip.
    struct Case {
        ActLevelMode mode;
        int64_t levels;
        std::vector<float> codes;
    };
    const std::vector<Case> cases = {
        {ActLevelMode::kSigned, 1, {-1, -1, 0, 0, 0, 0, 0, 1, 1, 1, 1}},
        {ActLevelMode::kSigned, 2, {-2, -2, 0, 0, 0, 0, 0, 1, 2, 2, 2}},
        {ActLevelMode::kSigned, 4, {-3, -2, 0, 0, 0, 0, 0, 1, 2, 2, 4}},
        {ActLevelMode::kBool, 1, {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}},
        {ActLevelMode::kBool, 2, {0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2}},
    };
    const auto a = hand_input();
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string(act_level_mode_name(c.mode)) + " L=" + std::to_string(c.levels));
        const auto expected = torch::tensor(c.codes) * kS;  // +0 everywhere a code is 0
        expect_bitwise_equal(act_level_quantize(a, kS, c.levels, c.mode), expected);
        auto q = make(c.mode, c.levels);
        q->set_scale(kS);
        expect_bitwise_equal(q(a), expected);
        // The module and the plain function agree bit for bit on random inputs too.
        torch::manual_seed(11);
        const auto r = torch::randn({7, 33}) * 1.3;
        q->set_scale(0.37);
        expect_bitwise_equal(q(r), act_level_quantize(r, 0.37, c.levels, c.mode));
    }
}

TEST(BwtaActQuant, BoolModeClipsNegativeInputsToZero) {
    // Not an error: bool is meant for non-negative activations, and clip() absorbs the rest.
    const auto a = torch::tensor({-5.0f, -0.1f, 0.3f, 0.2f});
    expect_bitwise_equal(act_level_quantize(a, 0.5, 1, ActLevelMode::kBool),
                         torch::tensor({0.0f, 0.0f, 0.5f, 0.0f}));
}

TEST(BwtaActQuant, MeanAbsQuantizedHandComputed) {
    // L = 1: codes -1 -1 0 0 0 0 0 1 1 1 1 -> sum |A_hat| = 6 * 0.5 over 11 values.
    EXPECT_DOUBLE_EQ(mean_abs_quantized(hand_input(), kS, 1, ActLevelMode::kSigned), 3.0 / 11.0);
    // L = 4: |codes| 3 2 0 0 0 0 0 1 2 2 4 = 14.
    EXPECT_DOUBLE_EQ(mean_abs_quantized(hand_input(), kS, 4, ActLevelMode::kSigned), 7.0 / 11.0);
    // bool: 4 ones.
    EXPECT_DOUBLE_EQ(mean_abs_quantized(hand_input(), kS, 1, ActLevelMode::kBool), 2.0 / 11.0);
}

// dL/dA = dL/dA_hat * [lo <= A/s <= hi], exactly: random inputs plus points exactly on and just
// past both clip bounds (s a power of two keeps A / s exact).
TEST(BwtaActQuant, InputGradientIsTheClippedSteMaskExactly) {
    torch::manual_seed(1);
    const double s = 0.25;
    for (const auto& c : kCases) {
        SCOPED_TRACE(std::string(act_level_mode_name(c.mode)) + " L=" + std::to_string(c.levels));
        const double lo = static_cast<double>(clip_low(c.mode, c.levels));
        const double hi = static_cast<double>(c.levels);
        auto v = torch::cat({torch::randn({200}, torch::kDouble) * (hi + 1.0),
                             torch::tensor({lo, hi, lo - 0.25, hi + 0.25, 0.0}, torch::kDouble)});
        auto a = (v * s).requires_grad_(true);
        auto w = torch::randn({v.size(0)}, torch::kDouble);
        auto q = make(c.mode, c.levels);
        q->to(torch::kDouble);
        q->set_scale(s);
        (w * q(a)).sum().backward();
        const auto mask = ((v >= lo) & (v <= hi)).to(torch::kDouble);
        expect_bitwise_equal(a.grad(), w * mask);
        // The boundary points themselves: on the bound passes, past it does not.
        const int64_t n = v.size(0);
        EXPECT_EQ(a.grad()[n - 5].item<double>(), w[n - 5].item<double>());
        EXPECT_EQ(a.grad()[n - 4].item<double>(), w[n - 4].item<double>());
        EXPECT_EQ(a.grad()[n - 3].item<double>(), 0.0);
        EXPECT_EQ(a.grad()[n - 2].item<double>(), 0.0);
    }
}

// Random double inputs whose A / s lies at least kBoundaryMargin from every rounding boundary
// (k + 0.5) and from both clip bounds.
torch::Tensor inputs_away_from_boundaries(double s, double lo, double hi) {
    auto v = torch::randn({400}, torch::kDouble) * (hi + 1.5);
    if (lo == 0.0) v = v.abs() - 0.7;  // bool: mostly non-negative, some below 0
    const auto a = v * s;
    const auto vv = a / s;
    const auto frac = vv - vv.floor();
    const auto keep = ((frac - 0.5).abs() > kBoundaryMargin) & ((vv - lo).abs() > kBoundaryMargin) &
                      ((vv - hi).abs() > kBoundaryMargin);
    return a.index({keep});
}

// The closed form: g * sum(w * (lo <= v <= hi ? round(v) - v : clamp(v, lo, hi))).
double closed_form_scale_grad(const torch::Tensor& a, const torch::Tensor& w, double s, double lo,
                              double hi, double g) {
    const auto v = a / s;
    const auto inside = (v >= lo) & (v <= hi);
    const auto ds = torch::where(inside, v.round() - v, v.clamp(lo, hi));
    return g * (w * ds).sum().item<double>();
}

// LSQ's s-gradient is the derivative of A_hat with round() passed straight through: the derivative
// of the smooth surrogate f(t) = sum(w * t * (clip(A / t, lo, hi) + delta)), with the rounding
// offset delta = round(clip(A / s)) - clip(A / s) frozen at t = s. (Holding r = round(A / s) fixed
// and differentiating t * clip(r) would give sum(w * clip(r)): it drops LSQ's -v term.)
TEST(BwtaActQuant, ScaleGradientMatchesClosedFormAndFiniteDifferences) {
    torch::manual_seed(2);
    const double s = 0.37;
    for (const auto& c : kCases) {
        for (bool lsq_grad_scale : {false, true}) {
            SCOPED_TRACE(std::string(act_level_mode_name(c.mode)) + " L=" +
                         std::to_string(c.levels) + (lsq_grad_scale ? " g=1/sqrt(nL)" : " g=1"));
            const double lo = static_cast<double>(clip_low(c.mode, c.levels));
            const double hi = static_cast<double>(c.levels);
            const auto a = inputs_away_from_boundaries(s, lo, hi);
            ASSERT_GT(a.numel(), 300);
            ASSERT_TRUE(((a / s) < lo).any().item<bool>() && ((a / s) > hi).any().item<bool>());
            const auto w = torch::randn({a.size(0)}, torch::kDouble);

            auto q = make(c.mode, c.levels, lsq_grad_scale);
            q->to(torch::kDouble);
            q->set_scale(s);
            (w * q(a)).sum().backward();
            const double grad = q->scale.grad().item<double>();

            const double g =
                lsq_grad_scale ? 1.0 / std::sqrt(static_cast<double>(a.numel()) * hi) : 1.0;
            const double closed = closed_form_scale_grad(a, w, s, lo, hi, g);
            EXPECT_NEAR(grad, closed, kSumRtol * (w.abs().sum().item<double>() * (hi + 1.0)));

            const auto clipped0 = (a / s).clamp(lo, hi);
            const auto delta = clipped0.round() - clipped0;
            auto f = [&](double t) {
                return (w * t * ((a / t).clamp(lo, hi) + delta)).sum().item<double>();
            };
            const double h = kFiniteDiffStep;
            const double fd = (f(s + h) - f(s - h)) / (2.0 * h);
            EXPECT_NEAR(grad, g * fd, kFiniteDiffAtol) << "finite difference " << fd;
            // The surrogate's value at s is the forward's.
            EXPECT_NEAR(f(s), (w * act_level_quantize(a, s, c.levels, c.mode)).sum().item<double>(),
                        kSumRtol * w.abs().sum().item<double>() * s * (hi + 1.0));
        }
    }
}

// At v = hi exactly the closed interval counts as inside: ds = round(hi) - hi = 0 (LSQ's paper
// would give hi); past it, ds = hi; below lo, ds = lo (0 in bool mode).
TEST(BwtaActQuant, ScaleGradientAtTheClipBounds) {
    const double s = 0.25;
    auto q = make(ActLevelMode::kSigned, 2, /*lsq_grad_scale=*/false);
    q->to(torch::kDouble);
    q->set_scale(s);
    for (const auto& [v, expected] : std::vector<std::pair<double, double>>{
             {2.0, 0.0}, {2.25, 2.0}, {-2.0, 0.0}, {-2.5, -2.0}, {1.25, 1.0 - 1.25}}) {
        q->zero_grad();
        q(torch::tensor({v * s}, torch::kDouble)).sum().backward();
        EXPECT_EQ(q->scale.grad().item<double>(), expected) << "v = " << v;
    }
    auto b = make(ActLevelMode::kBool, 1, /*lsq_grad_scale=*/false);
    b->to(torch::kDouble);
    b->set_scale(s);
    for (const auto& [v, expected] :
         std::vector<std::pair<double, double>>{{0.0, 0.0}, {-0.75, 0.0}, {1.0, 0.0}, {1.5, 1.0}}) {
        b->zero_grad();
        b(torch::tensor({v * s}, torch::kDouble)).sum().backward();
        EXPECT_EQ(b->scale.grad().item<double>(), expected) << "bool v = " << v;
    }
}

TEST(BwtaActQuant, InitialisesTheScaleFromTheFirstBatch) {
    auto q = make(ActLevelMode::kSigned, 3);
    EXPECT_FALSE(q->initialized());
    EXPECT_EQ(q->scale_value(), 1.0);
    // eq. 6: s_A^0 = mean|A| = (1 + 2 + 3 + 6) / 4 = 3.
    auto first = torch::tensor({-1.0f, 2.0f, -3.0f, 6.0f});
    auto out = q(first);
    EXPECT_TRUE(q->initialized());
    EXPECT_EQ(q->scale_value(), 3.0);
    expect_bitwise_equal(out, act_level_quantize(first, 3.0, 3, ActLevelMode::kSigned));
    // Later batches do not re-initialise.
    q(torch::full({5}, 100.0f));
    EXPECT_EQ(q->scale_value(), 3.0);

    torch::manual_seed(4);
    auto r = torch::randn({64, 48});
    auto p = make(ActLevelMode::kBool, 1);
    p->initialize_scale(r);
    EXPECT_EQ(
        p->scale_value(),
        static_cast<double>(static_cast<float>(r.abs().to(torch::kDouble).mean().item<double>())));
}

TEST(BwtaActQuant, CheckpointKeepsScaleAndInitialisedFlag) {
    auto q = make(ActLevelMode::kSigned, 2);
    q(torch::tensor({0.3f, -0.9f, 1.7f}));
    ASSERT_TRUE(q->initialized());
    std::stringstream saved;
    torch::save(q, saved);

    auto r = make(ActLevelMode::kSigned, 2);
    torch::load(r, saved);
    EXPECT_TRUE(r->initialized());
    EXPECT_EQ(r->scale_value(), q->scale_value());
    // Resumed: the next batch does not re-initialise.
    r(torch::tensor({10.0f, 20.0f}));
    EXPECT_EQ(r->scale_value(), q->scale_value());

    // An uninitialised checkpoint loads as uninitialised, over an initialised module too.
    std::stringstream fresh;
    torch::save(make(ActLevelMode::kSigned, 2), fresh);
    torch::load(r, fresh);
    EXPECT_FALSE(r->initialized());

    // clone() copies the state as well.
    auto c = std::dynamic_pointer_cast<ActLevelQuantizerImpl>(q->clone());
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->initialized());
    EXPECT_EQ(c->scale_value(), q->scale_value());
}

TEST(BwtaActQuant, SetLevelsAndSetScaleDriveTheForward) {
    const auto a = hand_input();
    auto q = make(ActLevelMode::kSigned, 4);
    const torch::Tensor param = q->scale;
    q->set_scale(kS);
    EXPECT_TRUE(q->initialized());  // an explicit scale counts as initialised
    expect_bitwise_equal(q(a), act_level_quantize(a, kS, 4, ActLevelMode::kSigned));
    q->set_levels(1);
    EXPECT_EQ(q->levels(), 1);
    expect_bitwise_equal(q(a), act_level_quantize(a, kS, 1, ActLevelMode::kSigned));

    // A stage transition as §4.2 does it: s_new = p * s_old, written in place.
    const double p = mean_abs_quantized(a, kS, 4, ActLevelMode::kSigned) /
                     mean_abs_quantized(a, kS, 1, ActLevelMode::kSigned);
    q->set_scale(p * kS);
    EXPECT_DOUBLE_EQ(q->scale_value(), static_cast<double>(static_cast<float>(p * kS)));
    EXPECT_TRUE(q->scale.is_same(param));  // the optimizer's parameter is the one that changed
    EXPECT_TRUE(q->scale.requires_grad());

    // The LSQ gradient scale follows the new L: g = 1 / sqrt(numel * L).
    auto d = make(ActLevelMode::kSigned, 4);
    d->to(torch::kDouble);
    d->set_scale(0.25);
    auto x = torch::tensor({0.1, 0.3, -0.2, 5.0}, torch::kDouble);
    d(x).sum().backward();
    const double g4 = d->scale.grad().item<double>();
    d->zero_grad();
    d->set_levels(1);
    d(x).sum().backward();
    const double g1 = d->scale.grad().item<double>();
    // v = 0.4, 1.2, -0.8, 20. Raw sums: L = 4: (0 - 0.4) + (1 - 1.2) + (-1 + 0.8) + 4 = 3.2;
    // L = 1: (0 - 0.4) + 1 + (-1 + 0.8) + 1 = 1.4 (1.2 and 20 are past the bound). 0.1 / 0.25 is
    // not exact in binary: a few ulps.
    EXPECT_NEAR(g4, 3.2 / std::sqrt(16.0), 1e-12);
    EXPECT_NEAR(g1, 1.4 / std::sqrt(4.0), 1e-12);
}

TEST(BwtaActQuant, ErrorsNameWhatWasWrong) {
    expect_contains(error_of([] { make(ActLevelMode::kSigned, 0); }),
                    {"ActLevelQuantizer", "levels must be >= 1", "got 0"});
    auto q = make(ActLevelMode::kBool, 1);
    expect_contains(error_of([&] { q->set_levels(-2); }),
                    {"set_levels", "levels must be >= 1", "got -2"});
    for (double bad : {0.0, -0.5, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()})
        expect_contains(error_of([&] { q->set_scale(bad); }),
                        {"set_scale", "scale must be positive and finite"});
    EXPECT_FALSE(q->initialized());  // a refused scale changes nothing
    expect_contains(error_of([&] {
                        q(torch::zeros({3, 4}));
                    }),
                    {"initialize_scale", "mean|A| = 0", "positive finite mean"});
    expect_contains(error_of([&] { q->initialize_scale(torch::zeros({0})); }),
                    {"initialize_scale", "empty"});
    expect_contains(error_of([&] { q(torch::ones({3}, torch::kInt32)); }),
                    {"ActLevelQuantizer", "floating-point", "Int"});
    expect_contains(error_of([&] {
                        q->set_scale(1.0);
                        torch::NoGradGuard no_grad;
                        q->scale.fill_(-0.5);  // what a diverging optimizer step could leave
                        q(torch::ones({2}));
                    }),
                    {"learned scale is -0.5", "positive finite"});

    const auto a = torch::ones({2});
    expect_contains(error_of([&] { act_level_quantize(a, 0.5, 0, ActLevelMode::kSigned); }),
                    {"act_level_quantize", "levels must be >= 1", "got 0"});
    expect_contains(error_of([&] { act_level_quantize(a, -1.0, 1, ActLevelMode::kSigned); }),
                    {"act_level_quantize", "scale must be positive and finite", "got -1"});
    expect_contains(error_of([&] {
                        act_level_quantize(torch::ones({2}, torch::kLong), 1.0, 1,
                                           ActLevelMode::kBool);
                    }),
                    {"act_level_quantize", "floating-point"});
    expect_contains(
        error_of([&] { mean_abs_quantized(torch::zeros({0}), 1.0, 1, ActLevelMode::kBool); }),
        {"mean_abs_quantized", "empty"});
    expect_contains(error_of([&] { mean_abs_quantized(a, 0.0, 1, ActLevelMode::kBool); }),
                    {"mean_abs_quantized", "scale must be positive and finite", "got 0"});
    expect_contains(error_of([&] { mean_abs_quantized(a, 1.0, 0, ActLevelMode::kBool); }),
                    {"mean_abs_quantized", "levels must be >= 1", "got 0"});
}

// Binary weights (eq. 5: W_b = s_W * sign(W - mu(W))) are WeightQuantMethod::kBinary; its
// per-channel values and its straight-through gradient (all granularities) are tested in
// test_weight_quant.cpp. This adds hand-computed per-tensor and partial-last-group cases.
TEST(BwtaWeight, BinaryPerTensorAndPartialGroupHandComputed) {
    const auto w =
        torch::tensor({{1.0f, -1.0f, 3.0f, -1.0f, 2.0f}, {0.0f, 4.0f, 0.0f, 0.0f, 0.0f}});
    WeightQuantSpec spec;
    spec.method = WeightQuantMethod::kBinary;
    // Tensor: mu = 0.8, sum |W - mu| = 13.6 over 10 -> s = 1.36.
    spec.granularity = ScaleGranularity::kTensor;
    auto t = quantize_weight(w, spec);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{1.36f}}))) << t.scale;
    EXPECT_TRUE(torch::equal(
        t.q, torch::tensor({{1.f, -1.f, 1.f, -1.f, 1.f}, {-1.f, 1.f, -1.f, -1.f, -1.f}})))
        << t.q;
    // Group 4, in = 5: row 0 {1, -1, 3, -1}: mu 0.5, s 1.5; {2}: W - mu = 0 -> +1, s 0.
    // row 1 {0, 4, 0, 0}: mu 1, s 1.5, codes -1 1 -1 -1; {0}: +1, s 0.
    spec.granularity = ScaleGranularity::kGroup;
    spec.group_size = 4;
    t = quantize_weight(w, spec);
    EXPECT_TRUE(torch::allclose(t.scale, torch::tensor({{1.5f, 0.0f}, {1.5f, 0.0f}}))) << t.scale;
    EXPECT_TRUE(torch::equal(
        t.q, torch::tensor({{1.f, -1.f, 1.f, -1.f, 1.f}, {-1.f, 1.f, -1.f, -1.f, 1.f}})))
        << t.q;
}

}  // namespace
}  // namespace trit
