// GPU tests of the bt GEMV's stream kernel (kernels/bt_gemv.h, bt_gemv_stream): int32 accumulators
// and fused epilogue bit-exact against the CPU references, with and without the early weight reads
// of PDL, over a shape table that takes every path of the kernel: d = 1, 2; m = 1, 2; n = 1, odd
// n, and more row tiles than the grid holds (blocks loop); k from one column to 14339, every tail
// k % 5, rows of odd length (so rows start at every byte offset mod 16) and of whole 16-byte
// chunks; one group, groups of 45 .. 2560 columns ending inside quintets and inside a thread's
// 16 bytes, a partial last group; per-tensor and per-channel scales, bias on and off; x at the
// int8 extremes; weights and x that start at any byte of an allocation. Also its rules on the host
// and which kernel bt_gemv runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "exporters/formats/bt.h"
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

class BtGemvStream : public trit::gputest::RequiresGpu<::testing::Test> {};

struct Shape {
    int64_t n, k, group;
};

// Row bytes 2 * floor(k / 5) + ceil(2 (k % 5) / 5) at d = 2: 1639 (k = 4096) and 5735 (14336) are
// odd, 1024 (2560) is a multiple of 16, 2765 (6912) odd with a 2-column tail.
const std::vector<Shape> kShapes = {
    {1, 5, 5},          {3, 7, 64},       {17, 64, 64},      {17, 65, 64},    {5, 4, 4},
    {9, 1, 1},          {33, 3, 3},       {130, 320, 64},    {31, 784, 784},  {17, 784, 64},
    {3, 2560, 128},     {40, 2560, 64},   {7, 2561, 45},     {17, 4100, 64},  {19, 4096, 64},
    {9, 4096, 1 << 18}, {5, 1283, 128},   {31, 1001, 1001},  {18, 803, 80},   {21, 1037, 100},
    {12, 6912, 64},     {3, 14336, 64},   {2, 14339, 64},    {40, 160, 50},   {600, 40, 40},
    {333, 27, 27},      {65, 6912, 2560}, {4, 14336, 14336}, {20001, 40, 40}, {9001, 1027, 64},
};

ProductCase stream_case(int depth, int64_t m, const Shape& s, uint64_t seed) {
    ProductCase c;
    c.format = Format::kBt;
    c.depth = depth;
    c.m = m, c.n = s.n, c.k = s.k, c.group = s.group;
    c.seed = seed;
    c.per_tensor_scale = seed % 2 == 0;
    c.bias = seed % 3 != 0;
    return c;
}

TEST_F(BtGemvStream, MatchesTheReferenceOverTheShapeTable) {
    uint64_t seed = 900;
    for (int depth = 1; depth <= 2; ++depth)
        for (int64_t m = 1; m <= 2; ++m)
            for (const Shape& s : kShapes) {
                PackedWeights w;
                w.format = Format::kBt;
                w.depth = depth;
                w.n = s.n;
                w.k = s.k;
                if (!trit::kernels::bt_gemv_stream_rejects(w, nullptr, m, s.group).empty())
                    continue;
                const ProductCase c = stream_case(depth, m, s, ++seed);
                trit::gputest::check_product_case(c, trit::kernels::bt_gemv_stream);
                if (::testing::Test::HasFailure()) return;
            }
}

// x at the int8 extremes: every dp4a byte and column-4 product at its largest magnitude, and the
// packed column-4 sums (A + 65536 B) at their largest 16-bit halves.
TEST_F(BtGemvStream, TakesTheFullInt8Range) {
    for (const auto& [lo, hi] :
         std::vector<std::pair<int, int>>{{-128, -128}, {127, 127}, {-128, 127}})
        for (int depth : {1, 2}) {
            ProductCase c =
                stream_case(depth, depth == 2 ? 2 : 1, {33, 1027, depth == 2 ? 64 : 100}, 71);
            c.x_lo = lo, c.x_hi = hi;
            trit::gputest::check_product_case(c, trit::kernels::bt_gemv_stream);
            c.group = c.k;
            trit::gputest::check_product_case(c, trit::kernels::bt_gemv_stream);
        }
}

// Weights and x starting at every byte offset mod 16 of an allocation: the first and last chunks
// of the array are read byte by byte (nothing outside the array is touched), and the class of
// rows a block takes starts at that offset.
TEST_F(BtGemvStream, TakesWeightsAndXAtAnyByte) {
    namespace fmt = trit::formats;
    const int64_t n = 37, k = 1031, m = 1;
    for (int depth : {1, 2})
        for (int64_t group : {k, depth == 2 ? int64_t{64} : int64_t{96}})
            for (int offset = 0; offset < 16; ++offset) {
                SCOPED_TRACE("depth=" + std::to_string(depth) + " group=" + std::to_string(group) +
                             " offset=" + std::to_string(offset));
                const int64_t rb = fmt::bt_row_bytes(k, depth);
                const int L = fmt::bt_levels(depth);
                const std::vector<int8_t> codes =
                    trit::gputest::random_codes(static_cast<size_t>(n * k), -L, L, 40 + offset);
                std::vector<uint8_t> packed(static_cast<size_t>(n * rb + 32), fmt::kBtZeroByte);
                fmt::bt_pack(codes.data(), n, k, depth, packed.data() + offset);
                std::vector<int8_t> xh(static_cast<size_t>(m * k + 32));
                const std::vector<int8_t> xv =
                    trit::gputest::random_codes(static_cast<size_t>(m * k), -128, 127, 7);
                std::copy(xv.begin(), xv.end(), xh.begin() + (offset * 3) % 16);
                const int64_t G = fmt::acc_num_groups(k, group);
                std::vector<int32_t> want(static_cast<size_t>(m * n * G));
                fmt::bt_gemm_ref(packed.data() + offset, n, k, depth, xh.data() + (offset * 3) % 16,
                                 m, group, want.data());

                trit::gputest::DeviceBuffer<uint8_t> d_w(packed);
                trit::gputest::DeviceBuffer<int8_t> d_x(xh);
                trit::gputest::DeviceBuffer<int32_t> d_acc(want.size());
                d_acc.poison();
                PackedWeights w;
                w.format = Format::kBt;
                w.depth = depth;
                w.a = d_w.get() + offset;
                w.n = n;
                w.k = k;
                trit::kernels::ProductOut out;
                out.acc = d_acc.get();
                trit::kernels::bt_gemv_stream(w, d_x.get() + (offset * 3) % 16, m, group, out,
                                              nullptr);
                TRIT_CUDA_CHECK(cudaDeviceSynchronize());
                EXPECT_EQ(d_acc.download(), want);
            }
}

TEST_F(BtGemvStream, TheGemvPathRunsItForOneAndTwoTokens) {
    for (int64_t m : {1, 2}) {
        const ProductCase c = stream_case(2, m, {96, 4096, 64}, 17 + static_cast<uint64_t>(m));
        trit::gputest::check_product_case(c, ProductPath::kAuto);
        trit::gputest::check_product_case(c, ProductPath::kGemv);
    }
}

PackedWeights bt(int depth, int64_t n, int64_t k) {
    static const uint8_t codes[16] = {};
    PackedWeights w;
    w.format = Format::kBt;
    w.depth = depth;
    w.a = codes;
    w.n = n;
    w.k = k;
    return w;
}

const int8_t g_x[16] = {};

// The stream kernel's own rules: from its rejects, and from its launcher with the shape.
void expect_rule(const PackedWeights& w, int64_t m, int64_t group, const std::string& rule) {
    trit::gputest::expect_rejected("bt_gemv_stream", trit::kernels::bt_gemv_stream_rejects, trit::kernels::bt_gemv_stream,
                                   w, g_x, m, group, rule);
}

TEST(BtGemvStreamContract, RejectsEachRuleNamingTheShape) {
    EXPECT_EQ(trit::kernels::bt_gemv_stream_rejects(bt(2, 14336, 4096), g_x, 1, 64), "");
    EXPECT_EQ(trit::kernels::bt_gemv_stream_rejects(bt(2, 4096, 14336), g_x, 2, 14336), "");
    EXPECT_EQ(trit::kernels::bt_gemv_stream_rejects(bt(1, 5, 7), g_x, 2, 1 << 20), "");
    EXPECT_EQ(trit::kernels::bt_gemv_stream_rejects(bt(2, 5, 100), g_x, 1, 45), "");
    expect_rule(bt(3, 4, 4096), 1, 64, "bt depth must be 1 or 2");
    expect_rule(bt(4, 4, 4096), 1, 4096, "bt depth must be 1 or 2");
    expect_rule(bt(2, 4, 4096), 3, 64, "m must be 1 or 2");
    expect_rule(bt(2, 4, 4096), 1, 44, "group must be >= k or >= 45");
    expect_rule(bt(1, 4, 4096), 1, 79, "group must be >= k or >= 80");
    expect_rule(bt(1, 4, 4096), 2, 128, "group must be >= k for d = 1 and m = 2");
    // d = 2, k = 20445: 8178 row bytes, one 16-byte chunk per thread is 512 + 1 threads.
    expect_rule(bt(2, 4, 20445), 1, 20445, "bt_row_bytes(k, d) must be in 1..8177");
    expect_rule(bt(2, 4, 20440), 1, 64, "bt_row_bytes(k, d) must be <= 7665 when group < k");
    // check_product's rules come first.
    int32_t acc[1];
    trit::kernels::ProductOut out;
    out.acc = acc;
    EXPECT_THROW(trit::kernels::bt_gemv_stream(bt(5, 4, 64), g_x, 1, 64, out, nullptr),
                 trit::Error);
}

TEST(BtGemvStreamContract, BtGemvRunsItWhereItTakesTheCall) {
    using trit::kernels::bt_gemv_variant;
    for (int64_t k : {2560, 4096, 6912, 14336}) {
        EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, k), g_x, 1, 64), "stream") << "k=" << k;
        EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, k), g_x, 1, k), "stream") << "k=" << k;
        EXPECT_STREQ(bt_gemv_variant(bt(1, 14336, k), g_x, 1, k), "stream") << "k=" << k;
        // m = 2 takes the warp kernel (measured faster), though the stream kernel accepts it.
        EXPECT_EQ(trit::kernels::bt_gemv_stream_rejects(bt(2, 14336, k), g_x, 2, 64), "") << "k=" << k;
        EXPECT_STREQ(bt_gemv_variant(bt(2, 14336, k), g_x, 2, 64), "warp") << "k=" << k;
    }
    EXPECT_STREQ(bt_gemv_variant(bt(2, 64, 4096), g_x, 3, 64), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(3, 64, 4096), g_x, 1, 64), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 64, 4096), g_x, 1, 40), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(1, 64, 4096), g_x, 2, 128), "warp");
    EXPECT_STREQ(bt_gemv_variant(bt(2, 64, 4096), g_x, 1, 39), "");
    EXPECT_EQ(trit::kernels::bt_gemv_rejects(bt(2, 64, 4096), g_x, 1, 40), "");
}

}  // namespace
