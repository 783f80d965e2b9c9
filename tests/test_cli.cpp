// End-to-end tests of the `trit` executable on a tiny recipe over synthetic data: a full run, the
// outputs it writes, a real SIGKILL followed by --resume, and the errors for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>


#include "core/fs.h"
#include "tests/support/process.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::run_trit;

class CliTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = trit::testing::make_temp_dir("trit-cli");
        recipe_ = dir_ + "/tiny.yaml";
        trit::testing::write_text(
            recipe_, trit::testing::tiny_recipe_yaml(
                         "optimizer: {lr: 0.01}\ntraining: {steps: 80, batch_size: 32, log_every: 20}\n"));
    }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string dir_, recipe_;
};

TEST_F(CliTest, VersionAndHelpWithExamples) {
    auto v = run_trit("--version");
    EXPECT_EQ(v.exit_code, 0);
    EXPECT_THAT(v.output, HasSubstr("trit " TRIT_VERSION));
    for (const char* sub : {"train", "export", "inspect", "validate", "summary", "bench", "bench train"}) {
        auto h = run_trit(std::string(sub) + " --help");
        EXPECT_EQ(h.exit_code, 0) << sub;
        EXPECT_THAT(h.output, HasSubstr("Example")) << sub;
    }
}

TEST_F(CliTest, TrainWritesRunAndSummaryReadsIt) {
    auto r = run_trit("train '" + recipe_ + "' --out '" + dir_ + "/run' --set training.log_every=40");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("quantized layers: fc1"));
    EXPECT_THAT(r.output, HasSubstr("step 40/80"));  // plain progress lines when not a terminal
    EXPECT_THAT(r.output, HasSubstr("result: tiny: test accuracy"));
    for (const char* f : {"checkpoint.pt", "recipe.yaml", "metrics.jsonl", "summary.json"})
        EXPECT_TRUE(fs::exists(dir_ + "/run/" + f)) << f;

    auto s = run_trit("summary '" + dir_ + "/run' '" + dir_ + "/run'");
    EXPECT_EQ(s.exit_code, 0) << s.output;
    EXPECT_THAT(s.output, HasSubstr("+0.00"));

    // The same run directory again: refused, with the way out named.
    auto again = run_trit("train '" + recipe_ + "' --out '" + dir_ + "/run' -q");
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_THAT(again.output, HasSubstr("--resume"));
}

// On a terminal (a pty from util-linux's `script`) progress is a bar redrawn in place with the
// rate and the ETA; elsewhere it is plain lines (TrainWritesRunAndSummaryReadsIt).
TEST_F(CliTest, TerminalGetsAProgressBar) {
    if (trit::testing::run_command("command -v script").exit_code != 0) GTEST_SKIP() << "no script(1)";
    auto r = trit::testing::run_command("script -qec \"'" TRIT_BINARY "' train '" + recipe_ + "' --out '" +
                                        dir_ + "/tty' --set training.steps=3000\" /dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("\r["));
    EXPECT_THAT(r.output, HasSubstr("] step "));
    EXPECT_THAT(r.output, HasSubstr("samples/s  ETA"));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("step 0/")));
    // Redrawn during the run (about 10 times a second), not only once at the end.
    size_t bars = 0;
    for (size_t p = r.output.find("] step "); p != std::string::npos; p = r.output.find("] step ", p + 1)) ++bars;
    EXPECT_GE(bars, 4u) << r.output;
}

TEST_F(CliTest, SigkillThenResumeGivesTheUninterruptedWeights) {
    const std::string long_run = "--set training.steps=4000 --set training.checkpoint_every=100 -q";
    auto ref = run_trit("train '" + recipe_ + "' --out '" + dir_ + "/ref' " + long_run);
    ASSERT_EQ(ref.exit_code, 0) << ref.output;

    // Start, wait for the first checkpoint, kill -9, then resume.
    const std::string killed = dir_ + "/killed";
    auto k = trit::testing::run_command(
        "'" TRIT_BINARY "' train '" + recipe_ + "' --out '" + killed + "' " + long_run +
        " & pid=$!; while [ ! -f '" + killed + "/checkpoint.pt' ]; do sleep 0.01; done; "
        "kill -9 $pid; wait $pid; echo exit=$?");
    EXPECT_THAT(k.output, HasSubstr("exit=137"));
    ASSERT_FALSE(fs::exists(killed + "/summary.json")) << "the run finished before it was killed";
    ASSERT_TRUE(fs::exists(killed + "/checkpoint.pt"));

    auto resumed = run_trit("train '" + recipe_ + "' --out '" + killed + "' --resume " + long_run);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    auto a = trit::testing::checkpoint_parameters(dir_ + "/ref");
    auto b = trit::testing::checkpoint_parameters(killed);
    for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
}

TEST_F(CliTest, BadInputsGiveClearErrorsAndNoCrash) {
    struct Case {
        std::string args, expected;
    };
    const std::vector<Case> cases = {
        {"train /nonexistent.yaml", "/nonexistent.yaml"},
        {"train '" + recipe_ + "' --set optimizer.lr=zero", "--set optimizer.lr: expected a number"},
        {"train '" + recipe_ + "' --set optimizer.momentum=0.9", "unknown key 'momentum'"},
        {"train '" + recipe_ + "' --set training.epochs=2", "exactly one of"},
        {"train '" + recipe_ + "' --device gpu", "--device 'gpu'"},
        {"train '" + recipe_ + "' --set data.path=/nonexistent/fm", "/nonexistent/fm"},
        {"train '" + recipe_ + "' --set quantization.targets=[fc7]", "'fc7' selects no layer"},
        {"train '" + recipe_ + "' --resume --overwrite", "exclude each other"},
        {"summary /nonexistent/run", "summary.json"},
    };
    for (const auto& c : cases) {
        const bool train = c.args.rfind("train", 0) == 0;
        auto r = run_trit(c.args + (train ? " --out '" + dir_ + "/bad'" : std::string()));
        EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
        EXPECT_THAT(r.output, HasSubstr("trit: error")) << c.args;
        EXPECT_THAT(r.output, HasSubstr(c.expected)) << c.args;
    }
    // Command-line syntax errors come from the parser, with a non-zero code.
    EXPECT_NE(run_trit("train").exit_code, 0);
    EXPECT_NE(run_trit("train '" + recipe_ + "' --no-such-flag").exit_code, 0);
    EXPECT_NE(run_trit("frobnicate").exit_code, 0);
}

TEST_F(CliTest, ExportInspectValidate) {
    const std::string run = dir_ + "/run", model = dir_ + "/m.h5";
    ASSERT_EQ(run_trit("train '" + recipe_ + "' --out '" + run + "' -q").exit_code, 0);
    for (const char* format : {"tern2", "tern24", "bt2"}) {
        auto e = run_trit("export '" + run + "' --format " + format + " --out '" + model + "'");
        ASSERT_EQ(e.exit_code, 0) << e.output;
        EXPECT_THAT(e.output, HasSubstr(std::string("fc1: ") + format));
        EXPECT_THAT(e.output, HasSubstr("head: float"));
        auto i = run_trit("inspect '" + model + "'");
        ASSERT_EQ(i.exit_code, 0) << i.output;
        EXPECT_THAT(i.output, HasSubstr(format));
        EXPECT_THAT(i.output, HasSubstr("of FP32"));
        auto v = run_trit("validate '" + model + "' --against '" + run + "/checkpoint.pt'");
        EXPECT_EQ(v.exit_code, 0) << v.output;
        EXPECT_THAT(v.output, HasSubstr("top-1 agreement 100.00%"));
        EXPECT_THAT(v.output, HasSubstr("PASS"));
    }
    // A file checked against another run is refused; so are bad flags.
    const std::string other = dir_ + "/other";
    ASSERT_EQ(run_trit("train '" + recipe_ + "' --out '" + other + "' -q --set seed=9").exit_code, 0);
    auto v = run_trit("validate '" + model + "' --against '" + other + "'");
    EXPECT_EQ(v.exit_code, 1);
    EXPECT_THAT(v.output, HasSubstr("recipe differs"));
    auto f = run_trit("export '" + run + "' --format tern3 --out '" + model + "'");
    EXPECT_EQ(f.exit_code, 1);
    EXPECT_THAT(f.output, HasSubstr("known: tern2, tern24, bin1, bt1, bt2, bt3, bt4"));
    EXPECT_THAT(run_trit("export '" + run + "' --format tern2 --group 32 --out '" + model + "'").output,
                HasSubstr("--group: only bt<d>"));
    EXPECT_THAT(run_trit("export '" + dir_ + "/nowhere' --format tern2 --out '" + model + "'").output,
                HasSubstr("expected a run directory"));
    EXPECT_THAT(run_trit("inspect '" + dir_ + "/nothing.h5'").output, HasSubstr("nothing.h5"));
    EXPECT_THAT(run_trit("validate '" + model + "' --against '" + run + "' --rtol-cuda -1").output,
                HasSubstr("--rtol-cuda: expected >= 0"));
    EXPECT_THAT(run_trit("validate '" + model + "' --against '" + run + "' --device tpu").output,
                HasSubstr("tpu"));
    EXPECT_THAT(run_trit("validate '" + model + "' --against '" + run + "' --limit -5").output,
                HasSubstr("--limit"));
}

TEST_F(CliTest, BenchTrainReportsRatio) {
    const std::string csv = dir_ + "/bench.csv";
    auto r = run_trit("bench train --recipes '" + recipe_ + "' '" + recipe_ +
                      "' --steps 5 --warmup 1 --repeats 1 --csv '" + csv + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("1.000x"));
    EXPECT_TRUE(fs::exists(csv));
}

}  // namespace
}  // namespace trit
