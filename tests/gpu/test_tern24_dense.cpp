// GPU tests of the tern24 dense path (kernels/tern24_dense.h): the tern24 -> tern2 rewrite equals
// the CPU packer's tern2 bytes of the same codes (partial last group, odd n), products through the
// dispatcher on the dense copy bit-exact against the CPU references for m = 3 .. 300 (the tern2
// streaming kernel and GEMM), and the dispatch rules: without the copy, many tokens fall to the
// generic kernel, naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "exporters/format_table.h"
#include "kernels/product.h"
#include "kernels/tern24_dense.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/product_check.h"

namespace {

using trit::gputest::DeviceBuffer;
using trit::gputest::ProductCase;
using trit::kernels::Format;
using trit::kernels::ProductPath;
using ::testing::HasSubstr;

namespace ex = trit::exporters;

class Tern24Dense : public trit::gputest::RequiresGpu<::testing::Test> {};

// Random codes with at most 2 non-zeros per group of 4 columns.
std::vector<int8_t> sparse_codes(int64_t n, int64_t k, uint64_t seed) {
    std::vector<int8_t> codes = trit::gputest::random_codes(static_cast<size_t>(n * k), -1, 1, seed);
    for (int64_t j = 0; j < n; ++j)
        for (int64_t g = 0; g < k; g += 4) {
            int nz = 0;
            for (int64_t c = g; c < std::min(k, g + 4); ++c) {
                int8_t& v = codes[static_cast<size_t>(j * k + c)];
                if (v != 0 && ++nz > 2) v = 0;
            }
        }
    return codes;
}

TEST_F(Tern24Dense, RewriteEqualsTheTern2PackerOnTheSameCodes) {
    for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {3, 10}, {17, 4096}, {129, 2562}}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
        const std::vector<int8_t> codes = sparse_codes(n, k, static_cast<uint64_t>(n * 31 + k));
        const ex::Arrays t24 = ex::pack_codes({ex::WeightFormat::kTern24, 0}, codes.data(), n, k);
        const ex::Arrays t2 = ex::pack_codes({ex::WeightFormat::kTern2, 0}, codes.data(), n, k);
        DeviceBuffer<uint8_t> mask(t24[0]), signs(t24[1]), out(t2[0].size());
        out.poison();
        trit::kernels::tern24_to_tern2(mask.get(), signs.get(), n, k, out.get(), nullptr);
        EXPECT_EQ(out.download(), t2[0]);
    }
}

TEST_F(Tern24Dense, ProductsOnTheDenseCopyMatchTheReference) {
    struct Shape {
        int64_t m, n, k, group;
    };
    const std::vector<Shape> shapes = {{9, 33, 256, 256},    {16, 130, 4096, 4096}, {3, 17, 4096, 64},
                                       {64, 65, 2560, 2560}, {300, 40, 768, 256},   {16, 20, 14336, 14336},
                                       {1, 40, 2560, 2560},  {4, 72, 768, 768},     {2, 50, 6912, 6912}};
    uint64_t seed = 70;
    for (const Shape& s : shapes) {
        ProductCase c;
        c.format = Format::kTern24;
        c.m = s.m, c.n = s.n, c.k = s.k, c.group = s.group;
        c.seed = ++seed;
        c.dense = true;
        SCOPED_TRACE(trit::gputest::describe(c));
        trit::gputest::check_product_case(c, ProductPath::kAuto);
        trit::gputest::check_product_case(c, ProductPath::kGemm);
        if (::testing::Test::HasFailure()) return;
    }
}

TEST(Tern24DenseContract, DispatchNeedsTheCopyForManyTokens) {
    alignas(16) static uint8_t mask[64], signs[64], dense[64];
    alignas(16) static int8_t x[64];
    trit::kernels::PackedWeights w;
    w.format = Format::kTern24;
    w.a = mask, w.b = signs;
    w.n = 4096, w.k = 4096;
    std::string why;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 16, 4096, &why), ProductPath::kGeneric);
    EXPECT_THAT(why, HasSubstr("needs the weights' dense tern2 copy"));
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 4096, &why), ProductPath::kGemv) << why;
    w.dense = dense;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 16, 4096, &why), ProductPath::kGemm) << why;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2048, 4096, &why), ProductPath::kGemm) << why;
    EXPECT_THAT(trit::kernels::tern24_dense_rejects(w, x, 16, 100), HasSubstr("no tern2 kernel takes the dense copy"));
}

TEST(Tern24DenseContract, DenseCopyFirstWhereItMeasuredFaster) {
    alignas(16) static uint8_t mask[64], signs[64], dense[64];
    alignas(16) static int8_t x[64];
    trit::kernels::PackedWeights w;
    w.format = Format::kTern24;
    w.a = mask, w.b = signs, w.dense = dense;
    std::string why;
    // m >= 2, one scale group: the dense copy.
    w.n = 14336, w.k = 4096;
    for (int64_t m : {2, 3, 8}) EXPECT_EQ(trit::kernels::choose_path(w, x, m, 4096, &why), ProductPath::kGemm) << m << ": " << why;
    // m = 1: the dense copy up to 8192 x 2560 weights, and up to 8192 x 4096 with k <= 4096; the
    // tern24 GEMV above.
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 4096, &why), ProductPath::kGemv) << why;
    EXPECT_THAT(trit::kernels::tern24_dense_first_rejects(w, x, 1, 4096), HasSubstr("m = 1 above 8192 x 2560 weights"));
    w.n = 8192, w.k = 4096;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 4096, &why), ProductPath::kGemm) << why;
    w.n = 8193;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 4096, &why), ProductPath::kGemv) << why;
    w.n = 2560, w.k = 8192;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 8192, &why), ProductPath::kGemm) << why;
    w.n = 4096, w.k = 6912;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 6912, &why), ProductPath::kGemv) << why;
    w.n = 4096, w.k = 4096;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 1, 4096, &why), ProductPath::kGemm) << why;
    // m = 2 from 2^27 weights: the tern24 streaming GEMV (fewer bytes).
    w.n = 32768, w.k = 4096;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 4096, &why), ProductPath::kGemv) << why;
    EXPECT_THAT(trit::kernels::tern24_dense_first_rejects(w, x, 2, 4096),
                HasSubstr("m = 2 on at least 2^27 weights runs the tern24 streaming GEMV"));
    w.n = 32767;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 4096, &why), ProductPath::kGemm) << why;
    w.n = 28672, w.k = 8192;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 8192, &why), ProductPath::kGemv) << why;
    w.n = 4096, w.k = 32768;  // k over the streaming kernel's 16384: the dense copy
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 32768, &why), ProductPath::kGemm) << why;
    w.n = 4096, w.k = 4096;
    // Several scale groups: the tern24 GEMVs, as before.
    EXPECT_EQ(trit::kernels::choose_path(w, x, 4, 64, &why), ProductPath::kGemv) << why;
    EXPECT_THAT(trit::kernels::tern24_dense_first_rejects(w, x, 4, 64), HasSubstr("one scale group only"));
    // Without the copy: the GEMVs.
    w.dense = nullptr;
    EXPECT_EQ(trit::kernels::choose_path(w, x, 2, 4096, &why), ProductPath::kGemv) << why;
    try {
        trit::kernels::tern24_to_tern2(mask, signs, 0, 4096, dense, nullptr);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("tern24_to_tern2 (n=0, k=4096): n and k must be >= 1"));
    }
}

}  // namespace
