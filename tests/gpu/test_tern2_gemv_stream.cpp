// GPU tests of the tern2 streaming GEMV (kernels/tern2_gemv_stream.h, tern24's streaming kernel
// with tern2's decode): int32 accumulators and fused epilogue bit-exact against the CPU references
// over a shape table (n = 1, odd, more row tiles than the grid holds, so blocks loop and both tile
// registers sets wrap; k from one chunk to the 16384 limit, teams of 1..4 warps with idle lanes;
// one group, groups of 128 .. 4096 columns, multiples of 4096, a partial last group), with and
// without the early weight reads of PDL; and its contract rules on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_gemv_stream.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;

class Tern2GemvStream : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(Tern2GemvStream, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t n, k, group;
    };
    // clang-format off
    const std::vector<Shape> shapes = {
        {1, 128, 128},       {3, 128, 1 << 20},    {17, 384, 128},      {33, 2048, 2048},
        {131, 2560, 2560},   {263, 2560, 256},     {500, 6912, 6912},   {77, 6912, 1 << 20},
        {4099, 4096, 4096},  {3001, 4096, 512},    {1000, 14336, 14336}, {129, 14336, 4096},
        {300, 16384, 16384}, {97, 16384, 8192},    {20001, 128, 128},   {30000, 1024, 1024},
        {6, 4096, 128},      {40, 8192, 4096},     {51, 12288, 4096},   {2, 4224, 4096},
        // A warp team finishes 16 tiles at a time: with 264 blocks (H100, H200) 35.5 tiles a
        // block (two whole batches and part of a third) and 16.6 (one and a part).
        {150001, 256, 256},  {70001, 1024, 1 << 20},
    };
    // clang-format on
    uint64_t seed = 1200;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = 1, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern2_gemv_stream);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2GemvStream, ExtremeCodesAndXStayExact) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 1, c.n = 37, c.k = 16384, c.group = 16384;
    c.x_lo = -128, c.x_hi = -128;  // |acc| up to 128 * 16384 = 2^21
    trit::gputest::check_product_case(c, trit::kernels::tern2_gemv_stream);
}

TEST_F(Tern2GemvStream, TheGemvPathRunsItForOneTokenOnLargeMatrices) {
    // 8192 x 8192: 16 MiB of codes, where it starts to beat the other m = 1 kernels.
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 1, c.n = 8192, c.k = 8192, c.group = 8192;
    c.seed = 1299;
    trit::gputest::check_product_case(c, trit::kernels::ProductPath::kAuto);
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

TEST(Tern2GemvStreamContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_gemv_stream_rejects;
    EXPECT_EQ(tern2_gemv_stream_rejects(tern2(4, 4096, codes), x, 1, 4096), "");
    EXPECT_EQ(tern2_gemv_stream_rejects(tern2(4, 16384, codes), x, 1, 128), "");
    EXPECT_EQ(tern2_gemv_stream_rejects(tern2(4, 16384, codes), x, 1, 12288), "");
    EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 4096, codes), x, 2, 4096), ::testing::HasSubstr("m must be 1"));
    EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 192, codes), x, 1, 192), ::testing::HasSubstr("multiple of 128"));
    EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 16512, codes), x, 1, 16512), ::testing::HasSubstr("k must be <= 16384"));
    EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 256, codes + 1), x, 1, 256), ::testing::HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 256, codes), x + 4, 1, 256), ::testing::HasSubstr("16-byte aligned"));
    for (int64_t group : {64, 192, 384, 6144})
        EXPECT_THAT(tern2_gemv_stream_rejects(tern2(4, 8192, codes), x, 1, group), ::testing::HasSubstr("128 * 2^e <= 4096"))
            << group;
    // The gemv path: m = 1 from 16 MiB of codes on, when the kernel's rules allow.
    using trit::kernels::tern2_gemv_variant;
    EXPECT_STREQ(tern2_gemv_variant(tern2(8192, 8192, codes), x, 1, 8192), "stream");
    EXPECT_STREQ(tern2_gemv_variant(tern2(128256, 4096, codes), x, 1, 4096), "stream");
    EXPECT_STREQ(tern2_gemv_variant(tern2(8191, 8192, codes), x, 1, 8192), "dp4a");
    EXPECT_STREQ(tern2_gemv_variant(tern2(14336, 4096, codes), x, 1, 4096), "skinny");
    EXPECT_STREQ(tern2_gemv_variant(tern2(8192, 8192, codes), x, 2, 8192), "skinny");
    EXPECT_STREQ(tern2_gemv_variant(tern2(16384, 8256, codes), x, 1, 8256), "dp4a");  // k % 128 != 0
    trit::gputest::expect_rejected("tern2_gemv_stream", tern2_gemv_stream_rejects, trit::kernels::tern2_gemv_stream,
                                   tern2(4, 4096, codes), x, 2, 4096, "m must be 1");
}

}  // namespace
