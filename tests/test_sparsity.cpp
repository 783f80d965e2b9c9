// 2:4 sparsity (recipe block `sparsity`): recipe errors name their key; a layer's stored mask
// (mask24) is what the forward applies, and a recomputation counts its flips; after training every
// group of 4 inputs keeps exactly 2 mask entries; a frozen mask never changes, a dynamic one only
// at multiples of recompute_every and not after freeze_after; kill-and-resume across a
// recomputation is bit-identical; tern24 and tern2 exports hold exactly the trained mask's codes
// and validate at 100% agreement; the masks live on the weight's device (CUDA, when visible).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "core/recipe.h"
#include "core/sparsity.h"
#include "exporters/format_table.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "quantizers/layer_selection.h"
#include "tests/support/error_of.h"
#include "tests/support/process.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/data.h"
#include "trainers/metrics.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::expect_error;

struct SimulatedKill {
    int64_t step;
};

trainers::TrainOptions quiet(const std::string& out) {
    trainers::TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return o;
}

// The tiny ternary MLP (tests/support/tiny_run.h) with a sparsity block and `extra` YAML.
Recipe sparse_recipe(const std::string& sparsity, const std::string& extra,
                     const std::vector<std::string>& sets = {}) {
    return parse_recipe(trit::testing::tiny_recipe_yaml("sparsity: " + sparsity + "\n" + extra),
                        "tiny.yaml", sets);
}

// Every sparse layer's stored mask in a run directory's checkpoint, by layer name.
std::map<std::string, torch::Tensor> stored_masks(const std::string& run_dir) {
    trainers::LoadedRun run = trainers::load_run(run_dir);
    std::map<std::string, torch::Tensor> out;
    for (auto& [name, layer] : sparse_linears(*run.model))
        out[name] = layer->mask24.clone();
    return out;
}

// fc1's mask after each step of a run that checkpoints every step: [0] at the start (the mask
// make_training_setup computes from the initial weights), [s] after step s.
std::vector<torch::Tensor> fc1_masks_by_step(const Recipe& r, const std::string& out) {
    std::vector<torch::Tensor> masks;
    {
        trainers::TrainingSetup setup = trainers::make_training_setup(r, torch::kCPU);
        masks.push_back(sparse_linears(*setup.model).at(0).second->mask24.clone());
    }
    auto o = quiet(out);
    o.after_step = [&](int64_t) { masks.push_back(stored_masks(out).at("fc1")); };
    trainers::train(r, o);
    return masks;
}

// step -> value of `key` on the metrics lines of a run that have it.
std::map<int64_t, double> metric(const std::string& run_dir, const std::string& key) {
    std::map<int64_t, double> out;
    std::ifstream in(run_dir + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);)
        if (trainers::json_has(line, key) && trainers::json_has(line, "loss"))
            out[static_cast<int64_t>(trainers::json_number(line, "step", "metrics"))] =
                trainers::json_number(line, key, "metrics");
    return out;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class SparsityTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-sparsity"); }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string dir_;
};

// ---- recipe ----

TEST(SparsityRecipe, ReadsWritesAndRoundTrips) {
    Recipe off = parse_recipe(trit::testing::tiny_recipe_yaml(), "r.yaml");
    EXPECT_FALSE(off.sparsity.enabled());
    // Off: not written, so the resolved recipes of earlier runs compare equal.
    EXPECT_EQ(recipe_to_yaml(off).find("sparsity"), std::string::npos);

    Recipe r = sparse_recipe(
        "{pattern: \"2:4\", mask: dynamic, freeze_after: 40, recompute_every: 5}", "");
    EXPECT_TRUE(r.sparsity.enabled());
    EXPECT_EQ(r.sparsity.pattern, "2:4");
    EXPECT_EQ(r.sparsity.mask, "dynamic");
    EXPECT_EQ(r.sparsity.freeze_after, 40);
    EXPECT_EQ(r.sparsity.recompute_every, 5);
    const std::string text = recipe_to_yaml(r);
    EXPECT_THAT(text, HasSubstr("sparsity:"));
    Recipe back = parse_recipe(text, "resolved.yaml");
    EXPECT_EQ(recipe_to_yaml(back), text);
    EXPECT_EQ(back.sparsity.freeze_after, 40);
    // Unquoted 2:4 reads as the same string; defaults are dynamic, every step, never frozen.
    Recipe d = sparse_recipe("{pattern: 2:4}", "");
    EXPECT_EQ(d.sparsity.pattern, "2:4");
    EXPECT_EQ(d.sparsity.mask, "dynamic");
    EXPECT_EQ(d.sparsity.recompute_every, 1);
    EXPECT_EQ(d.sparsity.freeze_after, 0);
    // --set reaches it too.
    EXPECT_TRUE(parse_recipe(trit::testing::tiny_recipe_yaml(), "r.yaml", {"sparsity.pattern=2:4"})
                    .sparsity.enabled());
}

TEST(SparsityRecipe, ErrorsNameTheKey) {
    expect_error([] { sparse_recipe("{pattern: \"1:4\"}", ""); },
                 {"tiny.yaml:", "sparsity.pattern", "2:4", "1:4"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", mask: sometimes}", ""); },
                 {"sparsity.mask", "dynamic", "frozen", "sometimes"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", recompute_every: 0}", ""); },
                 {"sparsity.recompute_every", "0"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", freeze_after: -1}", ""); },
                 {"sparsity.freeze_after"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", mask: frozen, freeze_after: 10}", ""); },
                 {"sparsity.freeze_after", "mask: dynamic", "10"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", mask: frozen, recompute_every: 3}", ""); },
                 {"sparsity.recompute_every", "mask: dynamic"});
    expect_error([] { sparse_recipe("{pattern: \"2:4\", every: 3}", ""); }, {"sparsity.every"});
    for (const char* method : {"binary", "balanced", "none"})
        expect_error(
            [&] {
                sparse_recipe("{pattern: \"2:4\"}", "",
                              {std::string("quantization.weight.method=") + method});
            },
            {"sparsity.pattern", "quantization.weight.method", "absmean", method});
    // absmax_threshold is ternary too.
    EXPECT_NO_THROW(
        sparse_recipe("{pattern: \"2:4\"}", "", {"quantization.weight.method=absmax_threshold"}));
}

TEST(SparsityRecipe, RecomputeScheduleAndFrozenStep) {
    SparsityConfig c;
    c.pattern = "2:4";
    c.recompute_every = 3;
    std::vector<int64_t> due;
    for (int64_t s = 0; s <= 10; ++s)
        if (mask_recompute_due(c, s)) due.push_back(s);
    EXPECT_EQ(due, (std::vector<int64_t>{3, 6, 9}));
    EXPECT_EQ(mask_frozen_step(c, 100), -1);  // never frozen
    c.freeze_after = 7;
    due.clear();
    for (int64_t s = 0; s <= 20; ++s)
        if (mask_recompute_due(c, s)) due.push_back(s);
    EXPECT_EQ(due, (std::vector<int64_t>{3, 6}));
    EXPECT_EQ(mask_frozen_step(c, 100), 6);
    EXPECT_EQ(mask_frozen_step(c, 7), -1);  // the run ends before it freezes
    c.mask = "frozen";
    c.freeze_after = 0;
    EXPECT_FALSE(mask_recompute_due(c, 3));
    EXPECT_EQ(mask_frozen_step(c, 100), 0);
    c.pattern = "none";
    c.mask = "dynamic";
    EXPECT_FALSE(mask_recompute_due(c, 3));
}

// ---- the layer's stored mask ----

// A module holding one QuantLinear "fc" (2 outputs, 8 inputs), absmean per channel.
struct OneLayer : torch::nn::Module {
    OneLayer() {
        fc = register_module("fc", QuantLinear(8, 2, /*bias=*/false));
        LinearQuantSpec s;
        s.weight.method = WeightQuantMethod::kAbsmean;
        fc->set_quant(s);
    }
    QuantLinear fc{nullptr};
};

TEST(SparsityLayer, StoredMaskIsAppliedAndFlipsAreCounted) {
    OneLayer m;
    {
        torch::NoGradGuard no_grad;
        // Row 0: s = mean|w| = 4.76 / 8 = 0.595, codes 1 1 0 0 | 1 -1 1 0: the mask keeps inputs
        // 0, 1 | 4, 5 (|w| 1 and 1 beat 0.9). Row 1: codes 1 0 -1 1 | 0 0 1 -1: keeps 0, 3 (|w| 1
        // and 0.9 beat |-0.6|) | 6, 7 and a zero code.
        m.fc->weight.copy_(torch::tensor({{0.9f, 0.8f, 0.1f, 0.05f, 1.0f, -1.0f, 0.9f, 0.01f},
                                          {1.0f, 0.1f, -0.6f, 0.9f, 0.0f, 0.05f, 0.7f, -0.8f}}));
    }
    EXPECT_TRUE(m.named_buffers().is_empty()) << "no buffer before sparsity";
    EXPECT_EQ(apply_sparsity(m, SparsityConfig{}).size(), 0u);  // pattern none: nothing
    SparsityConfig c;
    c.pattern = "2:4";
    EXPECT_EQ(apply_sparsity(m, c), (std::vector<std::string>{"fc"}));
    ASSERT_TRUE(m.fc->has_mask24());
    EXPECT_TRUE(m.named_buffers().contains("fc.mask24"));
    EXPECT_EQ(m.fc->mask24.scalar_type(), torch::kBool);
    const auto expected =
        torch::tensor({{1, 1, 0, 0, 1, 1, 0, 0}, {1, 0, 0, 1, 0, 0, 1, 1}}).to(torch::kBool);
    EXPECT_TRUE(torch::equal(m.fc->mask24, expected)) << m.fc->mask24;
    EXPECT_TRUE(m.fc->quant().weight.sparse24);

    // The forward multiplies by the stored mask: overwrite it by hand and the codes follow.
    {
        torch::NoGradGuard no_grad;
        m.fc->mask24.copy_(
            torch::tensor({{0, 0, 1, 1, 0, 0, 1, 1}, {1, 1, 0, 0, 1, 1, 0, 0}}).to(torch::kBool));
    }
    WeightQuantSpec dense;
    dense.method = WeightQuantMethod::kAbsmean;
    const QuantizedWeights q = quantize_weight(m.fc->weight, dense);
    const torch::Tensor want = torch::where(m.fc->mask24, q.q, torch::zeros_like(q.q)) * q.scale;
    EXPECT_TRUE(torch::equal(m.fc->effective_weight().detach(), want));
    // The straight-through gradient reaches every latent weight, the pruned ones too.
    torch::Tensor x = torch::ones({3, 8});
    m.fc->forward(x).sum().backward();
    EXPECT_TRUE(torch::equal(m.fc->weight.grad(), torch::full({2, 8}, 3.0f)));

    // A recomputation restores the magnitude mask: all 8 entries of row 0 change, 6 of row 1.
    MaskFlips f = recompute_masks(m);
    EXPECT_EQ(f.changed, 14);
    EXPECT_EQ(f.total, 16);
    EXPECT_TRUE(torch::equal(m.fc->mask24, expected));
    EXPECT_EQ(recompute_masks(m).changed, 0);  // against the previous mask: nothing moved
    {
        // w[0][2] 0.1 -> 0.95: s = 5.61 / 8 = 0.70, codes of row 0 1 1 1 0 | 1 -1 1 0; the first
        // group keeps 0.95 instead of 0.8: 2 of 16 entries flip.
        torch::NoGradGuard no_grad;
        m.fc->weight[0][2].fill_(0.95f);
    }
    f = recompute_masks(m);
    EXPECT_EQ(f.changed, 2);
    EXPECT_DOUBLE_EQ(f.rate(), 2.0 / 16.0);
    EXPECT_TRUE(
        m.fc->mask24[0].narrow(0, 0, 4).equal(torch::tensor({1, 0, 1, 0}).to(torch::kBool)));

    // Zeros before the mask (row 0: 2 of 8; row 1: 3 of 8) and after it (half of each row).
    const CodeZeros z = code_zeros(m);
    EXPECT_EQ(z.total, 16);
    EXPECT_EQ(z.dense, 5);
    EXPECT_EQ(z.masked, 8);

    // A spec given later (an export's, a reference's) keeps the layer's mask; a non-ternary one
    // does not take it.
    LinearQuantSpec s;
    s.weight.method = WeightQuantMethod::kAbsmaxThreshold;
    m.fc->set_quant(s);
    EXPECT_TRUE(m.fc->quant().weight.mask.defined());
    s.weight.method = WeightQuantMethod::kBinary;
    m.fc->set_quant(s);
    EXPECT_FALSE(m.fc->quant().weight.mask.defined());
    EXPECT_THAT(trit::testing::error_of([&] { m.fc->enable_mask24(); }), HasSubstr("ternary"));
}

TEST(SparsityLayer, NonTernaryLayerIsAnErrorNamingTheMethod) {
    OneLayer m;
    LinearQuantSpec s;
    s.weight.method = WeightQuantMethod::kBalanced;
    m.fc->set_quant(s);
    SparsityConfig c;
    c.pattern = "2:4";
    expect_error([&] { apply_sparsity(m, c); },
                 {"sparsity.pattern", "fc", "balanced", "quantization.weight.method"});
}

// ---- training ----

TEST_F(SparsityTest, EveryGroupOfFourKeepsTwoAfterTraining) {
    // fc2 has 34 inputs: 8 whole groups and a partial one of 2, which keeps both.
    Recipe r = sparse_recipe(
        "{pattern: \"2:4\"}",
        "optimizer: {lr: 0.01}\ntraining: {steps: 40, batch_size: 32, log_every: 10}\n",
        {"model.hidden=[34, 30]"});
    trainers::TrainSummary s = trainers::train(r, quiet(dir_ + "/run"));
    EXPECT_EQ(s.sparse_layers, (std::vector<std::string>{"fc1", "fc2"}));
    EXPECT_GT(s.test.accuracy, 0.3);
    EXPECT_EQ(s.mask_recomputes, 40);
    EXPECT_GT(s.mask_flip_rate_mean, 0.0);
    EXPECT_LT(s.mask_flip_rate_mean, 0.5);
    EXPECT_EQ(s.mask_frozen_step, -1);
    // Ternary's natural zeros, then at least half of the codes after the mask.
    EXPECT_GT(s.code_zeros.dense_fraction(), 0.1);
    EXPECT_GE(s.code_zeros.masked_fraction(), 0.5);
    EXPECT_GT(s.code_zeros.masked_fraction(), s.code_zeros.dense_fraction());

    trainers::LoadedRun run = trainers::load_run(dir_ + "/run");
    ASSERT_EQ(sparse_linears(*run.model).size(), 2u);
    for (auto& [name, layer] : sparse_linears(*run.model)) {
        const int64_t out = layer->options.out_features(), in = layer->options.in_features(),
                      whole = in / 4;
        const torch::Tensor mask = layer->mask24.to(torch::kInt64);
        EXPECT_TRUE(
            mask.narrow(1, 0, whole * 4).reshape({out, whole, 4}).sum(2).eq(2).all().item<bool>())
            << name;
        if (in % 4) {
            EXPECT_TRUE(mask.narrow(1, whole * 4, in % 4)
                            .sum(1)
                            .eq(std::min<int64_t>(2, in % 4))
                            .all()
                            .item<bool>())
                << name;
        }
        // The forward's codes: at most 2 non-zero in each group, all inside the mask.
        const torch::Tensor q = quantize_weight(layer->weight, layer->quant().weight).q;
        EXPECT_TRUE(q.ne(0).logical_and(layer->mask24.logical_not()).sum().item<int64_t>() == 0)
            << name;
        EXPECT_TRUE(q.narrow(1, 0, whole * 4)
                        .ne(0)
                        .reshape({out, whole, 4})
                        .sum(2)
                        .le(2)
                        .all()
                        .item<bool>())
            << name;
    }
    // Logged: the flip rate on every log line (each had 10 recomputations), the zero fractions,
    // the summary's figures.
    EXPECT_EQ(metric(dir_ + "/run", "mask_flip_rate").size(), 4u);
    EXPECT_EQ(metric(dir_ + "/run", "zero_codes_masked").size(), 4u);
    const std::string summary = read_text(dir_ + "/run/summary.json");
    for (const char* key : {"mask_recomputes", "mask_flip_rate_last", "mask_flip_rate_mean",
                            "zero_codes_dense", "zero_codes_masked"})
        EXPECT_TRUE(trainers::json_has(summary, key)) << key;
    EXPECT_FALSE(trainers::json_has(summary, "mask_frozen_step"));
    EXPECT_NEAR(trainers::json_number(summary, "mask_flip_rate_mean", "summary"),
                s.mask_flip_rate_mean, 1e-9);
}

TEST_F(SparsityTest, FrozenMaskNeverChanges) {
    Recipe r = sparse_recipe("{pattern: \"2:4\", mask: frozen}",
                             "optimizer: {lr: 0.02}\ntraining: {steps: 8, batch_size: 32, "
                             "checkpoint_every: 1, log_every: 4}\n");
    const auto masks = fc1_masks_by_step(r, dir_ + "/run");
    ASSERT_EQ(masks.size(), 9u);
    for (size_t s = 1; s < masks.size(); ++s)
        EXPECT_TRUE(torch::equal(masks[s], masks[0])) << "step " << s;
    // ... although the weights moved enough to change a freshly computed one.
    trainers::LoadedRun run = trainers::load_run(dir_ + "/run");
    auto fc1 = sparse_linears(*run.model).at(0).second;
    EXPECT_FALSE(torch::equal(sparse24_mask(fc1->weight, fc1->quant().weight), masks[0]));
    EXPECT_TRUE(metric(dir_ + "/run", "mask_flip_rate").empty());
    const std::string summary = read_text(dir_ + "/run/summary.json");
    EXPECT_EQ(trainers::json_number(summary, "mask_frozen_step", "summary"), 0.0);
    EXPECT_EQ(trainers::json_number(summary, "mask_recomputes", "summary"), 0.0);
}

TEST_F(SparsityTest, FrozenMaskComesFromInitFromWeights) {
    // A float run, then a frozen-mask run starting from it: its first mask is the magnitude mask
    // of the float run's weights.
    Recipe f = parse_recipe(
        trit::testing::tiny_recipe_yaml(
            "optimizer: {lr: 0.02}\ntraining: {steps: 6, batch_size: 32}\n"),
        "tiny.yaml", {"quantization.weight.method=none", "quantization.activation.method=none"});
    trainers::train(f, quiet(dir_ + "/float"));
    Recipe r =
        sparse_recipe("{pattern: \"2:4\", mask: frozen}",
                      "init: {from: '" + dir_ + "/float'}\ntraining: {steps: 2, batch_size: 32}\n");
    trainers::TrainingSetup setup = trainers::make_training_setup(r, torch::kCPU);
    auto fc1 = sparse_linears(*setup.model).at(0).second;
    const torch::Tensor w = trit::testing::checkpoint_parameters(dir_ + "/float").at("fc1.weight");
    EXPECT_TRUE(torch::equal(fc1->mask24, sparse24_mask(w, fc1->quant().weight)));
}

TEST_F(SparsityTest, DynamicMaskChangesOnlyAtMultiplesOfRecomputeEvery) {
    Recipe r = sparse_recipe("{pattern: \"2:4\", recompute_every: 3}",
                             "optimizer: {lr: 0.02}\ntraining: {steps: 10, batch_size: 32, "
                             "checkpoint_every: 1, log_every: 1}\n");
    const auto masks = fc1_masks_by_step(r, dir_ + "/run");
    ASSERT_EQ(masks.size(), 11u);
    int changes = 0;
    for (size_t s = 1; s < masks.size(); ++s) {
        const bool changed = !torch::equal(masks[s], masks[s - 1]);
        if (s % 3 != 0) {
            EXPECT_FALSE(changed) << "step " << s;
        }
        changes += changed;
    }
    EXPECT_GT(changes, 0);
    // Log lines carry the flip rate on the recomputation steps only (log_every 1), and it is the
    // fraction of fc1's mask that changed there.
    const auto flips = metric(dir_ + "/run", "mask_flip_rate");
    EXPECT_EQ(flips.size(), 3u);
    for (const auto& [step, rate] : flips) {
        EXPECT_EQ(step % 3, 0);
        const double want = masks[static_cast<size_t>(step)]
                                .ne(masks[static_cast<size_t>(step) - 1])
                                .sum()
                                .item<double>() /
                            static_cast<double>(masks[0].numel());
        EXPECT_NEAR(rate, want, 1e-9) << "step " << step;
    }
}

TEST_F(SparsityTest, FreezeAfterStopsChanges) {
    Recipe r = sparse_recipe("{pattern: \"2:4\", freeze_after: 4}",
                             "optimizer: {lr: 0.02}\ntraining: {steps: 10, batch_size: 32, "
                             "checkpoint_every: 1, log_every: 5}\n");
    const auto masks = fc1_masks_by_step(r, dir_ + "/run");
    ASSERT_EQ(masks.size(), 11u);
    int changes = 0;
    for (size_t s = 1; s < masks.size(); ++s) {
        const bool changed = !torch::equal(masks[s], masks[s - 1]);
        if (s > 4) {
            EXPECT_FALSE(changed) << "step " << s;
        }
        changes += changed;
    }
    EXPECT_GT(changes, 0);
    const std::string summary = read_text(dir_ + "/run/summary.json");
    EXPECT_EQ(trainers::json_number(summary, "mask_frozen_step", "summary"), 4.0);
    EXPECT_EQ(trainers::json_number(summary, "mask_recomputes", "summary"), 4.0);
    // The first log line (step 5) saw the 4 recomputations, the second none.
    const auto flips = metric(dir_ + "/run", "mask_flip_rate");
    ASSERT_EQ(flips.size(), 1u);
    EXPECT_EQ(flips.begin()->first, 5);
}

TEST_F(SparsityTest, KillAndResumeAcrossARecomputationIsBitIdentical) {
    // Recomputations at 3, 6, 9, ...; checkpoints at 4, 8, ...; killed after step 6: the resumed
    // run starts from step 4 and recomputes at 6 again.
    Recipe r =
        sparse_recipe("{pattern: \"2:4\", recompute_every: 3}",
                      "optimizer: {lr: 0.01}\nschedule: {warmup_steps: 3}\n"
                      "training: {epochs: 1, batch_size: 32, log_every: 1, checkpoint_every: 4}\n");
    const std::string full = dir_ + "/full", killed = dir_ + "/killed";
    trainers::TrainSummary a = trainers::train(r, quiet(full));

    auto o = quiet(killed);
    o.after_step = [](int64_t step) {
        if (step == 6) throw SimulatedKill{step};
    };
    EXPECT_THROW(trainers::train(r, o), SimulatedKill);
    auto resumed = quiet(killed);
    resumed.resume = true;
    trainers::TrainSummary b = trainers::train(r, resumed);
    EXPECT_EQ(b.resumed_from, 4);
    EXPECT_EQ(b.steps, 20);

    auto pa = trit::testing::checkpoint_parameters(full),
         pb = trit::testing::checkpoint_parameters(killed);
    ASSERT_EQ(pa.size(), pb.size());
    for (const auto& [name, t] : pa)
        EXPECT_TRUE(torch::equal(t, pb.at(name))) << name;
    auto ma = stored_masks(full), mb = stored_masks(killed);
    ASSERT_EQ(ma.size(), 1u);
    ASSERT_EQ(mb.size(), 1u);
    EXPECT_TRUE(torch::equal(ma.at("fc1"), mb.at("fc1")));
    EXPECT_EQ(metric(full, "loss"), metric(killed, "loss"));
    EXPECT_EQ(metric(full, "mask_flip_rate"), metric(killed, "mask_flip_rate"));
    EXPECT_EQ(a.mask_recomputes, 6);
    EXPECT_EQ(b.mask_recomputes, 6);
    EXPECT_EQ(a.mask_flip_rate_mean, b.mask_flip_rate_mean);
    EXPECT_EQ(a.mask_flip_rate_last, b.mask_flip_rate_last);
}

// ---- export ----

TEST_F(SparsityTest, ExportStoresTheTrainedMaskAndValidates) {
    // Frozen after step 5 of 30: the final weights' own magnitude mask differs from the trained
    // one, so an export or reference that recomputed the mask would show.
    Recipe r = sparse_recipe("{pattern: \"2:4\", freeze_after: 5}",
                             "optimizer: {lr: 0.02}\ntraining: {steps: 30, batch_size: 32}\n",
                             {"model.hidden=[36]"});
    const std::string run_dir = dir_ + "/run";
    trainers::train(r, quiet(run_dir));
    DataConfig data;
    data.path = trit::testing::tiny_data_dir();
    auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);

    for (const char* format : {"tern24", "tern2"}) {
        trainers::LoadedRun run = trainers::load_run(run_dir);
        auto fc1 = sparse_linears(*run.model).at(0).second;
        WeightQuantSpec dense = fc1->quant().weight;
        dense.mask = torch::Tensor();
        dense.sparse24 = false;
        ASSERT_FALSE(torch::equal(sparse24_mask(fc1->weight, dense), fc1->mask24));
        const torch::Tensor q = quantize_weight(fc1->weight, dense).q;
        const torch::Tensor want =
            torch::where(fc1->mask24, q, torch::zeros_like(q)).to(torch::kInt8);

        exporters::ExportOptions o;
        o.format = exporters::parse_format(format);
        o.layers = quantizers::selected_layers(*run.model, run.model->output_layer(),
                                               run.recipe.quantization);
        exporters::ExportResult e =
            exporters::pack_model(run.recipe, run.recipe_yaml, *run.model, o);
        EXPECT_TRUE(e.notes.empty()) << format << ": " << (e.notes.empty() ? "" : e.notes[0]);
        const std::string path = dir_ + "/model-" + format + ".h5";
        exporters::write_model(path, e.model);
        exporters::PackedModel back = exporters::read_model(path);
        const exporters::PackedLayer& l = back.layer("fc1");
        EXPECT_EQ(l.spec.sparse24, std::string(format) == "tern24");
        std::vector<int8_t> codes(static_cast<size_t>(l.out * l.in));
        exporters::unpack_codes(l.format, l.packed, l.out, l.in, codes.data());
        EXPECT_TRUE(torch::equal(torch::from_blob(codes.data(), {l.out, l.in}, torch::kInt8), want))
            << format;

        exporters::configure_reference(*run.model, back);
        torch::NoGradGuard no_grad;
        auto c =
            exporters::compare_logits(exporters::forward_cpu(back, x), run.model->forward(x), y);
        EXPECT_EQ(c.max_abs_error, 0.0) << format;
        EXPECT_EQ(c.top1_agreement, 1.0) << format;
    }

    // The command line: export tern24 and validate at 100% top-1 agreement.
    const std::string file = dir_ + "/cli-tern24.h5";
    auto ex =
        trit::testing::run_trit("export '" + run_dir + "' --format tern24 --out '" + file + "'");
    ASSERT_EQ(ex.exit_code, 0) << ex.output;
    EXPECT_THAT(ex.output, HasSubstr("2:4"));
    EXPECT_THAT(ex.output, ::testing::Not(HasSubstr("note:")));
    auto v = trit::testing::run_trit("validate '" + file + "' --against '" + run_dir + "'");
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_THAT(v.output, HasSubstr("top-1 agreement 100.00%"));
    EXPECT_THAT(v.output, HasSubstr("PASS"));
}

// ---- CUDA ----

TEST_F(SparsityTest, CudaTrainingKeepsMasksOnTheDevice) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible";
    Recipe r = sparse_recipe(
        "{pattern: \"2:4\", recompute_every: 2}",
        "optimizer: {lr: 0.01}\ntraining: {steps: 12, batch_size: 32, log_every: 4}\n");
    {
        trainers::TrainingSetup setup =
            trainers::make_training_setup(r, torch::Device(torch::kCUDA));
        auto fc1 = sparse_linears(*setup.model).at(0).second;
        EXPECT_TRUE(fc1->mask24.is_cuda());
        EXPECT_TRUE(recompute_masks(*setup.model).total > 0);
        EXPECT_TRUE(fc1->mask24.is_cuda());
        // The forward on the device applies the mask.
        const torch::Tensor w = fc1->effective_weight().detach();
        EXPECT_EQ(w.ne(0).logical_and(fc1->mask24.logical_not()).sum().item<int64_t>(), 0);
    }
    auto o = quiet(dir_ + "/run");
    o.device = "cuda";
    trainers::TrainSummary s = trainers::train(r, o);
    EXPECT_EQ(s.mask_recomputes, 6);
    trainers::LoadedRun run = trainers::load_run(dir_ + "/run");  // on the CPU
    auto fc1 = sparse_linears(*run.model).at(0).second;
    EXPECT_TRUE(fc1->mask24.to(torch::kInt64)
                    .reshape({fc1->options.out_features(), -1, 4})
                    .sum(2)
                    .eq(2)
                    .all()
                    .item<bool>());
}

}  // namespace
}  // namespace trit
