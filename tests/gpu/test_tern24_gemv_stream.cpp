// GPU tests of the streaming tern24 GEMV (tern24_gemv_stream, kernels/tern24_gemv.h): int32
// accumulators and fused epilogue bit-exact against the CPU references over a shape table (m = 1,
// 2; n = 1, odd, and more row tiles than the grid holds, so blocks loop; k from one 128-column
// chunk to the 16384 limit, at and off the 4096-column warp span (teams of 1..4 warps, blocks of
// 192 and 256 threads); one scale group, groups of 128 .. 4096 columns (runs of 1..32 lanes),
// whole-warp groups, partial last groups; per-tensor and per-channel scales, bias on and off), acc
// and y each with and without the early reads of PackedWeights::pdl, x at the int8 extremes, the
// dispatch of the gemv path, and its contract rules on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern24_gemv.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;

class Tern24GemvStream : public trit::gputest::RequiresGpu<::testing::Test> {};

// check_product_case runs acc with PackedWeights::pdl off and y with it on; this launcher flips
// the flag, so that y is also checked with the scales and bias read after pdl_wait() and acc with
// the weights read before it.
void stream_pdl_flipped(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const trit::kernels::ProductOut& out, cudaStream_t stream) {
    PackedWeights flipped = w;
    flipped.pdl = !w.pdl;
    trit::kernels::tern24_gemv_stream(flipped, x, m, group, out, stream);
}

TEST_F(Tern24GemvStream, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k, group;
    };
    // clang-format off
    const std::vector<Shape> shapes = {
        // One chunk, one row; one group past k.
        {1, 1, 128, 128}, {2, 1, 128, 1 << 20},
        // Runs of 1, 2, 4, 8, 16 and 32 lanes; partial last groups (384 / 256, 2560 / 2048,
        // 2688 / 512).
        {1, 3, 256, 128}, {2, 17, 384, 256}, {2, 5, 4096, 512}, {2, 6, 16384, 1024},
        {1, 40, 2560, 2048}, {2, 41, 2688, 512}, {1, 9, 8192, 256}, {1, 7, 4096, 4096},
        // One warp per row (k = 4096), two with one chunk in the second (4224), three (12288:
        // 192-thread blocks) and four (14336, 16384); whole-warp groups and a partial last one.
        {1, 33, 4096, 4096}, {1, 7, 4224, 4224}, {2, 9, 4224, 128}, {1, 27, 12288, 4096},
        {2, 31, 12288, 12288}, {1, 19, 14336, 14336}, {2, 13, 14336, 8192},
        {1, 11, 14336, 12288}, {2, 30, 16384, 16384}, {1, 2560, 2560, 2560},
        // More tiles than resident blocks (an H100 holds 264 blocks of 16 rows for k <= 4096,
        // of 4 rows for k > 8192): each block walks several tiles.
        {1, 20001, 128, 128}, {2, 9001, 256, 256}, {1, 5001, 4096, 1024}, {2, 4500, 2560, 2560},
        {1, 2053, 14336, 14336}, {2, 1500, 16384, 2048},
        // A warp team finishes 16 tiles (m = 1) or 8 (m = 2) at a time: on 264 blocks 35.5 and
        // 16.6 tiles a block, whole batches and a part.
        {1, 150001, 256, 256}, {2, 70001, 512, 1 << 20},
    };
    // clang-format on
    uint64_t seed = 500;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern24_gemv_stream);
        trit::gputest::check_product_case(c, stream_pdl_flipped);
        if (::testing::Test::HasFailure()) return;
    }
}

// x = -128 everywhere: the largest |x * code| sums (128 * 8192 at k = 16384); then the two
// extremes mixed, with groups of one lane.
TEST_F(Tern24GemvStream, ExtremeXStaysExact) {
    uint64_t seed = 40;
    for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-128, -128}, {-128, 127}}) {
        for (int64_t m : {1, 2}) {
            ProductCase c;
            c.format = Format::kTern24;
            c.m = m, c.n = 37, c.k = 16384, c.group = lo == hi ? 16384 : 128;
            c.x_lo = lo, c.x_hi = hi;
            c.seed = ++seed;
            trit::gputest::check_product_case(c, trit::kernels::tern24_gemv_stream);
        }
    }
}

TEST_F(Tern24GemvStream, TheGemvPathRunsItForOneAndTwoTokens) {
    for (int64_t m : {1, 2}) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = m, c.n = 96, c.k = 4096, c.group = 4096;
        c.seed = 7 + static_cast<uint64_t>(m);
        trit::gputest::check_product_case(c, ProductPath::kAuto);
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

PackedWeights tern24(int64_t n, int64_t k, const uint8_t* mask, const uint8_t* signs) {
    return trit::gputest::tern24_weights(n, k, mask, signs);
}

alignas(16) uint8_t g_mask[64];
alignas(16) uint8_t g_signs[64];
alignas(16) int8_t g_x[64];

// The rule from tern24_gemv_stream_rejects, and the launcher's trit::Error naming the shape.
void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const std::string& rule) {
    trit::gputest::expect_rejected("tern24_gemv_stream", trit::kernels::tern24_gemv_stream_rejects, trit::kernels::tern24_gemv_stream, w, x, m, group, rule);
}

TEST(Tern24GemvStreamContract, RejectsShapesOffItsRulesNamingThem) {
    using trit::kernels::tern24_gemv_stream_rejects;
    EXPECT_EQ(tern24_gemv_stream_rejects(tern24(4, 4096, g_mask, g_signs), g_x, 1, 4096), "");
    EXPECT_EQ(tern24_gemv_stream_rejects(tern24(4, 128, g_mask, g_signs), g_x, 2, 1 << 20), "");
    for (int64_t group : {128, 256, 512, 1024, 2048, 4096, 8192, 12288})
        EXPECT_EQ(tern24_gemv_stream_rejects(tern24(4, 16384, g_mask, g_signs), g_x, 2, group), "")
            << group;
    EXPECT_EQ(tern24_gemv_stream_rejects(tern24(4, 14336, g_mask, g_signs), g_x, 1, 12288), "");

    expect_rule(tern24(4, 4096, g_mask, g_signs), g_x, 3, 4096, "m must be 1 or 2");
    expect_rule(tern24(4, 320, g_mask, g_signs), g_x, 1, 320,
                "k must be a positive multiple of 128");
    expect_rule(tern24(4, 64, g_mask, g_signs), g_x, 1, 64, "k must be a positive multiple of 128");
    expect_rule(tern24(4, 16512, g_mask, g_signs), g_x, 1, 16512, "k must be <= 16384");
    for (int64_t group : {32, 64, 96, 384, 640, 6144, 12416})
        expect_rule(
            tern24(4, 16384, g_mask, g_signs), g_x, 1, group,
            "group must be >= k (one scale group), 128 * 2^e <= 4096, or a multiple of 4096");
    expect_rule(tern24(4, 256, g_mask + 8, g_signs), g_x, 1, 256,
                "the mask and x must be 16-byte aligned");
    expect_rule(tern24(4, 256, g_mask, g_signs), g_x + 4, 1, 256,
                "the mask and x must be 16-byte aligned");
    expect_rule(tern24(4, 256, g_mask, g_signs + 4), g_x, 1, 256,
                "the signs must be 8-byte aligned");
    PackedWeights tern2 = tern24(4, 256, g_mask, nullptr);
    tern2.format = Format::kTern2;
    EXPECT_THAT(tern24_gemv_stream_rejects(tern2, g_x, 1, 256), HasSubstr("tern24 weights only"));
}

TEST(Tern24GemvStreamContract, TheGemvPathPicksItWhereItTakesTheCall) {
    using trit::kernels::tern24_gemv_variant;
    EXPECT_STREQ(tern24_gemv_variant(tern24(14336, 4096, g_mask, g_signs), g_x, 1, 4096), "stream");
    EXPECT_STREQ(tern24_gemv_variant(tern24(4096, 14336, g_mask, g_signs), g_x, 1, 14336),
                 "stream");
    EXPECT_STREQ(tern24_gemv_variant(tern24(2560, 2560, g_mask, g_signs), g_x, 2, 128), "stream");
    // Groups of 32 or 64 columns, m > 2, k > 16384: the warp-per-row kernel.
    EXPECT_STREQ(tern24_gemv_variant(tern24(2560, 2560, g_mask, g_signs), g_x, 1, 64), "warp");
    EXPECT_STREQ(tern24_gemv_variant(tern24(2560, 2560, g_mask, g_signs), g_x, 3, 2560), "warp");
    EXPECT_STREQ(tern24_gemv_variant(tern24(64, 32768, g_mask, g_signs), g_x, 1, 32768), "warp");
    EXPECT_STREQ(tern24_gemv_variant(tern24(64, 4096, g_mask, g_signs), g_x, 2, 384), "warp");
    // Neither: the generic kernel.
    EXPECT_STREQ(tern24_gemv_variant(tern24(64, 784, g_mask, g_signs), g_x, 1, 784), "");
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(tern24(14336, 4096, g_mask, g_signs), g_x, 1, 4096, &why),
              ProductPath::kGemv)
        << why;
}

}  // namespace
