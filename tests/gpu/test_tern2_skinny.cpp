// GPU tests of the streaming tensor-core tern2 kernel for m <= 48 (kernels/tern2_skinny.h): int32
// accumulators and fused epilogue bit-exact against the CPU references over a shape table (m = 1,
// 2, 3, 8 (one token group of 8), 9 and 16 (two), 17, 24, 31 and 32 (four), 33, 40, 47 and 48
// (six, k <= 3072); n = 1, odd, partial
// 16-row tiles, and so many tiles that a cluster runs several rounds and rotates its three
// buffers; k from one 64-column piece, off the 256-column k-block, one CTA (k <= 4096) and
// clusters of 2 to 8 CTAs of 16 or 8 warps with a shorter last rank, at the edges of the 8-warp
// range 8192 < k <= 14336, among them 4096 x 14336 at m = 16 and 5000 x 14336 at m = 5, whose
// 8-warp clusters run one round and two), with and without the early reads of PDL, x at -128,
// outputs off 16-byte alignment, through the dispatcher's gemv path, and its contract rules, CTA
// geometry and clusters per call on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_skinny.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

class Tern2Skinny : public trit::gputest::RequiresGpu<::testing::Test> {
protected:
    // Clusters (k > 4096) need a 9.0 device.
    static bool clusters() {
        int device = 0, major = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        return major >= 9;
    }
};

TEST_F(Tern2Skinny, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k;
    };
    const std::vector<Shape> shapes = {
        {1, 1, 64},       {2, 1, 256},      {3, 17, 320},      {8, 33, 768},     {9, 16, 1024},
        {16, 40, 2560},   {2, 130, 4096},   {16, 7, 4096},     {5, 31, 4160},    {16, 65, 6912},
        {2, 48, 14336},   {12, 3, 14336},   {16, 20, 32768},   {9, 9, 16448},    {4, 200000, 64},
        {16, 30001, 256}, {8, 2049, 2560},  {9, 20000, 4160},  {1, 2560, 2560},  {16, 4, 192},
        {17, 1, 64},      {32, 40, 2560},   {24, 33, 768},     {31, 65, 6912},   {32, 7, 4096},
        {25, 20, 32768},  {32, 30001, 256}, {17, 20000, 4160}, {32, 2049, 2560}, {32, 48, 14336},
        {16, 50, 8192},   {16, 50, 8256},   {3, 4100, 8256},   {16, 33, 14336},  {16, 9, 14400},
        {24, 70, 11008},  {8, 3000, 11008}, {16, 4096, 14336}, {5, 5000, 14336}, {16, 3072, 768},
        {2, 3072, 768},   {8, 2560, 2560},  {33, 40, 2560},    {48, 17, 3072},   {48, 7, 64},
        {48, 2049, 2560}, {40, 30001, 256}, {47, 65, 1024},    {48, 160, 3072},  {41, 3, 768},
    };
    uint64_t seed = 500;
    for (const Shape& s : shapes) {
        if (trit::kernels::tern2_skinny_needs_cluster(s.k) && !clusters()) continue;
        ProductCase c;
        c.format = Format::kTern2;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.k + (seed % 2 == 0 ? 0 : 1000);
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern2_skinny);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2Skinny, ExtremeCodesAndXStayExact) {
    for (int64_t k : {int64_t{3072}, int64_t{4096}, int64_t{32768}}) {
        for (int64_t m : {16, 32, 48}) {
            if (m > 32 && k > 3072) continue;
            if (trit::kernels::tern2_skinny_needs_cluster(k) && !clusters()) continue;
            ProductCase c;
            c.format = Format::kTern2;
            c.m = m, c.n = 37, c.k = k, c.group = k;
            c.x_lo = -128, c.x_hi = -128;  // |acc| up to 128 * 32768 = 2^22
            SCOPED_TRACE(trit::gputest::describe(c));
            trit::gputest::check_product_case(c, trit::kernels::tern2_skinny);
        }
    }
}

// The epilogue loads four rows' w scales and biases and stores four rows of a token at once where
// n % 4 = 0 and they are 16-byte aligned; otherwise (n % 4 != 0, or the buffers off by 1..3
// elements) one row at a time.
TEST_F(Tern2Skinny, OutputsOffSixteenByteAlignmentStayExact) {
    for (int64_t offset : {1, 2, 3}) {
        for (int64_t n : {64, 68, 70}) {
            ProductCase c;
            c.format = Format::kTern2;
            // one, two and four token groups; the last a cluster of two CTAs
            c.m = offset == 1 ? 6 : (offset == 2 ? 16 : 32);
            c.k = offset == 3 && clusters() ? 6912 : 1024;
            c.n = n, c.group = c.k;
            c.out_offset = offset;
            c.seed = 70 + static_cast<uint64_t>(offset * n);
            SCOPED_TRACE(trit::gputest::describe(c));
            trit::gputest::check_product_case(c, trit::kernels::tern2_skinny);
        }
    }
}

TEST_F(Tern2Skinny, TheGemvPathRunsItForTwoToFortyEightTokens) {
    for (int64_t m : {2, 7, 16, 17, 32, 33, 48}) {
        ProductCase c;
        c.format = Format::kTern2;
        // m > 32: k <= 3072, and dispatch runs it there where n >= 5 k / 4 (n off the 16-row
        // tiles).
        c.k = m > 32 ? 3072 : 14336;
        c.m = m, c.n = m > 32 ? 6152 : 2056, c.group = c.k;
        c.seed = 40 + static_cast<uint64_t>(m);
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, ProductPath::kAuto);
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

TEST(Tern2SkinnyContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_skinny_rejects;
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 4096, codes), x, 16, 4096), "");
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 32768, codes), x, 1, 1 << 20), "");
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 4096, codes), x, 32, 4096), "");
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 3072, codes), x, 48, 3072), "");
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 3136, codes), x, 33, 3136),
                HasSubstr("m > 32 needs k <= 3072"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 3072, codes), x, 49, 3072),
                HasSubstr("m must be in 1..48"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 100, codes), x, 2, 100), HasSubstr("k must be a multiple of 64"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 32832, codes), x, 2, 32832), HasSubstr("k must be <= 32768"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 4096, codes), x, 2, 2048), HasSubstr("one scale group"));
    using trit::kernels::kTern2SkinnyMaxN;
    EXPECT_EQ(tern2_skinny_rejects(tern2(kTern2SkinnyMaxN, 64, codes), x, 2, 64), "");
    EXPECT_THAT(tern2_skinny_rejects(tern2(kTern2SkinnyMaxN + 1, 64, codes), x, 2, 64),
                HasSubstr("n must be at most 2^35 - 16"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 256, codes + 1), x, 2, 256), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 256, codes), x + 4, 2, 256), HasSubstr("16-byte aligned"));
    EXPECT_FALSE(trit::kernels::tern2_skinny_needs_cluster(4096));
    EXPECT_TRUE(trit::kernels::tern2_skinny_needs_cluster(4160));

    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::tern2_skinny(tern2(4, 4096, codes), x, 3, 1024, out, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern2_skinny (m=3, n=4, k=4096, group=1024): one scale group only"));
    }
}

TEST(Tern2SkinnyContract, CtaGeometryByKAndM) {
    // {k, m, CTAs per cluster, warps per CTA}: 16-warp CTAs, but 8-warp ones (two per SM) for
    // 8192 < k <= 14336 at m <= 16; the last rank may hold fewer k-blocks than the others.
    const int64_t table[][4] = {
        {64, 1, 1, 1},      {4096, 16, 1, 16},  {4160, 2, 2, 9},    {8192, 16, 2, 16},
        {8256, 16, 5, 7},   {8256, 17, 3, 11},  {11008, 2, 6, 8},   {14336, 16, 7, 8},
        {14336, 32, 4, 14}, {14400, 1, 4, 15},  {16384, 16, 4, 16}, {32768, 8, 8, 16}};
    for (const auto& row : table) {
        const auto geo = trit::kernels::tern2_skinny_geometry(row[0], row[1]);
        EXPECT_EQ(geo.cluster, row[2]) << "k = " << row[0] << ", m = " << row[1];
        EXPECT_EQ(geo.warps, row[3]) << "k = " << row[0] << ", m = " << row[1];
    }
}

TEST(Tern2SkinnyContract, ClustersPerCallByTilesAndResidency) {
    // {tiles, resident clusters, SMs, CTAs per cluster, m, clusters launched}: at most one CTA
    // covering all of k per SM above m = 2; as few clusters as keep the busiest at <= 2 tiles;
    // two tiles a CTA where one would take >= 7/8 of the SMs (116 of 132) and two fit on them.
    const int64_t table[][6] = {
        {160, 132, 132, 1, 16, 80}, {192, 660, 132, 1, 16, 96}, {192, 660, 132, 1, 2, 96},
        {48, 132, 132, 1, 16, 48},  {256, 132, 132, 1, 16, 128}, {896, 132, 132, 1, 2, 132},
        {432, 132, 132, 1, 16, 132}, {256, 37, 132, 7, 16, 37},  {60, 37, 132, 7, 16, 30},
        {1, 1, 1, 1, 1, 1},         {128, 132, 132, 1, 16, 64},  {116, 132, 132, 1, 4, 58},
        {115, 132, 132, 1, 4, 115}, {96, 132, 132, 1, 16, 96},   {256, 264, 132, 1, 2, 128},
        {264, 264, 132, 1, 1, 132}, {265, 528, 132, 1, 2, 265},  {128, 132, 132, 2, 16, 128},
        {1, 1, 1, 1, 16, 1}};
    for (const auto& row : table) {
        EXPECT_EQ(trit::kernels::tern2_skinny_clusters(row[0], row[1], row[2], static_cast<int>(row[3]), row[4]),
                  row[5])
            << "tiles " << row[0] << ", resident " << row[1] << ", SMs " << row[2] << ", cluster "
            << row[3] << ", m " << row[4];
    }
    try {
        trit::kernels::tern2_skinny_clusters(0, 132, 132, 1, 16);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tiles, resident clusters, SMs and cluster size must be >= 1 (got 0, 132, 132, 1)"));
    }
}

TEST(Tern2SkinnyContract, RoundTilesCoverTheBusiestClusterWhereTheyCan) {
    using trit::kernels::tern2_skinny_round_tiles;
    // {tiles the busiest cluster walks, CTAs per cluster, warps, largest round, round}: the
    // smallest divisor of 2 C W that covers them, else the largest within the limit.
    const int table[][5] = {
        {1, 1, 16, 8, 1}, {2, 1, 10, 8, 2}, {3, 1, 16, 8, 4}, {3, 1, 10, 8, 4},  {4, 1, 10, 8, 4},
        {5, 1, 10, 8, 5}, {6, 1, 10, 8, 5}, {7, 1, 8, 8, 8},  {20, 1, 16, 8, 8}, {20, 1, 12, 8, 8},
        {3, 7, 8, 8, 4},  {2, 1, 9, 8, 2},  {2, 1, 1, 8, 2},  {3, 1, 1, 8, 2},   {9, 8, 16, 8, 8}};
    for (const auto& row : table) {
        EXPECT_EQ(tern2_skinny_round_tiles(row[0], row[1], row[2], row[3]), row[4])
            << "tiles " << row[0] << ", cluster " << row[1] << ", warps " << row[2] << ", at most "
            << row[3];
    }
    try {
        tern2_skinny_round_tiles(0, 1, 16, 8);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(
            e.what(),
            HasSubstr("tiles, cluster size, warps and round size must be >= 1 (got 0, 1, 16, 8)"));
    }
}

TEST(Tern2SkinnyContract, NextCallLaunchedLateButWhereEightWarpCtasOutnumberTheSms) {
    using trit::kernels::tern2_skinny_launches_late;
    constexpr int64_t kSms = 132;
    EXPECT_TRUE(tern2_skinny_launches_late(80, 1, 10, kSms));     // 2560 x 2560, m = 16
    EXPECT_TRUE(tern2_skinny_launches_late(132, 1, 16, kSms));    // 14336 x 4096: as many CTAs as SMs
    EXPECT_TRUE(tern2_skinny_launches_late(192, 1, 3, kSms));     // 3072 x 768, m = 2: 3-warp CTAs
    EXPECT_TRUE(tern2_skinny_launches_late(160, 1, 7, kSms));     // under 8 warps
    EXPECT_FALSE(tern2_skinny_launches_late(160, 1, 8, kSms));    // 2560 x 2048, m <= 2
    EXPECT_FALSE(tern2_skinny_launches_late(133, 1, 16, kSms));   // one CTA more than the SMs
    EXPECT_TRUE(tern2_skinny_launches_late(160, 1, 8, 2 * kSms));
    EXPECT_TRUE(tern2_skinny_launches_late(259, 7, 8, kSms));     // 4096 x 14336: clusters of 7
    try {
        tern2_skinny_launches_late(0, 1, 8, kSms);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("CTAs, cluster size, warps and SMs must be >= 1 (got 0, 1, 8, 132)"));
    }
}

}  // namespace
