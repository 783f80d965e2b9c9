// GPU tests of the tern2 GEMV path (kernels/tern2_gemv.h): the tensor-core kernel run alone
// (tern2_gemv_mma) and through the dispatcher, int32 accumulators and fused epilogue bit-exact
// against the CPU references over a shape table (m = 1..8, odd and partial row tiles, k at and off
// the 256-column k-block, one group and groups of 256 / 512, a single k-block, more warps than
// k-blocks), and its own contract rules on the host. The streaming kernels that the path runs for
// one scale group (skinny) and for m = 1 with several (dp4a) have their own tests
// (test_tern2_skinny.cpp, test_tern2_gemv_dp4a.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

class Tern2Gemv : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(Tern2Gemv, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k, group;
    };
    const std::vector<Shape> shapes = {
        {1, 1, 64, 64},       {1, 16, 256, 256},     {1, 17, 320, 320},    {2, 3, 64, 1000},
        {3, 33, 2560, 2560},  {8, 130, 768, 768},    {5, 64, 4096, 256},   {1, 40, 2560, 512},
        {7, 16, 4160, 4160},  {4, 257, 1024, 1 << 20}, {1, 2560, 2560, 2560}, {8, 100, 14336, 256},
        {6, 9, 576, 256},
    };
    uint64_t seed = 100;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        trit::gputest::check_product_case(c, trit::kernels::tern2_gemv_mma);
        if (::testing::Test::HasFailure()) return;
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

TEST_F(Tern2Gemv, SmallMBeyondItsSharedMemoryStageRunsOnTheGemm) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 8, c.n = 40, c.k = 16384, c.group = 16384;
    trit::gputest::check_product_case(c, ProductPath::kAuto);
}

TEST_F(Tern2Gemv, AutoDispatchPicksItForSmallM) {
    ProductCase c;
    c.format = Format::kTern2;
    c.m = 1, c.n = 48, c.k = 512, c.group = 512;
    trit::gputest::check_product_case(c, ProductPath::kAuto);
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

TEST(Tern2GemvContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_gemv_mma_rejects;
    using trit::kernels::tern2_gemv_rejects;
    EXPECT_EQ(tern2_gemv_mma_rejects(tern2(4, 256, codes), x, 8, 256), "");
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 256, codes), x, 9, 256), HasSubstr("m must be <= 8"));
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 100, codes), x, 1, 100), HasSubstr("k must be a multiple of 64"));
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 256, codes + 1), x, 1, 256), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 256, codes), x + 4, 1, 256), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 512, codes), x, 1, 64), HasSubstr("multiple of 256"));
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 256 * 65, codes), x, 1, 256), HasSubstr("at most 64 scale groups"));
    EXPECT_EQ(tern2_gemv_mma_rejects(tern2(4, 14336, codes), x, 8, 14336), "");
    EXPECT_THAT(tern2_gemv_mma_rejects(tern2(4, 16384, codes), x, 8, 16384), HasSubstr("m * k must be <= 114688"));
    // The path takes a call when either kernel does: groups of 64 at m = 1 go to the dp4a kernel,
    // and its rules only show when both decline.
    EXPECT_EQ(tern2_gemv_rejects(tern2(4, 512, codes), x, 1, 64), "");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 512, codes), x, 1, 64), "dp4a");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 512, codes), x, 3, 256), "mma");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 4096, codes), x, 1, 4096), "oneshot");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 4160, codes), x, 1, 4160), "oneshot");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(2048, 4096, codes), x, 1, 4096), "skinny");  // 8 units a lane
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(1024, 4160, codes), x, 1, 4160), "dp4a");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 4160, codes), x, 2, 4160), "skinny");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 32768, codes), x, 1, 32768), "mma");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 32832, codes), x, 1, 32832), "mma");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 512, codes), x, 3, 64), "");
    EXPECT_THAT(tern2_gemv_rejects(tern2(4, 512, codes), x, 3, 64), HasSubstr("multiple of 256"));
    // One scale group, m = 2..16: the streaming tensor-core kernel (kernels/tern2_skinny.h).
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 4096, codes), x, 2, 4096), "skinny");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 14336, codes), x, 16, 14336), "skinny");
    EXPECT_STREQ(trit::kernels::tern2_gemv_variant(tern2(4, 32832, codes), x, 8, 32832), "");
    // Above m = 8 the skinny kernel's rule is the one named.
    EXPECT_THAT(tern2_gemv_rejects(tern2(4, 4096, codes), x, 9, 256), HasSubstr("one scale group"));

    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    auto expect_error = [&](int64_t n, int64_t k, int64_t m, const std::string& what) {
        try {
            trit::kernels::tern2_gemv(tern2(n, k, codes), x, m, k, out, nullptr);
            ADD_FAILURE() << "expected trit::Error";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), HasSubstr(what));
        }
    };
    expect_error(4, 100, 2, "tern2_gemv (m=2, n=4, k=100, group=100): k must be a multiple of 64");
    // Above m = 8 the error names the skinny kernel's rule, or the dispatch rule that keeps it off.
    expect_error(2560, 2560, 48,
                 "tern2_gemv (m=48, n=2560, k=2560, group=2560): m = 33..48 runs here only when "
                 "n <= 8192, and where k > 1024 only when n >= 5 k / 4");
    expect_error(4096, 4096, 33,
                 "tern2_gemv (m=33, n=4096, k=4096, group=4096): m > 32 needs k <= 3072");
}

TEST(Tern2GemvContract, DispatchTakesItForSmallMAndFallsBackOtherwise) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 4096, codes), x, 1, 4096, &why), ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 784, codes), x, 1, 784, &why), ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("k must be a multiple of 64"));
    // One scale group up to m = 32 (48 where k <= 3072): the streaming kernel of the gemv path.
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 16384, codes), x, 8, 16384, &why), ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 4096, codes), x, 16, 4096, &why), ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 4096, codes), x, 32, 4096, &why), ProductPath::kGemv) << why;
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 4096, codes), x, 33, 4096, &why), ProductPath::kGemm) << why;
    EXPECT_THAT(tern2_gemv_rejects(tern2(4096, 4096, codes), x, 33, 4096),
                HasSubstr("m > 32 needs k <= 3072"));
    // m = 33..48 (H200, session 34): n <= 8192, and k <= 1024 or n >= 5 k / 4.
    const struct {
        int64_t n, k, m;
        ProductPath path;
    } wide[] = {{768, 768, 48, ProductPath::kGemv},   {3072, 768, 48, ProductPath::kGemv},
                {1024, 1024, 33, ProductPath::kGemv}, {6912, 2560, 48, ProductPath::kGemv},
                {8192, 2048, 40, ProductPath::kGemv}, {3840, 3072, 33, ProductPath::kGemv},
                {3839, 3072, 33, ProductPath::kGemm}, {2560, 2560, 40, ProductPath::kGemm},
                {768, 2048, 48, ProductPath::kGemm},  {3072, 3072, 48, ProductPath::kGemm},
                {8208, 2048, 33, ProductPath::kGemm}, {8208, 768, 33, ProductPath::kGemm},
                {2048, 1536, 48, ProductPath::kGemv}, {768, 768, 49, ProductPath::kGemm}};
    for (const auto& c : wide) {
        EXPECT_EQ(trit::kernels::choose_path(tern2(c.n, c.k, codes), x, c.m, c.k, &why), c.path)
            << "n " << c.n << ", k " << c.k << ", m " << c.m << ": " << why;
    }
    EXPECT_THAT(tern2_gemv_rejects(tern2(8208, 2048, codes), x, 33, 2048),
                HasSubstr("only when n <= 8192"));
    EXPECT_THAT(tern2_gemv_rejects(tern2(2560, 2560, codes), x, 33, 2560),
                HasSubstr("only when n >= 5 k / 4"));
    // m = 17..32: every shape it takes, the BWTA shapes among them (session 34).
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {768, 768}, {3072, 768}, {768, 3072}, {2048, 1984}, {14336, 4096}}) {
        for (int64_t m : {17, 24, 32}) {
            EXPECT_EQ(trit::kernels::choose_path(tern2(n, k, codes), x, m, k, &why),
                      ProductPath::kGemv)
                << "n " << n << ", k " << k << ", m " << m << ": " << why;
        }
    }
    // Several groups above m = 8: the GEMM.
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 4096, codes), x, 17, 256, &why), ProductPath::kGemm) << why;
    // Several groups and x too large for the mma GEMV's shared-memory stage: the GEMM takes it.
    EXPECT_EQ(trit::kernels::choose_path(tern2(4096, 16384, codes), x, 8, 256, &why), ProductPath::kGemm) << why;
}

}  // namespace
