// GPU tests of the one-shot tern2 GEMV (kernels/tern2_gemv_oneshot.h): int32 accumulators and fused
// epilogue bit-exact against the CPU references over a shape table (n = 1, odd, fewer rows than a
// block covers, tens of thousands of rows; k from one piece to the 16384 limit, the BitNet-2B,
// Llama-8B and BWTA widths), every lane count with every piece count per lane (full and partial
// last lanes), both with and without the early weight reads of PDL, and its contract rules on the
// host. From float x (tern2_gemv_oneshot_from_float, product_from_float): y bit for bit the CPU
// quantizer (act_int8_quantize_ref) and the CPU runtime's product, fused or not, and non-finite
// rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_gemv_oneshot.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductOut;

class Tern2GemvOneshot : public trit::gputest::RequiresGpu<::testing::Test> {};

void oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
             cudaStream_t stream) {
    trit::kernels::tern2_gemv_oneshot(w, x, m, group, out, stream);
}

template <int Lanes>
void oneshot_lanes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
                   cudaStream_t stream) {
    trit::kernels::tern2_gemv_oneshot(w, x, m, group, out, stream, Lanes);
}

ProductCase tern2_case(int64_t n, int64_t k, int64_t group, uint64_t seed) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 1, c.n = n, c.k = k, c.group = group;
    c.seed = seed;
    c.per_tensor_scale = seed % 2 == 0;
    c.half_scales = seed % 4 >= 2;  // ProductOut::w_scale_half given (read with groups of 64)
    c.bias = seed % 3 != 0;
    return c;
}

TEST_F(Tern2GemvOneshot, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t n, k, group;
    };
    const std::vector<Shape> shapes = {
        {1, 64, 64},        {3, 128, 1 << 20},  {5, 640, 640},       {33, 768, 768},     {1000, 2560, 2560},
        {7, 3072, 3072},    {130, 4096, 4096},  {9, 6912, 6912},     {4, 14336, 14336},  {3, 16384, 16384},
        {20001, 192, 192},  {2049, 16320, 16320}, {17, 1088, 5000},  {768, 768, 768},    {31, 2048, 2048},
    };
    uint64_t seed = 700;
    for (const Shape& s : shapes) {
        const ProductCase c = tern2_case(s.n, s.k, s.group, ++seed);
        trit::gputest::check_product_case(c, oneshot);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2GemvOneshot, EveryLaneCountAndPiecesPerLane) {
    using Launcher = trit::gputest::ProductLauncher;
    const std::vector<std::pair<int, Launcher>> lane_counts = {
        {4, oneshot_lanes<4>}, {8, oneshot_lanes<8>}, {16, oneshot_lanes<16>}, {32, oneshot_lanes<32>}};
    uint64_t seed = 800;
    for (const auto& [lanes, launch] : lane_counts) {
        for (int u = 1; u <= 8; ++u) {
            // Every lane with u pieces, and only the first lane with u (the others u - 1).
            for (const int64_t pieces : {int64_t{lanes} * u, int64_t{lanes} * (u - 1) + 1}) {
                const ProductCase c = tern2_case(2 * 32 / lanes + 3, 64 * pieces, 64 * pieces, ++seed);
                SCOPED_TRACE("lanes " + std::to_string(lanes) + ", pieces " + std::to_string(pieces));
                trit::gputest::check_product_case(c, launch);
                if (::testing::Test::HasFailure()) return;
            }
        }
    }
}

TEST_F(Tern2GemvOneshot, ExtremeCodesAndXStayExact) {
    ProductCase c = tern2_case(37, 16384, 16384, 9);
    c.x_lo = -128, c.x_hi = -128;  // |acc| up to 128 * 16384 = 2^21
    trit::gputest::check_product_case(c, oneshot);
}

TEST_F(Tern2GemvOneshot, TheGemvPathRunsItForOneTokenAndOneScaleGroup) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_gemv_variant;
    const PackedWeights w = trit::gputest::tern2_weights(3072, 768, codes);
    EXPECT_STREQ(tern2_gemv_variant(w, x, 1, 768), "oneshot");
    EXPECT_STREQ(tern2_gemv_variant(w, x, 1, 256), "dp4a");  // several scale groups
    EXPECT_STRNE(tern2_gemv_variant(w, x, 2, 768), "oneshot");
    // Above 3072 x 768 weights only where its blocks let the next call launch after their products
    // (at most 3 blocks an SM, 1, 3 or 4 units a lane; from float x any units, k <= 4096); the
    // other kernels measured faster elsewhere.
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    ASSERT_GE(sms, 43) << "the expectations below hold from 43 SMs (128 blocks)";
    const auto tern2 = [&](int64_t n, int64_t k) { return trit::gputest::tern2_weights(n, k, codes); };
    const auto* xf = reinterpret_cast<const float*>(x);
    EXPECT_STREQ(tern2_gemv_variant(tern2(3073, 768), x, 1, 768), "oneshot");    // 3 units a lane, 97 blocks
    EXPECT_STREQ(tern2_gemv_variant(tern2(1024, 4096), x, 1, 4096), "oneshot");  // 4 units, 128 blocks
    EXPECT_STREQ(tern2_gemv_variant(tern2(2560, 2560), x, 1, 2560), "skinny");   // 5 units
    EXPECT_STREQ(tern2_gemv_variant(tern2(2048, 4096), x, 1, 4096), "skinny");   // 8 units
    EXPECT_TRUE(trit::kernels::tern2_gemv_takes_float_x(tern2(2048, 4096), xf, 1, 4096));  // 128 blocks
    EXPECT_FALSE(trit::kernels::tern2_gemv_takes_float_x(tern2(1024, 4160), xf, 1, 4160));  // k > 4096
    if (sms < 144) {  // 432 blocks
        EXPECT_FALSE(trit::kernels::tern2_gemv_takes_float_x(tern2(6912, 2560), xf, 1, 2560));
    }
    for (const ProductCase& c :
         {tern2_case(3072, 768, 768, 11), tern2_case(4096, 768, 768, 12), tern2_case(1024, 4096, 4096, 13)}) {
        trit::gputest::check_product_case(c, trit::kernels::ProductPath::kAuto);
        trit::gputest::check_product_case(c, trit::kernels::ProductPath::kGemv);
    }
}

// A tern2 float-x case: random codes, x in [lo, hi], per-row scales and biases.
trit::gputest::FromFloatCase tern2_from_float(int64_t n, int64_t k, float lo, float hi, uint64_t seed) {
    trit::gputest::FromFloatCase c;
    c.n = n, c.k = k, c.group = k;
    c.codes = trit::gputest::random_codes(static_cast<size_t>(n * k), -1, 1, seed);
    c.x = trit::gputest::random_floats(static_cast<size_t>(k), lo, hi, seed + 1);
    c.ws = trit::gputest::random_floats(static_cast<size_t>(n), 1e-3f, 2e-2f, seed + 2);
    c.bias = trit::gputest::random_floats(static_cast<size_t>(n), -1.0f, 1.0f, seed + 3);
    return c;
}

TEST_F(Tern2GemvOneshot, FromFloatXIsTheQuantizerThenTheProductBitForBit) {
    struct Shape {
        int64_t n, k;
        float lo, hi;
    };
    const std::vector<Shape> shapes = {
        {768, 768, -3.0f, 3.0f},   {3072, 768, -0.01f, 0.02f}, {768, 3072, -50.0f, 40.0f}, {5, 16384, -1.0f, 1.0f},
        {1, 64, -1.0f, 1.0f},      {33, 2560, -1e-7f, 1e-7f},  // amax below kAct8Eps
        {1024, 1024, 0.0f, 0.0f},  // all zeros
    };
    uint64_t seed = 900;
    for (const Shape& sh : shapes) {
        SCOPED_TRACE("n=" + std::to_string(sh.n) + ", k=" + std::to_string(sh.k));
        trit::gputest::FromFloatCase c = tern2_from_float(sh.n, sh.k, sh.lo, sh.hi, seed += 4);
        if (sh.k > 100) c.x[77] = sh.hi * 1.5f;  // one outlier sets the scale
        bool fused = false;
        const std::vector<float> y = trit::gputest::gpu_y_from_float(c, &fused);
        EXPECT_TRUE(fused);  // every shape here is one the fused one-shot kernel takes
        trit::gputest::expect_same_bits(y, trit::gputest::reference_y_from_float(c));
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2GemvOneshot, FromFloatXUnfusedAboveTheFusedSizeGivesTheSameBits) {
    // Where the fused kernel does not run (above 3072 x 768 weights: k > 4096, or more than 3
    // blocks an SM) the quantizer runs, then the product (2560 x 6912: the dp4a kernel; 6912 x
    // 2560, 432 blocks: skinny): the same y as the CPU references.
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    std::vector<std::pair<int64_t, int64_t>> shapes = {{2560, 6912}};
    if (sms < 144) shapes.emplace_back(6912, 2560);
    for (const auto& [n, k] : shapes) {
        const trit::gputest::FromFloatCase c = tern2_from_float(n, k, -2.0f, 2.0f, 41 + n);
        bool fused = true;
        const std::vector<float> y = trit::gputest::gpu_y_from_float(c, &fused);
        EXPECT_FALSE(fused) << n << " x " << k;
        trit::gputest::expect_same_bits(y, trit::gputest::reference_y_from_float(c));
    }
}

TEST_F(Tern2GemvOneshot, FromFloatXANonFiniteRowGivesNaN) {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()}) {
        trit::gputest::FromFloatCase c = tern2_from_float(96, 768, -1.0f, 1.0f, 51);
        c.x[500] = bad;
        bool fused = false;
        const std::vector<float> y = trit::gputest::gpu_y_from_float(c, &fused);
        EXPECT_TRUE(fused);
        for (size_t j = 0; j < y.size(); ++j) EXPECT_TRUE(std::isnan(y[j])) << "y[" << j << "] = " << y[j];
    }
}

TEST(Tern2GemvOneshotContract, PicksTheMostLanesThatKeepTheGridSmall) {
    using trit::kernels::tern2_gemv_oneshot_lanes;
    EXPECT_EQ(tern2_gemv_oneshot_lanes(768, 768), 16);     // 12288 threads
    EXPECT_EQ(tern2_gemv_oneshot_lanes(1024, 1024), 16);   // 16384
    EXPECT_EQ(tern2_gemv_oneshot_lanes(3072, 768), 4);     // 12288
    EXPECT_EQ(tern2_gemv_oneshot_lanes(768, 3072), 16);    // 12288, 3 units a lane
    EXPECT_EQ(tern2_gemv_oneshot_lanes(4, 64), 32);        // one block
    EXPECT_EQ(tern2_gemv_oneshot_lanes(100, 16384), 32);   // 4 to 16 lanes would need > 8 units
    EXPECT_EQ(tern2_gemv_oneshot_lanes(20000, 2560), 8);   // over 16384 threads: the fewest lanes
    EXPECT_EQ(tern2_gemv_oneshot_lanes(20000, 1024), 4);   //   that hold the row
}

TEST(Tern2GemvOneshotContract, LetsTheNextKernelStartAfterTheProductsOnlyForSmallGrids) {
    using trit::kernels::tern2_gemv_oneshot_launches_late;
    constexpr int kSms = 132;  // late: at most 396 blocks and, from int8 x, 1, 3 or 4 units a lane
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(768, 768, false, kSms));    // 1 unit, 96 blocks
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(3072, 768, false, kSms));   // 3 units (4 lanes)
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(768, 3072, false, kSms));   // 3 units (16 lanes)
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(512, 8192, false, kSms));   // 4 units, 128 blocks
    EXPECT_FALSE(tern2_gemv_oneshot_launches_late(512, 10240, false, kSms));  // 5 units
    EXPECT_FALSE(tern2_gemv_oneshot_launches_late(1536, 768, false, kSms));  // 2 units
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(1536, 768, true, kSms));    // from float x
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(12672, 1024, false, kSms));   // 4 units, 396 blocks
    EXPECT_FALSE(tern2_gemv_oneshot_launches_late(12704, 1024, false, kSms));  // 397 blocks
    EXPECT_TRUE(tern2_gemv_oneshot_launches_late(12704, 1024, false, 2 * kSms));
    EXPECT_FALSE(tern2_gemv_oneshot_launches_late(4, 32768, false, kSms));  // no lanes hold the row
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const std::string& rule) {
    trit::gputest::expect_rejected("tern2_gemv_oneshot", trit::kernels::tern2_gemv_oneshot_rejects, oneshot, w, x, m,
                                   group, rule);
}

TEST(Tern2GemvOneshotContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_gemv_oneshot_rejects;
    EXPECT_EQ(tern2_gemv_oneshot_rejects(tern2(4, 4096, codes), x, 1, 4096), "");
    EXPECT_EQ(tern2_gemv_oneshot_rejects(tern2(4, 16384, codes), x, 1, 1 << 30), "");
    expect_rule(tern2(4, 4096, codes), x, 2, 4096, "m must be 1");
    expect_rule(tern2(4, 4096, codes), x, 1, 2048, "one scale group only (group >= k)");
    expect_rule(tern2(4, 100, codes), x, 1, 100, "k must be a multiple of 64");
    expect_rule(tern2(4, 16448, codes), x, 1, 16448, "k must be <= 16384");
    expect_rule(tern2(4, 256, codes + 1), x, 1, 256, "16-byte aligned");
    expect_rule(tern2(4, 256, codes), x + 4, 1, 256, "16-byte aligned");
}

TEST(Tern2GemvOneshotContract, RejectsALaneCountThatCannotHoldTheRow) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    int32_t acc[1];
    ProductOut out;
    out.acc = acc;
    for (const auto& [lanes, k] : std::vector<std::pair<int, int64_t>>{{4, 4096}, {3, 256}, {64, 256}, {-1, 256}}) {
        try {
            trit::kernels::tern2_gemv_oneshot(tern2(4, k, codes), x, 1, k, out, nullptr, lanes);
            ADD_FAILURE() << "expected trit::Error for " << lanes << " lanes, k = " << k;
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), ::testing::HasSubstr("lanes per row must be 4, 8, 16 or 32 with at most 8 units"));
            EXPECT_THAT(e.what(), ::testing::HasSubstr("got " + std::to_string(lanes) + " lanes"));
        }
    }
}

TEST(Tern2GemvOneshotContract, FromFloatXNamesItsRules) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static float x[64];
    static float y[4], ws[4];
    static int32_t acc[4];
    ProductOut out;
    out.y = y;
    out.w_scale = ws;
    auto expect_error = [](auto&& call, const std::string& what) {
        try {
            call();
            ADD_FAILURE() << "expected trit::Error with '" << what << "'";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), ::testing::HasSubstr(what));
        }
    };
    using trit::kernels::tern2_gemv_oneshot_from_float;
    expect_error([&] { tern2_gemv_oneshot_from_float(tern2(4, 256, codes), x + 1, 256, out, nullptr); },
                 "tern2_gemv_oneshot_from_float (m=1, n=4, k=256, group=256): the codes and x must be 16-byte aligned");
    expect_error([&] { tern2_gemv_oneshot_from_float(tern2(4, 256, codes), x, 64, out, nullptr); },
                 "one scale group only (group >= k)");
    expect_error([&] { tern2_gemv_oneshot_from_float(tern2(4, 256, codes), nullptr, 256, out, nullptr); },
                 "must be non-null");
    ProductOut with_acc = out;
    with_acc.y = nullptr;
    with_acc.acc = acc;
    expect_error([&] { tern2_gemv_oneshot_from_float(tern2(4, 256, codes), x, 256, with_acc, nullptr); },
                 "y only (out.acc must be null)");
    static int8_t q[64];
    static float sx[1];
    expect_error([&] { trit::kernels::product_from_float(tern2(4, 256, codes), x, 1, 256, with_acc, q, sx, nullptr); },
                 "product_from_float (tern2, m=1, n=4, k=256, group=256): y only");
    expect_error([&] { trit::kernels::product_from_float(tern2(4, 256, codes), x, 1, 256, out, nullptr, sx, nullptr); },
                 "x, q and x_scale must be non-null");
    // Which calls fuse: the one-shot contract, up to 3072 x 768 weights, and for k <= 4096 where its
    // blocks let the next call launch after their products (the GPU's SMs; none on a host without
    // one: TheGemvPathRunsItForOneTokenAndOneScaleGroup checks those on the GPU).
    using trit::kernels::product_from_float_fuses;
    EXPECT_TRUE(product_from_float_fuses(tern2(3072, 768, codes), x, 1, 768));
    EXPECT_TRUE(product_from_float_fuses(tern2(1024, 1024, codes), x, 1, 1024));
    EXPECT_FALSE(product_from_float_fuses(tern2(2560, 6912, codes), x, 1, 6912));  // k > 4096
    EXPECT_FALSE(product_from_float_fuses(tern2(2600, 4160, codes), x, 1, 4160));
    EXPECT_FALSE(product_from_float_fuses(tern2(768, 768, codes), x, 1, 64));  // several scale groups
    EXPECT_FALSE(product_from_float_fuses(tern2(768, 768, codes), x, 2, 768));
}

}  // namespace
