// GPU tests of the tern2 x int8 tensor-core GEMM (kernels/tern2_gemm.h): int32 accumulators and
// fused-epilogue y bit-exact against the CPU references over a shape table that reaches every
// tile (small m <= 16, mid m <= 256, large), split and unsplit k, grouped and one-group products,
// m and n off the tiles, k off the k-tile; and the host-side contract (no GPU needed): each rule
// broken once, with an error naming m, n, k, group and the rule, the dispatcher's choice, and the
// mma.sync/wgmma crossover rule on the shapes it was measured on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemm.h"
#include "kernels/tern2_gemm_sm90.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::ProductPath;

struct GemmShape {
    int64_t m, n, k, group;
};

// m over the tiles' edges (9, 16 | 17, 33, 64, 100, 256 | 300), n odd and small (1, 3, 17, 130)
// and large, k at and off the k-tiles (64, 192, 256, 784 is rejected: 784 % 64 != 0), one group
// (group = k, group > k) and groups of 64, 128 and 192 (a partial last group when k % group != 0).
const std::vector<GemmShape> kGemmShapes = {
    {9, 1, 64, 64},         {16, 3, 192, 192},      {17, 17, 256, 256},    {33, 130, 2560, 2560},
    {64, 64, 256, 1000},    {100, 130, 192, 64},    {256, 17, 2560, 128},  {300, 3, 64, 64},
    {300, 130, 2560, 2560}, {16, 130, 2560, 128},   {9, 257, 448, 192},    {33, 1, 2560, 4096},
    {256, 200, 768, 768},   {64, 70, 3072, 3072},   {100, 64, 320, 128},   {17, 130, 640, 192},
    {16, 2560, 256, 256},   {300, 256, 2560, 2560}, {300, 130, 1024, 128},
};

// Several scale groups on the wgmma kernel (forced; y only: it folds each group's int32 sums into
// float sums in group order): groups of 64 (a fold at every pair of k32 steps), 128, 192 (groups
// ending inside a k-tile, a partial last group) and 256 (groups across k-tiles); k off the
// 128-column k-tile (k % 128 == 64: the last k-tile's upper half does not run); m and n off the
// (128, 128) tile and off multiples of 4 (direct stores); more tiles than SMs (a persistent CTA's
// ring and sums carried across tiles: {1100, 4100, 320, 64}, {600, 4099, 448, 192}).
const std::vector<GemmShape> kGroupedShapes = {
    {9, 1, 128, 64},       {17, 130, 192, 64},    {100, 130, 448, 192},  {128, 128, 320, 64},
    {129, 257, 2560, 128}, {300, 130, 1024, 256}, {256, 200, 768, 64},   {2048, 768, 768, 64},
    {33, 64, 4096, 64},    {1100, 4100, 320, 64}, {600, 4099, 448, 192},
};

// Shapes the launcher does not split along k: one k-tile (k <= 128), or enough output tiles
// (>= 2 CTAs per SM of a 132-SM H100) for each tile size, so the unsplit store path runs too.
const std::vector<GemmShape> kUnsplitShapes = {
    {16, 16896, 64, 64},     // small tile, one k-tile
    {256, 4224, 128, 128},   // mid tile, one k-tile
    {300, 11264, 64, 64},    // large tile, one k-tile
    {16, 33792, 192, 192},   // small tile: 264 column tiles, 2 k-tiles (the second half empty)
    {256, 4224, 256, 256},   // mid tile: 4 x 66 tiles
    {257, 11264, 192, 192},  // large tile: 3 x 88 tiles
};

// Large m and one group: auto dispatch's wgmma shapes on an H100, and the wgmma kernel forced over
// the awkward ones: m far below its 128-token tile, n off its 128 / 256 weight rows and off
// multiples of 4 (direct stores instead of the staged TMA epilogue), k off its 128-column k-tile
// (k = 64: half a tile), group > k. {300, 11200, 192} has enough tiles for the 256-row tile on a
// 132-SM H100; the others take the 128-row tile. {1100, 4100, 320} and {600, 4099, 448} have more
// tiles than SMs, so a persistent CTA runs several, its ring carried across them (odd and even
// k-tile counts), through either epilogue. {128, 130, 6144} and {256, 512, 6144} fill a few SMs
// with tiles of 48 k-tiles: auto splits them stream-K (again through either epilogue).
const std::vector<GemmShape> kOneGroupShapes = {
    {9, 1, 64, 64},         {16, 3, 192, 192},      {17, 17, 256, 256},     {33, 130, 2560, 2560},
    {64, 64, 256, 1000},    {128, 128, 128, 128},   {129, 129, 320, 320},   {300, 3, 64, 64},
    {300, 130, 2560, 2560}, {256, 200, 768, 768},   {64, 70, 3072, 3072},   {2048, 768, 768, 768},
    {300, 11200, 192, 192}, {513, 257, 4096, 4096}, {1000, 384, 448, 8192},
    {1100, 4100, 320, 320}, {600, 4099, 448, 448},   {128, 130, 6144, 6144}, {256, 512, 6144, 6144},
};

using VariantScope = trit::kernels::ScopedTern2GemmVariant;

using trit::gputest::device_is_sm90;

class Tern2Gemm : public trit::gputest::RequiresGpu<::testing::Test> {};

void run_shapes(const std::vector<GemmShape>& shapes, ProductPath path, uint64_t seed,
                bool y_only = false, bool half_scales = false) {
    for (const GemmShape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = seed++;
        c.per_tensor_scale = seed % 3 == 0;
        c.bias = seed % 2 == 0;
        c.y_only = y_only;
        c.half_scales = half_scales;
        trit::gputest::check_product_case(c, path);
    }
}

// x at the ends of the int8 range (all -128, all 127, -128 and -127 mixed) on an m x 130 x 2560
// product: every product is +-128 or +-127, the sums reach 128 * k = 327680; catches a sign or
// saturation slip in the decode or the x permute.
void run_extreme_x(int64_t m, uint64_t seed) {
    for (const auto& [lo, hi] :
         std::vector<std::pair<int, int>>{{-128, -128}, {127, 127}, {-128, -127}}) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = m, c.n = 130, c.k = 2560, c.group = 2560;
        c.x_lo = lo, c.x_hi = hi;
        c.seed = seed + static_cast<uint64_t>(lo + 200);
        trit::gputest::check_product_case(c, ProductPath::kGemm);
    }
}

// An m x 128 x k product into outputs 1, 2 and 3 elements off 16-byte alignment (n % 4 = 0).
void run_offset_outputs(int64_t m, int64_t k, uint64_t seed) {
    for (int64_t offset : {1, 2, 3}) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = m, c.n = 128, c.k = k, c.group = k;
        c.out_offset = offset;
        c.seed = seed++;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, ProductPath::kGemm);
    }
}

// A 300 x 130 x 256 product through the gemm path under the variant and tokens in force: refused
// with an error naming m and `rule`.
void expect_refused(const std::string& rule) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 300, c.n = 130, c.k = 256, c.group = 256;
    try {
        trit::gputest::check_product_case(c, ProductPath::kGemm);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(rule));
        EXPECT_THAT(e.what(), HasSubstr("m=300"));
    }
}

TEST_F(Tern2Gemm, MatchesTheReferenceOverTheShapeTable) {
    run_shapes(kGemmShapes, ProductPath::kGemm, 101);
}

TEST_F(Tern2Gemm, MatchesTheReferenceWithoutSplitK) {
    run_shapes(kUnsplitShapes, ProductPath::kGemm, 201);
}

// Auto dispatch sends large m to the wgmma kernel on an H100: the mma.sync kernel, forced, over
// every table (its large tile included).
TEST_F(Tern2Gemm, MmaSyncKernelMatchesTheReference) {
    VariantScope scope(trit::kernels::Tern2GemmVariant::kMmaSync);
    run_shapes(kGemmShapes, ProductPath::kGemm, 501);
    run_shapes(kUnsplitShapes, ProductPath::kGemm, 601);
    run_shapes(kOneGroupShapes, ProductPath::kGemm, 701);
}

TEST_F(Tern2Gemm, WgmmaKernelMatchesTheReference) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmma);
    run_shapes(kOneGroupShapes, ProductPath::kGemm, 801);
    run_extreme_x(300, 901);
}

TEST_F(Tern2Gemm, WgmmaKernelFoldsSeveralScaleGroups) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmma);
    run_shapes(kGroupedShapes, ProductPath::kGemm, 1501, /*y_only=*/true);
    // With the scales' fp16 copy (ProductOut::w_scale_half) each term is one FFMA.
    run_shapes(kGroupedShapes, ProductPath::kGemm, 1701, /*y_only=*/true, /*half_scales=*/true);
    // x at the int8 extremes with groups of 64 and 2048: the folds' int32 sums reach 128 * 2048.
    for (const bool half : {false, true})
        for (int64_t group : {int64_t{64}, int64_t{2048}})
            for (const auto& [lo, hi] :
                 std::vector<std::pair<int, int>>{{-128, -128}, {127, 127}, {-128, 127}}) {
                ProductCase c;
                c.format = Format::kTern2;
                c.m = 300, c.n = 130, c.k = 4096, c.group = group;
                c.x_lo = lo, c.x_hi = hi;
                c.seed = 1601 + static_cast<uint64_t>(lo + 200 + group);
                c.y_only = true;
                c.half_scales = half;
                trit::gputest::check_product_case(c, ProductPath::kGemm);
            }
}

// Every tile stream-K: CTA ranges that start and end inside tiles, tiles shared by up to a
// hundred CTAs (one k-tile a tile at k <= 128: most ranges empty or a piece of one k-tile), the
// fix-up's waits and adds before either epilogue. Twice over, so that the second round's flags
// hold the first round's epoch when it starts.
TEST_F(Tern2Gemm, WgmmaStreamKMatchesTheReference) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmmaStreamK);
    run_shapes(kOneGroupShapes, ProductPath::kGemm, 1101);
    run_shapes(kOneGroupShapes, ProductPath::kGemm, 1201);
}

// The 128-row tile with 96, 160, 176 and 256 tokens (auto takes them from m = 256 where they leave
// less work on the busiest SM), forced over the one-group table: m far below and off the token
// tile (9 .. 2048: partial last tiles), n off the rows and off multiples of 4 (direct stores),
// k = 64 (half a k-tile), several tiles per CTA; extreme x; outputs off 16-byte alignment.
// Stream-K with them is refused, naming the tokens.
TEST_F(Tern2Gemm, WgmmaTokenTilesMatchTheReference) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmma);
    uint64_t seed = 1501;
    for (const int tokens : {96, 160, 176, 256}) {
        SCOPED_TRACE("tokens per tile " + std::to_string(tokens));
        const trit::kernels::ScopedTern2GemmTokens forced(tokens);
        run_shapes(kOneGroupShapes, ProductPath::kGemm, seed);
        seed += 100;
        run_extreme_x(300, seed);
        seed += 100;
        run_offset_outputs(1000, 640, seed);
        seed += 100;
    }
    // The auto choice where it takes each (132 SMs): 160 tokens on 2560 x 2560 at m = 2048, 96 on
    // 768 x 768, 256 on 1536 rows (k scaled down to keep the CPU reference short).
    run_shapes({{2048, 2560, 256, 256},
                {2048, 768, 256, 256},
                {1100, 768, 192, 192},
                {2048, 1536, 128, 128}},
               ProductPath::kGemm, seed);
    VariantScope stream_k(trit::kernels::Tern2GemmVariant::kWgmmaStreamK);
    const trit::kernels::ScopedTern2GemmTokens forced(96);
    expect_refused("stream-K runs 128-token tiles only, got 96");
}

// The k-split tile (64 weight rows, the consumers on alternate k-tiles, each adding the other's
// partial sums of its half of the tokens), forced with 96 and 128 tokens and the launcher's choice
// over the one-group table: one k-tile (k = 64, 128: the second consumer has none), odd and even
// k-tile counts, m off the token tile and below half of it (a consumer whose tokens all lie past
// m), n off the 64 rows and off multiples of 4 (direct stores), many tiles per CTA (the exchange
// reused).
TEST_F(Tern2Gemm, WgmmaKSplitTileMatchesTheReference) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmmaKSplit);
    uint64_t seed = 2101;
    for (const int tokens : {96, 128, 0}) {
        SCOPED_TRACE("tokens per tile " + std::to_string(tokens));
        const trit::kernels::ScopedTern2GemmTokens forced(tokens);
        run_shapes(kOneGroupShapes, ProductPath::kGemm, seed);
        seed += 100;
    }
}

// The k-split tile on few cases (the sanitizers' set): extreme x, outputs off 16-byte alignment,
// six tiles per CTA with three k-tiles each (the exchange reused, the consumers' k-tile counts
// unequal), and other token counts refused, naming them.
TEST_F(Tern2Gemm, WgmmaKSplitTileEdges) {
    if (!device_is_sm90()) GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmmaKSplit);
    uint64_t seed = 2501;
    for (const int tokens : {96, 128}) {
        SCOPED_TRACE("tokens per tile " + std::to_string(tokens));
        const trit::kernels::ScopedTern2GemmTokens forced(tokens);
        run_extreme_x(300, seed);
        seed += 100;
        run_offset_outputs(200, 640, seed);
        seed += 100;
        run_shapes({{1100, 4100, 320, 320}}, ProductPath::kGemm, seed);
        seed += 100;
    }
    const trit::kernels::ScopedTern2GemmTokens forced(160);
    expect_refused("the k-split tile holds 96 or 128 tokens, got 160");
}

// Outputs, w scales and biases 1..3 elements off 16-byte alignment with n % 4 = 0 (the wgmma
// epilogue's unstaged path, the mma.sync kernel's scalar stores), through each variant.
TEST_F(Tern2Gemm, OutputsOffSixteenByteAlignmentStayExact) {
    using trit::kernels::Tern2GemmVariant;
    std::vector<Tern2GemmVariant> variants = {Tern2GemmVariant::kMmaSync};
    if (device_is_sm90()) {
        variants.push_back(Tern2GemmVariant::kWgmma);
        variants.push_back(Tern2GemmVariant::kWgmmaStreamK);
        variants.push_back(Tern2GemmVariant::kWgmmaKSplit);
    }
    uint64_t seed = 1301;
    for (Tern2GemmVariant v : variants) {
        VariantScope scope(v);
        run_offset_outputs(300, 2560, seed);
        seed += 3;
    }
}

// The auto choice over large m, grouped and not (wgmma on an H100 for one group, mma.sync else).
TEST_F(Tern2Gemm, AutoDispatchOverLargeM) {
    run_shapes({{300, 130, 2560, 2560}, {300, 130, 1024, 128}, {2048, 768, 768, 768}},
               ProductPath::kAuto, 1001);
}

TEST_F(Tern2Gemm, ForcedWgmmaRefusesWhatItCannotRun) {
    VariantScope scope(trit::kernels::Tern2GemmVariant::kWgmma);
    trit::gputest::DeviceBuffer<uint8_t> codes(std::vector<uint8_t>(64 * 64, 0));
    trit::gputest::DeviceBuffer<int8_t> x(std::vector<int8_t>(300 * 256, 1));
    trit::gputest::DeviceBuffer<int32_t> acc(300 * 64 * 2);
    trit::kernels::PackedWeights w;
    w.format = Format::kTern2;
    w.a = codes.get();
    w.n = 64;
    w.k = 256;
    trit::kernels::ProductOut out;
    out.acc = acc.get();
    try {
        trit::kernels::tern2_gemm(w, x.get(), 300, 128, out, nullptr);  // two groups into acc
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("m=300"));
        EXPECT_THAT(e.what(), HasSubstr("group=128"));
        EXPECT_THAT(e.what(), HasSubstr(device_is_sm90() ? "write y only"
                                                         : "a compute capability 9.0 device"));
    }
}

TEST_F(Tern2Gemm, AutoDispatchRunsItForManyTokens) {
    run_shapes({{64, 130, 256, 256}, {17, 33, 192, 64}}, ProductPath::kAuto, 301);
}

// x at the ends of the int8 range (run_extreme_x) through the small tiles.
TEST_F(Tern2Gemm, ExtremeActivations) {
    run_extreme_x(33, 401);
}

// ---- host-side contract (no GPU needed) ------------------------------------------------------

alignas(16) uint8_t g_codes[64];
alignas(16) int8_t g_x[64];

trit::kernels::PackedWeights tern2_weights(int64_t n, int64_t k, const uint8_t* codes = g_codes) {
    trit::kernels::PackedWeights w;
    w.format = Format::kTern2;
    w.a = codes;
    w.n = n;
    w.k = k;
    return w;
}

trit::kernels::ProductOut acc_out() {
    static int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    return out;
}

void expect_gemm_error(const trit::kernels::PackedWeights& w, const int8_t* x, int64_t m,
                       int64_t group, const std::string& rule) {
    SCOPED_TRACE(rule);
    EXPECT_THAT(trit::kernels::tern2_gemm_rejects(w, x, m, group), HasSubstr(rule));
    try {
        trit::kernels::product(w, x, m, group, acc_out(), nullptr, ProductPath::kGemm);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern2_gemm"));
        EXPECT_THAT(e.what(), HasSubstr(rule));
        EXPECT_THAT(e.what(), HasSubstr("m=" + std::to_string(m)));
        EXPECT_THAT(e.what(), HasSubstr("n=" + std::to_string(w.n)));
        EXPECT_THAT(e.what(), HasSubstr("k=" + std::to_string(w.k)));
        EXPECT_THAT(e.what(), HasSubstr("group=" + std::to_string(group)));
    }
}

TEST(Tern2GemmContract, RejectsEveryBrokenRuleNamingTheShape) {
    expect_gemm_error(tern2_weights(64, 100), g_x, 64, 100, "k must be a multiple of 64");
    expect_gemm_error(tern2_weights(64, 784), g_x, 64, 784, "k must be a multiple of 64");
    expect_gemm_error(tern2_weights(64, 256), g_x + 1, 64, 256, "16-byte aligned");
    expect_gemm_error(tern2_weights(64, 256, g_codes + 4), g_x, 64, 256, "16-byte aligned");
    expect_gemm_error(tern2_weights(64, 256), g_x, 64, 100,
                      "group must be >= k or a multiple of 64");
    expect_gemm_error(tern2_weights(64, 256), g_x, 64, 32,
                      "group must be >= k or a multiple of 64");
    expect_gemm_error(tern2_weights(2, 64), g_x, int64_t{1} << 31, 64, "m must be <= 2147483647");
    expect_gemm_error(tern2_weights(4194241, 64), g_x, 16, 64, "n must be <= 4194240");
}

TEST(Tern2GemmContract, CommonChecksComeFirst) {
    trit::kernels::ProductOut none;  // no output: check_product's rule, named by tern2_gemm
    try {
        trit::kernels::tern2_gemm(tern2_weights(64, 256), g_x, 64, 256, none, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern2_gemm"));
        EXPECT_THAT(e.what(), HasSubstr("exactly one output"));
    }
    trit::kernels::PackedWeights bin1 = tern2_weights(64, 256);
    bin1.format = Format::kBin1;
    EXPECT_THAT(trit::kernels::tern2_gemm_rejects(bin1, g_x, 64, 256), HasSubstr("must be tern2"));
}

TEST(Tern2GemmContract, AcceptsTheModelShapes) {
    for (const GemmShape& s : std::vector<GemmShape>{{16, 2560, 2560, 2560},
                                                     {2048, 14336, 4096, 4096},
                                                     {64, 768, 3072, 3072},
                                                     {256, 6912, 2560, 128},
                                                     {9, 3, 64, 1 << 20}}) {
        SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k));
        EXPECT_EQ(trit::kernels::tern2_gemm_rejects(tern2_weights(s.n, s.k), g_x, s.m, s.group),
                  "");
    }
}

// The mma.sync/wgmma rule (kernels/tern2_gemm.cu, wgmma_pays) on the 18 shapes it was fitted on
// (H200, 132 SMs; docs/BENCHMARKS.md, sessions 34, 35 and 49) at m = 40, 48, 56, 64, 80, 96, 128,
// 160, 192, 256 (W: wgmma, M: mma.sync): from m = 56 the wgmma kernel's k-split tile wherever its
// tiles fit one wave with k <= 2n, or from m = 80 with 32 tiles or more (session 35), but not at
// m <= 64 on n <= k with n k <= 3072^2 (session 49: the mma.sync kernel is faster there since
// 05c5f9d); else the crossover of the 128-row tiles and mma.sync (sessions 34 and 49).
TEST(Tern2GemmContract, AutoDispatchFollowsTheMeasuredCrossover) {
    using trit::kernels::Tern2GemmVariant;
    using trit::kernels::tern2_gemm_auto_kernel;
    struct Case {
        int64_t n, k;
        const char* picks;  // m = 40, 48, 56, 64, 80, 96, 128, 160, 192, 256
    };
    const std::vector<Case> cases = {
        {768, 768, "MMMMWWWWWW"},    {768, 2048, "MMMMMMMMMW"},   {768, 3072, "MMMMMMMMMW"},
        {1024, 1024, "MMMMWWWWWW"},  {1536, 768, "MMWWWWWWWW"},   {2048, 2048, "MMMMWWWWWW"},
        {2048, 8192, "MMMMWWWWWW"},  {2560, 2560, "MMMMWWWWWW"},  {2560, 6912, "MMMMWWWWWW"},
        {3072, 768, "MMWWWWWWWW"},   {3072, 3072, "MMMMWWWWWW"},  {4096, 4096, "MMWWWWWWWW"},
        {4096, 11008, "MMMMWWWWWW"}, {4096, 14336, "MMMMWWWWWW"}, {6912, 2560, "WWWWWWWWWW"},
        {8192, 2048, "WWWWWWWWWW"},  {11008, 4096, "WWWWWWWWWW"}, {14336, 4096, "WWWWWWWWWW"},
    };
    const int64_t ms[10] = {40, 48, 56, 64, 80, 96, 128, 160, 192, 256};
    const bool sm90 = trit::kernels::detail::tern2_gemm_sm90_built();
    for (const Case& c : cases) {
        for (int i = 0; i < 10; ++i) {
            SCOPED_TRACE("n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                         " m=" + std::to_string(ms[i]));
            const Tern2GemmVariant want =
                sm90 && c.picks[i] == 'W' ? Tern2GemmVariant::kWgmma : Tern2GemmVariant::kMmaSync;
            EXPECT_EQ(tern2_gemm_auto_kernel(ms[i], c.n, c.k, c.k, 9, 0, 132), want);
        }
        // Every shape takes the wgmma kernel at m > 256; none at m <= 16.
        EXPECT_EQ(tern2_gemm_auto_kernel(384, c.n, c.k, c.k, 9, 0, 132),
                  sm90 ? Tern2GemmVariant::kWgmma : Tern2GemmVariant::kMmaSync);
        EXPECT_EQ(tern2_gemm_auto_kernel(2048, c.n, c.k, c.k, 9, 0, 132),
                  sm90 ? Tern2GemmVariant::kWgmma : Tern2GemmVariant::kMmaSync);
        EXPECT_EQ(tern2_gemm_auto_kernel(16, c.n, c.k, c.k, 9, 0, 132), Tern2GemmVariant::kMmaSync);
        // Scale groups, or a device other than 9.0: always mma.sync.
        EXPECT_EQ(tern2_gemm_auto_kernel(2048, c.n, c.k, 128, 9, 0, 132),
                  Tern2GemmVariant::kMmaSync);
        EXPECT_EQ(tern2_gemm_auto_kernel(2048, c.n, c.k, c.k, 8, 0, 132),
                  Tern2GemmVariant::kMmaSync);
        EXPECT_EQ(tern2_gemm_auto_kernel(2048, c.n, c.k, c.k, 10, 0, 132),
                  Tern2GemmVariant::kMmaSync);
    }
    // The rule's edges (the k-split tile's own in KSplitTilePaysWhereItFillsOneWave): it starts
    // at m = 49 (4096 x 4096 at m = 48 / 49); k <= 2n (3072 x 6144 / 6208 at m = 64); 32 tiles from
    // m = 65 (2048 x 8192 at m = 64 / 65); not at m <= 64 on n <= k with n k <= 3072^2 (3072 x
    // 3072 / 3136 and 3136 x 3072 at m = 64, 2560 x 2560 at m = 64 / 65). The 128-row tiles and
    // mma.sync: k <= 1024 at n m = 147456 (3072 x 768 at m = 48 / 49); longer k at n ceil(m / 64)
    // = 4096 (n = 4096 / 4097 on k = 14336 at m = 64).
    const struct {
        int64_t m, n, k;
        bool wgmma;
    } edges[] = {{48, 4096, 4096, false}, {49, 4096, 4096, true},  {64, 3072, 6144, true},
                 {64, 3072, 6208, false}, {64, 2048, 8192, false}, {65, 2048, 8192, true},
                 {64, 3072, 3072, false}, {64, 3072, 3136, true},  {64, 3136, 3072, true},
                 {64, 2560, 2560, false}, {65, 2560, 2560, true},  {48, 3072, 768, false},
                 {49, 3072, 768, true},   {64, 2560, 6912, false}, {64, 4096, 14336, false},
                 {64, 4097, 14336, true}};
    for (const auto& c : edges) {
        SCOPED_TRACE("n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                     " m=" + std::to_string(c.m));
        EXPECT_EQ(tern2_gemm_auto_kernel(c.m, c.n, c.k, c.k, 9, 0, 132),
                  sm90 && c.wgmma ? Tern2GemmVariant::kWgmma : Tern2GemmVariant::kMmaSync);
    }
}

// The wgmma kernel's tile (kernels/tern2_gemm_sm90_tile.h), pinned on the default benchmark
// shapes at m = 2048 on 132 SMs, where it was measured (H100, docs/BENCHMARKS.md session 23): 160
// tokens where 128 leave a third wave mostly idle (2560 x 2560: 320 tiles of 128 x 128, 260 of
// 128 x 160), 96 where 128 leave SMs idle in the only wave (768 x 768: 96 tiles against 132), 176
// on 6912 x 2560 (648 tiles, 5 waves, against 864 of 128 x 128), 256 on the Llama-8B shapes, 128
// on 3072 x 768; under stream-K the 128-token tiles (256 rows where they take half the waves of
// 128); below m = 256 those or 96 tokens (session 32: m = 32, 64 and 128); never 96 on long k; at
// m = 256, 96 tokens where 128 fill one wave with a third of the SMs idle or more, 256 on 14336
// rows; but from m = 49 to 256 the k-split tile (64 rows, 96 or 128 tokens) wherever it pays
// (session 35, KSplitTilePaysWhereItFillsOneWave).
TEST(Tern2GemmContract, WgmmaTileLeavesTheLeastWorkOnTheBusiestSm) {
    using trit::kernels::detail::tern2_gemm_sm90_tile;
    struct Case {
        int64_t m, n, k;
        bool wide;
        int tokens;
        bool ksplit;
    };
    const std::vector<Case> cases = {
        {2048, 2560, 2560, false, 160, false},  {2048, 2560, 6912, false, 160, false},
        {2048, 6912, 2560, false, 176, false},  {2048, 4096, 4096, false, 256, false},
        {2048, 14336, 4096, false, 256, false}, {2048, 4096, 14336, false, 256, false},
        {2048, 768, 768, false, 96, false},     {2048, 3072, 768, false, 128, false},
        {2048, 768, 3072, false, 96, false},    {2048, 768, 6144, false, 128, false},
        {256, 768, 768, false, 96, true},       {256, 14336, 4096, false, 256, false},
        {200, 14336, 4096, true, 128, false},   {200, 768, 768, false, 96, true},
        {512, 768, 6144, false, 128, false},    {64, 768, 768, false, 96, true},
        {32, 3072, 768, false, 96, false},      {128, 4096, 4096, false, 96, true},
        {64, 4096, 6912, false, 96, true},      {128, 2560, 6912, false, 128, true},
        {128, 14336, 4096, false, 128, false},  {200, 2560, 2560, false, 96, true},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                     " k=" + std::to_string(c.k));
        const auto t = tern2_gemm_sm90_tile(c.m, c.n, c.k, 132);
        EXPECT_EQ(t.wide, c.wide);
        EXPECT_EQ(t.tokens, c.tokens);
        EXPECT_EQ(t.ksplit, c.ksplit);
        // The 128-token tiles alone: the rule from before the other token counts (wide when it
        // takes at most half the waves of 128 rows).
        const auto t128 = trit::kernels::detail::tern2_gemm_sm90_tile_128(c.m, c.n, 132);
        const int64_t mt = (c.m + 127) / 128, sms = 132;
        EXPECT_EQ(t128.wide, 2 * ((mt * ((c.n + 255) / 256) + sms - 1) / sms) <=
                                 (mt * ((c.n + 127) / 128) + sms - 1) / sms);
        EXPECT_EQ(t128.tokens, 128);
    }
}

// The k-split tile's tokens (132 SMs): 128 where 96 would take more waves (4096 x 4096 at m = 256:
// 128 tiles of 64 x 128 in one wave against 192 of 64 x 96 in two) or at m = 97..128 on k > 4096
// (one token tile), else 96 (2560 x 2560 at m = 256: 120 tiles of 64 x 96 in one wave, or 80 of
// 64 x 128 in one).
TEST(Tern2GemmContract, KSplitTokensLeaveTheLeastWorkOnTheBusiestSm) {
    using trit::kernels::detail::tern2_gemm_sm90_ksplit_tokens;
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(256, 2560, 2560, 132), 96);
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(256, 4096, 4096, 132), 128);
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(96, 2560, 6912, 132), 96);
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(128, 4096, 4096, 132), 96);   // one wave either way
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(256, 8192, 2048, 132), 128);  // 2 waves against 3
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(128, 2560, 6912, 132), 128);  // k > 4096
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(97, 2560, 4160, 132), 128);
    EXPECT_EQ(tern2_gemm_sm90_ksplit_tokens(129, 2560, 6912, 132), 96);
    const trit::kernels::detail::Tern2GemmSm90Tile t{false, 96, true};
    EXPECT_EQ(t.rows(), 64);
}

// Where auto takes the k-split tile (kernels/tern2_gemm_sm90_tile.h, 132 SMs): m = 49 .. 256; its
// tiles in one wave (96 tokens at m = 96: 132 tiles of 64 rows is 8448 rows, 8449 is 133; at
// m = 192, 2 x 66 tiles, 4224 rows); k <= 2n (768 x 1536 / 1537 at m = 64), or from m = 65 at
// least 32 tiles (1984 / 2048 rows at k = 8192, m = 96; at m = 64, 2048 x 8192 does not) with
// k <= 8192 up to m = 128 (4096 x 8192 / 8256 at m = 128; 8256 at m = 129).
TEST(Tern2GemmContract, KSplitTilePaysWhereItFillsOneWave) {
    using trit::kernels::detail::tern2_gemm_sm90_ksplit_pays;
    using trit::kernels::detail::tern2_gemm_sm90_tile;
    const struct {
        int64_t m, n, k;
        bool ksplit;
    } cases[] = {{48, 2560, 2560, false},  {49, 2560, 2560, true},   {256, 2560, 2560, true},
                 {257, 2560, 2560, false}, {96, 8448, 2048, true},   {96, 8449, 2048, false},
                 {192, 4224, 1024, true},  {192, 4225, 1024, false}, {64, 768, 1536, true},
                 {64, 768, 1537, false},   {96, 1984, 8192, false},  {96, 2048, 8192, true},
                 {64, 2048, 8192, false},  {96, 768, 3072, false},   {256, 768, 3072, true},
                 {128, 4096, 8192, true},  {128, 4096, 8256, false}, {129, 4096, 8256, true}};
    for (const auto& c : cases) {
        SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                     " k=" + std::to_string(c.k));
        EXPECT_EQ(tern2_gemm_sm90_ksplit_pays(c.m, c.n, c.k, 132), c.ksplit);
        EXPECT_EQ(tern2_gemm_sm90_tile(c.m, c.n, c.k, 132).ksplit, c.ksplit);
        if (c.ksplit) {
            EXPECT_EQ(tern2_gemm_sm90_tile(c.m, c.n, c.k, 132).rows(), 64);
        }
    }
    // Fewer SMs, fewer tiles in a wave: 2560 x 2560 at m = 96 is 40 tiles.
    EXPECT_TRUE(tern2_gemm_sm90_ksplit_pays(96, 2560, 2560, 40));
    EXPECT_FALSE(tern2_gemm_sm90_ksplit_pays(96, 2560, 2560, 39));
}

TEST(Tern2GemmContract, ForcedTokensPerTileAreChecked) {
    EXPECT_EQ(trit::kernels::tern2_gemm_tokens(), 0);
    for (const int bad : {64, 127, 192, -1}) {
        try {
            trit::kernels::set_tern2_gemm_tokens(bad);
            ADD_FAILURE() << "expected trit::Error for " << bad;
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), HasSubstr("must be 0 (its own choice), 96, 128, 160, 176 or 256, "
                                            "got " + std::to_string(bad)));
        }
    }
    EXPECT_EQ(trit::kernels::tern2_gemm_tokens(), 0);
    {
        const trit::kernels::ScopedTern2GemmTokens forced(160);
        EXPECT_EQ(trit::kernels::tern2_gemm_tokens(), 160);
    }
    EXPECT_EQ(trit::kernels::tern2_gemm_tokens(), 0);
}

TEST(Tern2GemmContract, ChoosePathPicksTheGemmForManyTokens) {
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(tern2_weights(2560, 2560), g_x, 2048, 2560, &why),
              ProductPath::kGemm)
        << why;
    EXPECT_THAT(why, HasSubstr("gemm"));
    EXPECT_EQ(trit::kernels::choose_path(tern2_weights(4096, 4096), g_x, 9, 128, &why),
              ProductPath::kGemm)
        << why;
    // Off the contract: the generic kernel, and the reason names the rule.
    EXPECT_EQ(trit::kernels::choose_path(tern2_weights(64, 100), g_x, 256, 100, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("k must be a multiple of 64"));
    EXPECT_EQ(trit::kernels::choose_path(tern2_weights(64, 256), g_x + 1, 256, 256, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("16-byte aligned"));
    // Few tokens are not the GEMM's (the table sends m <= 8 elsewhere).
    EXPECT_NE(trit::kernels::choose_path(tern2_weights(2560, 2560), g_x, 8, 2560, &why),
              ProductPath::kGemm);
}

}  // namespace
