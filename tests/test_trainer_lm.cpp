// The trainer on the other tasks: a byte-level gpt learns a synthetic fortune corpus (validation
// bits per byte far below uniform), resumes bit-identically mid-epoch, and reports language-model
// metrics; a vit trains on images; weight decay skips everything but the linear weights; bf16
// autocast is refused off the GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/error.h"
#include "core/fortunes.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "core/recipe.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/metrics.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using ::testing::HasSubstr;

struct SimulatedKill {};

trainers::TrainOptions quiet(const std::string& out) {
    trainers::TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return o;
}

std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

class TrainerLmTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-trainer-lm"); }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string dir_;
};

TEST_F(TrainerLmTest, TernaryGptLearnsTheCorpus) {
    Recipe r = parse_recipe(trit::testing::tiny_gpt_recipe_yaml(
                                "quantization:\n"
                                "  weight: {method: absmean}\n"
                                "  activation: {method: int8_per_token}\n"
                                "  targets: ['re:blocks\\..*']\n"
                                "optimizer: {lr: 0.01}\n"
                                "training: {steps: 150, batch_size: 16, log_every: 50}\n"),
                            "tiny_gpt.yaml");
    const auto s = trainers::train(r, quiet(dir_ + "/run"));
    EXPECT_EQ(s.quantized_layers.size(), 6u);  // q, k, v, o, up, down of the one block
    EXPECT_EQ(s.item_name, "tokens");
    ASSERT_TRUE(s.test.language_model);
    const data::TextCorpus corpus = data::load_fortunes(trit::testing::tiny_text_dir());
    EXPECT_EQ(s.test.examples, static_cast<int64_t>(corpus.valid.size()) - 1);
    // Uniform bytes are 8 bits; the templated sentences carry far less.
    EXPECT_LT(s.test.bits_per_byte(), 2.5);
    EXPECT_NEAR(s.test.perplexity(), std::exp(s.test.loss), 1e-9);
    EXPECT_GT(s.test.accuracy, 0.4);

    const std::string summary = first_line(dir_ + "/run/summary.json");
    EXPECT_NEAR(trainers::json_number(summary, "valid_bits_per_byte", "summary"), s.test.bits_per_byte(), 1e-9);
    EXPECT_TRUE(trainers::json_has(summary, "train_tokens_per_s"));
    EXPECT_FALSE(trainers::json_has(summary, "test_accuracy"));
    bool eval_line = false;
    std::ifstream metrics(dir_ + "/run/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);)
        eval_line = eval_line || trainers::json_has(line, "eval_bits_per_byte");
    EXPECT_TRUE(eval_line);
}

TEST_F(TrainerLmTest, KillAndResumeMidEpochIsBitIdentical) {
    // 16 windows of 32 bytes per step: the ~27 KB training text is 50-odd steps per epoch, so 70
    // steps cross an epoch boundary and the kill at 23 lands mid-epoch.
    Recipe r = parse_recipe(trit::testing::tiny_gpt_recipe_yaml(
                                "optimizer: {lr: 0.01}\n"
                                "training: {steps: 70, batch_size: 16, log_every: 1, checkpoint_every: 10}\n"),
                            "tiny_gpt.yaml");
    const std::string full = dir_ + "/full", killed = dir_ + "/killed";
    trainers::train(r, quiet(full));
    auto o = quiet(killed);
    o.after_step = [](int64_t step) {
        if (step == 23) throw SimulatedKill{};
    };
    EXPECT_THROW(trainers::train(r, o), SimulatedKill);
    auto resumed = quiet(killed);
    resumed.resume = true;
    const auto s = trainers::train(r, resumed);
    EXPECT_EQ(s.resumed_from, 20);
    auto a = trit::testing::checkpoint_parameters(full), b = trit::testing::checkpoint_parameters(killed);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
}

TEST_F(TrainerLmTest, VitTrainsOnImages) {
    Recipe r = parse_recipe("name: tiny_vit\n"
                            "seed: 3\n"
                            "model: {type: vit, dim: 32, depth: 1, heads: 2}\n"
                            "data: {path: '" + trit::testing::tiny_data_dir() + "'}\n"
                            "quantization:\n"
                            "  weight: {method: absmean}\n"
                            "  activation: {method: int8_per_token}\n"
                            "  targets: ['re:blocks\\..*']\n"
                            "optimizer: {lr: 0.003}\n"
                            "training: {steps: 200, batch_size: 32}\n",
                            "tiny_vit.yaml");
    const auto s = trainers::train(r, quiet(dir_ + "/run"));
    EXPECT_FALSE(s.test.language_model);
    EXPECT_EQ(s.item_name, "samples");
    EXPECT_EQ(s.test.examples, 200);
    EXPECT_GT(s.test.accuracy, 0.5);  // 10 classes
}

TEST(TrainingSetup, WeightDecayOnlyOnLinearWeights) {
    Recipe r = parse_recipe(trit::testing::tiny_gpt_recipe_yaml(), "tiny_gpt.yaml");
    trainers::TrainingSetup s = trainers::make_training_setup(r, torch::kCPU);
    std::set<const void*> linear;
    for (auto& [name, layer] : quant_linears(*s.model)) linear.insert(layer->weight.unsafeGetTensorImpl());
    auto& groups = s.optimizer->param_groups();
    ASSERT_EQ(groups.size(), 2u);
    for (const auto& p : groups[0].params()) EXPECT_TRUE(linear.count(p.unsafeGetTensorImpl()));
    EXPECT_EQ(groups[0].params().size(), linear.size());
    const auto& no_decay = static_cast<const torch::optim::AdamWOptions&>(groups[1].options());
    EXPECT_EQ(no_decay.weight_decay(), 0.0);
    // The embedding is among the undecayed parameters.
    const torch::Tensor embed = s.model->named_parameters()["embed.weight"];
    bool found = false;
    for (const auto& p : groups[1].params()) found = found || p.unsafeGetTensorImpl() == embed.unsafeGetTensorImpl();
    EXPECT_TRUE(found);
}

TEST(TrainingSetup, Bf16NeedsCuda) {
    EXPECT_EQ(trainers::parse_precision("bf16"), trainers::Precision::kBf16);
    try {
        trainers::parse_precision("fp16");
        ADD_FAILURE() << "fp16 accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("--precision 'fp16': expected fp32 or bf16"));
    }
    Recipe r = parse_recipe(trit::testing::tiny_gpt_recipe_yaml(), "tiny_gpt.yaml");
    try {
        trainers::make_training_setup(r, torch::kCPU, trainers::Precision::kBf16);
        ADD_FAILURE() << "bf16 on the CPU accepted";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("bf16 autocast needs --device cuda"));
    }
}

TEST(TrainData, MissingCorpusIsNamed) {
    Recipe r = parse_recipe(trit::testing::tiny_gpt_recipe_yaml(), "tiny_gpt.yaml",
                            {"data.path=/nonexistent/fortunes"});
    try {
        trainers::make_train_data(r, torch::kCPU);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("/nonexistent/fortunes"));
    }
}

}  // namespace
}  // namespace trit
