// GPU tests of the streaming tensor-core tern2 kernel for m <= 16 (kernels/tern2_skinny.h): int32
// accumulators and fused epilogue bit-exact against the CPU references over a shape table (m = 1,
// 2, 3, 8 (one token half), 9 and 16 (two); n = 1, odd, partial 16-row tiles, and so many tiles
// that a cluster runs several rounds and rotates its three buffers; k from one 64-column piece,
// off the 256-column k-block, one CTA (k <= 4096) and clusters of 2, 4 and 8 CTAs with a shorter
// last rank), with and without the early reads of PDL, x at -128, through the dispatcher's gemv
// path, and its contract rules on the host. The fused variant that quantizes float x itself
// (tern2_skinny_fused, product_from_float): its x scales bit for bit act_int8_quantize_ref's and
// its acc and y those of the int8 kernel on the reference codes, NaN and Inf rows included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/act_int8.h"
#include "core/error.h"
#include "exporters/format_table.h"
#include "kernels/product.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_skinny.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::PackedWeights;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

class Tern2Skinny : public trit::gputest::RequiresGpu<::testing::Test> {
protected:
    // Clusters (k > 4096) need a 9.0 device.
    static bool clusters() {
        int device = 0, major = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        return major >= 9;
    }
};

TEST_F(Tern2Skinny, MatchesTheReferenceOverTheShapeTable) {
    struct Shape {
        int64_t m, n, k;
    };
    const std::vector<Shape> shapes = {
        {1, 1, 64},       {2, 1, 256},      {3, 17, 320},      {8, 33, 768},     {9, 16, 1024},
        {16, 40, 2560},   {2, 130, 4096},   {16, 7, 4096},     {5, 31, 4160},    {16, 65, 6912},
        {2, 48, 14336},   {12, 3, 14336},   {16, 20, 32768},   {9, 9, 16448},    {4, 200000, 64},
        {16, 30001, 256}, {8, 2049, 2560},  {9, 20000, 4160},  {1, 2560, 2560},  {16, 4, 192},
    };
    uint64_t seed = 500;
    for (const Shape& s : shapes) {
        if (trit::kernels::tern2_skinny_needs_cluster(s.k) && !clusters()) continue;
        ProductCase c;
        c.format = Format::kTern2;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.k + (seed % 2 == 0 ? 0 : 1000);
        c.seed = ++seed;
        c.per_tensor_scale = seed % 2 == 0;
        c.bias = seed % 3 != 0;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern2_skinny);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Tern2Skinny, ExtremeCodesAndXStayExact) {
    for (int64_t k : {int64_t{4096}, int64_t{32768}}) {
        if (trit::kernels::tern2_skinny_needs_cluster(k) && !clusters()) continue;
        ProductCase c;
        c.format = Format::kTern2;
        c.m = 16, c.n = 37, c.k = k, c.group = k;
        c.x_lo = -128, c.x_hi = -128;  // |acc| up to 128 * 32768 = 2^22
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, trit::kernels::tern2_skinny);
    }
}

TEST_F(Tern2Skinny, TheGemvPathRunsItForTwoToSixteenTokens) {
    for (int64_t m : {2, 7, 16}) {
        ProductCase c;
        c.format = Format::kTern2;
        c.m = m, c.n = 96, c.k = 14336, c.group = 14336;
        c.seed = 40 + static_cast<uint64_t>(m);
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, ProductPath::kAuto);
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

// Float x through tern2_skinny_fused and product_from_float (fused, and forced onto the int8 path)
// against act_int8_quantize_ref's codes and scales run through tern2_skinny: same bits.
void check_fused(int64_t m, int64_t n, int64_t k, uint64_t seed, bool poison_rows) {
    using trit::gputest::DeviceBuffer;
    SCOPED_TRACE("fused m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    const std::vector<int8_t> codes = trit::gputest::random_codes(static_cast<size_t>(n * k), -1, 1, seed);
    const trit::exporters::Arrays packed =
        trit::exporters::pack_codes({trit::exporters::WeightFormat::kTern2, 0}, codes.data(), n, k);
    std::vector<float> x = trit::gputest::random_floats(static_cast<size_t>(m * k), -3.0f, 3.0f, seed + 1);
    for (int64_t i = 0; i < m; ++i)  // rows of different magnitudes, ties and an all-zero row
        for (int64_t c = 0; c < k; ++c) x[static_cast<size_t>(i * k + c)] *= i == 3 ? 0.0f : std::pow(10.0f, float(i) - 1.0f);
    if (poison_rows && m >= 2) x[static_cast<size_t>(1 * k + k / 2)] = std::numeric_limits<float>::quiet_NaN();
    if (poison_rows && m >= 3) x[static_cast<size_t>(2 * k)] = -std::numeric_limits<float>::infinity();
    std::vector<int8_t> q(static_cast<size_t>(m * k));
    std::vector<float> sx(static_cast<size_t>(m));
    trit::act_int8_quantize_ref(x.data(), m, k, q.data(), sx.data());
    const std::vector<float> ws = trit::gputest::random_floats(static_cast<size_t>(n), 1e-3f, 2e-2f, seed + 2);
    const std::vector<float> bias = trit::gputest::random_floats(static_cast<size_t>(n), -1.0f, 1.0f, seed + 3);

    DeviceBuffer<uint8_t> d_w(packed[0]);
    DeviceBuffer<float> d_x(x), d_sx(sx), d_ws(ws), d_bias(bias), d_sx_got(static_cast<size_t>(m));
    DeviceBuffer<int8_t> d_q(q), d_q_scratch(static_cast<size_t>(m * k));
    DeviceBuffer<float> d_y_ref(static_cast<size_t>(m * n)), d_y(static_cast<size_t>(m * n));
    DeviceBuffer<int32_t> d_acc_ref(static_cast<size_t>(m * n)), d_acc(static_cast<size_t>(m * n));
    PackedWeights w = trit::gputest::tern2_weights(n, k, d_w.get());
    ASSERT_EQ(trit::kernels::tern2_skinny_fused_rejects(w, d_x.get(), m, k), "");
    ASSERT_TRUE(trit::kernels::product_quantizes_x(w, d_x.get(), m, k));

    trit::kernels::ProductOut out;
    out.w_scale = d_ws.get();
    out.w_scale_rows = n;
    out.bias = d_bias.get();
    trit::kernels::ProductOut ref = out;
    ref.y = d_y_ref.get();
    ref.x_scale = d_sx.get();
    ref.x_scale_rows = m;
    trit::kernels::tern2_skinny(w, d_q.get(), m, k, ref, nullptr);
    trit::kernels::ProductOut acc_ref;
    acc_ref.acc = d_acc_ref.get();
    trit::kernels::tern2_skinny(w, d_q.get(), m, k, acc_ref, nullptr);
    const std::vector<float> y_ref = d_y_ref.download();
    const std::vector<int32_t> acc_want = d_acc_ref.download();

    auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    for (int pdl = 0; pdl < 2; ++pdl) {
        w.pdl = pdl == 1;
        d_y.poison();
        d_sx_got.poison();
        trit::kernels::ProductOut o = out;
        o.y = d_y.get();
        trit::kernels::product_from_float(w, d_x.get(), m, k, o, d_sx_got.get(), nullptr, nullptr);
        EXPECT_TRUE(same_bits(d_sx_got.download(), sx)) << "x scales differ from act_int8_quantize_ref (pdl " << pdl << ")";
        EXPECT_TRUE(same_bits(d_y.download(), y_ref)) << "fused y differs from the int8 kernel's (pdl " << pdl << ")";
        trit::kernels::ProductOut a;
        a.acc = d_acc.get();
        d_acc.poison();
        trit::kernels::tern2_skinny_fused(w, d_x.get(), m, k, a, d_sx_got.get(), nullptr);
        EXPECT_EQ(d_acc.download(), acc_want) << "fused accumulators differ (pdl " << pdl << ")";
    }
    // A forced path quantizes with act_int8_quantize into q first: the same y.
    d_y.poison();
    trit::kernels::ProductOut o = out;
    o.y = d_y.get();
    trit::kernels::product_from_float(w, d_x.get(), m, k, o, d_sx_got.get(), d_q_scratch.get(), nullptr, ProductPath::kGemv);
    EXPECT_FALSE(trit::kernels::product_quantizes_x(w, d_x.get(), m, k, ProductPath::kGemv));
    EXPECT_TRUE(same_bits(d_y.download(), y_ref)) << "act_int8_quantize + product differs from the int8 kernel's";
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_F(Tern2Skinny, FusedQuantizationMatchesActInt8ThenTheProduct) {
    struct Shape {
        int64_t m, n, k;
    };
    const std::vector<Shape> shapes = {{1, 1, 64},    {2, 17, 256},   {3, 33, 320},  {4, 300, 2560},
                                       {1, 4099, 4096}, {4, 40, 4096}, {2, 16, 1984}, {3, 2000, 768}};
    uint64_t seed = 900;
    for (const Shape& sh : shapes) {
        check_fused(sh.m, sh.n, sh.k, seed += 10, sh.m >= 3);
        if (::testing::Test::HasFailure()) return;
    }
}

PackedWeights tern2(int64_t n, int64_t k, const uint8_t* a) {
    return trit::gputest::tern2_weights(n, k, a);
}

TEST(Tern2SkinnyContract, RejectsShapesOffItsRulesNamingThem) {
    alignas(16) static uint8_t codes[64];
    alignas(16) static int8_t x[64];
    using trit::kernels::tern2_skinny_rejects;
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 4096, codes), x, 16, 4096), "");
    EXPECT_EQ(tern2_skinny_rejects(tern2(4, 32768, codes), x, 1, 1 << 20), "");
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 4096, codes), x, 17, 4096), HasSubstr("m must be in 1..16"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 100, codes), x, 2, 100), HasSubstr("k must be a multiple of 64"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 32832, codes), x, 2, 32832), HasSubstr("k must be <= 32768"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 4096, codes), x, 2, 2048), HasSubstr("one scale group"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 256, codes + 1), x, 2, 256), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_skinny_rejects(tern2(4, 256, codes), x + 4, 2, 256), HasSubstr("16-byte aligned"));
    EXPECT_FALSE(trit::kernels::tern2_skinny_needs_cluster(4096));
    EXPECT_TRUE(trit::kernels::tern2_skinny_needs_cluster(4160));

    alignas(16) static float xf[64];
    using trit::kernels::tern2_skinny_fused_rejects;
    EXPECT_EQ(tern2_skinny_fused_rejects(tern2(4, 4096, codes), xf, 4, 4096), "");
    EXPECT_THAT(tern2_skinny_fused_rejects(tern2(4, 4096, codes), xf, 5, 4096), HasSubstr("m must be <= 4"));
    EXPECT_THAT(tern2_skinny_fused_rejects(tern2(4, 4160, codes), xf, 1, 4160), HasSubstr("k must be <= 4096"));
    EXPECT_THAT(tern2_skinny_fused_rejects(tern2(4, 4096, codes), xf + 1, 1, 4096), HasSubstr("16-byte aligned"));
    EXPECT_THAT(tern2_skinny_fused_rejects(tern2(4, 4096, codes), xf, 1, 1024), HasSubstr("one scale group"));
    EXPECT_FALSE(trit::kernels::product_quantizes_x(tern2(4, 4096, codes), xf, 5, 4096));

    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::product_from_float(tern2(4, 4096, codes), xf, 5, 4096, out, nullptr, nullptr, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("product_from_float (tern2, m=5, n=4, k=4096, group=4096): no kernel quantizes x"));
    }
    try {
        trit::kernels::tern2_skinny(tern2(4, 4096, codes), x, 3, 1024, out, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern2_skinny (m=3, n=4, k=4096, group=1024): one scale group only"));
    }
}

}  // namespace
