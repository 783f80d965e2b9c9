// GPU tests of bt's nibble layout and GEMV (kernels/bt_nib4.h): the GPU rewrite of the bt bytes
// equals the CPU packer's nibbles of the same codes, byte for byte, for every tail k % 5 and
// partial last word; the nibble GEMV's int32 accumulators and fused epilogue are bit-exact against
// the CPU references (computed from the bt bytes) over a shape table (d = 1, 2; n = 1, odd, more
// row tiles than the grid holds; k from one chunk to the 16384 limit, teams of 1..4 warps with idle
// lanes; one group, groups of 64 (half chunks), 128 .. 4096, multiples of 4096, a partial last
// group), with and without the early weight reads of PDL, and at the codes' and x's extremes; the
// dispatch (bt_gemv and product() run it for one token when the nibbles are there); its contract
// rules on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "kernels/bt_gemv.h"
#include "kernels/bt_nib4.h"
#include "kernels/product.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::DeviceBuffer;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;

class BtNib4 : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(BtNib4, TheGpuRewriteOfTheBtBytesEqualsTheCpuPacker) {
    struct Shape {
        int64_t n, k;
    };
    const std::vector<Shape> shapes = {{1, 1},   {3, 5},     {7, 7},    {2, 8},     {5, 9},    {9, 13},
                                       {4, 64},  {3, 130},   {17, 784}, {6, 4096},  {5, 4097}, {3, 4099},
                                       {2, 6912}, {1, 14339}, {600, 40}, {1001, 128}};
    uint64_t seed = 4000;
    for (int depth = 1; depth <= trit::kernels::kBtNib4MaxDepth; ++depth) {
        const int levels = trit::formats::bt_levels(depth);
        for (const Shape& s : shapes) {
            SCOPED_TRACE(::testing::Message() << "d=" << depth << " n=" << s.n << " k=" << s.k);
            const std::vector<int8_t> codes =
                trit::gputest::random_codes(static_cast<size_t>(s.n * s.k), -levels, levels, ++seed);
            std::vector<uint8_t> bt(static_cast<size_t>(s.n * trit::formats::bt_row_bytes(s.k, depth)));
            trit::formats::bt_pack(codes.data(), s.n, s.k, depth, bt.data());
            std::vector<uint8_t> want(static_cast<size_t>(s.n * trit::kernels::bt_nib4_row_bytes(s.k)));
            trit::kernels::bt_nib4_pack(codes.data(), s.n, s.k, want.data());
            DeviceBuffer<uint8_t> d_bt(bt), d_nib(want.size());
            d_nib.poison();
            trit::kernels::bt_to_nib4(d_bt.get(), depth, s.n, s.k, d_nib.get(), nullptr);
            TRIT_CUDA_CHECK(cudaDeviceSynchronize());
            ASSERT_EQ(d_nib.download(), want);
        }
    }
}

TEST(BtNib4Layout, TheCpuPackerWritesTheDocumentedNibbles) {
    // k = 10: word 0 = columns 0..7 (low nibbles 0..3, high nibbles 4..7), word 1 = columns 8, 9
    // and six columns of code 0 (nibble 8).
    const std::vector<int8_t> codes = {-4, -1, 0, 1, 4, 2, -2, 3, -3, 1};
    std::vector<uint8_t> out(static_cast<size_t>(trit::kernels::bt_nib4_row_bytes(10)));
    ASSERT_EQ(out.size(), 8u);
    trit::kernels::bt_nib4_pack(codes.data(), 1, 10, out.data());
    const std::vector<uint8_t> want = {0xC4, 0xA7, 0x68, 0xB9, 0x85, 0x89, 0x88, 0x88};
    EXPECT_EQ(out, want);
    const std::vector<int8_t> bad = {0, 8};
    EXPECT_THAT([&] { trit::kernels::bt_nib4_pack(bad.data(), 1, 2, out.data()); },
                ::testing::ThrowsMessage<trit::Error>(HasSubstr("code 8 at row 0, column 1 is outside [-8, 7]")));
}

struct Shape {
    int64_t n, k, group;
};

// clang-format off
const std::vector<Shape> kShapes = {
    {1, 128, 64},       {3, 128, 1 << 20},  {17, 384, 64},     {33, 2048, 2048},  {131, 2560, 64},
    {263, 2560, 256},   {500, 6912, 6912},  {77, 6912, 64},    {4099, 4096, 64},  {3001, 4096, 512},
    {1000, 14336, 64},  {129, 14336, 4096}, {300, 16384, 64},  {97, 16384, 8192}, {20001, 128, 64},
    {30000, 1024, 128}, {6, 4096, 128},     {40, 8192, 4096},  {51, 12288, 4096}, {2, 4224, 4096},
    {9, 768, 64},       {11, 3072, 64},
    // One group, a warp team: 16 tiles finished at a time, 23.7 tiles a block on 264 blocks.
    {100001, 256, 1 << 20},
};
// clang-format on

TEST_F(BtNib4, MatchesTheReferenceOverTheShapeTable) {
    uint64_t seed = 4100;
    for (int depth = 1; depth <= trit::kernels::kBtNib4MaxDepth; ++depth) {
        for (const Shape& s : kShapes) {
            ProductCase c;
            c.format = Format::kBt;
            c.depth = depth;
            c.dense = true;
            c.m = 1, c.n = s.n, c.k = s.k, c.group = s.group;
            c.seed = ++seed;
            c.per_tensor_scale = seed % 2 == 0;
            c.bias = seed % 3 != 0;
            SCOPED_TRACE(trit::gputest::describe(c));
            trit::gputest::check_product_case(c, trit::kernels::bt_nib4_gemv);
            if (::testing::Test::HasFailure()) return;
        }
    }
}

TEST_F(BtNib4, ExtremeCodesAndXStayExact) {
    // x = -128 everywhere and codes in [-4, 4]: the high-nibble sums reach 192 * 128 per column.
    for (int64_t group : {int64_t{64}, int64_t{16384}}) {
        ProductCase c;
        c.format = Format::kBt;
        c.depth = 2;
        c.dense = true;
        c.m = 1, c.n = 37, c.k = 16384, c.group = group;
        c.x_lo = -128, c.x_hi = -128;
        c.seed = 4199 + group;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::bt_nib4_gemv);
    }
}

TEST_F(BtNib4, TheGemvPathRunsItForOneTokenWhenTheNibblesAreThere) {
    ProductCase c;
    c.format = Format::kBt;
    c.depth = 2;
    c.dense = true;
    c.m = 1, c.n = 1031, c.k = 4096, c.group = 64;
    c.seed = 4300;
    trit::gputest::check_product_case(c, trit::kernels::ProductPath::kAuto);
    c.m = 2;  // two tokens: the bt kernels on the bt bytes, with the nibbles present
    trit::gputest::check_product_case(c, trit::kernels::ProductPath::kAuto);
}

PackedWeights bt(int depth, int64_t n, int64_t k, const uint8_t* a, const uint8_t* nib) {
    return trit::gputest::bt_weights(depth, n, k, a, nib);
}

TEST(BtNib4Contract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t bytes[64], nib[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::bt_nib4_gemv_rejects;
    EXPECT_EQ(bt_nib4_gemv_rejects(bt(2, 4, 4096, bytes, nib), x, 1, 64), "");
    EXPECT_EQ(bt_nib4_gemv_rejects(bt(1, 4, 4096, bytes, nib), x, 1, 4096), "");
    EXPECT_EQ(bt_nib4_gemv_rejects(bt(2, 4, 16384, bytes, nib), x, 1, 128), "");
    EXPECT_EQ(bt_nib4_gemv_rejects(bt(2, 4, 16384, bytes, nib), x, 1, 12288), "");
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(3, 4, 4096, bytes, nib), x, 1, 64), HasSubstr("depth 1 or 2"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 4096, bytes, nullptr), x, 1, 64), HasSubstr("PackedWeights::dense"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 4096, bytes, nib), x, 2, 64), HasSubstr("m must be 1"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 192, bytes, nib), x, 1, 64), HasSubstr("multiple of 128"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 16512, bytes, nib), x, 1, 64), HasSubstr("k must be <= 16384"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 256, bytes, nib + 4), x, 1, 64), HasSubstr("16-byte aligned"));
    EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 256, bytes, nib), x + 4, 1, 64), HasSubstr("16-byte aligned"));
    for (int64_t group : {32, 96, 192, 6144})
        EXPECT_THAT(bt_nib4_gemv_rejects(bt(2, 4, 8192, bytes, nib), x, 1, group), HasSubstr("64 * 2^e <= 4096"))
            << group;
    // bt_gemv: the nibble kernels for one token where they take the call, else the bt-byte kernels.
    using trit::kernels::bt_gemv_variant;
    // (The one-shot kernel takes every call the nibble kernel takes: TRIT_ONESHOT=0 runs the latter.)
    EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, 4096, bytes, nib), x, 1, 64), "oneshot");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, 4096, bytes, nullptr), x, 1, 64), "stream");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, 4096, bytes, nib), x, 2, 64), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, 4100, bytes, nib), x, 1, 64), "stream");  // k % 128 != 0
    trit::gputest::expect_rejected("bt_nib4_gemv", bt_nib4_gemv_rejects, trit::kernels::bt_nib4_gemv,
                                   bt(2, 4, 4096, bytes, nib), x, 2, 64, "m must be 1");
}

TEST(BtNib4Contract, TheRewriteRejectsItsInputsNamingThem) {
    alignas(16) static uint8_t bytes[64], nib[64];
    EXPECT_THAT([] { trit::kernels::bt_to_nib4(bytes, 3, 4, 64, nib, nullptr); },
                ::testing::ThrowsMessage<trit::Error>(HasSubstr("depth must be 1 or 2")));
    EXPECT_THAT([] { trit::kernels::bt_to_nib4(bytes, 2, 0, 64, nib, nullptr); },
                ::testing::ThrowsMessage<trit::Error>(HasSubstr("n and k must be >= 1")));
    EXPECT_THAT([] { trit::kernels::bt_to_nib4(nullptr, 2, 4, 64, nib, nullptr); },
                ::testing::ThrowsMessage<trit::Error>(HasSubstr("must be non-null")));
}

}  // namespace
