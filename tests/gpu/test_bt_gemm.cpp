// GPU tests of the bt GEMM (kernels/bt_gemm.h): the trit planes built on the GPU from the bt bytes
// equal the CPU's from the codes; int32 accumulators and fused-epilogue y bit-exact against the CPU
// references for d = 1..4 over a shape table that reaches every tile of the mma.sync kernel (m <=
// 16, <= 256, above; with several groups the 16-row tiles above 16 tokens too), split and unsplit
// k (with several groups on the 16-row tiles: 2, 4 and 8 splits), one group and groups of 64, 128
// and 192 (a partial last group), m and n off the tiles; x at the int8 extremes with d = 4; auto
// dispatch from 2 tokens where the planes are given; and the host-side contract, each rule broken
// once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "exporters/pack.h"
#include "kernels/bt_gemm.h"
#include "kernels/product.h"
#include "kernels/tern2_gemm.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::DeviceBuffer;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;

class BtGemm : public trit::gputest::RequiresGpu<::testing::Test> {};

struct Shape {
    int64_t m, n, k, group;
};

// m over the tiles' edges (2, 3, 5, 9, 16 | 17, 64, 100, 256 | 257, 300), n odd and small and up to
// 2560, k from one chunk to 2560, one group (group = k, group > k) and groups of 64, 128 and 192
// (192 on k = 448 and 640: a partial last group). Grouped calls run the 16-row tiles on small grids
// (all but the two of n = 2560 here), and there k splits over a cluster in whole units of
// lcm(group, 128) columns on sm_90: 2 splits on (16, 3, 192, 64), (9, 257, 448, 192) (units of 384
// columns, the last one partial) and (100, 130, 192, 64), 4 on (12, 40, 512, 64), 8 on (16, 130,
// 2560, 128); (300, 2560, 448, 192) and (300, 2560, 256, 64) run the (64, 64) tile
// (PlansTilesAndSplitsByTheGrid checks these plans).
const std::vector<Shape> kShapes = {
    {9, 1, 64, 64},       {16, 3, 192, 64},      {17, 17, 256, 256},   {33, 130, 2560, 2560},
    {64, 64, 256, 1000},  {100, 130, 192, 64},   {256, 17, 2560, 128}, {257, 3, 64, 64},
    {300, 130, 2560, 64}, {16, 130, 2560, 128},  {9, 257, 448, 192},   {33, 1, 2560, 4096},
    {300, 200, 768, 768}, {17, 130, 640, 192},   {16, 2560, 256, 256}, {300, 256, 1024, 1024},
    {12, 40, 512, 64},    {300, 2560, 448, 192}, {300, 2560, 256, 64}, {2, 130, 2560, 64},
    {5, 257, 448, 192},   {3, 40, 512, 1024},
};

// A case of the tables: bt of `depth` with its planes, scales per tensor or per row and a bias or
// none by the seed.
ProductCase table_case(int depth, const Shape& s, uint64_t seed) {
    ProductCase c;
    c.format = Format::kBt;
    c.depth = depth;
    c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
    c.seed = seed;
    c.planes = true;
    c.per_tensor_scale = seed % 2 == 0;
    c.bias = seed % 3 != 0;
    return c;
}

TEST_F(BtGemm, MatchesTheReferenceForEveryDepthOverTheShapeTable) {
    uint64_t seed = 900;
    for (int depth = 1; depth <= 4; ++depth)
        for (const Shape& s : kShapes) {
            ProductCase c = table_case(depth, s, ++seed);
            c.half_scales = seed % 4 == 1;
            trit::gputest::check_product_case(c, ProductPath::kGemm);
            trit::gputest::check_product_case(c, trit::kernels::bt_gemm);
        }
}

// The sm_90a wgmma kernel on the planes (forced; auto takes it where bt_gemm_wgmma_pays): one
// group (acc and y) and groups of 64, 128, 192 and 256 (y only: the kernel folds each group's
// sums), d = 1..4, m and n off its (128, 128) tile, n off multiples of 4, k off its 128-column
// k-tile, more tiles than SMs ({1100, 4100, 320, 64}).
TEST_F(BtGemm, WgmmaKernelMatchesTheReference) {
    if (!trit::gputest::device_is_sm90())
        GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    const trit::kernels::ScopedTern2GemmVariant scope(trit::kernels::Tern2GemmVariant::kWgmma);
    const std::vector<Shape> shapes = {
        {9, 1, 128, 64},       {17, 130, 192, 64},    {100, 130, 448, 192}, {128, 128, 320, 320},
        {129, 257, 2560, 128}, {300, 130, 1024, 256}, {256, 200, 768, 64},  {2048, 768, 768, 64},
        {300, 64, 2560, 4096}, {1100, 4100, 320, 64},
    };
    uint64_t seed = 2900;
    for (int depth = 1; depth <= 4; ++depth)
        for (const Shape& s : shapes) {
            ProductCase c = table_case(depth, s, ++seed);
            c.y_only = s.group < s.k;
            // The scales' fp16 copy (each fold's term one FFMA) on half the cases.
            c.half_scales = (seed / 2) % 2 == 1;
            trit::gputest::check_product_case(c, trit::kernels::bt_gemm);
        }
    // x at the int8 extremes with d = 4: groups of 64 and 512 (sums up to 128 * 512 * 40 < 2^22,
    // the fold's exact range) and one group of 4096, with and without the fp16 scales.
    for (const auto& [lo, hi] :
         std::vector<std::pair<int, int>>{{-128, -128}, {127, 127}, {-128, 127}})
        for (int64_t group : {int64_t{64}, int64_t{512}, int64_t{4096}})
            for (const bool half : {false, true}) {
                ProductCase c;
                c.format = Format::kBt;
                c.depth = 4;
                c.m = 300, c.n = 130, c.k = 4096, c.group = group;
                c.x_lo = lo, c.x_hi = hi;
                c.planes = true;
                c.seed = 3001 + static_cast<uint64_t>(lo + 200 + group);
                c.y_only = group < c.k;
                c.half_scales = half;
                trit::gputest::check_product_case(c, trit::kernels::bt_gemm);
            }
}

// The auto rule between the two GEMM kernels (host only, runs without a GPU), on 132 SMs: the
// wgmma kernel at 128 tokens where its (128, 128) tiles fill half the SMs or more, above 128
// where they number 30 % of them, as measured (docs/BENCHMARKS.md, sessions 52 and 53).
TEST(BtGemmDispatch, TakesTheWgmmaKernelWhereItsTilesFillEnoughSms) {
    using trit::kernels::bt_gemm_wgmma_pays;
    EXPECT_TRUE(bt_gemm_wgmma_pays(2048, 768, 768, 64, 132));  // 96 tiles
    EXPECT_TRUE(bt_gemm_wgmma_pays(2048, 2560, 2560, 64, 132));
    EXPECT_TRUE(bt_gemm_wgmma_pays(128, 14336, 4096, 64, 132));  // 112 tiles
    EXPECT_TRUE(bt_gemm_wgmma_pays(256, 6912, 2560, 64, 132));   // 108 tiles
    EXPECT_TRUE(bt_gemm_wgmma_pays(256, 2560, 2560, 64, 132));   // 40 tiles: 30 % of 132
    EXPECT_TRUE(bt_gemm_wgmma_pays(129, 2560, 2560, 64, 132));   // two token tiles
    EXPECT_FALSE(bt_gemm_wgmma_pays(256, 2432, 2560, 64, 132));  // 38 tiles
    EXPECT_FALSE(bt_gemm_wgmma_pays(64, 14336, 4096, 64, 132));  // below 128 tokens
    EXPECT_FALSE(bt_gemm_wgmma_pays(256, 768, 3072, 64, 132));   // 12 tiles
    EXPECT_FALSE(bt_gemm_wgmma_pays(128, 6912, 2560, 64, 132));  // 54 tiles at 128 tokens
    EXPECT_TRUE(bt_gemm_wgmma_pays(128, 6912, 2560, 64, 108));   // 54 of 108 SMs
}

// The forced wgmma kernel refuses, naming the rule, what it cannot run: several groups into acc,
// and groups whose sums could reach 2^22 (bt4, groups of 1024: 1024 * 128 * 40).
TEST_F(BtGemm, ForcedWgmmaRefusesWhatItCannotRun) {
    if (!trit::gputest::device_is_sm90())
        GTEST_SKIP() << "the wgmma kernel needs compute capability 9.0";
    const trit::kernels::ScopedTern2GemmVariant scope(trit::kernels::Tern2GemmVariant::kWgmma);
    DeviceBuffer<uint8_t> planes(std::vector<uint8_t>(4 * 64 * 2048 / 4, 0));
    DeviceBuffer<int8_t> x(std::vector<int8_t>(300 * 2048, 1));
    DeviceBuffer<float> y(300 * 64), scales(64 * 2048 / 64);
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = 4;
    w.a = planes.get();
    w.planes = planes.get();
    w.n = 64;
    w.k = 2048;
    const auto expect_refusal = [&](int64_t group, const trit::kernels::ProductOut& out,
                                    const std::string& rule) {
        try {
            trit::kernels::bt_gemm(w, x.get(), 300, group, out, nullptr);
            ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), HasSubstr("m=300"));
            EXPECT_THAT(e.what(), HasSubstr("group=" + std::to_string(group)));
            EXPECT_THAT(e.what(), HasSubstr(rule));
        }
    };
    DeviceBuffer<int32_t> acc(300 * 64 * 32);
    trit::kernels::ProductOut acc_out;
    acc_out.acc = acc.get();
    expect_refusal(64, acc_out, "write y only");
    trit::kernels::ProductOut y_out;
    y_out.y = y.get();
    y_out.w_scale = scales.get();
    y_out.x_scale = scales.get();
    expect_refusal(1024, y_out, "2^22");
}

// x at the int8 extremes only: with d = 4 (|code| <= 40) the bytes the fragments rebuild reach
// their largest magnitudes, and one group of 4096 columns the largest sums.
TEST_F(BtGemm, TakesTheFullInt8Range) {
    for (const auto& [lo, hi] :
         std::vector<std::pair<int, int>>{{-128, -127}, {126, 127}, {-128, 127}})
        for (int depth : {2, 4})
            for (int64_t group : {int64_t{64}, int64_t{4096}}) {
                ProductCase c;
                c.format = Format::kBt;
                c.depth = depth;
                c.m = 40, c.n = 33, c.k = 4096, c.group = group;
                c.x_lo = lo, c.x_hi = hi;
                c.planes = true;
                c.seed = 191 + static_cast<uint64_t>(hi) + depth;
                trit::gputest::check_product_case(c, ProductPath::kGemm);
            }
}

// Auto dispatch on the GPU: the GEMM's results through product() at 2, 5, 9, 64 and 300 tokens.
TEST_F(BtGemm, AutoDispatchRunsItFromTwoTokensWithThePlanes) {
    for (int64_t m : {int64_t{2}, int64_t{5}, int64_t{9}, int64_t{64}, int64_t{300}}) {
        ProductCase c;
        c.format = Format::kBt;
        c.depth = 2;
        c.m = m, c.n = 130, c.k = 2560, c.group = 64;
        c.planes = true;
        c.seed = 7 + static_cast<uint64_t>(m);
        trit::gputest::check_product_case(c, ProductPath::kAuto);
    }
}

// The dispatch rule (host only, runs without a GPU): from 2 tokens the GEMM where the planes are
// given, but at m = 2 with several scale groups for k > 8192; m = 1 and calls without the planes
// the GEMV (over chunks of 8 above 8 tokens).
TEST(BtGemmDispatch, TakesTheGemmFromTwoTokensWithThePlanes) {
    alignas(16) static const uint8_t bytes[16] = {};
    alignas(16) static const int8_t x[16] = {};
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = 2;
    w.a = bytes;
    w.n = 2560;
    w.k = 2560;
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 16, 64, &why), ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 64, &why), ProductPath::kGemv) << why;
    EXPECT_THAT(trit::kernels::bt_gemm_rejects(w, x, 16, 64), HasSubstr("needs the trit planes"));
    w.planes = bytes;
    for (int64_t m : {2, 3, 8, 9, 16, 300}) {
        EXPECT_EQ(trit::kernels::choose_path(w, x, m, 64, &why), ProductPath::kGemm)
            << "m=" << m << ": " << why;
        EXPECT_THAT(why, HasSubstr("gemm: m in [2, inf]"));
    }
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 64, &why), ProductPath::kGemv) << why;
    w.k = 14336;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 64, &why), ProductPath::kGemv) << why;
    EXPECT_THAT(trit::kernels::bt_gemm_dispatch_rejects(w, x, 2, 64),
                HasSubstr("at m = 2 with several scale groups the GEMV for k > 8192"));
    EXPECT_TRUE(trit::kernels::bt_gemm_rejects(w, x, 2, 64).empty());  // bt_gemm itself takes it
    EXPECT_EQ(trit::kernels::choose_path(w, x, 3, 64, &why), ProductPath::kGemm) << why;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 14336, &why), ProductPath::kGemm) << why;
    w.k = 8192;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 64, &why), ProductPath::kGemm) << why;
}

// bt_gemm_plan: grouped calls run 16-row tiles to 16 tokens and above it where the (64, 64)
// tile's grid is small (2560 x 2560 at 64 tokens: 40 CTAs), (64, 64) on large grids; the 16-row
// tiles of the shape table split k over 2, 4 and 8 CTAs on sm_90 (none below it, which has no
// clusters) where their grid is small, also above 16 tokens; 448 tiles of (16, 32) fill the GPU
// unsplit; one group splits where the tiles leave SMs idle.
TEST_F(BtGemm, PlansTilesAndSplitsByTheGrid) {
    alignas(16) static const uint8_t bytes[16] = {};
    alignas(16) static const int8_t x[16] = {};
    alignas(16) static float y[4] = {}, scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = 2;
    w.a = bytes;
    w.planes = bytes;
    trit::kernels::ProductOut out;
    out.y = y;
    out.w_scale = scale;
    out.x_scale = scale;
    int device = 0, major = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
              cudaSuccess);
    const int on_sm90 = major >= 9 ? 1 : 0;
    const auto plan = [&](int64_t m, int64_t n, int64_t k, int64_t group) {
        w.n = n;
        w.k = k;
        const trit::kernels::BtGemmPlan p = trit::kernels::bt_gemm_plan(w, x, m, group, out);
        return std::to_string(p.tile_m) + "x" + std::to_string(p.tile_n) + "/" +
               std::to_string(p.splits) + (p.wgmma ? " wgmma" : "");
    };
    const auto split = [&](int s) { return std::to_string(on_sm90 ? s : 1); };
    EXPECT_EQ(plan(16, 3, 192, 64), "16x32/" + split(2));
    EXPECT_EQ(plan(9, 257, 448, 192), "16x32/" + split(2));
    EXPECT_EQ(plan(12, 40, 512, 64), "16x32/" + split(4));
    EXPECT_EQ(plan(16, 130, 2560, 128), "16x32/" + split(8));
    EXPECT_EQ(plan(17, 130, 2560, 128), "16x32/" + split(8));
    EXPECT_EQ(plan(16, 14336, 4096, 64), "16x32/1");
    EXPECT_EQ(plan(16, 130, 2560, 2560), "16x128/" + split(8));  // one group
    EXPECT_EQ(plan(100, 130, 192, 64), "16x32/" + split(2));
    // From here on a 9.0 device runs the wgmma kernel where bt_gemm_wgmma_pays.
    const bool wgmma = trit::gputest::device_is_sm90();
    EXPECT_EQ(plan(300, 2560, 448, 192), wgmma ? "128x128/1 wgmma" : "64x64/1");  // 60 tiles
    EXPECT_EQ(plan(300, 2560, 256, 64), wgmma ? "128x128/1 wgmma" : "64x64/1");
    EXPECT_EQ(plan(64, 2560, 2560, 64), "16x32/1");  // 320 tiles of (16, 32) against 40 of (64, 64)
    EXPECT_EQ(plan(64, 14336, 4096, 64), "64x64/1");
    EXPECT_EQ(plan(2048, 2560, 2560, 64), wgmma ? "128x128/1 wgmma" : "64x64/1");
    EXPECT_EQ(plan(2048, 2560, 2560, 2560), wgmma ? "128x128/1 wgmma" : "128x128/1");
    if (wgmma) {
        EXPECT_EQ(plan(128, 14336, 4096, 64), "128x128/1 wgmma");  // 112 tiles
    }
    EXPECT_THROW(plan(16, 130, 2560, 100),
                 trit::Error);  // group % 64 != 0: named as bt_gemm does
}

// bt_to_planes (GPU, from the bt bytes) against bt_planes_pack (CPU, from the codes), every depth,
// k with every tail length k % 5 and k % 4.
TEST_F(BtGemm, PlanesFromTheBtBytesEqualThePlanesOfTheCodes) {
    for (int depth = 1; depth <= 4; ++depth)
        for (int64_t k :
             {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{65}, int64_t{784}, int64_t{1001}}) {
            SCOPED_TRACE("depth " + std::to_string(depth) + " k " + std::to_string(k));
            const int64_t n = 37;
            const int levels = trit::formats::bt_levels(depth);
            std::vector<int8_t> codes(static_cast<size_t>(n * k));
            for (size_t i = 0; i < codes.size(); ++i)
                codes[i] = static_cast<int8_t>(static_cast<int>((i * 7919 + k) % (2 * levels + 1)) -
                                               levels);
            const trit::exporters::FormatId id{trit::exporters::WeightFormat::kBt,
                                               static_cast<uint32_t>(depth)};
            const trit::exporters::Arrays packed =
                trit::exporters::pack_codes(id, codes.data(), n, k);
            std::vector<uint8_t> want(
                static_cast<size_t>(trit::kernels::bt_planes_bytes(depth, n, k)));
            trit::kernels::bt_planes_pack(codes.data(), depth, n, k, want.data());
            DeviceBuffer<uint8_t> d_bt(packed[0]), d_planes(want.size());
            d_planes.poison();
            trit::kernels::bt_to_planes(d_bt.get(), depth, n, k, d_planes.get(), nullptr);
            EXPECT_EQ(d_planes.download(), want);
        }
}

TEST(BtPlanes, PackRejectsCodesOutOfRangeAndBadDepths) {
    const int8_t codes[4] = {0, 4, -5, 1};
    uint8_t out[4];
    try {
        trit::kernels::bt_planes_pack(codes, 2, 1, 4, out);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("code -5 at row 0, column 2 is outside [-4, 4]"));
    }
    EXPECT_THROW(trit::kernels::bt_planes_pack(codes, 5, 1, 4, out), trit::Error);
    EXPECT_THROW(trit::kernels::bt_to_planes(nullptr, 2, 1, 4, out, nullptr), trit::Error);
    EXPECT_THROW(trit::kernels::bt_to_planes(out, 0, 1, 4, out, nullptr), trit::Error);
}

alignas(16) uint8_t g_bytes[64];
alignas(16) int8_t g_x[64];

PackedWeights bt_weights(int64_t n, int64_t k, const uint8_t* planes = g_bytes) {
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = 2;
    w.a = g_bytes;
    w.planes = planes;
    w.n = n;
    w.k = k;
    return w;
}

void expect_gemm_error(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                       const std::string& rule) {
    SCOPED_TRACE(rule);
    EXPECT_THAT(trit::kernels::bt_gemm_rejects(w, x, m, group), HasSubstr(rule));
    static int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::product(w, x, m, group, out, nullptr, ProductPath::kGemm);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("bt_gemm"));
        EXPECT_THAT(e.what(), HasSubstr(rule));
        EXPECT_THAT(e.what(), HasSubstr("m=" + std::to_string(m)));
        EXPECT_THAT(e.what(), HasSubstr("n=" + std::to_string(w.n)));
        EXPECT_THAT(e.what(), HasSubstr("k=" + std::to_string(w.k)));
        EXPECT_THAT(e.what(), HasSubstr("group=" + std::to_string(group)));
    }
}

TEST(BtGemmContract, RejectsEveryBrokenRuleNamingTheShape) {
    expect_gemm_error(bt_weights(64, 256, nullptr), g_x, 64, 64, "needs the trit planes");
    expect_gemm_error(bt_weights(64, 100), g_x, 64, 100, "k must be a multiple of 64");
    expect_gemm_error(bt_weights(64, 784), g_x, 64, 64, "k must be a multiple of 64");
    expect_gemm_error(bt_weights(64, 256), g_x + 1, 64, 64, "16-byte aligned");
    expect_gemm_error(bt_weights(64, 256, g_bytes + 4), g_x, 64, 64, "16-byte aligned");
    expect_gemm_error(bt_weights(64, 256), g_x, 64, 100, "group must be >= k or a multiple of 64");
    expect_gemm_error(bt_weights(64, 256), g_x, 64, 40, "group must be >= k or a multiple of 64");
    expect_gemm_error(bt_weights(2, 64), g_x, int64_t{1} << 31, 64, "m must be <= 2147483647");
    expect_gemm_error(bt_weights(4194241, 64), g_x, 16, 64, "n must be <= 4194240");
}

}  // namespace
