// GPU tests of the tern24 GEMV path (kernels/tern24_gemv.h): the warp-per-row kernel run alone
// (tern24_gemv_warp) and the path through the dispatcher, int32 accumulators and fused epilogue
// bit-exact against the CPU references over a shape table (m = 1, 2, 3, 8; n = 1 .. 2560 with odd
// n; k from one 128-column chunk to more than two chunks per lane; group = k, 32, 64, 128, 384 and
// larger than k; x over the full int8 range, -128 included), auto dispatch and its order over the
// three kernels (forced ones too), and the path's contract rules on the host (each rule rejected
// with m, n, k and group in the message). The streaming kernel that the path runs for m <= 2 and
// the tensor-core kernel it runs from m = 3 have their own tests (test_tern24_gemv_stream.cpp,
// test_tern24_gemv_mma.cpp).
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

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

struct Shape {
    int64_t m, n, k, group;
};

class Tern24Gemv : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(Tern24Gemv, MatchesTheReferenceOverTheShapeTable) {
    const std::vector<Shape> shapes = {
        {1, 1, 128, 128},      {1, 3, 128, 1000},     {2, 17, 256, 64},     {3, 130, 384, 32},
        {8, 17, 640, 128},     {1, 2560, 2560, 2560}, {1, 130, 2560, 64},   {2, 130, 2560, 128},
        {3, 17, 4096, 4096},   {8, 130, 4096, 64},    {1, 3, 4096, 1 << 20}, {8, 3, 14336, 14336},
        {1, 17, 14336, 64},    {2, 1, 6912, 384},     {8, 130, 1152, 32},   {3, 2560, 1024, 256},
        {1, 17, 8320, 8320},   {2, 5, 768, 512},
    };
    uint64_t seed = 300;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        trit::gputest::check_product_case(c, trit::kernels::tern24_gemv_warp);
        if (::testing::Test::HasFailure()) return;
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

// x at the int8 extremes only: |x * code| sums of -128 and 127 reach every byte of the dp4a.
// One kernel instantiation, its shared memory growing, shrinking and growing again with k: the
// launch must not run under a limit lowered by the smaller call (was a launch "invalid argument").
TEST_F(Tern24Gemv, SameKernelWithLargerSmallerLargerSharedMemory) {
    // The warp kernel through the path (auto runs the tensor-core kernel at m = 8).
    const trit::kernels::ScopedTern24GemvVariant warp(trit::kernels::Tern24GemvVariant::kWarp);
    uint64_t seed = 900;
    for (int64_t k : {16384, 256, 16384, 4096}) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = 8, c.n = 24, c.k = k, c.group = k;
        c.seed = ++seed;
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

TEST_F(Tern24Gemv, TakesTheFullInt8Range) {
    for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-128, -127}, {126, 127}, {-128, 127}}) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = 8, c.n = 33, c.k = 1024, c.group = 64;
        c.x_lo = lo, c.x_hi = hi;
        c.seed = 77 + static_cast<uint64_t>(hi);
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

TEST_F(Tern24Gemv, AutoDispatchPicksItForSmallM) {
    ProductCase c;
    c.format = Format::kTern24;
    c.m = 2, c.n = 48, c.k = 512, c.group = 128;
    trit::gputest::check_product_case(c, ProductPath::kAuto);
    c.k = 784, c.group = 784;  // off the contract: the generic kernel
    trit::gputest::check_product_case(c, ProductPath::kAuto);
}

PackedWeights tern24(int64_t n, int64_t k, const uint8_t* mask, const uint8_t* signs) {
    return trit::gputest::tern24_weights(n, k, mask, signs);
}

// The path's auto order: the streaming kernel for m <= 2, the tensor-core kernel from m = 3 where
// m >= 5 or n >= 8192, else the warp kernel; a forced kernel runs or throws its own rule. The
// calls through the tensor-core kernel match the reference.
TEST_F(Tern24Gemv, AutoOrderAndForcedKernels) {
    using trit::kernels::ScopedTern24GemvVariant;
    using trit::kernels::tern24_gemv_variant;
    using trit::kernels::Tern24GemvVariant;
    alignas(16) static uint8_t mask[64], signs[64];
    alignas(16) static int8_t x[64];
    EXPECT_STREQ(tern24_gemv_variant(tern24(4096, 4096, mask, signs), x, 2, 4096), "stream");
    EXPECT_STREQ(tern24_gemv_variant(tern24(4096, 4096, mask, signs), x, 4, 4096), "warp");
    EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 3, 4096), "mma");
    EXPECT_STREQ(tern24_gemv_variant(tern24(2560, 2560, mask, signs), x, 5, 2560), "mma");
    EXPECT_STREQ(tern24_gemv_variant(tern24(24, 256, mask, signs), x, 8, 256), "mma");
    // Several scale groups, k > 16384: not the tensor-core kernel.
    EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 8, 128), "warp");
    EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 32768, mask, signs), x, 3, 32768), "warp");
    {
        const ScopedTern24GemvVariant forced(Tern24GemvVariant::kWarp);
        EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 1, 4096), "warp");
    }
    {
        const ScopedTern24GemvVariant forced(Tern24GemvVariant::kMma);
        EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 1, 4096), "mma");
        EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 1, 128), "");
        EXPECT_THAT(trit::kernels::tern24_gemv_rejects(tern24(8192, 4096, mask, signs), x, 1, 128),
                    HasSubstr("group must be >= k (one scale group)"));
    }
    {
        const ScopedTern24GemvVariant forced(Tern24GemvVariant::kStream);
        EXPECT_STREQ(tern24_gemv_variant(tern24(8192, 4096, mask, signs), x, 3, 4096), "");
        int32_t acc[1];
        trit::kernels::ProductOut out;
        out.acc = acc;
        try {
            trit::kernels::tern24_gemv(tern24(8192, 4096, mask, signs), x, 3, 4096, out, nullptr);
            ADD_FAILURE() << "expected trit::Error";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(),
                        HasSubstr("tern24_gemv (tern24, m=3, n=8192, k=4096, group=4096): "
                                  "m must be 1 or 2"));
        }
    }
    EXPECT_EQ(trit::kernels::tern24_gemv_variant_forced(), Tern24GemvVariant::kAuto);
    uint64_t seed = 1200;
    for (const Shape& s :
         std::vector<Shape>{{5, 40, 512, 512}, {8, 17, 4096, 4096}, {6, 33, 1152, 1 << 20}}) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.bias = true;
        ASSERT_STREQ(tern24_gemv_variant(tern24(s.n, s.k, mask, signs), x, s.m, s.group), "mma");
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

alignas(16) uint8_t g_mask[64];
alignas(16) uint8_t g_signs[64];
alignas(16) int8_t g_x[64];

// The kernel's own rules come back from its rejects; check_product's (own = false) only from the
// launcher, which checks them first.
void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const std::string& rule,
                 bool own = true) {
    if (own) {
        EXPECT_THAT(trit::kernels::tern24_gemv_rejects(w, x, m, group), HasSubstr(rule));
    }
    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::tern24_gemv(w, x, m, group, out, nullptr);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        const std::string shape = "m=" + std::to_string(m) + ", n=" + std::to_string(w.n) +
                                  ", k=" + std::to_string(w.k) + ", group=" + std::to_string(group) + "): ";
        EXPECT_THAT(e.what(), HasSubstr("tern24_gemv (tern24, " + shape));
        EXPECT_THAT(e.what(), HasSubstr(rule));
    }
}

TEST(Tern24GemvContract, RejectsEachRuleNamingTheShape) {
    const PackedWeights ok = tern24(4, 256, g_mask, g_signs);
    EXPECT_EQ(trit::kernels::tern24_gemv_rejects(ok, g_x, 8, 256), "");
    EXPECT_EQ(trit::kernels::tern24_gemv_rejects(ok, g_x, 1, 32), "");
    EXPECT_EQ(trit::kernels::tern24_gemv_rejects(ok, g_x, 1, 64), "");
    EXPECT_EQ(trit::kernels::tern24_gemv_rejects(ok, g_x, 1, 128), "");
    EXPECT_EQ(trit::kernels::tern24_gemv_rejects(ok, g_x, 1, 1000), "");
    expect_rule(ok, g_x, 9, 256, "m must be in 1..8");
    expect_rule(tern24(4, 320, g_mask, g_signs), g_x, 1, 320, "k must be a positive multiple of 128");
    expect_rule(tern24(4, 65, g_mask, g_signs), g_x, 1, 65, "k must be a positive multiple of 128");
    expect_rule(tern24(4, 512, g_mask, g_signs), g_x, 1, 96, "group must be >= k, 32, 64 or a multiple of 128");
    expect_rule(tern24(4, 512, g_mask, g_signs), g_x, 1, 16, "group must be >= k, 32, 64 or a multiple of 128");
    expect_rule(tern24(4, 256, g_mask + 8, g_signs), g_x, 1, 256, "the mask and x must be 16-byte aligned");
    expect_rule(ok, g_x + 4, 1, 256, "the mask and x must be 16-byte aligned");
    expect_rule(tern24(4, 256, g_mask, g_signs + 4), g_x, 1, 256, "the signs must be 8-byte aligned");
    // 8 tokens of x at k = 2^18 need 8 * 2^18 * 9 / 8 bytes of shared memory.
    expect_rule(tern24(4, 1 << 18, g_mask, g_signs), g_x, 8, 1 << 18, "must fit");
    // check_product's rules come first.
    expect_rule(tern24(4, 256, g_mask, nullptr), g_x, 1, 256, "tern24 needs its signs array", /*own=*/false);
}

// The warp kernel alone names itself; its rules are the path's for m > 2.
TEST(Tern24GemvContract, TheWarpKernelAloneRejectsNamingItself) {
    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    EXPECT_EQ(trit::kernels::tern24_gemv_warp_rejects(tern24(4, 256, g_mask, g_signs), g_x, 1, 64),
              "");
    try {
        trit::kernels::tern24_gemv_warp(tern24(4, 256, g_mask, g_signs), g_x, 9, 256, out, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(
            e.what(),
            HasSubstr("tern24_gemv_warp (tern24, m=9, n=4, k=256, group=256): m must be in 1..8"));
    }
}

TEST(Tern24GemvContract, DispatchTakesItForSmallMAndFallsBackOtherwise) {
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(tern24(2560, 2560, g_mask, g_signs), g_x, 1, 2560, &why),
              ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern24(4096, 14336, g_mask, g_signs), g_x, 8, 64, &why),
              ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern24(6912, 2560, g_mask, g_signs), g_x, 3, 128, &why),
              ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern24(4096, 784, g_mask, g_signs), g_x, 1, 784, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("k must be a positive multiple of 128"));
    EXPECT_NE(trit::kernels::choose_path(tern24(4096, 4096, g_mask, g_signs), g_x, 9, 4096, &why),
              ProductPath::kGemv);
}

}  // namespace
