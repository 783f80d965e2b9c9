// GPU tests of the streaming tern2 GEMV (kernels/tern2_gemv_dp4a.h): int32 accumulators and fused
// epilogue bit-exact against the CPU references over a shape table (m = 1, 2; n = 1, odd, and
// more row tiles than the grid holds, so blocks loop; k from one piece to the 16384 limit, off
// the 2048-column warp span; one group, groups of 64 .. 2048 columns (runs of lanes), whole warps,
// and a partial last group), both with and without the early weight reads of PDL, and its
// contract rules on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_gemv_dp4a.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

class Tern2GemvDp4a : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(Tern2GemvDp4a, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k, group;
    };
    const std::vector<Shape> shapes = {
        {1, 1, 64, 64},         {2, 1, 64, 1 << 20},    {1, 3, 128, 64},       {2, 17, 192, 64},
        {1, 33, 2048, 2048},    {2, 65, 2112, 128},     {1, 40, 2560, 256},    {2, 41, 2560, 512},
        {1, 7, 4096, 1024},     {2, 9, 4096, 2048},     {1, 5, 8192, 4096},    {2, 3, 4608, 4096},
        {1, 20001, 64, 64},     {2, 9001, 128, 128},    {1, 4099, 4096, 4096}, {1, 31, 14336, 14336},
        {2, 30, 16384, 16384},  {1, 6, 16384, 64},      {2, 300, 704, 704},    {1, 129, 16320, 16320},
        {1, 10, 256, 256},      {1, 256, 512, 512},     {1, 2, 256, 256},      {2, 5, 512, 512},
    };
    uint64_t seed = 300;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern2_gemv_dp4a);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2GemvDp4a, ExtremeCodesAndXStayExact) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 2, c.n = 37, c.k = 16384, c.group = 16384;
    c.x_lo = -128, c.x_hi = -128;  // |acc| up to 128 * 16384 = 2^21
    trit::gputest::check_product_case(c, trit::kernels::tern2_gemv_dp4a);
}

TEST_F(Tern2GemvDp4a, TheGemvPathRunsItForOneTokenWithScaleGroups) {
    // One scale group goes to the streaming tensor-core kernel (test_tern2_skinny.cpp).
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(trit::gputest::tern2_weights(96, 4096, codes), x, 1, 1024), "dp4a");
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 1, c.n = 96, c.k = 4096, c.group = 1024;
    c.seed = 8;
    trit::gputest::check_product_case(c, ProductPath::kAuto);
    trit::gputest::check_product_case(c, ProductPath::kGemv);
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

TEST(Tern2GemvDp4aContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_gemv_dp4a_rejects;
    EXPECT_EQ(tern2_gemv_dp4a_rejects(tern2(4, 4096, codes), x, 1, 4096), "");
    EXPECT_EQ(tern2_gemv_dp4a_rejects(tern2(4, 16384, codes), x, 2, 64), "");
    EXPECT_EQ(tern2_gemv_dp4a_rejects(tern2(4, 16384, codes), x, 2, 6144), "");
    EXPECT_EQ(tern2_gemv_dp4a_rejects(tern2(4, 4160, codes), x, 1, 5000), "");
    EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 4096, codes), x, 3, 4096), HasSubstr("m must be <= 2"));
    EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 100, codes), x, 1, 100), HasSubstr("k must be a multiple of 64"));
    EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 16448, codes), x, 1, 16448), HasSubstr("k must be <= 16384"));
    EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 256, codes + 1), x, 1, 256), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 256, codes), x + 4, 1, 256), HasSubstr("16-byte aligned"));
    for (int64_t group : {32, 96, 192, 320, 3072})
        EXPECT_THAT(tern2_gemv_dp4a_rejects(tern2(4, 8192, codes), x, 1, group), HasSubstr("64 * 2^e <= 2048"))
            << group;

    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::tern2_gemv_dp4a(tern2(4, 4096, codes), x, 3, 4096, out, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern2_gemv_dp4a (m=3, n=4, k=4096, group=4096): m must be <= 2"));
    }
}

}  // namespace
