// GPU tests of the bt GEMV (kernels/bt_gemv.h): int32 accumulators and fused epilogue bit-exact
// against the CPU references for d = 1..4 over a shape table (m = 1, 2, 3, 8; n = 1 .. 2560 with
// odd n, so rows start at every byte offset; k with every tail length k % 5, from one quintet to
// 14336; group = k, 64 (boundaries inside quintets), 128, 40, 100 and larger than k; x over the
// full int8 range, -128 included), through bt_gemv (which runs the stream kernel for m, d <= 2) and
// through the warp kernel alone, auto dispatch, and the contract rules on the host. The stream
// kernel's own table: test_bt_gemv_stream.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/bt_gemv.h"
#include "kernels/product.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using ::testing::HasSubstr;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;

struct Shape {
    int64_t m, n, k, group;
};

class BtGemv : public trit::gputest::RequiresGpu<::testing::Test> {};

const std::vector<Shape> kShapes = {
    {1, 1, 5, 5},           {1, 3, 7, 64},       {2, 17, 64, 64},     {3, 17, 65, 64},
    {8, 130, 320, 64},      {1, 130, 784, 784},  {2, 17, 784, 64},    {3, 3, 2560, 128},
    {1, 2560, 2560, 64},    {8, 17, 2560, 2560}, {1, 17, 4100, 64},   {2, 130, 4096, 64},
    {1, 17, 4096, 1 << 18}, {8, 3, 4096, 40},    {3, 17, 6912, 100},  {1, 5, 14336, 64},
    {2, 3, 14336, 14336},   {8, 9, 1283, 128},   {1, 31, 1001, 1001}, {2, 33, 3, 3},
};

// Every depth over `shapes`, through `path` and through `launch` alone.
void run_every_depth(const std::vector<Shape>& shapes, uint64_t seed, ProductPath path,
                     trit::gputest::ProductLauncher launch) {
    for (int depth = 1; depth <= 4; ++depth)
        for (const Shape& s : shapes) {
            ProductCase c;
            c.format = Format::kBt;
            c.depth = depth;
            c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
            c.seed = ++seed;
            c.per_tensor_scale = seed % 2 == 0;
            c.bias = seed % 3 != 0;
            trit::gputest::check_product_case(c, path);
            trit::gputest::check_product_case(c, launch);
        }
}

TEST_F(BtGemv, MatchesTheReferenceForEveryDepthOverTheShapeTable) {
    run_every_depth(kShapes, 500, ProductPath::kGemv, trit::kernels::bt_gemv_warp);
}

// x at the int8 extremes only: with d = 4 (|code| <= 40) every byte of the dp4a and the column-4
// product reach their largest magnitudes.
TEST_F(BtGemv, TakesTheFullInt8Range) {
    for (const auto& [lo, hi] :
         std::vector<std::pair<int, int>>{{-128, -127}, {126, 127}, {-128, 127}})
        for (int depth : {2, 4}) {
            ProductCase c;
            c.format = Format::kBt;
            c.depth = depth;
            c.m = 8, c.n = 33, c.k = 1027, c.group = 64;
            c.x_lo = lo, c.x_hi = hi;
            c.seed = 91 + static_cast<uint64_t>(hi) + depth;
            trit::gputest::check_product_case(c, ProductPath::kGemv);
            c.m = 2;  // the warp kernel at a stream kernel's m
            trit::gputest::check_product_case(c, trit::kernels::bt_gemv_warp);
        }
}

TEST_F(BtGemv, AutoDispatchPicksItForSmallM) {
    ProductCase c;
    c.format = Format::kBt;
    c.depth = 2;
    c.m = 2, c.n = 48, c.k = 4096, c.group = 64;
    trit::gputest::check_product_case(c, ProductPath::kAuto);
    c.group = 16;  // off the contract: the generic kernel
    trit::gputest::check_product_case(c, ProductPath::kAuto);
}

// Above 8 tokens the gemv path runs bt_gemv over chunks of 8 (the last one shorter: m = 9, 20, 33),
// every depth, with per-row x scales, per-tensor ones and int32 accumulators over
// scale groups: each chunk's x, x scales and outputs start at its first token.
TEST_F(BtGemv, ChunksOfEightTokensAboveEight) {
    run_every_depth(
        {{9, 130, 640, 64}, {16, 33, 2560, 2560}, {20, 67, 1027, 128}, {33, 85, 784, 784}}, 900,
        ProductPath::kAuto, trit::kernels::bt_gemv_chunks);
}

PackedWeights bt(int depth, int64_t n, int64_t k, const uint8_t* a) {
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = depth;
    w.a = a;
    w.n = n;
    w.k = k;
    return w;
}

uint8_t g_codes[64];
int8_t g_x[64];

// The kernel's own rules come back from its rejects; check_product's (own = false) only from the
// launcher, which checks them first.
void expect_rule(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const std::string& rule, bool own = true) {
    if (own) {
        EXPECT_THAT(trit::kernels::bt_gemv_rejects(w, x, m, group), HasSubstr(rule));
    }
    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::bt_gemv(w, x, m, group, out, nullptr);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        const std::string shape = "m=" + std::to_string(m) + ", n=" + std::to_string(w.n) +
                                  ", k=" + std::to_string(w.k) +
                                  ", group=" + std::to_string(group) + "): ";
        EXPECT_THAT(e.what(), HasSubstr("bt_gemv (bt, " + shape));
        EXPECT_THAT(e.what(), HasSubstr(rule));
    }
}

TEST(BtGemvContract, RejectsEachRuleNamingTheShape) {
    // No alignment rule: any row start, any x.
    EXPECT_EQ(trit::kernels::bt_gemv_rejects(bt(2, 4, 4096, g_codes + 1), g_x + 3, 8, 64), "");
    EXPECT_EQ(trit::kernels::bt_gemv_rejects(bt(2, 4, 7, g_codes), g_x, 1, 7), "");
    EXPECT_EQ(trit::kernels::bt_gemv_rejects(bt(2, 4, 100, g_codes), g_x, 1, 40), "");
    EXPECT_EQ(trit::kernels::bt_gemv_rejects(bt(4, 4, 100, g_codes), g_x, 1, 1000), "");
    expect_rule(bt(2, 4, 4096, g_codes), g_x, 9, 64, "m must be in 1..8");
    expect_rule(bt(2, 4, 4096, g_codes), g_x, 1, 39,
                "group must be >= k or >= 40 (a lane's 40 columns may meet at most two groups)");
    expect_rule(bt(1, 4, 100, g_codes), g_x, 2, 5, "group must be >= k or >= 40");
    // 8 tokens of x at k = 2^18 need about 8 * 2^18 * 9 / 8 bytes of shared memory.
    expect_rule(bt(2, 4, 1 << 18, g_codes), g_x, 8, 1 << 18, "must fit");
    // check_product's rules come first.
    expect_rule(bt(5, 4, 64, g_codes), g_x, 1, 64, "bt depth must be in 1..4", /*own=*/false);
}

TEST(BtGemvContract, DispatchTakesItForSmallMAndFallsBackOtherwise) {
    std::string why;
    for (int64_t k : {2560, 4096, 6912, 14336})
        for (int64_t m : {1, 8}) {
            EXPECT_EQ(trit::kernels::choose_path(bt(2, 4096, k, g_codes + 1), g_x, m, 64, &why),
                      ProductPath::kGemv)
                << "k=" << k << " m=" << m << ": " << why;
            EXPECT_EQ(trit::kernels::choose_path(bt(2, 4096, k, g_codes), g_x, m, k, &why),
                      ProductPath::kGemv)
                << "k=" << k << " m=" << m << ": " << why;
        }
    EXPECT_EQ(trit::kernels::choose_path(bt(2, 4096, 4096, g_codes), g_x, 1, 32, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("group must be >= k or >= 40"));
    // Above 8 tokens: the GEMV over chunks of 8, with an 8-token chunk's rules.
    for (int64_t m : {9, 16, 2048}) {
        EXPECT_EQ(trit::kernels::choose_path(bt(2, 4096, 4096, g_codes), g_x, m, 64, &why),
                  ProductPath::kGemv)
            << "m=" << m << ": " << why;
        EXPECT_THAT(why, HasSubstr("gemv: m in [9, inf]"));
    }
    EXPECT_EQ(trit::kernels::choose_path(bt(2, 4096, 4096, g_codes), g_x, 16, 32, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("group must be >= k or >= 40"));
    // Small layers above 64 tokens: the generic kernel's one launch (n * k = 262143 / 262144); up
    // to 64 tokens the chunks whatever the layer.
    EXPECT_EQ(trit::kernels::choose_path(bt(2, 262143, 1, g_codes), g_x, 65, 1, &why),
              ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("above 64 tokens n * k must be >= 262144"));
    EXPECT_EQ(trit::kernels::choose_path(bt(2, 512, 512, g_codes), g_x, 65, 512, &why),
              ProductPath::kGemv)
        << why;
    EXPECT_EQ(trit::kernels::choose_path(bt(2, 32, 49, g_codes), g_x, 64, 49, &why),
              ProductPath::kGemv)
        << why;
}

TEST(BtGemvContract, ChunksNameTheCallAndAnEightTokenChunksRule) {
    EXPECT_EQ(trit::kernels::bt_gemv_chunks_rejects(bt(2, 64, 4096, g_codes), g_x, 2048, 64), "");
    EXPECT_EQ(trit::kernels::bt_gemv_chunks_rejects(bt(2, 4, 4096, g_codes), g_x, 3, 64), "");
    EXPECT_THAT(trit::kernels::bt_gemv_chunks_rejects(bt(2, 4, 4096, g_codes), g_x, 0, 64),
                HasSubstr("m must be >= 1"));
    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    const struct {
        int64_t n, k, group;
        const char* rule;
    } cases[] = {{4, 4096, 4096, "above 64 tokens n * k must be >= 262144"},
                 {64, 4096, 39, "group must be >= k or >= 40"},
                 {4, 1 << 18, 1 << 18, "must fit"}};
    for (const auto& c : cases) {
        try {
            trit::kernels::bt_gemv_chunks(bt(2, c.n, c.k, g_codes), g_x, 65, c.group, out, nullptr);
            ADD_FAILURE() << "expected trit::Error with '" << c.rule << "'";
        } catch (const trit::Error& e) {
            EXPECT_THAT(e.what(), HasSubstr("bt_gemv_chunks (bt, m=65, n=" + std::to_string(c.n) +
                                            ", k=" + std::to_string(c.k) +
                                            ", group=" + std::to_string(c.group) + "): "));
            EXPECT_THAT(e.what(), HasSubstr(c.rule));
        }
    }
}

}  // namespace
