// GPU tests of the product dispatcher and the generic kernels (kernels/product.h): every format's
// int32 accumulators and fused epilogue bit-exact against the CPU references over a shape table
// (m = 1, odd n, k at and off the group, partial last groups, one group), and the host-side
// contract: each rule violated once, with an error naming the kernel, m, n, k, group and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/product.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

struct GenericShape {
    int64_t m, n, k, group;
};

// Awkward shapes: m = 1, single rows, odd n and k, k off the group, group 1, group >= k.
const std::vector<GenericShape> kGenericShapes = {
    {1, 1, 1, 1},    {1, 7, 13, 4},    {3, 5, 64, 64},  {2, 33, 100, 64}, {1, 17, 257, 256},
    {5, 3, 31, 1000}, {4, 9, 130, 7},  {1, 64, 784, 784}, {7, 11, 6, 5},
};

class GenericProduct : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(GenericProduct, EveryFormatMatchesTheReferenceOverTheShapeTable) {
    const std::vector<std::pair<Format, int>> formats = {
        {Format::kTern2, 0}, {Format::kTern24, 0}, {Format::kBin1, 0}, {Format::kBt, 1},
        {Format::kBt, 2},    {Format::kBt, 3},     {Format::kBt, 4}};
    uint64_t seed = 1;
    for (const auto& [format, depth] : formats)
        for (const GenericShape& s : kGenericShapes) {
            ProductCase c;
            c.format = format;
            c.depth = depth;
            c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
            c.seed = seed++;
            c.per_tensor_scale = seed % 3 == 0;
            c.bias = seed % 2 == 0;
            trit::gputest::check_product_case(c, ProductPath::kGeneric);
        }
}

// Contract checks run on the host before any launch: they need no GPU.
trit::kernels::PackedWeights weights(Format f, int64_t n, int64_t k) {
    static uint8_t dummy[16];
    trit::kernels::PackedWeights w;
    w.format = f;
    w.depth = f == Format::kBt ? 2 : 0;
    w.a = dummy;
    w.b = f == Format::kTern24 ? dummy : nullptr;
    w.n = n;
    w.k = k;
    return w;
}

void expect_contract_error(const trit::kernels::PackedWeights& w, int64_t m, int64_t group,
                           const trit::kernels::ProductOut& out, const char* rule) {
    static int8_t x[16];
    try {
        trit::kernels::product(w, x, m, group, out, nullptr, ProductPath::kGeneric);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr(rule));
        EXPECT_THAT(e.what(), HasSubstr("m=" + std::to_string(m)));
        EXPECT_THAT(e.what(), HasSubstr("n=" + std::to_string(w.n)));
        EXPECT_THAT(e.what(), HasSubstr("k=" + std::to_string(w.k)));
    }
}

TEST(ProductContract, RejectsEveryBrokenRuleNamingTheShape) {
    int32_t acc[1];
    float y[1], s[1];
    trit::kernels::ProductOut acc_out;
    acc_out.acc = acc;
    expect_contract_error(weights(Format::kTern2, 4, 8), 0, 4, acc_out, "must all be >= 1");
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 0, acc_out, "must all be >= 1");
    expect_contract_error(weights(Format::kTern2, 0, 8), 1, 4, acc_out, "must all be >= 1");

    trit::kernels::PackedWeights bad_depth = weights(Format::kBt, 4, 8);
    bad_depth.depth = 5;
    expect_contract_error(bad_depth, 1, 4, acc_out, "bt depth must be in 1..4");
    trit::kernels::PackedWeights no_signs = weights(Format::kTern24, 4, 8);
    no_signs.b = nullptr;
    expect_contract_error(no_signs, 1, 4, acc_out, "tern24 needs its signs array");
    trit::kernels::PackedWeights extra = weights(Format::kTern2, 4, 8);
    extra.b = extra.a;
    expect_contract_error(extra, 1, 4, acc_out, "only tern24 has a second array");
    trit::kernels::PackedWeights bt4 = weights(Format::kBt, 4, 500000);
    bt4.depth = 4;  // |code| <= 40: at most 419430 columns per int32 group
    expect_contract_error(bt4, 1, 500000, acc_out, "could overflow the int32 accumulator");

    trit::kernels::ProductOut both = acc_out;
    both.y = y;
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, both, "exactly one output");
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, {}, "exactly one output");
    trit::kernels::ProductOut half_acc = acc_out;
    half_acc.w_scale_half = reinterpret_cast<const uint16_t*>(s);
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, half_acc,
                          "w_scale_half (fp16 weight scales) is read by");
    trit::kernels::ProductOut no_scale;
    no_scale.y = y;
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, no_scale, "needs w_scale and x_scale");
    trit::kernels::ProductOut rows = no_scale;
    rows.w_scale = s;
    rows.x_scale = s;
    rows.w_scale_rows = 3;
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, rows, "w_scale must have 1 or n rows");
    rows.w_scale_rows = 4;
    rows.x_scale_rows = 2;
    expect_contract_error(weights(Format::kTern2, 4, 8), 1, 4, rows, "x_scale must have 1 or m rows");
}

TEST(ProductContract, ForcingAPathWithoutAKernelIsAnError) {
    int32_t acc[1];
    static int8_t x[16];
    trit::kernels::ProductOut out;
    out.acc = acc;
    try {
        trit::kernels::product(weights(Format::kBin1, 4, 8), x, 1, 8, out, nullptr, ProductPath::kGemv);
        // A bin1 GEMV may exist: then the call must have launched (no GPU here: a CUDA error).
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("no gemv kernel for bin1"), HasSubstr("CUDA")));
    }
}

}  // namespace
