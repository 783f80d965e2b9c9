// scripts/gpu-ab.sh without a GPU: `compare` (the side-by-side table every kernel A/B in
// docs/BENCHMARKS.md is read from) on benchmark logs written here, and each input the script
// refuses, named, before it builds anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/process.h"
#include "tests/support/synthetic_idx.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using trit::testing::run_command;
using trit::testing::write_text;

std::string script() {
    return "bash '" + trit::testing::source_path("scripts/gpu-ab.sh") + "'";
}

// A `trit bench kernels` table: the header lines, then rows of model, kernel, format, path, m, n,
// k, median (the columns after it do not matter to compare).
std::string bench_log(const std::string& rows) {
    return "device: test\nmethod: test\ncopy:   4158.7 GB/s\n\n"
           "model      kernel           format    path             m      n      k  median_us     "
           "p10_us\n" +
           rows;
}

class GpuAbCompare : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-gpu-ab"); }
    void TearDown() override { run_command("rm -rf '" + dir_ + "'"); }
    std::string dir_;
};

TEST_F(GpuAbCompare, PrintsEachCasesRangesPerTreeAndTheRatioOfTheirMidpoints) {
    // Two rounds per tree; tern24 in both trees, a case only A ran, and two rows of one case
    // (two --paths), kept apart by their order.
    write_text(dir_ + "/A_1.txt",
               bench_log("-  product  tern24  gemv  1 128256 4096  33.62  33.4\n"
                         "-  product  tern2   gemv.stream  1 128256 4096  35.70  35.5\n"
                         "-  product  tern2   gemv.skinny  16 4096 4096  5.00  4.9\n"
                         "-  product  tern2   gemm.wgmma   16 4096 4096  6.00  5.9\n"));
    write_text(dir_ + "/A_2.txt",
               bench_log("-  product  tern24  gemv  1 128256 4096  33.60  33.4\n"
                         "-  product  tern2   gemv.stream  1 128256 4096  35.72  35.5\n"
                         "-  product  tern2   gemv.skinny  16 4096 4096  5.10  4.9\n"
                         "-  product  tern2   gemm.wgmma   16 4096 4096  6.20  5.9\n"));
    write_text(dir_ + "/B_1.txt",
               bench_log("-  product  tern24  gemv  1 128256 4096  30.52  30.4\n"
                         "-  product  tern2   gemv.skinny  16 4096 4096  4.50  4.4\n"
                         "-  product  tern2   gemm.wgmma   16 4096 4096  6.00  5.9\n"));
    write_text(dir_ + "/B_2.txt",
               bench_log("-  product  tern24  gemv  1 128256 4096  30.57  30.4\n"
                         "-  product  tern2   gemv.skinny  16 4096 4096  4.70  4.4\n"
                         "-  product  tern2   gemm.wgmma   16 4096 4096  6.20  5.9\n"));
    const auto r = run_command(script() + " compare '" + dir_ + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("A path"));
    EXPECT_THAT(r.output, HasSubstr("B/A"));
    // (30.52 + 30.57) / (33.60 + 33.62) = 0.909
    EXPECT_THAT(
        r.output,
        ::testing::ContainsRegex(
            "product +tern24 +1 +128256 +4096 +gemv +33.60-33.62 +gemv +30.52-30.57 +0.909"));
    EXPECT_THAT(r.output,
                ::testing::ContainsRegex(
                    "product +tern2 +1 +128256 +4096 +gemv.stream +35.70-35.72 +- +- +-"));
    // (4.50 + 4.70) / (5.00 + 5.10) = 0.911; the second row of the case 1.000.
    EXPECT_THAT(
        r.output,
        ::testing::ContainsRegex(
            "tern2 +16 +4096 +4096 +gemv.skinny +5.00-5.10 +gemv.skinny +4.50-4.70 +0.911"));
    EXPECT_THAT(r.output,
                ::testing::ContainsRegex(
                    "tern2 +16 +4096 +4096 +gemm.wgmma +6.00-6.20 +gemm.wgmma +6.00-6.20 +1.000"));
}

TEST_F(GpuAbCompare, ADirectoryWithoutLogsIsNamed) {
    const auto r = run_command(script() + " compare '" + dir_ + "'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.output, HasSubstr("no A_<round>.txt in " + dir_));
}

TEST(GpuAbScript, EveryRefusedInputIsNamedBeforeAnyBuild) {
    // No subcommand, an unknown one, run and swap without the -- before the benchmark's arguments:
    // the usage, exit code 2.
    for (const char* args : {"", "frobnicate", "run", "swap -r 2", "compare", "prepare"}) {
        const auto r = run_command(script() + " " + args);
        EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
        EXPECT_THAT(r.output, HasSubstr("scripts/gpu-ab.sh prepare REV")) << args;
    }
    // A count that is not a positive integer, named with the value.
    for (const char* mode : {"run", "swap"}) {
        for (const char* rounds : {"0", "x", "-3", "1.5"}) {
            const auto r = run_command(script() + " " + mode + " -r " + rounds + " -- --m 1");
            EXPECT_EQ(r.exit_code, 1) << mode << " " << rounds << "\n" << r.output;
            EXPECT_THAT(r.output,
                        HasSubstr(std::string("-r takes a positive count, not '") + rounds + "'"));
        }
    }
    // A revision that names no commit.
    const auto r = run_command(script() + " prepare no-such-revision-xyz");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("'no-such-revision-xyz' is not a commit"));
    EXPECT_THAT(r.output, Not(HasSubstr("A = ")));
}

}  // namespace
