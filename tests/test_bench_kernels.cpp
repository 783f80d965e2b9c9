// `trit bench kernels` without a GPU: its flag parsing (every wrong value an error naming the flag
// and echoing the value), the defaults and --quick, the table and CSV, and the binary's exit code 1
// with a clear message where no GPU is visible.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "bench/kernels.h"
#include "core/error.h"
#include "tests/support/process.h"
#include "tests/support/error_of.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::error_of;


TEST(BenchKernelsOptions, ShapesParseAndNameTheirModel) {
    const auto s = bench::parse_shapes("4096x4096,768x3072,100x37");
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].n, 4096);
    EXPECT_EQ(s[0].k, 4096);
    EXPECT_EQ(s[0].model, "Llama-8B");
    EXPECT_EQ(s[1].model, "BWTA");
    EXPECT_EQ(s[2].n, 100);
    EXPECT_EQ(s[2].k, 37);
    EXPECT_EQ(s[2].model, "");
    EXPECT_EQ(bench::default_kernel_shapes().size(), 9u);
}

TEST(BenchKernelsOptions, BadShapesNameTheFlagAndTheValue) {
    for (const char* bad : {"12x", "x12", "0x5", "5x0", "12", "12x-3", "1x2x3", "ax4", " 4x4",
                            "4x4 ", "12x3.5", "99999999x4"}) {
        const std::string msg = error_of([&] { bench::parse_shapes(bad); });
        EXPECT_THAT(msg, HasSubstr("--shapes: expected NxK")) << bad;
        EXPECT_THAT(msg, HasSubstr(std::string("got '") + bad + "'")) << bad;
    }
    EXPECT_THAT(error_of([] { bench::parse_shapes("4x4,,8x8"); }), HasSubstr("got ''"));
    EXPECT_THAT(error_of([] { bench::parse_shapes("4x4,"); }), HasSubstr("got ''"));
    EXPECT_THAT(error_of([] { bench::parse_shapes("4x4,4x4"); }),
                HasSubstr("--shapes: '4x4' is listed twice"));
}

TEST(BenchKernelsOptions, MListsFormatsAndPaths) {
    EXPECT_EQ(bench::parse_m_list("1,16,2048"), (std::vector<int64_t>{1, 16, 2048}));
    for (const char* bad : {"0", "-1", "abc", "1,,2", "1.5", ""})
        EXPECT_THAT(error_of([&] { bench::parse_m_list(bad); }), HasSubstr("--m: expected")) << bad;
    EXPECT_THAT(error_of([] { bench::parse_m_list("1,x"); }), HasSubstr("got 'x'"));
    EXPECT_THAT(error_of([] { bench::parse_m_list("4,4"); }),
                HasSubstr("--m: '4' is listed twice"));

    const auto f = bench::parse_format_list("tern2,bt2,bin1");
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[1].name, "bt2");
    EXPECT_EQ(f[1].max_m, INT64_MAX);  // named formats run at every m
    EXPECT_THAT(error_of([] { bench::parse_format_list("tern3"); }),
                HasSubstr("--formats: unknown format 'tern3'; known: tern2"));
    EXPECT_THAT(error_of([] { bench::parse_format_list("float"); }),
                HasSubstr("--formats: expected packed formats"));
    EXPECT_THAT(error_of([] { bench::parse_format_list("bt5"); }), HasSubstr("'bt5'"));

    // The b1 GEMM cases sit in the same list, named ones at every m.
    const auto b1 = bench::parse_format_list("bin1_tern,tern2,bool_tern,tern_tern");
    ASSERT_EQ(b1.size(), 4u);
    EXPECT_EQ(b1[0].name, "bin1_tern");
    EXPECT_EQ(b1[0].min_m, 1);
    EXPECT_EQ(b1[0].max_m, INT64_MAX);
    EXPECT_EQ(b1[2].name, "bool_tern");
    EXPECT_EQ(b1[3].name, "tern_tern");
    EXPECT_TRUE(bench::is_b1_format("bin1_tern"));
    EXPECT_FALSE(bench::is_b1_format("bin1"));
    EXPECT_THAT(error_of([] { bench::parse_format_list("bin1_bin1"); }),
                HasSubstr("--formats: unknown format 'bin1_bin1'; known: tern2"));
    EXPECT_THAT(error_of([] { bench::parse_format_list("bin1b"); }),
                HasSubstr("or a b1 GEMM: bin1_tern, bool_tern, tern_tern"));
    EXPECT_THAT(error_of([] { bench::parse_format_list("bin1_tern,bin1_tern"); }),
                HasSubstr("--formats: 'bin1_tern' is listed twice"));

    EXPECT_EQ(bench::parse_path_list("auto,generic"),
              (std::vector<std::string>{"auto", "generic"}));
    EXPECT_EQ(bench::parse_path_list("gemm.mma_sync,gemm.wgmma,gemm.wgmma.sk"),
              (std::vector<std::string>{"gemm.mma_sync", "gemm.wgmma", "gemm.wgmma.sk"}));
    EXPECT_EQ(bench::parse_path_list("gemv.stream,gemv.warp,gemv.mma"),
              (std::vector<std::string>{"gemv.stream", "gemv.warp", "gemv.mma"}));
    EXPECT_THAT(error_of([] { bench::parse_path_list("gemv.dp4a"); }),
                HasSubstr("got 'gemv.dp4a'"));
    EXPECT_EQ(bench::parse_path_list("gemv.oneshot.l32r2,gemv.oneshot.l16r4d2"),
              (std::vector<std::string>{"gemv.oneshot.l32r2", "gemv.oneshot.l16r4d2"}));
    bench::Nib4Geometry g;
    EXPECT_TRUE(bench::nib4_geometry_path("gemv.oneshot.l32r1d4", &g));
    EXPECT_EQ(g.lanes, 32);
    EXPECT_EQ(g.rows, 1);
    EXPECT_EQ(g.ahead, 4);
    EXPECT_TRUE(bench::nib4_geometry_path("gemv.oneshot.l16r2", &g));
    EXPECT_EQ(g.lanes, 16);
    EXPECT_EQ(g.rows, 2);
    EXPECT_EQ(g.ahead, -1);  // the kernel's rule
    EXPECT_TRUE(bench::nib4_geometry_path("gemv.oneshot.l32r4d0", &g));
    EXPECT_EQ(g.ahead, 0);
    EXPECT_TRUE(bench::nib4_geometry_path("gemv.oneshot.l64r2", &g));
    EXPECT_EQ(g.lanes, 64);
    for (const char* bad :
         {"gemv.oneshot", "gemv.oneshot.l8r2", "gemv.oneshot.l128r1", "gemv.oneshot.l32r3",
          "gemv.oneshot.l32", "gemv.oneshot.l032r2", "gemv.oneshot.l32r2d", "gemv.oneshot.l32r2d3",
          "gemv.oneshot.l32r2d2x", "gemv.oneshot.r2l32", "gemv.oneshot.l32r22"}) {
        EXPECT_FALSE(bench::nib4_geometry_path(bad, &g)) << bad;
        EXPECT_THAT(
            error_of([bad] { bench::parse_path_list(bad); }),
            HasSubstr("gemv.oneshot.l<L>r<R>[d<D>] (L: 16, 32 or 64, R: 1, 2 or 4, D: 0, 2 or 4)"))
            << bad;
    }
    EXPECT_EQ(bench::wgmma_tokens_path("gemm.wgmma.sk"), 0);
    EXPECT_EQ(bench::parse_path_list("gemm.wgmma.t96,gemm.wgmma.t176,gemm.wgmma.t256"),
              (std::vector<std::string>{"gemm.wgmma.t96", "gemm.wgmma.t176", "gemm.wgmma.t256"}));
    EXPECT_EQ(bench::wgmma_tokens_path("gemm.wgmma.t160"), 160);
    EXPECT_EQ(bench::wgmma_tokens_path("gemm.wgmma"), 0);
    EXPECT_EQ(bench::parse_path_list("gemm.wgmma.ks96,gemm.wgmma.ks128"),
              (std::vector<std::string>{"gemm.wgmma.ks96", "gemm.wgmma.ks128"}));
    EXPECT_EQ(bench::wgmma_tokens_path("gemm.wgmma.ks128"), 128);
    EXPECT_THAT(
        error_of([] { bench::parse_path_list("fast"); }),
        HasSubstr("--paths: expected auto, gemv, gemm, generic, gemv.stream, gemv.warp, "
                  "gemv.mma, gemv.oneshot.l<L>r<R>[d<D>] (L: 16, 32 or 64, R: 1, 2 or 4, D: "
                  "0, 2 or 4), gemm.mma_sync, gemm.wgmma, gemm.wgmma.sk, gemm.wgmma.t<N> (N: "
                  "96, 128, 160, 176 or 256) or "
                  "gemm.wgmma.ks<N> (N: 96 or 128), comma-separated, got 'fast'"));
    EXPECT_THAT(error_of([] { bench::parse_path_list("gemm.dp4a"); }),
                HasSubstr("got 'gemm.dp4a'"));
    for (const char* bad : {"gemm.wgmma.t64", "gemm.wgmma.t", "gemm.wgmma.t+96", "gemm.wgmma.t096",
                            "gemm.wgmma.t0096", "gemm.wgmma.t99999999999", "gemm.wgmma.sk2",
                            "gemm.wgmma.ks160", "gemm.wgmma.ks", "gemm.wgmma.ks096"}) {
        EXPECT_THAT(error_of([&] { bench::parse_path_list(bad); }),
                    HasSubstr("got '" + std::string(bad) + "'"));
    }
}

TEST(BenchKernelsOptions, DefaultsQuickAndCounts) {
    bench::KernelBenchArgs a;
    auto o = bench::resolve_kernel_bench_args(a);
    EXPECT_EQ(o.shapes.size(), 9u);
    EXPECT_EQ(o.ms, (std::vector<int64_t>{1, 16, 64, 256, 2048}));
    ASSERT_EQ(o.formats.size(), 4u);
    EXPECT_EQ(o.formats[2].name, "bt2");
    EXPECT_EQ(o.formats[2].max_m, INT64_MAX);  // the GEMV to 8 tokens, the bt GEMM above
    EXPECT_EQ(o.formats[2].min_m, 1);
    EXPECT_EQ(o.formats[3].name, "bin1_tern");  // a GEMM: from m = 2 up
    EXPECT_EQ(o.formats[3].min_m, 2);
    EXPECT_EQ(o.formats[3].max_m, INT64_MAX);
    EXPECT_EQ(o.paths, (std::vector<std::string>{"auto"}));
    EXPECT_EQ(o.reps, 100);
    EXPECT_EQ(o.warmup, 10);
    EXPECT_EQ(o.bt_group, 64);

    a.quick = true;
    o = bench::resolve_kernel_bench_args(a);
    EXPECT_EQ(o.reps, 20);
    EXPECT_EQ(o.warmup, 3);
    EXPECT_EQ(o.ms, (std::vector<int64_t>{1, 64, 128, 2048}));  // 128: bin1_tern's target
    a.reps = 7, a.reps_given = true, a.ms = "16";
    o = bench::resolve_kernel_bench_args(a);  // given values win over --quick
    EXPECT_EQ(o.reps, 7);
    EXPECT_EQ(o.ms, (std::vector<int64_t>{16}));

    a.reps = 0;
    EXPECT_THAT(error_of([&] { bench::resolve_kernel_bench_args(a); }),
                HasSubstr("--reps: expected"));
    a.reps = 5, a.warmup = -1, a.warmup_given = true;
    EXPECT_THAT(error_of([&] { bench::resolve_kernel_bench_args(a); }),
                HasSubstr("--warmup: expected"));
    a.warmup = 0, a.bt_group = 96;
    EXPECT_THAT(
        error_of([&] { bench::resolve_kernel_bench_args(a); }),
        HasSubstr(
            "--bt-group: expected a positive multiple of 64 (columns a bt scale group), got 96"));
    a.bt_group = 0;
    EXPECT_THAT(error_of([&] { bench::resolve_kernel_bench_args(a); }),
                HasSubstr("--bt-group: expected"));
    a.bt_group = 4096;
    EXPECT_EQ(bench::resolve_kernel_bench_args(a).bt_group, 4096);
    EXPECT_TRUE(bench::resolve_kernel_bench_args(a).bt_half_scales);  // f16, the default
    a.bt_scales = "f32";
    EXPECT_FALSE(bench::resolve_kernel_bench_args(a).bt_half_scales);
    a.bt_scales = "fp16";
    EXPECT_THAT(
        error_of([&] { bench::resolve_kernel_bench_args(a); }),
        HasSubstr("--bt-scales: expected f16 or f32 (the bt weight scales' type), got 'fp16'"));
    a.bt_scales = "f16";
    a.warmup = 0, a.shapes = "12x";
    EXPECT_THAT(error_of([&] { bench::resolve_kernel_bench_args(a); }),
                HasSubstr("--shapes: expected NxK"));
}

TEST(BenchKernelsReport, TableAndCsvRows) {
    bench::KernelBenchReport rep;
    rep.device = "GPU \"X\", 1 SM";
    rep.date = "2026-01-01T00:00:00Z";
    rep.copy_gbps = 2000;
    bench::KernelRow r;
    r.model = "Llama-8B", r.kernel = "product", r.format = "tern2", r.path = "gemv";
    r.m = 1, r.n = 4096, r.k = 4096, r.samples = 10, r.batch = 4, r.copies = 9;
    r.median_us = 10, r.min_us = 9, r.p10_us = 9.5, r.p90_us = 11;
    r.bytes = 10e6, r.ops = 2.0 * 4096 * 4096, r.vs_fp16 = 3.5;
    bench::finish_row(r, rep.copy_gbps);
    EXPECT_DOUBLE_EQ(r.gbps, 1000);  // 10 MB in 10 µs
    EXPECT_DOUBLE_EQ(r.pct_copy, 50);
    EXPECT_NEAR(r.tops, 3.3554432, 1e-9);  // 2 * 4096^2 ops in 10 µs
    bench::KernelRow refused = r;
    refused.samples = 0, refused.note = "gemv: m <= 8";
    rep.rows = {r, refused};

    EXPECT_THAT(bench::kernel_table_header(), HasSubstr("median_us"));
    const std::string line = bench::kernel_table_line(r);
    EXPECT_THAT(line, HasSubstr("Llama-8B"));
    EXPECT_THAT(line, HasSubstr("1000.0"));
    EXPECT_THAT(line, HasSubstr("3.50"));
    EXPECT_THAT(bench::kernel_table_line(refused), HasSubstr("-- gemv: m <= 8"));
    // The b1 rows' longer names fit their columns: the figures stay where the other rows' are.
    bench::KernelRow b1 = r;
    b1.kernel = "pack+b1_gemm", b1.format = "bin1_tern", b1.path = "medium";
    EXPECT_EQ(bench::kernel_table_line(b1).find("1000.0"), line.find("1000.0"));
    // So do the tern2 GEMM's kernel and tile names, forced or not.
    for (const char* path : {"wgmma.t160*", "wg128x176", "wg128x128sk", "mma_sync*"}) {
        bench::KernelRow g = r;
        g.path = path;
        EXPECT_EQ(bench::kernel_table_line(g).find("1000.0"), line.find("1000.0")) << path;
    }

    std::istringstream csv(bench::kernel_csv(rep));
    std::string header, row1, row2;
    std::getline(csv, header), std::getline(csv, row1), std::getline(csv, row2);
    EXPECT_EQ(header.rfind("device,date,model,kernel,format,path,m,n,k,", 0), 0u);
    EXPECT_THAT(row1,
                HasSubstr("\"GPU \"\"X\"\", 1 "
                          "SM\",2026-01-01T00:00:00Z,Llama-8B,product,tern2,gemv,1,4096,4096"));
    EXPECT_THAT(row2, HasSubstr("\"gemv: m <= 8\""));
    // One field per header column (the device is the only quoted field with a comma here).
    auto commas = [](const std::string& s) { return std::count(s.begin(), s.end(), ','); };
    EXPECT_EQ(commas(row1) - 1, commas(header));
}

// Hiding every GPU (CUDA_VISIBLE_DEVICES empty) gives the no-GPU path on any machine; a build
// without CUDA fails the same way with its own message.
TEST(BenchKernelsCli, NoGpuExitsOneWithAClearMessage) {
    const auto r =
        trit::testing::run_command("CUDA_VISIBLE_DEVICES= '" TRIT_BINARY "' bench kernels --quick");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output,
                ::testing::AnyOf(HasSubstr("bench kernels: no CUDA GPU visible"),
                                 HasSubstr("bench kernels: this trit was built without CUDA")));
}

TEST(BenchKernelsCli, BadFlagsFailBeforeAnyGpuWork) {
    const auto r = trit::testing::run_trit("bench kernels --shapes 12x");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("--shapes: expected NxK (out x in) with N, K in 1..1048576, "
                                    "comma-separated, got '12x'"));
    const auto h = trit::testing::run_trit("bench kernels --help");
    EXPECT_EQ(h.exit_code, 0);
    EXPECT_THAT(h.output, HasSubstr("Example"));
    EXPECT_THAT(h.output, HasSubstr("--shapes"));
    EXPECT_THAT(h.output, HasSubstr("bin1_tern"));
    const auto f = trit::testing::run_trit("bench kernels --formats bin1_tern,bin1b");
    EXPECT_EQ(f.exit_code, 1) << f.output;
    EXPECT_THAT(f.output, HasSubstr("--formats: unknown format 'bin1b'"));
    EXPECT_THAT(trit::testing::run_trit("bench --help").output, HasSubstr("kernels"));
}

}  // namespace
}  // namespace trit
