// GPU tests of the tensor-core tern24 GEMV (tern24_gemv_mma, kernels/tern24_gemv.h): int32
// accumulators and fused epilogue bit-exact against the CPU references over a shape table (m = 1
// to 8; n = 1, odd, and more 16-row tiles than the grid's warps, so warps loop; k from one
// 128-column chunk, sub-tiles of 512 columns whole and in part, to the 16384 limit; per-tensor and
// per-channel scales, bias on and off), acc and y each with and without the early reads of
// PackedWeights::pdl, x at the int8 extremes, its contract rules on the host, the auto dispatch's
// rule for it ahead of the dense copy, and that rule as dispatch applies it on the device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/product.h"
#include "kernels/tern24_gemv.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;

// check_product_case runs acc with PackedWeights::pdl off and y with it on; this launcher flips
// the flag, so that both outputs are also checked the other way.
void mma_pdl_flipped(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const trit::kernels::ProductOut& out, cudaStream_t stream) {
    PackedWeights flipped = w;
    flipped.pdl = !w.pdl;
    trit::kernels::tern24_gemv_mma(flipped, x, m, group, out, stream);
}

class Tern24GemvMma : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(Tern24GemvMma, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k, group;
    };
    // clang-format off
    const std::vector<Shape> shapes = {
        // One chunk (lanes t = 1..3 past k), one row; a group past k.
        {1, 1, 128, 128}, {2, 3, 128, 1 << 20},
        // Sub-tiles of 512 columns in part (384, 640, 6912: 3, 5 and 54 chunks) and whole.
        {1, 17, 384, 384}, {3, 17, 640, 640}, {8, 33, 512, 512}, {5, 40, 6912, 6912},
        {1, 37, 2560, 2560}, {4, 100, 4096, 4096}, {7, 19, 14336, 14336}, {8, 21, 16384, 16384},
        {6, 1000, 3072, 3072}, {2, 4099, 2048, 2048},
        // More tiles than warps (an H100 or H200 runs 264 blocks of 8 warps): each warp loops.
        {1, 150001, 256, 256}, {2, 70001, 512, 1 << 20}, {8, 40000, 1024, 1024},
    };
    // clang-format on
    uint64_t seed = 700;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern24_gemv_mma);
        trit::gputest::check_product_case(c, mma_pdl_flipped);
        if (::testing::Test::HasFailure()) return;
    }
}

// x = -128 everywhere: the largest |x * code| sums (128 * 8192 at k = 16384), for every token;
// then the two extremes mixed.
TEST_F(Tern24GemvMma, ExtremeXStaysExact) {
    uint64_t seed = 90;
    for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-128, -128}, {-128, 127}}) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = 8, c.n = 37, c.k = 16384, c.group = 16384;
        c.x_lo = lo, c.x_hi = hi;
        c.seed = ++seed;
        trit::gputest::check_product_case(c, trit::kernels::tern24_gemv_mma);
    }
}

PackedWeights tern24(int64_t n, int64_t k, const uint8_t* mask, const uint8_t* signs) {
    return trit::gputest::tern24_weights(n, k, mask, signs);
}

alignas(16) uint8_t g_mask[64];
alignas(16) uint8_t g_signs[64];
alignas(16) int8_t g_x[64];

void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const std::string& rule) {
    trit::gputest::expect_rejected("tern24_gemv_mma", trit::kernels::tern24_gemv_mma_rejects,
                                   trit::kernels::tern24_gemv_mma, w, x, m, group, rule);
}

// The auto dispatch's rule for the tensor-core kernel ahead of the dense copy, with the H200's 2112
// resident warps (132 SMs, 2 blocks of 8 warps) and others.
TEST(Tern24GemvMmaContract, FirstRuleWantsManyWeightsAndFullRounds) {
    using trit::kernels::tern24_gemv_mma_first;
    EXPECT_TRUE(tern24_gemv_mma_first(8, 128256, 4096, 2112));  // 8016 tiles, 4 rounds: 0.95
    EXPECT_TRUE(tern24_gemv_mma_first(3, 65536, 4096, 2112));   // 4096 tiles, 2 rounds: 0.97
    EXPECT_TRUE(tern24_gemv_mma_first(4, 151936, 3584, 2112));  // 9496 tiles, 5 rounds: 0.90
    EXPECT_TRUE(tern24_gemv_mma_first(8, 128256, 8192, 2112));
    EXPECT_FALSE(tern24_gemv_mma_first(8, 49152, 4096, 2112));  // 3072 tiles, 2 rounds: 0.73
    EXPECT_FALSE(tern24_gemv_mma_first(8, 70000, 4096, 2112));  // 4375 tiles, 3 rounds: 0.69
    EXPECT_TRUE(tern24_gemv_mma_first(8, 70000, 4096, 2200));   // 2 rounds: 0.99
    EXPECT_FALSE(tern24_gemv_mma_first(8, 65535, 4096, 2112));  // under 2^28 weights
    EXPECT_TRUE(tern24_gemv_mma_first(8, 65536, 4096, 2112));
    EXPECT_FALSE(tern24_gemv_mma_first(2, 128256, 4096, 2112));  // m = 2: the streaming kernel
    EXPECT_FALSE(tern24_gemv_mma_first(9, 128256, 4096, 2112));
    EXPECT_FALSE(tern24_gemv_mma_first(8, 128256, 4096, 0));  // x does not fit
}

TEST(Tern24GemvMmaContract, RejectsShapesOffItsRulesNamingThem) {
    using trit::kernels::tern24_gemv_mma_rejects;
    for (int64_t m = 1; m <= 8; ++m)
        EXPECT_EQ(tern24_gemv_mma_rejects(tern24(4, 4096, g_mask, g_signs), g_x, m, 4096), "") << m;
    EXPECT_EQ(tern24_gemv_mma_rejects(tern24(4, 128, g_mask, g_signs), g_x, 1, 1 << 20), "");
    EXPECT_EQ(tern24_gemv_mma_rejects(tern24(4, 16384, g_mask, g_signs), g_x, 8, 16384), "");

    expect_rule(tern24(4, 4096, g_mask, g_signs), g_x, 9, 4096, "m must be in 1..8");
    expect_rule(tern24(4, 320, g_mask, g_signs), g_x, 1, 320,
                "k must be a positive multiple of 128");
    expect_rule(tern24(4, 64, g_mask, g_signs), g_x, 1, 64, "k must be a positive multiple of 128");
    expect_rule(tern24(4, 16512, g_mask, g_signs), g_x, 1, 16512, "k must be <= 16384");
    for (int64_t group : {32, 64, 128, 2048, 4095})
        expect_rule(tern24(4, 4096, g_mask, g_signs), g_x, 1, group,
                    "group must be >= k (one scale group)");
    expect_rule(tern24(4, 256, g_mask + 8, g_signs), g_x, 1, 256,
                "the mask and x must be 16-byte aligned");
    expect_rule(tern24(4, 256, g_mask, g_signs), g_x + 4, 1, 256,
                "the mask and x must be 16-byte aligned");
    expect_rule(tern24(4, 256, g_mask, g_signs + 4), g_x, 1, 256,
                "the signs must be 8-byte aligned");
    PackedWeights tern2 = tern24(4, 256, g_mask, nullptr);
    tern2.format = Format::kTern2;
    EXPECT_THAT(tern24_gemv_mma_rejects(tern2, g_x, 1, 256), HasSubstr("tern24 weights only"));
}

// On this device: auto dispatch sends m = 3..8 to the tensor-core GEMV exactly where the rule holds
// with the kernel's resident warps here, else to the dense copy.
TEST_F(Tern24GemvMma, DispatchFollowsTheFirstRuleOnThisDevice) {
    using trit::kernels::ProductPath;
    alignas(16) static uint8_t mask[64], signs[64], dense[64];
    alignas(16) static int8_t x[64];
    const int64_t warps = trit::kernels::tern24_gemv_mma_resident_warps(8, 4096);
    EXPECT_GT(warps, 0);
    EXPECT_EQ(trit::kernels::tern24_gemv_mma_resident_warps(9, 4096), 0);
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {128256, 4096}, {65536, 4096}, {49152, 4096}, {151936, 3584}, {24576, 4096}}) {
        PackedWeights w = tern24(n, k, mask, signs);
        w.dense = dense;
        for (int64_t m : {3, 8}) {
            const bool first = trit::kernels::tern24_gemv_mma_first(
                m, n, k, trit::kernels::tern24_gemv_mma_resident_warps(m, k));
            std::string why;
            EXPECT_EQ(trit::kernels::choose_path(w, x, m, k, &why),
                      first ? ProductPath::kGemv : ProductPath::kGemm)
                << m << " x " << n << " x " << k << ": " << why;
            if (first) {
                EXPECT_STREQ(trit::kernels::tern24_gemv_variant(w, x, m, k), "mma");
            }
        }
    }
}

}  // namespace
