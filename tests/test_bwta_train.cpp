// BWTA training (issue 6): every activation grid on hand-picked values and its gradients against
// finite differences; the integer-exact BWTA linear against the float composition and its
// autograd; the new recipe keys (errors, round trip, old recipes written as before); the SMSQ
// stage plan and transition; and tiny runs: stage and transition lines, fresh optimizers, scale
// learning rate, kill-and-resume across a transition, early stop, distillation, init.from and
// layer selection.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/bwta_linear.h"
#include "core/bwta_quant.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/int8_linear.h"
#include "core/model.h"
#include "core/quant_linear.h"
#include "core/recipe.h"
#include "quantizers/layer_selection.h"
#include "tests/support/error_of.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/lr_schedule.h"
#include "trainers/metrics.h"
#include "trainers/smsq.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using testing::expect_error;

// Float32 results of the same products summed in another order (integer sums then the epilogue,
// against a float matmul; autograd's matmuls against the custom backward's): a few ulps of the
// largest magnitude involved, far below 1e-5 of it.
constexpr double kFloatRtol = 1e-5;
// Central differences of a surrogate linear in s over [s - h, s + h], in double: cancellation only.
constexpr double kFiniteDiffStep = 1e-5;
constexpr double kFiniteDiffAtol = 1e-7;
// Metrics lines print 9 significant digits.
constexpr double kMetricsRtol = 1e-7;

// max |a - b| <= rtol * max |ref|, with the first mismatch printed.
void expect_close(const torch::Tensor& a, const torch::Tensor& ref, double rtol,
                  const std::string& what) {
    ASSERT_EQ(a.sizes(), ref.sizes()) << what;
    const double scale = ref.abs().max().item<double>();
    const torch::Tensor diff = (a.to(torch::kDouble) - ref.to(torch::kDouble)).abs().flatten();
    const int64_t worst = diff.argmax().item<int64_t>();
    EXPECT_LE(diff[worst].item<double>(), rtol * scale + 1e-30)
        << what << ": index " << worst << ": " << a.flatten()[worst].item<double>() << " vs "
        << ref.flatten()[worst].item<double>() << " (max |ref| " << scale << ")";
}

// ---------------------------------------------------------------------------------------------
// Grids

// v = A / s with s = 0.5 (A / s exact): ties (+-0.5, 1.5, 2.5, 3.5) and values past every bound.
const std::vector<double> kV = {-5, -3, -1.5, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1.5, 2.5, 3.5, 7};
constexpr double kS = 0.5;

TEST(BwtaTrainGrid, EveryGridKindOnHandPickedValues) {
    // round() rounds halves to even: -1.5 -> -2, -0.5 -> 0, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4.
    struct Case {
        int64_t count;
        ActLevelMode mode;
        ActGrid grid;
        std::vector<float> codes;
    };
    const ActLevelMode S = ActLevelMode::kSigned, B = ActLevelMode::kBool;
    const std::vector<Case> cases = {
        {3, S, {-1, 1, false}, {-1, -1, -1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}},  // levelwise, ternary
        {5, S, {-2, 2, false}, {-2, -2, -2, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2}},
        {9, S, {-4, 4, false}, {-4, -3, -2, 0, 0, 0, 0, 0, 1, 2, 2, 4, 4}},
        {8, S, {-4, 3, false}, {-4, -3, -2, 0, 0, 0, 0, 0, 1, 2, 2, 3, 3}},   // bitwise, 3 bits
        {4, S, {-2, 1, false}, {-2, -2, -2, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}},   // 2 bits
        {2, S, {-1, 1, true}, {-1, -1, -1, -1, -1, 1, 1, 1, 1, 1, 1, 1, 1}},  // binary: 0 -> +1
        {3, B, {0, 1, false}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}},       // bool odd: eq. 3
        {5, B, {0, 2, false}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2}},
        {2, B, {0, 1, false}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}},  // bool even: unsigned
        {4, B, {0, 3, false}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 3, 3}},
        {8, B, {0, 7, false}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 4, 7}},
    };
    const torch::Tensor a = torch::tensor(kV, torch::kFloat32) * kS;
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string(act_level_mode_name(c.mode)) + " " + std::to_string(c.count));
        const ActGrid g = act_grid(c.count, c.mode);
        EXPECT_EQ(g, c.grid) << describe_grid(g);
        EXPECT_EQ(g.count(), c.mode == S ? c.count : c.grid.hi + 1);
        const torch::Tensor expected = torch::tensor(c.codes);
        EXPECT_TRUE(torch::equal(act_grid_codes(a, torch::scalar_tensor(kS), g), expected));
        EXPECT_TRUE(torch::equal(act_grid_quantize(a, kS, g), expected * kS));
        // The module's forward is the same, bit for bit, on random inputs too.
        ActLevelQuantizer q{ActLevelQuantizerOptions(c.mode)};
        q->set_grid(g);
        q->set_scale(kS);
        EXPECT_TRUE(torch::equal(q(a), expected * kS));
        torch::manual_seed(3);
        const torch::Tensor r = torch::randn({5, 31}) * 2;
        q->set_scale(0.37);
        EXPECT_TRUE(torch::equal(q(r), act_grid_quantize(r, 0.37, g)));
    }
    EXPECT_EQ(describe_grid(act_grid(2, S)), "{-1, +1}");
    EXPECT_EQ(describe_grid(act_grid(8, S)), "[-4, 3]");
    EXPECT_EQ(act_grid(8, S).q_max(), 4);
}

TEST(BwtaTrainGrid, BinaryHasNoZero) {
    const ActGrid g = act_grid(2, ActLevelMode::kSigned);
    const torch::Tensor a =
        torch::cat({torch::randn({1000}) * 1e-3, torch::tensor({0.0f, -0.0f, 1e-30f})});
    const torch::Tensor q = act_grid_quantize(a, 0.1, g);
    EXPECT_TRUE((q.abs() == 0.1f).all().item<bool>());
    EXPECT_EQ(
        act_grid_codes(torch::tensor({0.0f, -0.0f}), torch::scalar_tensor(1.0), g)[1].item<float>(),
        1.0f);
    EXPECT_DOUBLE_EQ(mean_abs_quantized(a, 0.1, g), static_cast<double>(0.1f));
}

// The bitwise and binary grids' gradients (the levelwise ones are in test_bwta_quant.cpp):
// dL/dA = dL/dA_hat * [lo <= v <= hi] exactly, and dL/ds equal to g times the central difference
// of f(t) = sum(w * t * (clip(A / t, lo, hi) + delta)), delta = q - clip(A / s) frozen at s (the
// straight-through round; binary: clip to [-1, 1], q = sign).
TEST(BwtaTrainGrid, BitwiseAndBinaryGradientsMatchFiniteDifferences) {
    torch::manual_seed(5);
    const double s = 0.375;
    for (int64_t count : {8, 4, 2}) {
        const ActGrid grid = act_grid(count, ActLevelMode::kSigned);
        SCOPED_TRACE(describe_grid(grid));
        const double lo = static_cast<double>(grid.lo), hi = static_cast<double>(grid.hi);
        torch::Tensor v = torch::randn({500}, torch::kDouble) * (hi + 1.5);
        const torch::Tensor frac = v - v.floor();
        // Away from rounding ties (the binary grid has none but 0, which no t > 0 moves) and
        // bounds.
        v = v.index(
            {((frac - 0.5).abs() > 1e-3) & ((v - lo).abs() > 1e-3) & ((v - hi).abs() > 1e-3)});
        ASSERT_TRUE(((v < lo).any() & (v > hi).any()).item<bool>());
        const torch::Tensor a = (v * s).requires_grad_(true);
        const torch::Tensor w = torch::randn({v.size(0)}, torch::kDouble);
        ActLevelQuantizer q{ActLevelQuantizerOptions(ActLevelMode::kSigned)};
        q->to(torch::kDouble);
        q->set_grid(grid);
        q->set_scale(s);
        (w * q(a)).sum().backward();

        const torch::Tensor inside = ((v >= lo) & (v <= hi)).to(torch::kDouble);
        EXPECT_TRUE(torch::equal(a.grad(), w * inside));

        const double g =
            1.0 / std::sqrt(static_cast<double>(v.numel()) * static_cast<double>(grid.q_max()));
        EXPECT_DOUBLE_EQ(q->grad_scale(v.numel()), g);
        const torch::Tensor codes =
            act_grid_codes(a.detach(), torch::scalar_tensor(s, torch::kDouble), grid);
        const torch::Tensor delta = codes - v.clamp(lo, hi);
        auto f = [&](double t) {
            return (w * t * ((a.detach() / t).clamp(lo, hi) + delta)).sum().item<double>();
        };
        const double fd = (f(s + kFiniteDiffStep) - f(s - kFiniteDiffStep)) / (2 * kFiniteDiffStep);
        EXPECT_NEAR(q->scale.grad().item<double>(), g * fd, kFiniteDiffAtol);
        EXPECT_NEAR(f(s), (w * act_grid_quantize(a.detach(), s, grid)).sum().item<double>(), 1e-9);
    }
}

// ---------------------------------------------------------------------------------------------
// BWTA linear

struct LinearCase {
    ScaleGranularity granularity;
    bool bias;
    ActLevelMode mode;
    int64_t count;
};

std::vector<LinearCase> linear_cases() {
    std::vector<LinearCase> out;
    for (auto gr : {ScaleGranularity::kTensor, ScaleGranularity::kChannel})
        for (bool bias : {true, false})
            for (auto [mode, count] :
                 std::vector<std::pair<ActLevelMode, int64_t>>{{ActLevelMode::kSigned, 3},
                                                               {ActLevelMode::kSigned, 8},
                                                               {ActLevelMode::kSigned, 2},
                                                               {ActLevelMode::kBool, 3},
                                                               {ActLevelMode::kBool, 4}})
                out.push_back({gr, bias, mode, count});
    return out;
}

std::string describe(const LinearCase& c) {
    return std::string(scale_granularity_name(c.granularity)) + (c.bias ? " bias " : " no bias ") +
           act_level_mode_name(c.mode) + " " + std::to_string(c.count);
}

TEST(BwtaTrainLinear, ForwardIsTheIntegerExactFloatComposition) {
    for (const auto& c : linear_cases()) {
        SCOPED_TRACE(describe(c));
        torch::manual_seed(7);
        WeightQuantSpec spec;
        spec.method = WeightQuantMethod::kBinary;
        spec.granularity = c.granularity;
        const ActGrid grid = act_grid(c.count, c.mode);
        const torch::Tensor x = torch::randn({2, 3, 24}) * 1.5;  // (B, T, in)
        const torch::Tensor w = torch::randn({5, 24}) * 0.2;
        const torch::Tensor b = c.bias ? torch::randn({5}) : torch::Tensor();
        const double s = 0.6;
        const torch::Tensor y =
            bwta_linear(x, torch::scalar_tensor(s), grid, 1.0, w, b, spec).detach();
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 5}));
        const QuantizedWeightsEff qw = quantize_weight_eff(w, spec);
        expect_close(y, torch::linear(act_grid_quantize(x, s, grid), qw.w_eff, b), kFloatRtol,
                     "float");
        // Exactly the integer path: codes, exact sums, the epilogue, then the bias.
        const torch::Tensor codes =
            act_grid_codes(x.reshape({-1, 24}), torch::scalar_tensor(s), grid);
        torch::Tensor yi = integer_linear_forward(codes, torch::scalar_tensor(s, torch::kFloat32),
                                                  qw.w, spec, grid.q_max());
        if (c.bias) yi = yi + b;
        EXPECT_TRUE(torch::equal(y.reshape({-1, 5}), yi));
        // QuantLinear with ternary activations runs this forward.
        QuantLinear layer(torch::nn::LinearOptions(24, 5).bias(c.bias));
        {
            torch::NoGradGuard no_grad;
            layer->weight.copy_(w);
            if (c.bias) layer->bias.copy_(b);
        }
        LinearQuantSpec ls;
        ls.weight = spec;
        ls.activation = ActQuantMethod::kTernary;
        ls.act_mode = c.mode;
        ls.act_levels = c.count;
        layer->set_quant(ls);
        layer->act->set_scale(s);
        EXPECT_TRUE(torch::equal(layer(x).detach(), y));
    }
}

TEST(BwtaTrainLinear, GradientsEqualAutogradOfTheComposition) {
    for (const auto& c : linear_cases()) {
        SCOPED_TRACE(describe(c));
        torch::manual_seed(8);
        WeightQuantSpec spec;
        spec.method = WeightQuantMethod::kBinary;
        spec.granularity = c.granularity;
        const torch::Tensor x0 = torch::randn({2, 3, 24}) * 1.5, w0 = torch::randn({5, 24}) * 0.2;
        const torch::Tensor b0 = torch::randn({5}), r = torch::randn({2, 3, 5});
        struct Side {
            torch::Tensor x, w, b;
            ActLevelQuantizer q{nullptr};
        };
        auto side = [&]() {
            Side sd{x0.clone().requires_grad_(true), w0.clone().requires_grad_(true),
                    c.bias ? b0.clone().requires_grad_(true) : torch::Tensor(),
                    ActLevelQuantizer(ActLevelQuantizerOptions(c.mode))};
            sd.q->set_grid(act_grid(c.count, c.mode));
            sd.q->set_scale(0.6);
            return sd;
        };
        Side a = side(), e = side();
        (bwta_linear(a.x, a.q->scale, a.q->grid(), a.q->grad_scale(a.x.numel()), a.w, a.b, spec) *
         r)
            .sum()
            .backward();
        (torch::linear(e.q->forward(e.x), weight_fake_quant(e.w, spec), e.b) * r).sum().backward();
        expect_close(a.x.grad(), e.x.grad(), kFloatRtol, "dL/dx");
        expect_close(a.w.grad(), e.w.grad(), kFloatRtol, "dL/dW");
        expect_close(a.q->scale.grad(), e.q->scale.grad(), kFloatRtol, "dL/ds");
        EXPECT_NE(e.q->scale.grad().item<float>(), 0.0f);
        if (c.bias) expect_close(a.b.grad(), e.b.grad(), kFloatRtol, "dL/db");
    }
}

// ---------------------------------------------------------------------------------------------
// Recipes

Recipe parse(const std::string& text) {
    return parse_recipe(text, "bwta.yaml");
}

const char* kTernaryVit =
    "model: {type: vit, dim: 16, depth: 1, heads: 2}\n"
    "quantization: {weight: {method: binary}, activation: {method: ternary}}\n";

TEST(BwtaTrainRecipe, ErrorsNameTheKeyAndTheExpectation) {
    const std::string v = kTernaryVit;
    expect_error([&] { parse(v + "smsq: {stages: [4, 3]}\n"); },
                 {"bwta.yaml:", "smsq.stages", "odd level counts", "got 4"});
    expect_error([&] { parse(v + "smsq: {stages: [6, 4], degradation: bitwise}\n"); },
                 {"smsq.stages", "powers of two", "got 6"});
    expect_error([&] { parse(v + "smsq: {stages: [3, 5]}\n"); },
                 {"smsq.stages", "must decrease", "3 then 5"});
    expect_error([&] { parse(v + "smsq: {stages: [5, 3, 3]}\n"); },
                 {"smsq.stages", "must decrease"});
    expect_error([&] { parse(v + "smsq: {stages: [5, 3], stage_steps: [10]}\n"); },
                 {"smsq.stage_steps", "one step count per stage (2), got 1"});
    expect_error(
        [] {
            parse(
                "quantization: {weight: {method: absmean}, activation: {method: int8_per_token}}\n"
                "smsq: {stages: [5, 3]}\n");
        },
        {"smsq.stages", "quantization.activation.method: ternary",
         "quantization.attention: ternary"});
    expect_error([&] { parse(v + "smsq: {stages: [5, 3], early_stop_patience: 2}\n"); },
                 {"smsq.early_stop_patience", "training.eval_every > 0"});
    expect_error(
        [] {
            parse(
                "quantization: {weight: {method: binary}, activation: {method: ternary}, "
                "select: {fraction: 0.5}}\n");
        },
        {"quantization.select.fraction", "init.from"});
    expect_error(
        [] { parse("quantization: {weight: {method: binary}, select: {layers: [fc1]}}\n"); },
        {"quantization.select.layers", "fraction > 0"});
    expect_error([] { parse("quantization: {weight: {method: binary}, attention: ternary}\n"); },
                 {"quantization.attention", "an mlp has no attention"});
    expect_error([] { parse("distillation: {teacher: runs/fp, ce: 0, kl: 0}\n"); },
                 {"distillation.ce", "all 0"});
    expect_error([&] { parse(v + "smsq: {stages: [5, 3], rescale: scaled}\n"); },
                 {"smsq.rescale", "projection", "mean", "none", "'scaled'"});
    expect_error([&] { parse(v + "smsq: {stages: [5, 3], degradation: halving}\n"); },
                 {"smsq.degradation", "levelwise", "bitwise"});
}

TEST(BwtaTrainRecipe, FullBwtaRecipeReadsBackToItself) {
    const Recipe r = parse(
        "model: {type: vit, dim: 16, depth: 1, heads: 2, activation: relu2}\n"
        "quantization:\n"
        "  weight: {method: binary, granularity: tensor}\n"
        "  activation: {method: ternary}\n"
        "  attention: ternary\n"
        "  targets: ['re:blocks\\..*']\n"
        "  select: {fraction: 0.75, calibration_batches: 3, metric: relative_mse,\n"
        "           layers: [blocks.0.mlp.up, blocks.0.mlp.down]}\n"
        "smsq: {stages: [8, 4, 2], degradation: bitwise, rescale: mean,\n"
        "       stage_steps: [10, 20, 30], final_fraction: 0.25, calibration_batches: 2,\n"
        "       early_stop_patience: 3, early_stop_min_delta: 0.01}\n"
        "distillation: {teacher: runs/fp, ce: 0.5, kl: 2, temperature: 3, hidden_mse: 0.1}\n"
        "init: {from: runs/fp}\n"
        "optimizer: {lr: 0.002, scale_lr: 0.0001}\n"
        "training: {steps: 60, eval_every: 10}\n");
    const std::string yaml = recipe_to_yaml(r);
    const Recipe back = parse_recipe(yaml, "resolved.yaml");
    EXPECT_EQ(recipe_to_yaml(back), yaml);
    const auto& q = back.quantization;
    EXPECT_EQ(q.activation.method, "ternary");
    EXPECT_EQ(q.attention, "ternary");
    EXPECT_DOUBLE_EQ(q.select.fraction, 0.75);
    EXPECT_EQ(q.select.calibration_batches, 3);
    EXPECT_EQ(q.select.metric, "relative_mse");
    EXPECT_EQ(q.select.layers, (std::vector<std::string>{"blocks.0.mlp.up", "blocks.0.mlp.down"}));
    EXPECT_EQ(back.smsq.stages, (std::vector<int64_t>{8, 4, 2}));
    EXPECT_EQ(back.smsq.degradation, "bitwise");
    EXPECT_EQ(back.smsq.rescale, "mean");
    EXPECT_EQ(back.smsq.stage_steps, (std::vector<int64_t>{10, 20, 30}));
    EXPECT_DOUBLE_EQ(back.smsq.final_fraction, 0.25);
    EXPECT_EQ(back.smsq.calibration_batches, 2);
    EXPECT_EQ(back.smsq.early_stop_patience, 3);
    EXPECT_DOUBLE_EQ(back.smsq.early_stop_min_delta, 0.01);
    EXPECT_EQ(back.distillation.teacher, "runs/fp");
    EXPECT_DOUBLE_EQ(back.distillation.ce, 0.5);
    EXPECT_DOUBLE_EQ(back.distillation.kl, 2);
    EXPECT_DOUBLE_EQ(back.distillation.temperature, 3);
    EXPECT_DOUBLE_EQ(back.distillation.hidden_mse, 0.1);
    EXPECT_EQ(back.init.from, "runs/fp");
    EXPECT_DOUBLE_EQ(back.optimizer.scale_lr, 0.0001);
}

// Written by recipe_to_yaml before BWTA training (build of commit 9208351, 2026-11-22).
const char* kOldRecipe =
    "name: old\nseed: 5\n"
    "model: {type: vit, dim: 32, depth: 1, heads: 2, patch: 7}\n"
    "data: {train_limit: 256, test_limit: 100}\n"
    "quantization:\n"
    "  weight: {method: absmean, granularity: tensor}\n"
    "  activation: {method: int8_per_token}\n"
    "  targets: ['re:blocks\\..*']\n"
    "  ignore: [blocks.0.attn.o]\n"
    "optimizer: {lr: 0.002}\n"
    "schedule: {warmup_steps: 2}\n"
    "training: {steps: 2, batch_size: 32}\n";
const char* kOldRecipeWritten =
    "name: old\nseed: 5\nmodel:\n  type: vit\n  input: 784\n  classes: 10\n  patch: 7\n  dim: 32\n"
    "  depth: 1\n  heads: 2\n  mlp_hidden: 0\n  activation: gelu\n  subln: false\n"
    "  norm_eps: 1.0000000000000001e-05\n  bias: false\ndata:\n  dataset: fashion_mnist\n"
    "  path: /usr/share/datasets/fashion-mnist\n  train_limit: 256\n  test_limit: 100\n"
    "  normalize: true\nquantization:\n  weight:\n    method: absmean\n    granularity: tensor\n"
    "    group_size: 64\n    threshold: 0.050000000000000003\n    depth: 2\n  activation:\n"
    "    method: int8_per_token\n  targets: [re:blocks\\..*]\n  ignore: [blocks.0.attn.o]\n"
    "optimizer:\n  type: adamw\n  lr: 0.002\n  weight_decay: 0.01\n  beta1: 0.90000000000000002\n"
    "  beta2: 0.999\n  eps: 1e-08\n  grad_clip: 1\nschedule:\n  type: cosine\n  warmup_steps: 2\n"
    "  min_lr_ratio: 0\ntraining:\n  epochs: 0\n  steps: 2\n  batch_size: 32\n"
    "  eval_batch_size: 1000\n  eval_every: 0\n  checkpoint_every: 500\n  log_every: 50\n"
    "  threads: 0\noutput:\n  dir: runs/old\n";

TEST(BwtaTrainRecipe, OldRecipeIsWrittenExactlyAsBefore) {
    EXPECT_EQ(recipe_to_yaml(parse(kOldRecipe)), kOldRecipeWritten);
}

// ---------------------------------------------------------------------------------------------
// Stage plan and transition

TEST(BwtaTrainStages, PlanSplitsTheSteps) {
    SmsqConfig c;
    c.stages = {7, 5, 3};
    // Last stage round(0.5 * 103) = 52; 51 left over two stages, the earlier one takes the rest.
    auto p = trainers::plan_stages(c, true, 103);
    EXPECT_EQ(p.levels, (std::vector<int64_t>{7, 5, 3}));
    EXPECT_EQ(p.steps, (std::vector<int64_t>{26, 25, 52}));
    c.stages = {9, 7, 5, 3};
    c.final_fraction = 0.5;
    EXPECT_EQ(trainers::plan_stages(c, true, 10).steps, (std::vector<int64_t>{2, 2, 1, 5}));
    c.final_fraction = 0.25;
    EXPECT_EQ(trainers::plan_stages(c, true, 40).steps, (std::vector<int64_t>{10, 10, 10, 10}));

    c.stages = {5, 3};
    c.stage_steps = {30, 70};
    EXPECT_EQ(trainers::plan_stages(c, true, 100).steps, (std::vector<int64_t>{30, 70}));
    expect_error([&] { trainers::plan_stages(c, true, 90); },
                 {"smsq.stage_steps", "sum to 100", "90 steps"});

    c = SmsqConfig{};
    c.stages = {3};
    p = trainers::plan_stages(c, true, 40);
    EXPECT_EQ(p.levels, (std::vector<int64_t>{3}));
    EXPECT_EQ(p.steps, (std::vector<int64_t>{40}));
    // No stages: one ternary stage with level quantizers, a plan without levels without.
    p = trainers::plan_stages(SmsqConfig{}, true, 40);
    EXPECT_EQ(p.levels, (std::vector<int64_t>{3}));
    EXPECT_EQ(p.steps, (std::vector<int64_t>{40}));
    EXPECT_TRUE(trainers::plan_stages(SmsqConfig{}, false, 40).levels.empty());

    c.stages = {7, 5, 3};
    expect_error([&] { trainers::plan_stages(c, true, 2); },
                 {"smsq:", "2 steps cannot give 3 stages", "final_fraction"});
}

// An mlp 6-8-8-3 with binary weights and ternary activations on fc1 (its input: the batches
// given, signed) and fc2 (relu(fc1(x)): bool).
struct TransitionModel {
    std::shared_ptr<Model> model;
    ActLevelQuantizer a1{nullptr}, a2{nullptr};
    std::vector<torch::Tensor> batches;
    torch::Tensor x_all, h_all;  // what fc1 and fc2 see over all batches
};

TransitionModel transition_model(int64_t levels) {
    TransitionModel t;
    ModelConfig mc = model_defaults("mlp");
    mc.input = 6;
    mc.hidden = {8, 8};
    mc.classes = 3;
    QuantizationConfig qc;
    qc.weight.method = "binary";
    qc.activation.method = "ternary";
    qc.targets = {"fc1", "fc2"};
    torch::manual_seed(9);
    t.model = make_model(mc);
    quantizers::apply_quantization(*t.model, "head", qc, levels);
    auto named = quantizers::act_level_quantizers(*t.model);
    EXPECT_EQ(named.size(), 2u);
    t.a1 = named[0].second;
    t.a2 = named[1].second;
    EXPECT_EQ(t.a1->mode(), ActLevelMode::kSigned);
    EXPECT_EQ(t.a2->mode(), ActLevelMode::kBool);
    t.a1->set_scale(0.7);
    t.a2->set_scale(0.3);
    for (int i = 0; i < 3; ++i)
        t.batches.push_back(torch::randn({4, 6}) * 2);
    t.x_all = torch::cat(t.batches);
    torch::NoGradGuard no_grad;
    auto layers = quant_linears(*t.model);
    t.h_all = torch::relu(layers[0].second->forward(t.x_all));
    return t;
}

TEST(BwtaTrainStages, TransitionRescalesAndSwitchesGrids) {
    const ActLevelMode S = ActLevelMode::kSigned, B = ActLevelMode::kBool;
    for (const std::string rescale : {"projection", "mean", "none"}) {
        SCOPED_TRACE(rescale);
        TransitionModel t = transition_model(5);
        EXPECT_EQ(t.a1->grid(), act_grid(5, S));
        EXPECT_EQ(t.a2->grid(), act_grid(5, B));
        t.model->train();
        const auto out = trainers::transition_quantizers(
            *t.model, 3, rescale, [&](int64_t i) { return t.batches[static_cast<size_t>(i)]; }, 3);
        EXPECT_TRUE(t.model->is_training());  // the mode is restored
        EXPECT_EQ(t.a1->grid(), act_grid(3, S));
        EXPECT_EQ(t.a2->grid(), act_grid(3, B));
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[0].name, "fc1.act");
        EXPECT_EQ(out[1].name, "fc2.act");
        // Expected scales by hand: E|A_hat| under the old (5) and new (3) grid at the old scale.
        auto expected = [&](const torch::Tensor& a, double s, ActLevelMode m) {
            if (rescale == "none") return s;
            if (rescale == "mean") return a.abs().to(torch::kDouble).mean().item<double>();
            return s * mean_abs_quantized(a, s, act_grid(5, m)) /
                   mean_abs_quantized(a, s, act_grid(3, m));
        };
        const double s1 = expected(t.x_all, 0.7, S), s2 = expected(t.h_all, 0.3, B);
        EXPECT_NEAR(t.a1->scale_value(), s1, 1e-6 * s1);  // float32 parameter
        EXPECT_NEAR(t.a2->scale_value(), s2, 1e-6 * s2);
        EXPECT_NEAR(out[0].factor, s1 / 0.7, 1e-6);
        EXPECT_NEAR(out[1].factor, s2 / 0.3, 1e-6);
        if (rescale == "projection") {
            EXPECT_GT(out[0].factor, 1.0);  // fewer levels: a larger step
        }
        EXPECT_FALSE(out[0].kept || out[1].kept);
    }
}

// ---------------------------------------------------------------------------------------------
// Training runs. A float vit teacher and one BWTA run with stages [5, 3] are trained once.

trainers::TrainOptions quiet(const std::string& out) {
    trainers::TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return o;
}

std::vector<std::string> lines_of(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

// A run's metrics lines without the timing fields (samples_per_s, elapsed_s).
std::vector<std::string> deterministic_metrics(const std::string& run) {
    std::vector<std::string> out;
    for (const auto& l : lines_of(run + "/metrics.jsonl")) {
        if (!trainers::json_has(l, "elapsed_s")) {
            out.push_back(l);
            continue;
        }
        std::ostringstream os;
        for (const char* k : {"step", "epoch", "loss", "lr"})
            os << k << "=" << trainers::json_number(l, k, run) << " ";
        out.push_back(os.str());
    }
    return out;
}

// step -> the metrics line with `key` at that step.
std::map<int64_t, std::string> lines_with(const std::string& run, const std::string& key) {
    std::map<int64_t, std::string> out;
    for (const auto& l : lines_of(run + "/metrics.jsonl"))
        if (trainers::json_has(l, key))
            out[static_cast<int64_t>(trainers::json_number(l, "step", run))] = l;
    return out;
}

double field(const std::string& line, const std::string& key) {
    return trainers::json_number(line, key, line);
}

struct SimulatedKill {};

class BwtaTrainRun : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(trit::testing::make_temp_dir("trit-bwta"));
        trainers::train(
            parse(vit("teacher", "") + "optimizer: {lr: 0.003}\n"
                                       "training: {steps: 30, batch_size: 32, log_every: 10}\n"),
            quiet(teacher()));
        summary_ = new trainers::TrainSummary(trainers::train(parse(bwta_yaml()), quiet(full())));
    }
    static void TearDownTestSuite() {
        fs::remove_tree(*dir_);
        delete dir_;
        delete summary_;
    }
    static std::string teacher() { return *dir_ + "/teacher"; }
    static std::string full() { return *dir_ + "/full"; }
    static std::string vit(const std::string& name, const std::string& quant, int64_t depth = 1) {
        return "name: " + name +
               "\nseed: 4\nmodel: {type: vit, dim: 16, depth: " + std::to_string(depth) +
               ", heads: 2}\ndata: {path: '" + trit::testing::tiny_data_dir() + "'}\n" + quant;
    }
    static std::string bwta_quant() {
        return "quantization:\n"
               "  weight: {method: binary, granularity: tensor}\n"
               "  activation: {method: ternary}\n"
               "  attention: ternary\n"
               "  targets: ['re:blocks\\..*']\n";
    }
    // 75 steps: stage 0 (5 levels) 20 steps, stage 1 (3 levels) 55; the transition's loss
    // window (50 steps) closes at step 70.
    static std::string bwta_yaml() {
        return vit("bwta", bwta_quant()) +
               "smsq: {stages: [5, 3], stage_steps: [20, 55], rescale: projection}\n"
               "distillation: {teacher: '" +
               teacher() +
               "', ce: 1, kl: 1, hidden_mse: 0.1}\n"
               "init: {from: '" +
               teacher() +
               "'}\n"
               "optimizer: {lr: 0.002, scale_lr: 0.01}\n"
               "schedule: {warmup_steps: 4}\n"
               "training: {steps: 75, batch_size: 32, log_every: 1, eval_every: 25, "
               "checkpoint_every: 10}\n";
    }
    static std::string* dir_;
    static trainers::TrainSummary* summary_;
};
std::string* BwtaTrainRun::dir_ = nullptr;
trainers::TrainSummary* BwtaTrainRun::summary_ = nullptr;

TEST_F(BwtaTrainRun, SmsqRunLogsStagesAndTheTransition) {
    const auto stages = lines_with(full(), "stage");
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages.at(0), "{\"step\":0,\"stage\":0,\"levels\":5,\"stage_steps\":20}");
    EXPECT_EQ(stages.at(20), "{\"step\":20,\"stage\":1,\"levels\":3,\"stage_steps\":55}");

    // loss_before / loss_after: mean training loss of steps 1..20 and 21..70 (log_every 1).
    std::map<int64_t, double> loss, lr;
    for (const auto& [step, l] : lines_with(full(), "loss")) {
        loss[step] = field(l, "loss");
        lr[step] = field(l, "lr");
    }
    ASSERT_EQ(loss.size(), 75u);
    double before = 0, after = 0;
    for (int64_t s = 1; s <= 20; ++s)
        before += loss[s] / 20;
    for (int64_t s = 21; s <= 70; ++s)
        after += loss[s] / 50;
    const auto tr = lines_with(full(), "transition");
    ASSERT_EQ(tr.size(), 1u);
    ASSERT_EQ(tr.count(70), 1u);
    const std::string& t = tr.at(70);
    EXPECT_EQ(field(t, "transition"), 1);
    EXPECT_EQ(field(t, "transition_step"), 20);
    EXPECT_NEAR(field(t, "loss_before"), before, kMetricsRtol * before);
    EXPECT_NEAR(field(t, "loss_after"), after, kMetricsRtol * after);
    EXPECT_NEAR(field(t, "loss_jump"), after - before, kMetricsRtol * (before + after));

    ASSERT_EQ(summary_->transitions.size(), 1u);
    EXPECT_TRUE(summary_->transitions[0].measured);
    EXPECT_EQ(summary_->transitions[0].from_levels, 5);
    EXPECT_EQ(summary_->transitions[0].to_levels, 3);
    const std::string summary = lines_of(full() + "/summary.json").at(0);
    EXPECT_EQ(field(summary, "stages"), 2);
    EXPECT_NEAR(field(summary, "transition_1_loss_jump"), summary_->transitions[0].loss_jump(),
                1e-8);
    EXPECT_NEAR(field(summary, "mean_loss_jump"), summary_->transitions[0].loss_jump(), 1e-8);

    // Each stage warms up and decays on its own budget.
    ScheduleConfig sc;
    sc.warmup_steps = 4;
    EXPECT_NEAR(lr[1], trainers::lr_at(sc, 0.002, 0, 20), 1e-12);
    EXPECT_NEAR(lr[20], trainers::lr_at(sc, 0.002, 19, 20), 1e-12);
    EXPECT_NEAR(lr[21], trainers::lr_at(sc, 0.002, 0, 55), 1e-12);
    EXPECT_NEAR(lr[21], 0.0005, 1e-12);
    EXPECT_NEAR(lr[75], trainers::lr_at(sc, 0.002, 54, 55), 1e-12);

    // A fresh optimizer at the transition: Adam's step counters in the final checkpoint count
    // the last stage's 55 steps, not the run's 75.
    trainers::TrainingSetup setup = trainers::make_training_setup(parse(bwta_yaml()), torch::kCPU);
    trainers::load_checkpoint(full() + "/checkpoint.pt", *setup.model, setup.optimizer.get(),
                              nullptr);
    int64_t states = 0;
    for (const auto& item : setup.optimizer->state()) {
        EXPECT_EQ(static_cast<const torch::optim::AdamWParamState&>(*item.second).step(), 55);
        ++states;
    }
    EXPECT_GT(states, 10);

    // The trained model's quantizers are on the last stage's grid.
    trainers::LoadedRun run = trainers::load_run(full());
    const auto qs = quantizers::act_level_quantizers(*run.model);
    EXPECT_EQ(qs.size(), 10u);  // q, k, v, o, up, down and the four attention points
    for (const auto& [name, q] : qs)
        EXPECT_EQ(q->grid(), act_grid(3, q->mode())) << name;
}

// Kill after `kill_at`, resume, and compare with the uninterrupted run: same weights bit for bit,
// the same metrics lines (timings aside), the same summary.
void expect_resume_matches(const std::string& recipe, const std::string& full,
                           const std::string& killed, int64_t kill_at, int64_t resumed_from) {
    auto o = quiet(killed);
    o.after_step = [&](int64_t step) {
        if (step == kill_at) throw SimulatedKill{};
    };
    EXPECT_THROW(trainers::train(parse(recipe), o), SimulatedKill);
    auto r = quiet(killed);
    r.resume = true;
    const auto s = trainers::train(parse(recipe), r);
    EXPECT_EQ(s.resumed_from, resumed_from);
    auto a = trit::testing::checkpoint_parameters(full),
         b = trit::testing::checkpoint_parameters(killed);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a)
        EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
    EXPECT_EQ(deterministic_metrics(full), deterministic_metrics(killed));
    const std::string sa = lines_of(full + "/summary.json").at(0),
                      sb = lines_of(killed + "/summary.json").at(0);
    EXPECT_EQ(field(sa, "transition_1_loss_jump"), field(sb, "transition_1_loss_jump"));
    EXPECT_EQ(field(sa, "test_loss"), field(sb, "test_loss"));
}

// The checkpoint at step 20 is written before the transition at 20; the one at 30 after it.
TEST_F(BwtaTrainRun, KillAndResumeAcrossTheTransitionIsBitIdentical) {
    {
        SCOPED_TRACE("resume at the transition step");
        expect_resume_matches(bwta_yaml(), full(), *dir_ + "/killed23", 23, 20);
    }
    {
        SCOPED_TRACE("resume in the second stage");
        expect_resume_matches(bwta_yaml(), full(), *dir_ + "/killed34", 34, 30);
    }
}

TEST_F(BwtaTrainRun, EarlyStopMovesTheRestToTheNextStage) {
    // min_delta huge: the second evaluation (step 10) is never better, patience 1 stops stage 0.
    const std::string recipe =
        vit("early", bwta_quant()) +
        "smsq: {stages: [5, 3], stage_steps: [30, 20], early_stop_patience: 1, "
        "early_stop_min_delta: 1.0e9}\n"
        "training: {steps: 50, batch_size: 32, log_every: 10, eval_every: 5}\n";
    const auto s = trainers::train(parse(recipe), quiet(*dir_ + "/early"));
    EXPECT_EQ(s.steps, 50);
    ASSERT_EQ(s.transitions.size(), 1u);
    EXPECT_EQ(s.transitions[0].step, 10);
    const auto stages = lines_with(*dir_ + "/early", "stage");
    ASSERT_EQ(stages.size(), 2u);
    EXPECT_EQ(stages.at(0), "{\"step\":0,\"stage\":0,\"levels\":5,\"stage_steps\":30}");
    EXPECT_EQ(stages.at(10), "{\"step\":10,\"stage\":1,\"levels\":3,\"stage_steps\":40}");
    // The last stage's schedule runs over its 40 steps: step 20 is its 10th.
    ScheduleConfig sc;
    const double lr20 = field(lines_with(*dir_ + "/early", "loss").at(20), "lr");
    EXPECT_NEAR(lr20, trainers::lr_at(sc, 1e-3, 9, 40), 1e-12);
}

TEST_F(BwtaTrainRun, ScaleLearningRateAppliesToTheScaleGroup) {
    const Recipe r = parse(vit("scale_lr", bwta_quant()) +
                           "optimizer: {lr: 0.001, scale_lr: 0.01}\n"
                           "training: {steps: 5, batch_size: 32}\n");
    trainers::TrainingSetup setup = trainers::make_training_setup(r, torch::kCPU);
    trainers::RecipeData data = trainers::make_data(r, torch::kCPU);
    const trainers::Batch batch = data.train->batch(0, 0);
    {
        torch::NoGradGuard no_grad;
        setup.model->forward(batch.x);  // initialises the scales (eq. 6)
    }
    std::map<std::string, double> before;
    const auto qs = quantizers::act_level_quantizers(*setup.model);
    for (const auto& [name, q] : qs)
        before[name] = q->scale_value();
    trainers::train_step(setup, batch.x, batch.y, /*lr=*/0.0004, /*grad_clip=*/0);

    std::set<const void*> scales;
    for (const auto& [name, q] : qs)
        scales.insert(q->scale.unsafeGetTensorImpl());
    int64_t scale_groups = 0;
    for (auto& g : setup.optimizer->param_groups()) {
        const auto& o = static_cast<const torch::optim::AdamWOptions&>(g.options());
        const bool is_scales = scales.count(g.params().front().unsafeGetTensorImpl()) > 0;
        for (const auto& p : g.params())
            EXPECT_EQ(scales.count(p.unsafeGetTensorImpl()) > 0, is_scales);
        if (is_scales) {
            ++scale_groups;
            EXPECT_EQ(g.params().size(), qs.size());
            EXPECT_NEAR(o.lr(), 0.0004 * 0.01 / 0.001, 1e-15);
            EXPECT_EQ(o.weight_decay(), 0.0);
        } else {
            EXPECT_NEAR(o.lr(), 0.0004, 1e-15);
        }
    }
    EXPECT_EQ(scale_groups, 1);
    // Adam's first step moves each scale by lr * |g| / (|g| + eps) (bias-corrected moments are g
    // and g^2; no weight decay); the float32 scale keeps that to ~1e-4 relative.
    int64_t moved = 0;
    for (const auto& [name, q] : qs) {
        const double g = std::fabs(q->scale.grad().item<double>());
        if (g == 0) continue;
        const double expected = 0.004 * g / (g + 1e-8);
        EXPECT_NEAR(std::fabs(q->scale_value() - before[name]), expected, expected * 1e-3) << name;
        ++moved;
    }
    EXPECT_GT(moved, 0);
}

TEST_F(BwtaTrainRun, DistillationLossOnHandCheckableCases) {
    // A float student starting from the teacher's weights: KL and hidden MSE are exactly 0.
    Recipe r = parse(vit("student", "") + "distillation: {teacher: '" + teacher() +
                     "', ce: 0.7, kl: 1, temperature: 2, hidden_mse: 0.5}\n"
                     "init: {from: '" +
                     teacher() + "'}\ntraining: {steps: 5, batch_size: 32}\n");
    trainers::TrainingSetup setup = trainers::make_training_setup(r, torch::kCPU);
    const trainers::Batch batch = trainers::make_data(r, torch::kCPU).train->batch(0, 0);
    torch::NoGradGuard no_grad;
    const torch::Tensor ce =
        trainers::task_loss(Task::kClassification, setup.teacher->forward(batch.x), batch.y);
    EXPECT_NEAR(trainers::training_loss(setup, batch.x, batch.y).item<double>(),
                0.7 * ce.item<double>(), 1e-6);

    // Only KL, the student's head moved: T^2 * mean over rows of sum p_t (log p_t - log p_s).
    setup.distillation.ce = 0;
    setup.distillation.hidden_mse = 0;
    setup.model->named_parameters()["head.weight"].add_(0.3 * torch::randn({10, 16}));
    const double t = 2;
    auto log_softmax = [&](const torch::Tensor& z) {
        const torch::Tensor zt = z.to(torch::kDouble) / t;
        return zt - zt.exp().sum(-1, true).log();
    };
    const torch::Tensor lt = log_softmax(setup.teacher->forward(batch.x));
    const torch::Tensor ls = log_softmax(setup.model->forward(batch.x));
    const double kl = t * t * (lt.exp() * (lt - ls)).sum(-1).mean().item<double>();
    EXPECT_GT(kl, 1e-3);
    EXPECT_NEAR(trainers::training_loss(setup, batch.x, batch.y).item<double>(), kl, 1e-5 * kl);

    // Only hidden MSE, a block weight moved: the mean square difference of the block's output.
    setup.distillation.kl = 0;
    setup.distillation.hidden_mse = 0.5;
    setup.model->named_parameters()["blocks.0.mlp.up.weight"].add_(0.1);
    std::vector<torch::Tensor> hs, ht;
    setup.model->forward_hidden(batch.x, hs);
    setup.teacher->forward_hidden(batch.x, ht);
    ASSERT_EQ(hs.size(), 1u);
    const double mse = (hs[0] - ht[0]).square().mean().item<double>();
    EXPECT_GT(mse, 1e-4);
    EXPECT_NEAR(trainers::training_loss(setup, batch.x, batch.y).item<double>(), 0.5 * mse,
                1e-5 * mse);
}

TEST_F(BwtaTrainRun, InitFromAnotherArchitectureIsAnError) {
    const Recipe r = parse(vit("deeper", bwta_quant(), /*depth=*/2) + "init: {from: '" + teacher() +
                           "'}\ntraining: {steps: 5}\n");
    expect_error([&] { trainers::make_training_setup(r, torch::kCPU); },
                 {"init.from '" + teacher() + "'", "expected the same architecture"});
}

// An mlp 784-32-32-10 whose fc1 is scaled up by c and fc2 down by 1/c: the float function is
// the same (relu is positively homogeneous), fc2's quantized output error too (its activation and
// weight scales follow; the codes are the same), but fc1's error grows by c^2.
void write_init_checkpoint(const std::string& path, const std::string& float_recipe,
                           const std::string& sensitive) {
    const Recipe fr = parse(float_recipe);
    torch::manual_seed(21);
    auto m = make_model(fr.model);
    {
        torch::NoGradGuard no_grad;
        auto p = m->named_parameters();
        const std::string other = sensitive == "fc1" ? "fc2" : "fc1";
        const double c = 100;
        p[sensitive + ".weight"].mul_(c);
        p[sensitive + ".bias"].mul_(c);
        if (sensitive == "fc1") p[other + ".weight"].div_(c);
    }
    torch::optim::AdamW opt(m->parameters());
    trainers::save_checkpoint(path, *m, opt, trainers::TrainPosition{}, recipe_to_yaml(fr));
}

TEST_F(BwtaTrainRun, LayerSelectionSkipsTheSensitiveLayerAndIsKept) {
    const std::string data = "data: {path: '" + trit::testing::tiny_data_dir() + "'}\n";
    const std::string float_recipe = "name: fp\nseed: 6\nmodel: {hidden: [32, 32]}\n" + data;
    const std::string init = *dir_ + "/init.pt";
    write_init_checkpoint(init, float_recipe, "fc1");
    const std::string recipe = "name: sel\nseed: 6\nmodel: {hidden: [32, 32]}\n" + data +
                               "quantization:\n"
                               "  weight: {method: binary}\n"
                               "  activation: {method: ternary}\n"
                               "  select: {fraction: 0.5, calibration_batches: 2}\n"
                               "init: {from: '" +
                               init +
                               "'}\n"
                               "optimizer: {lr: 0.001}\n"
                               "training: {steps: 12, batch_size: 32, checkpoint_every: 5}\n";
    const std::string run = *dir_ + "/sel";
    const auto s = trainers::train(parse(recipe), quiet(run));
    EXPECT_EQ(s.quantized_layers, (std::vector<std::string>{"fc2"}));
    const Recipe written = load_recipe(run + "/recipe.yaml");
    EXPECT_EQ(written.quantization.select.layers, (std::vector<std::string>{"fc2"}));
    // load_run and export (which packs selected_layers) use exactly those layers.
    trainers::LoadedRun loaded = trainers::load_run(run);
    EXPECT_EQ(quantizers::selected_layers(*loaded.model, loaded.model->output_layer(),
                                          loaded.recipe.quantization),
              (std::vector<std::string>{"fc2"}));
    for (auto& [name, layer] : quant_linears(*loaded.model))
        EXPECT_EQ(layer->quant().enabled(), name == "fc2") << name;

    // Killed at 7 and resumed after init.from has changed so that a new selection would differ:
    // the run keeps the selection in its checkpoint and ends bit-identical.
    auto o = quiet(*dir_ + "/sel_killed");
    o.after_step = [](int64_t step) {
        if (step == 7) throw SimulatedKill{};
    };
    EXPECT_THROW(trainers::train(parse(recipe), o), SimulatedKill);
    write_init_checkpoint(init, float_recipe, "fc2");
    Recipe changed = parse(recipe);
    trainers::select_layers(changed, torch::kCPU, *trainers::make_data(changed, torch::kCPU).train);
    EXPECT_EQ(changed.quantization.select.layers, (std::vector<std::string>{"fc1"}));
    auto r = quiet(*dir_ + "/sel_killed");
    r.resume = true;
    const auto resumed = trainers::train(parse(recipe), r);
    EXPECT_EQ(resumed.resumed_from, 5);
    EXPECT_EQ(resumed.quantized_layers, (std::vector<std::string>{"fc2"}));
    EXPECT_EQ(load_recipe(*dir_ + "/sel_killed/recipe.yaml").quantization.select.layers,
              (std::vector<std::string>{"fc2"}));
    auto a = trit::testing::checkpoint_parameters(run),
         b = trit::testing::checkpoint_parameters(*dir_ + "/sel_killed");
    for (const auto& [name, t] : a)
        EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
}

}  // namespace
}  // namespace trit
