// GPU tests of the one-shot nibble GEMV (bt_nib4_oneshot, kernels/bt_nib4.h): int32 accumulators
// and fused epilogue bit-exact against the CPU references (computed from the bt bytes) over a
// shape table (d = 1, 2; n = 1, odd, fewer rows than a block covers, tens of thousands of rows;
// k from one unit to the 16384 limit; one group, groups of 64, 128, 192, 4096 and a partial last
// group), every lane group (16 or 32 lanes and one, two or four rows; 64 lanes, two warps, and one
// or two rows with several groups) with every piece count per lane
// (full and partial last lanes, one and several groups), with and without the early reads of PDL,
// at the codes' and x's extremes; with and without the scales' fp16 copy (ProductOut::w_scale_half:
// read by the kernels that hold groups of 64's scales in registers, ignored by the others, the same
// y either way); the dispatch (bt_gemv runs it for one token on small matrices when the nibbles are
// there); its contract rules on the host. From float x (bt_nib4_oneshot_from_float,
// product_from_float): y bit for bit the CPU quantizer (act_int8_quantize_ref) and the CPU
// runtime's product, fused or not (product_check.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "kernels/bt_gemv.h"
#include "kernels/bt_nib4.h"
#include "kernels/product.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"
#include "tests/support/error_of.h"

namespace {

using ::testing::HasSubstr;
using trit::testing::expect_error;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductOut;

class BtNib4Oneshot : public trit::gputest::RequiresGpu<::testing::Test> {};

void oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
             cudaStream_t stream) {
    trit::kernels::bt_nib4_oneshot(w, x, m, group, out, stream);
}

template <int Lanes, int Rows, int Ahead = 0>
void oneshot_shape(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
                   cudaStream_t stream) {
    trit::kernels::bt_nib4_oneshot(w, x, m, group, out, stream, Lanes, Rows, Ahead);
}

ProductCase bt_case(int depth, int64_t n, int64_t k, int64_t group, uint64_t seed) {
    ProductCase c;
    c.format = Format::kBt;
    c.depth = depth;
    c.dense = true;
    c.m = 1, c.n = n, c.k = k, c.group = group;
    c.seed = seed;
    c.per_tensor_scale = seed % 2 == 0;
    c.half_scales = seed % 4 >= 2;  // ProductOut::w_scale_half given (read with groups of 64)
    c.bias = seed % 3 != 0;
    return c;
}

TEST_F(BtNib4Oneshot, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t n, k, group;
    };
    const std::vector<Shape> shapes = {
        {1, 64, 64},         {3, 128, 1 << 20}, {5, 640, 64},       {33, 768, 64},
        {768, 768, 64},      {3072, 768, 64},   {768, 3072, 64},    {1000, 2560, 64},
        {7, 3072, 3072},     {130, 4096, 128},  {9, 6912, 64},      {4, 14336, 4096},
        {3, 16384, 64},      {20001, 192, 64},  {2049, 16320, 192}, {17, 1088, 5000},
        {31, 768, 512},      {6, 4096, 1024},   {11, 2560, 2560},   {40, 8192, 4096},
        {21, 8256, 1 << 20}, {9, 14336, 64},    {301, 5184, 192},   {2561, 6912, 64},
    };
    uint64_t seed = 5000;
    for (int depth = 1; depth <= trit::kernels::kBtNib4MaxDepth; ++depth) {
        for (const Shape& s : shapes) {
            const ProductCase c = bt_case(depth, s.n, s.k, s.group, ++seed);
            SCOPED_TRACE(trit::gputest::describe(c));
            trit::gputest::check_product_case(c, oneshot);
            if (::testing::Test::HasFailure()) return;
        }
    }
}

TEST_F(BtNib4Oneshot, EveryLaneGroupAndPiecesPerLane) {
    using Launcher = trit::gputest::ProductLauncher;
    struct Shape {
        int lanes, rows, ahead;
        Launcher launch;
    };
    // Every piece requested first, and (2, 4) the later ones requested ahead of the products.
    const std::vector<Shape> shapes = {{16, 1, 0, oneshot_shape<16, 1>},
                                       {16, 2, 0, oneshot_shape<16, 2>},
                                       {32, 1, 0, oneshot_shape<32, 1>},
                                       {32, 2, 0, oneshot_shape<32, 2>},
                                       {16, 1, 2, oneshot_shape<16, 1, 2>},
                                       {32, 2, 2, oneshot_shape<32, 2, 2>},
                                       {16, 2, 4, oneshot_shape<16, 2, 4>},
                                       {32, 1, 4, oneshot_shape<32, 1, 4>},
                                       {32, 2, 4, oneshot_shape<32, 2, 4>},
                                       {16, 4, 0, oneshot_shape<16, 4>},
                                       {32, 4, 0, oneshot_shape<32, 4>},
                                       {32, 4, 2, oneshot_shape<32, 4, 2>},
                                       // Two warps a row: several groups only.
                                       {64, 1, 0, oneshot_shape<64, 1>},
                                       {64, 2, 0, oneshot_shape<64, 2>},
                                       {64, 1, 2, oneshot_shape<64, 1, 2>},
                                       {64, 2, 4, oneshot_shape<64, 2, 4>}};
    uint64_t seed = 5100;
    for (const Shape& sh : shapes) {
        // Rows of two blocks and part of a third (4 warps a block).
        const int64_t n = 2 * 4 * 32 * sh.rows / sh.lanes + 3;
        for (int v = 1; v <= (sh.rows == 4 ? 4 : sh.lanes == 64 ? 8 : 16); ++v) {
            // Every lane with v pieces (32 columns each), and only the first two lanes with v (the
            // others v - 1); one group, and groups of one unit, of three (a group spans lanes and
            // ends inside a lane's run). Two rows over 8 pieces: the rest staged in shared memory.
            for (const int64_t pieces : {int64_t{sh.lanes} * v, int64_t{sh.lanes} * (v - 1) + 2}) {
                const int64_t units = pieces / 2;
                for (const int64_t group_units : {units, int64_t{1}, int64_t{3}}) {
                    if (sh.lanes == 64 && group_units >= units) continue;  // no one-group kernel
                    const ProductCase c = bt_case(2, n, 64 * units, 64 * group_units, ++seed);
                    SCOPED_TRACE("lanes " + std::to_string(sh.lanes) + ", rows " + std::to_string(sh.rows) +
                                 ", ahead " + std::to_string(sh.ahead) + ", " + trit::gputest::describe(c));
                    trit::gputest::check_product_case(c, sh.launch);
                    if (::testing::Test::HasFailure()) return;
                }
            }
        }
    }
}

TEST_F(BtNib4Oneshot, StagedRowsReadTheScalesHalvesWhereAlignedElseTheFloats) {
    // A lane group of 32 lanes and two rows with more than 8 pieces a lane and row (k > 8192:
    // staged pieces), groups of 64, the fp16 copy given: the staged pieces' scales come as the
    // 4-byte word of two halves where the copy is 4-byte aligned and every row's halves start
    // 4-byte aligned (one row of scales, or an even number of groups), else as floats; with one
    // row of an odd number of groups, whose last word would reach past the array, launch() passes
    // no fp16 copy. Each case must give the reference's y bit for bit (and stay inside the scales'
    // arrays under compute-sanitizer), with every piece requested first and 4 ahead of the
    // products.
    struct Shape {
        int64_t n, k, offset;
        bool per_tensor;
    };
    const std::vector<Shape> shapes = {
        {37, 14336, 0, false},  // 224 groups a row: halves
        {37, 14336, 1, false},  // the copy 2 bytes off 4-byte alignment: floats
        {37, 14336, 2, false},  // 4-byte aligned, off 16: halves
        {37, 14336, 0, true},   // one row of scales for every row: halves
        {37, 14272, 0, false},  // 223 groups (odd rows' halves misaligned): floats
        {37, 14272, 0, true},   // 223 groups, one row of scales: no fp16 copy given, floats
        {37, 16384, 3, true},   // misaligned copy, one row of scales: floats
    };
    uint64_t seed = 5600;
    const trit::gputest::ProductLauncher launchers[] = {oneshot_shape<32, 2>,
                                                        oneshot_shape<32, 2, 4>};
    for (const trit::gputest::ProductLauncher launch : launchers) {
        for (const Shape& sh : shapes) {
            ProductCase c = bt_case(2, sh.n, sh.k, 64, ++seed);
            c.half_scales = true;
            c.out_offset = sh.offset;
            c.per_tensor_scale = sh.per_tensor;
            SCOPED_TRACE(trit::gputest::describe(c));
            trit::gputest::check_product_case(c, launch);
            if (::testing::Test::HasFailure()) return;
        }
    }
}

TEST_F(BtNib4Oneshot, ExtremeCodesAndXStayExact) {
    // x = -128 everywhere and codes in [-4, 4]: a unit's high-nibble sum reaches 32 * 192 * 128.
    for (int64_t group : {int64_t{64}, int64_t{16384}}) {
        ProductCase c = bt_case(2, 37, 16384, group, 5200 + group);
        c.x_lo = -128, c.x_hi = -128;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, oneshot);
    }
}

PackedWeights bt(int depth, int64_t n, int64_t k, const uint8_t* a, const uint8_t* nib) {
    return trit::gputest::bt_weights(depth, n, k, a, nib);
}

TEST_F(BtNib4Oneshot, TheGemvPathRunsItForOneToken) {
    alignas(16) static uint8_t bytes[64], nib[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::bt_gemv_variant;
    EXPECT_STREQ(bt_gemv_variant(bt(2, 3072, 768, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 768, 3072, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 768, 768, bytes, nullptr), x, 1, 64), "stream");  // no nibbles
    EXPECT_STREQ(bt_gemv_variant(bt(2, 768, 768, bytes, nib), x, 2, 64), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 6912, 2560, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 2560, 6912, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, 4096, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 128256, 4096, bytes, nib), x, 1, 64), "oneshot");
    ProductCase c = bt_case(2, 3072, 768, 64, 5300);
    trit::gputest::check_product_case(c, trit::kernels::ProductPath::kAuto);
    trit::gputest::check_product_case(c, trit::kernels::ProductPath::kGemv);
}

// A bt<depth> float-x case: random codes, x in [lo, hi], per-row scales of `group` columns, biases.
trit::gputest::FromFloatCase bt_from_float(int depth, int64_t n, int64_t k, int64_t group, float lo, float hi,
                                           uint64_t seed) {
    trit::gputest::FromFloatCase c;
    c.format = Format::kBt;
    c.depth = depth;
    c.n = n, c.k = k, c.group = group;
    const int levels = trit::formats::bt_levels(depth);
    c.codes = trit::gputest::random_codes(static_cast<size_t>(n * k), -levels, levels, seed);
    c.x = trit::gputest::random_floats(static_cast<size_t>(k), lo, hi, seed + 1);
    c.ws = trit::gputest::random_floats(static_cast<size_t>(n * ((k + group - 1) / group)), 1e-3f, 2e-2f, seed + 2);
    c.bias = trit::gputest::random_floats(static_cast<size_t>(n), -1.0f, 1.0f, seed + 3);
    return c;
}

TEST_F(BtNib4Oneshot, FromFloatXIsTheQuantizerThenTheProductBitForBit) {
    struct Shape {
        int depth;
        int64_t n, k, group;
        float lo, hi;
        bool fused;  // the one-shot kernel takes float x (else the quantizer, then the product)
    };
    const std::vector<Shape> shapes = {
        {2, 768, 768, 64, -3.0f, 3.0f, true},      {2, 3072, 768, 64, -0.01f, 0.02f, true},
        {2, 768, 3072, 64, -50.0f, 40.0f, true},   {1, 5, 4096, 4096, -1.0f, 1.0f, true},
        {2, 33, 2560, 256, -1e-7f, 1e-7f, true},   // amax below kAct8Eps; groups of four units
        {2, 1024, 1024, 1024, 0.0f, 0.0f, true},   // all zeros
        {2, 1, 64, 64, -1.0f, 1.0f, true},         {2, 14336, 4096, 64, -2.0f, 2.0f, true},
        {1, 5, 16384, 16384, -1.0f, 1.0f, false},  // k > 4096: the quantizer, then the one-shot kernel
        {2, 300, 1024, 256, -4.0f, 4.0f, true},    // groups of four units, 8-warp blocks (k <= 1024)
        // Four rows a lane group on a GPU of up to 312 SMs (nib4_rows; also 3072 x 768 and 14336 x 4096
        // up to 192 and 1792): groups of four units and 3 pieces a lane and row, one group and 8-warp blocks.
        {2, 2500, 2560, 256, -1.0f, 1.0f, true},   {1, 5000, 1024, 1024, -1.0f, 1.0f, true},
    };
    uint64_t seed = 5400;
    for (const Shape& sh : shapes) {
        // Groups of 64 also with the scales' fp16 copy (ProductOut::w_scale_half), which they read.
        for (const bool half : {false, true}) {
            if (half && sh.group != 64) continue;
            SCOPED_TRACE("d=" + std::to_string(sh.depth) + ", n=" + std::to_string(sh.n) +
                         ", k=" + std::to_string(sh.k) + ", group=" + std::to_string(sh.group) +
                         (half ? ", fp16 scales" : ""));
            trit::gputest::FromFloatCase c =
                bt_from_float(sh.depth, sh.n, sh.k, sh.group, sh.lo, sh.hi, seed += 4);
            if (half) trit::gputest::use_half_scales(c);
            if (sh.k > 100) c.x[77] = sh.hi * 1.5f;  // one outlier sets the scale
            bool fused = !sh.fused;
            const std::vector<float> y = trit::gputest::gpu_y_from_float(c, &fused);
            EXPECT_EQ(fused, sh.fused);
            trit::gputest::expect_same_bits(y, trit::gputest::reference_y_from_float(c));
            if (::testing::Test::HasFailure()) return;
        }
    }
}

TEST_F(BtNib4Oneshot, FromFloatXANonFiniteRowGivesNaN) {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()}) {
        trit::gputest::FromFloatCase c = bt_from_float(2, 96, 768, 64, -1.0f, 1.0f, 5501);
        c.x[500] = bad;
        bool fused = false;
        const std::vector<float> y = trit::gputest::gpu_y_from_float(c, &fused);
        EXPECT_TRUE(fused);
        for (size_t j = 0; j < y.size(); ++j) EXPECT_TRUE(std::isnan(y[j])) << "y[" << j << "] = " << y[j];
    }
}

TEST(BtNib4OneshotContract, LetsTheNextKernelStartAfterTheProductsOnlyForSmallGrids) {
    using trit::kernels::bt_nib4_oneshot_launches_late;
    constexpr int kSms = 132;  // late: at most 396 blocks and, from int8 x, at most 4 pieces a lane
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(768, 768, false, kSms));     // 4 rows of 1 piece, 48 blocks
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(3072, 768, false, kSms));    // 192 blocks
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(6336, 768, false, kSms));    // 396 blocks
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(6352, 768, false, kSms));   // 397 blocks
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(6352, 768, false, 2 * kSms));
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(768, 1536, false, kSms));   // 4 rows of 2 pieces
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(768, 3072, false, kSms));
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(2560, 2560, false, kSms));
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(16384, 1024, false, kSms));  // 2 rows of 1 piece, 2048 blocks
    // float x: any pieces, at most 396 blocks (16 rows a block; 32 with k <= 1024)
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(768, 3072, true, kSms));
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(4096, 4096, true, kSms));    // 256 blocks
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(6336, 2560, true, kSms));    // 396
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(6352, 2560, true, kSms));   // 397
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(6912, 2560, true, kSms));
    EXPECT_TRUE(bt_nib4_oneshot_launches_late(12672, 768, true, kSms));    // 396 blocks of 32 rows
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(12704, 768, true, kSms));
}

TEST(BtNib4OneshotContract, PicksTwoWarpsARowForLongRowsAndForGridsOfFewBlocks) {
    constexpr int kSms = 132;
    const auto two_warps = [](int64_t n, int64_t k, int64_t group, bool float_x = false,
                              int sms = 132, int64_t resident = 0, int64_t pair_resident = 0) {
        return trit::kernels::bt_nib4_oneshot_two_warps(n, k, group, float_x, sms, resident,
                                                        pair_resident);
    };
    // Several groups and 4097..8192 columns: 32 lanes would hold 5-8 pieces a row, 64 lanes 3-4.
    EXPECT_TRUE(two_warps(2560, 6912, 64));
    EXPECT_TRUE(two_warps(2560, 5120, 256));
    EXPECT_TRUE(two_warps(2560, 4160, 64));
    EXPECT_TRUE(two_warps(100000, 8192, 64));
    EXPECT_FALSE(two_warps(2560, 6912, 6912));  // one group
    EXPECT_FALSE(two_warps(2560, 6912, 1 << 20));
    EXPECT_FALSE(two_warps(2560, 6912, 64, true));  // float x
    // ... unless the 32-lane grid (8 rows a block) fits the device at once and the 64-lane one (4
    // rows a block) does not.
    EXPECT_FALSE(
        two_warps(4096, 8192, 64, false, kSms, 4 * kSms, 7 * kSms));  // 512 <= 528, 1024 > 924
    EXPECT_TRUE(
        two_warps(3696, 8192, 64, false, kSms, 4 * kSms, 7 * kSms));  // 924 blocks of 4 rows
    EXPECT_TRUE(two_warps(5120, 5120, 64, false, kSms, 4 * kSms, 7 * kSms));  // 640 > 528
    EXPECT_TRUE(two_warps(8192, 8192, 64, false, kSms, 4 * kSms, 7 * kSms));
    EXPECT_TRUE(two_warps(4096, 8192, 64, false, kSms, 0, 7 * kSms));  // not known: not compared
    // Past 8192 columns (5-8 pieces a lane at 64 lanes) where the 64-lane grid fits the device at
    // once.
    EXPECT_TRUE(two_warps(2048, 14336, 64, false, kSms, 4 * kSms, 4 * kSms));  // 512 <= 528
    EXPECT_TRUE(two_warps(2112, 16384, 128, false, kSms, 4 * kSms, 4 * kSms));
    EXPECT_FALSE(two_warps(2113, 16384, 128, false, kSms, 4 * kSms, 4 * kSms));
    EXPECT_FALSE(two_warps(4096, 14336, 64, false, kSms, 4 * kSms, 4 * kSms));
    EXPECT_FALSE(two_warps(1024, 8256, 64));  // not known
    // 513..4096 columns: where the 32-lane grid is at most half as many blocks as SMs (16 rows a
    // block).
    EXPECT_TRUE(two_warps(768, 3072, 64));    // 48 blocks
    EXPECT_TRUE(two_warps(1056, 3072, 192));  // 66
    EXPECT_FALSE(two_warps(1057, 3072, 64));  // 67
    EXPECT_TRUE(two_warps(1057, 3072, 64, false, kSms + 2));
    EXPECT_FALSE(two_warps(2560, 2560, 64));                  // 160
    EXPECT_FALSE(two_warps(4096, 4096, 64));                  // two rows, 512 blocks
    EXPECT_TRUE(two_warps(4096, 4096, 64, false, 4 * kSms));  // four rows, 256 blocks
    EXPECT_TRUE(two_warps(768, 768, 64));
    EXPECT_TRUE(two_warps(7, 576, 64));
    EXPECT_FALSE(two_warps(7, 512, 64));  // 16 lanes
    EXPECT_FALSE(two_warps(768, 3072, 3072));
    // Where it holds, the launch is late as for its 64 lanes and two rows: at most 4 pieces a lane.
    using trit::kernels::bt_nib4_oneshot_launches_late;
    EXPECT_TRUE(
        bt_nib4_oneshot_launches_late(768, 3072, false, kSms, 64));  // 2 + 2 pieces, 192 blocks
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(768, 3072, false, kSms));  // one group: 32 lanes, 12
    EXPECT_FALSE(bt_nib4_oneshot_launches_late(2560, 6912, false, kSms, 64));  // 4 + 4 pieces
}

TEST(BtNib4OneshotContract, PicksThirtyTwoLanesAndTwoOrFourRows) {
    using trit::kernels::bt_nib4_oneshot_lanes;
    using trit::kernels::bt_nib4_oneshot_rows;
    EXPECT_EQ(bt_nib4_oneshot_lanes(64), 16);  // 2 pieces
    EXPECT_EQ(bt_nib4_oneshot_lanes(512), 16);  // 16 pieces
    EXPECT_EQ(bt_nib4_oneshot_lanes(576), 32);
    EXPECT_EQ(bt_nib4_oneshot_lanes(16384), 32);
    constexpr int kSms = 132;
    // int8 x: four rows up to 4 pieces a lane and row and 32 KB of nibbles an SM (4224 KB here).
    EXPECT_EQ(bt_nib4_oneshot_rows(3072, 768, false, kSms), 4);    // 1 piece a lane and row
    EXPECT_EQ(bt_nib4_oneshot_rows(2560, 2560, false, kSms), 4);   // 3 pieces, 3200 KB
    EXPECT_EQ(bt_nib4_oneshot_rows(2112, 4096, false, kSms), 4);   // 4 pieces, 4224 KB
    EXPECT_EQ(bt_nib4_oneshot_rows(2113, 4096, false, kSms),
              4);  // 2 KB more, in 133 blocks of 16 rows
    EXPECT_EQ(bt_nib4_oneshot_rows(4096, 4096, false, 2 * kSms), 4);
    // Up to 48 KB an SM (6336 KB here) in at most 2 blocks of 16 rows an SM (264 blocks).
    EXPECT_EQ(bt_nib4_oneshot_rows(3072, 4096, false, kSms), 4);  // 6144 KB, 192 blocks
    EXPECT_EQ(bt_nib4_oneshot_rows(4096, 3072, false, kSms), 4);  // 6144 KB, 256 blocks
    EXPECT_EQ(bt_nib4_oneshot_rows(3168, 4096, false, kSms), 4);  // 6336 KB
    EXPECT_EQ(bt_nib4_oneshot_rows(3169, 4096, false, kSms), 2);  // 2 KB more
    EXPECT_EQ(bt_nib4_oneshot_rows(4224, 3072, false, kSms), 4);  // 6336 KB, 264 blocks
    EXPECT_EQ(bt_nib4_oneshot_rows(4240, 2048, false, kSms), 2);  // 4240 KB in 265 blocks
    EXPECT_EQ(bt_nib4_oneshot_rows(4096, 4096, false, kSms), 2);  // 8192 KB
    EXPECT_EQ(bt_nib4_oneshot_rows(6144, 2048, false, kSms), 2);  // 6144 KB in 384 blocks
    // The two-row grid past the blocks the device holds at once, the four-row grid within them.
    EXPECT_EQ(bt_nib4_oneshot_rows(8192, 4096, false, kSms), 2);  // residency not known
    EXPECT_EQ(bt_nib4_oneshot_rows(8192, 4096, false, kSms, 7 * kSms, 4 * kSms),
              4);  // 1024 > 924, 512 <= 528
    EXPECT_EQ(bt_nib4_oneshot_rows(7392, 4096, false, kSms, 7 * kSms, 4 * kSms),
              2);  // 924 blocks of 8 rows
    EXPECT_EQ(bt_nib4_oneshot_rows(7400, 4096, false, kSms, 7 * kSms, 4 * kSms), 4);   // 925
    EXPECT_EQ(bt_nib4_oneshot_rows(14336, 4096, false, kSms, 7 * kSms, 4 * kSms), 2);  // 896 > 528
    EXPECT_EQ(bt_nib4_oneshot_rows(12288, 2048, false, kSms, 8 * kSms, 7 * kSms),
              4);  // 1536 > 1056, 768 <= 924
    EXPECT_EQ(bt_nib4_oneshot_rows(8192, 2048, false, kSms, 8 * kSms, 7 * kSms),
              2);                                                             // 1024 <= 1056
    EXPECT_EQ(bt_nib4_oneshot_rows(8192, 4160, false, kSms, 1, 1000000), 2);  // 5 pieces
    EXPECT_EQ(bt_nib4_oneshot_rows(64, 4160, false, kSms), 2);     // 5 pieces
    EXPECT_EQ(bt_nib4_oneshot_rows(6912, 2560, false, kSms), 2);
    EXPECT_EQ(bt_nib4_oneshot_rows(768, 8192, false, kSms), 2);    // 8 pieces a lane and row
    EXPECT_EQ(bt_nib4_oneshot_rows(768, 8256, false, kSms), 2);    // 9: 8 in registers, 1 staged in shared memory
    EXPECT_EQ(bt_nib4_oneshot_rows(768, 16384, false, kSms), 2);   // 16: 8 and 8
    // float x: four rows up to 4 pieces where blocks of two rows (8 a block; 16 with k <= 1024)
    // outnumber the SMs and the nibbles are at most 256 KB an SM (33792 KB here).
    EXPECT_EQ(bt_nib4_oneshot_rows(2560, 2560, true, kSms), 4);
    EXPECT_EQ(bt_nib4_oneshot_rows(14336, 4096, true, kSms), 4);
    EXPECT_EQ(bt_nib4_oneshot_rows(1064, 3072, true, kSms), 4);    // 133 blocks
    EXPECT_EQ(bt_nib4_oneshot_rows(1056, 3072, true, kSms), 2);    // 132
    EXPECT_EQ(bt_nib4_oneshot_rows(3072, 768, true, kSms), 4);     // 192 blocks of 16 rows
    EXPECT_EQ(bt_nib4_oneshot_rows(2112, 1024, true, kSms), 2);    // 132 blocks of 16 rows
    EXPECT_EQ(bt_nib4_oneshot_rows(768, 768, true, kSms), 2);
    EXPECT_EQ(bt_nib4_oneshot_rows(6912, 4160, true, kSms), 2);    // 5 pieces
    EXPECT_EQ(bt_nib4_oneshot_rows(16896, 4096, true, kSms), 4);   // 256 KB of nibbles an SM
    EXPECT_EQ(bt_nib4_oneshot_rows(16897, 4096, true, kSms), 2);
    EXPECT_EQ(bt_nib4_oneshot_rows(128256, 4096, true, kSms), 2);
}

void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const std::string& rule) {
    trit::gputest::expect_rejected("bt_nib4_oneshot", trit::kernels::bt_nib4_oneshot_rejects, oneshot, w, x, m, group,
                                   rule);
}

TEST(BtNib4OneshotContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t bytes[64], nib[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::bt_nib4_oneshot_rejects;
    EXPECT_EQ(bt_nib4_oneshot_rejects(bt(2, 4, 768, bytes, nib), x, 1, 64), "");
    EXPECT_EQ(bt_nib4_oneshot_rejects(bt(1, 4, 768, bytes, nib), x, 1, 768), "");
    EXPECT_EQ(bt_nib4_oneshot_rejects(bt(2, 4, 16384, bytes, nib), x, 1, 192), "");
    expect_rule(bt(3, 4, 768, bytes, nib), x, 1, 64, "depth 1 or 2 only");
    expect_rule(bt(2, 4, 768, bytes, nullptr), x, 1, 64, "PackedWeights::dense");
    expect_rule(bt(2, 4, 768, bytes, nib), x, 2, 64, "m must be 1");
    expect_rule(bt(2, 4, 700, bytes, nib), x, 1, 700, "k must be a multiple of 64");
    expect_rule(bt(2, 4, 16448, bytes, nib), x, 1, 64, "k must be <= 16384");
    expect_rule(bt(2, 4, 768, bytes, nib), x, 1, 96, "group must be >= k (one group) or a multiple of 64");
    expect_rule(bt(2, 4, 256, bytes, nib + 4), x, 1, 64, "16-byte aligned");
    expect_rule(bt(2, 4, 256, bytes, nib), x + 4, 1, 64, "16-byte aligned");
}

TEST(BtNib4OneshotContract, FromFloatXNamesItsRules) {
    alignas(16) static uint8_t bytes[64], nib[64];
    alignas(16) static float x[64];
    static float y[4], ws[64];
    static int32_t acc[64];
    static int8_t q[64];
    static float sx[1];
    ProductOut out;
    out.y = y;
    out.w_scale = ws;
    auto expect_error = [](auto&& call, const std::string& what) {
        try {
            call();
            ADD_FAILURE() << "expected trit::Error with '" << what << "'";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), HasSubstr(what));
        }
    };
    using trit::kernels::bt_nib4_oneshot_from_float;
    expect_error([&] { bt_nib4_oneshot_from_float(bt(2, 4, 256, bytes, nib), x + 1, 64, out, nullptr); },
                 "bt_nib4_oneshot_from_float (m=1, n=4, k=256, group=64): the nibbles and x must be 16-byte aligned");
    expect_error([&] { bt_nib4_oneshot_from_float(bt(2, 4, 256, bytes, nib), x, 96, out, nullptr); },
                 "group must be >= k (one group) or a multiple of 64");
    expect_error([&] { bt_nib4_oneshot_from_float(bt(2, 4, 256, bytes, nullptr), x, 64, out, nullptr); },
                 "PackedWeights::dense");
    ProductOut with_acc = out;
    with_acc.y = nullptr;
    with_acc.acc = acc;
    expect_error([&] { bt_nib4_oneshot_from_float(bt(2, 4, 256, bytes, nib), x, 64, with_acc, nullptr); },
                 "y only (out.acc must be null)");
    expect_error([&] { trit::kernels::product_from_float(bt(2, 4, 256, bytes, nib), x, 1, 64, with_acc, q, sx, nullptr); },
                 "product_from_float (bt, m=1, n=4, k=256, group=64): y only");
    // Host-side: product_from_float_fuses says which calls fuse.
    using trit::kernels::product_from_float_fuses;
    EXPECT_TRUE(product_from_float_fuses(bt(2, 768, 768, bytes, nib), x, 1, 64));
    EXPECT_FALSE(product_from_float_fuses(bt(2, 768, 768, bytes, nullptr), x, 1, 64));  // no nibbles
    EXPECT_FALSE(product_from_float_fuses(bt(2, 768, 768, bytes, nib), x, 2, 64));
    EXPECT_TRUE(product_from_float_fuses(bt(2, 14336, 4096, bytes, nib), x, 1, 64));
    EXPECT_TRUE(product_from_float_fuses(bt(2, 4096, 4096, bytes, nib), x, 1, 64));
    EXPECT_FALSE(product_from_float_fuses(bt(2, 2560, 6912, bytes, nib), x, 1, 64));  // k > 4096
    EXPECT_FALSE(product_from_float_fuses(bt(2, 768, 768, bytes, nib), x, 1, 64, trit::kernels::ProductPath::kGeneric));
}

// bt_nib4_oneshot on 4 rows of k columns in host buffers, int32 out: for the rules it checks on the
// host before any launch.
void oneshot_on_host(int64_t k, int lanes, int rows, int ahead, int64_t group = 64) {
    alignas(16) static uint8_t bytes[64], nib[64];
    alignas(16) static int8_t x[64];
    static int32_t acc[64];
    ProductOut out;
    out.acc = acc;
    trit::kernels::bt_nib4_oneshot(bt(2, 4, k, bytes, nib), x, 1, group, out, nullptr, lanes, rows,
                                   ahead);
}

TEST(BtNib4OneshotContract, RejectsALaneCountThatCannotHoldTheRow) {
    struct Case {
        int lanes, rows;
        int64_t k;
        int64_t group = 64;
    };
    // 4 and 8 lanes, lanes that are no power of two or too many, rows other than 1, 2 and 4, more
    // than 16 pieces a lane and row (16384 columns over 16 lanes, one or two rows; 8256 over 16
    // lanes), more than 4 with four rows (4160 columns over 32 lanes, 2112 over 16: 5 pieces); 64
    // lanes with one scale group or four rows.
    for (const Case& c : std::vector<Case>{{4, 1, 256},
                                           {8, 1, 256},
                                           {3, 1, 256},
                                           {128, 1, 256},
                                           {64, 1, 256, 256},
                                           {64, 2, 8192, 1 << 20},
                                           {64, 4, 256},
                                           {-1, 1, 256},
                                           {32, 3, 256},
                                           {32, 8, 256},
                                           {32, 4, 4160},
                                           {16, 4, 2112},
                                           {32, -1, 256},
                                           {16, 1, 16384},
                                           {16, 2, 16384},
                                           {16, 2, 8256}}) {
        SCOPED_TRACE(std::to_string(c.lanes) + " lanes, " + std::to_string(c.rows) +
                     " rows, k = " + std::to_string(c.k) + ", group = " + std::to_string(c.group));
        expect_error([&] { oneshot_on_host(c.k, c.lanes, c.rows, -1, c.group); },
                     {"lanes per row must be 16 or 32 and rows per lane group 1, 2 or 4, with at "
                      "most 16 pieces of 32 columns "
                      "a lane and row (4 with four rows), or, from int8 x with several scale "
                      "groups, 64 lanes and 1 or 2 rows "
                      "with at most 8",
                      "got " + std::to_string(c.lanes) + " lanes and " + std::to_string(c.rows) +
                          " rows for " + std::to_string(c.k / 64) + " units"});
    }
}

TEST(BtNib4OneshotContract, RejectsAPiecesAheadCountItHasNoKernelFor) {
    for (const int ahead : {-2, 1, 3, 8}) {
        expect_error([&] { oneshot_on_host(64, 0, 0, ahead); },
                     {"bt_nib4_oneshot (m=1, n=4, k=64, group=64): pieces requested ahead must be -1 (the rule), 0, 2 "
                      "or 4, got " +
                      std::to_string(ahead)});
    }
}

}  // namespace
