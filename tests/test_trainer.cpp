// The training loop on tiny synthetic data: it learns; kill-and-resume gives bit-identical final
// weights (at an epoch boundary and mid-epoch); a non-finite loss stops the run and keeps the last
// good checkpoint; run directories are protected; the LR schedule has the documented shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/recipe.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/lr_schedule.h"
#include "trainers/metrics.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using ::testing::HasSubstr;

struct SimulatedKill {
    int64_t step;
};

trainers::TrainOptions quiet(const std::string& out) {
    trainers::TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return o;
}

// The message of the trit::Error that training throws ("" when it finishes).
std::string train_error(const Recipe& r, const trainers::TrainOptions& o) {
    try {
        trainers::train(r, o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// step -> loss from a run's metrics.jsonl.
std::map<int64_t, double> losses(const std::string& run_dir) {
    std::map<int64_t, double> out;
    std::ifstream in(run_dir + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);)
        if (line.find("\"loss\"") != std::string::npos)
            out[static_cast<int64_t>(trainers::json_number(line, "step", "metrics"))] =
                trainers::json_number(line, "loss", "metrics");
    return out;
}

class TrainerTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-trainer"); }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string dir_;
};

TEST_F(TrainerTest, TernaryMlpLearnsSyntheticTask) {
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml(
                                "optimizer: {lr: 0.01}\ntraining: {steps: 120, batch_size: 32}\n"),
                            "tiny.yaml");
    auto s = trainers::train(r, quiet(dir_ + "/run"));
    EXPECT_EQ(s.quantized_layers, (std::vector<std::string>{"fc1"}));
    EXPECT_EQ(s.steps, 120);
    EXPECT_GT(s.test.accuracy, 0.9);
    EXPECT_EQ(s.test.examples, 200);
    for (const char* f : {"checkpoint.pt", "recipe.yaml", "metrics.jsonl", "summary.json"})
        EXPECT_TRUE(fs::exists(dir_ + "/run/" + f)) << f;
    // The resolved recipe in the run directory reads back to the run's recipe.
    Recipe back = load_recipe(dir_ + "/run/recipe.yaml");
    EXPECT_EQ(back.training.steps, 120);
    EXPECT_EQ(back.output.dir, dir_ + "/run");
}

// Kill (an exception out of the step hook) after `kill_at`, resume from the last checkpoint, and
// compare with an uninterrupted run: same weights bit for bit, same per-step losses.
void kill_and_resume(const std::string& dir, int64_t checkpoint_every, int64_t kill_at) {
    const std::string extra = "optimizer: {lr: 0.01}\nschedule: {warmup_steps: 7}\n"
                              "training: {epochs: 3, batch_size: 32, log_every: 1, checkpoint_every: " +
                              std::to_string(checkpoint_every) + "}\n";
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml(extra), "tiny.yaml");
    const std::string full = dir + "/full", killed = dir + "/killed";
    trainers::train(r, quiet(full));

    auto o = quiet(killed);
    o.after_step = [&](int64_t step) {
        if (step == kill_at) throw SimulatedKill{step};
    };
    EXPECT_THROW(trainers::train(r, o), SimulatedKill);
    EXPECT_FALSE(fs::exists(killed + "/summary.json"));

    auto resumed = quiet(killed);
    resumed.resume = true;
    auto s = trainers::train(r, resumed);
    EXPECT_EQ(s.resumed_from, (kill_at / checkpoint_every) * checkpoint_every);
    EXPECT_EQ(s.steps, 60);  // 640 / 32 = 20 batches per epoch, 3 epochs

    auto a = trit::testing::checkpoint_parameters(full), b = trit::testing::checkpoint_parameters(killed);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
    EXPECT_EQ(losses(full), losses(killed));  // and the metrics log has no duplicated steps
}

TEST_F(TrainerTest, KillAndResumeAtEpochBoundaryIsBitIdentical) { kill_and_resume(dir_, 20, 27); }
TEST_F(TrainerTest, KillAndResumeMidEpochIsBitIdentical) { kill_and_resume(dir_, 15, 37); }

TEST_F(TrainerTest, NonFiniteLossStopsAndKeepsLastGoodCheckpoint) {
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml(
                                "optimizer: {lr: 1e30, grad_clip: 0}\n"
                                "training: {steps: 50, batch_size: 32, checkpoint_every: 1}\n"),
                            "tiny.yaml");
    int64_t last_step = 0;
    auto o = quiet(dir_ + "/run");
    o.after_step = [&](int64_t step) { last_step = step; };
    const std::string e = train_error(r, o);
    EXPECT_THAT(e, HasSubstr("training diverged"));
    EXPECT_THAT(e, HasSubstr("keeps the last good state (step " + std::to_string(last_step)));
    // The checkpoint is the one written after the last finite step, and it loads.
    ASSERT_TRUE(fs::exists(dir_ + "/run/checkpoint.pt"));
    Recipe saved = parse_recipe(trainers::read_checkpoint_recipe(dir_ + "/run/checkpoint.pt"), "c");
    auto model = make_model(saved.model);
    auto pos = trainers::load_checkpoint(dir_ + "/run/checkpoint.pt", *model, nullptr, nullptr);
    EXPECT_EQ(pos.step, last_step);
    EXPECT_FALSE(fs::exists(dir_ + "/run/summary.json"));
}

TEST_F(TrainerTest, RunDirectoryIsProtected) {
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml("training: {steps: 3, batch_size: 32}\n"),
                            "tiny.yaml");
    trainers::train(r, quiet(dir_ + "/run"));
    const std::string e = train_error(r, quiet(dir_ + "/run"));
    EXPECT_THAT(e, HasSubstr("already holds a run"));
    EXPECT_THAT(e, HasSubstr("--resume"));
    auto o = quiet(dir_ + "/run");
    o.overwrite = true;
    EXPECT_EQ(trainers::train(r, o).steps, 3);

    // Resuming with a different recipe names the difference.
    Recipe other = r;
    other.optimizer.lr = 0.5;
    auto res = quiet(dir_ + "/run");
    res.resume = true;
    const std::string differs = train_error(other, res);
    EXPECT_THAT(differs, HasSubstr("recipe differs"));
    EXPECT_THAT(differs, HasSubstr("lr: 0.5"));
    auto none = quiet(dir_ + "/empty");
    none.resume = true;
    EXPECT_THROW(trainers::train(r, none), Error);
}

TEST_F(TrainerTest, ResumeWithDamagedMetricsLogNamesTheLine) {
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml("training: {steps: 4, batch_size: 32, checkpoint_every: 2}\n"),
                            "tiny.yaml");
    trainers::train(r, quiet(dir_ + "/run"));
    std::ofstream(dir_ + "/run/metrics.jsonl", std::ios::app) << "{\"step\":oops}\n";
    auto o = quiet(dir_ + "/run");
    o.resume = true;
    const std::string e = train_error(r, o);
    EXPECT_THAT(e, HasSubstr("metrics.jsonl:"));
    EXPECT_THAT(e, HasSubstr("\"step\" is not a number"));
}

TEST_F(TrainerTest, CorruptCheckpointIsNamed) {
    fs::make_dirs(dir_ + "/run");
    trit::testing::write_raw_file(dir_ + "/run/checkpoint.pt", "not a zip archive");
    Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml("training: {steps: 3}\n"), "tiny.yaml");
    auto o = quiet(dir_ + "/run");
    o.resume = true;
    const std::string e = train_error(r, o);
    EXPECT_THAT(e, HasSubstr("checkpoint.pt"));
    EXPECT_THAT(e, HasSubstr("corrupt"));
}

TEST_F(TrainerTest, MissingDataDirectoryIsNamed) {
    Recipe r = parse_recipe("data: {path: /nonexistent/fmnist}\ntraining: {steps: 1}\n", "r.yaml");
    const std::string e = train_error(r, quiet(dir_ + "/run"));
    EXPECT_THAT(e, HasSubstr("/nonexistent/fmnist"));
}

TEST_F(TrainerTest, CudaDeviceWithoutGpuIsAnError) {
    if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
    EXPECT_THROW(trainers::parse_device("cuda"), Error);
    EXPECT_THROW(trainers::parse_device("tpu"), Error);
}

TEST(LrSchedule, WarmupThenCosineOrLinear) {
    ScheduleConfig s;
    s.type = "cosine";
    s.warmup_steps = 10;
    s.min_lr_ratio = 0.1;
    EXPECT_DOUBLE_EQ(trainers::lr_at(s, 1.0, 0, 110), 0.1);   // (0 + 1) / 10
    EXPECT_DOUBLE_EQ(trainers::lr_at(s, 1.0, 9, 110), 1.0);   // end of warm-up
    EXPECT_DOUBLE_EQ(trainers::lr_at(s, 1.0, 10, 110), 1.0);  // decay starts at the peak
    EXPECT_NEAR(trainers::lr_at(s, 1.0, 109, 110), 0.1, 1e-12);  // last step: the floor
    EXPECT_NEAR(trainers::lr_at(s, 1.0, 10 + 99 / 2, 110), 0.55, 0.02);  // halfway
    s.type = "linear";
    EXPECT_NEAR(trainers::lr_at(s, 2.0, 109, 110), 0.2, 1e-12);
    s.type = "constant";
    EXPECT_DOUBLE_EQ(trainers::lr_at(s, 2.0, 100, 110), 2.0);
}

TEST(Metrics, JsonLinesRoundTrip) {
    const std::string line = trainers::json_line({{"step", 12}, {"loss", 0.25}, {"bad", std::nan("")}});
    EXPECT_EQ(line, "{\"step\":12,\"loss\":0.25,\"bad\":null}");
    EXPECT_DOUBLE_EQ(trainers::json_number(line, "loss", "x"), 0.25);
    EXPECT_TRUE(std::isnan(trainers::json_number(line, "bad", "x")));
    EXPECT_THROW(trainers::json_number(line, "acc", "x"), Error);
}

}  // namespace
}  // namespace trit
