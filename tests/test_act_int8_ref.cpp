// CPU tests of trit::act_int8_quantize_ref, the reference the CUDA kernel and the training
// forward match bit for bit: hand-computed rows (ties, eps floor, huge values), non-finite rows,
// properties over random rows, and the contract checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/act_int8.h"
#include "core/error.h"

namespace {

struct Quantized {
    std::vector<int8_t> q;
    std::vector<float> scale;
};

Quantized quantize(const std::vector<float>& x, int64_t rows) {
    const int64_t cols = static_cast<int64_t>(x.size()) / rows;
    Quantized out{std::vector<int8_t>(x.size()), std::vector<float>(rows)};
    trit::act_int8_quantize_ref(x.data(), rows, cols, out.q.data(), out.scale.data());
    return out;
}

std::vector<int> as_ints(const std::vector<int8_t>& q) {
    return {q.begin(), q.end()};
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

TEST(ActInt8Ref, GoldenRow) {
    // amax 1 -> qs 127: 0.5 * 127 = 63.5 ties to even 64; 0.25 * 127 = 31.75 -> 32.
    const Quantized r = quantize({0.5f, -1.0f, 0.25f, 0.0f}, 1);
    EXPECT_EQ(as_ints(r.q), (std::vector<int>{64, -127, 32, 0}));
    EXPECT_EQ(bits(r.scale[0]), bits(1.0f / 127.0f));
}

TEST(ActInt8Ref, TiesRoundHalfToEven) {
    // amax 127 -> qs exactly 1, so every x below is its own product and .5 is an exact tie.
    const Quantized r = quantize({127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -3.5f}, 1);
    EXPECT_EQ(as_ints(r.q), (std::vector<int>{127, 0, 2, 2, 0, -2, -2, 126, -4}));
    EXPECT_EQ(r.scale[0], 1.0f);
    // amax 2 -> qs 63.5: +-1 -> +-63.5 -> +-64, 0.5 -> 31.75 -> 32.
    const Quantized s = quantize({2.0f, 1.0f, -1.0f, 0.5f}, 1);
    EXPECT_EQ(as_ints(s.q), (std::vector<int>{127, 64, -64, 32}));
}

TEST(ActInt8Ref, ZeroAndTinyRowsUseEps) {
    const Quantized z = quantize({0.0f, -0.0f, 0.0f}, 1);
    EXPECT_EQ(as_ints(z.q), (std::vector<int>{0, 0, 0}));
    EXPECT_EQ(bits(z.scale[0]), bits(trit::kAct8Eps / 127.0f));
    // amax 2e-6 < eps: qs = 127 / 1e-5 = 1.27e7, so 1e-6 -> 12.7 -> 13 and -2e-6 -> -25.4 -> -25.
    const Quantized t = quantize({1e-6f, -2e-6f, 1e-40f}, 1);
    EXPECT_EQ(as_ints(t.q), (std::vector<int>{13, -25, 0}));
    EXPECT_EQ(bits(t.scale[0]), bits(trit::kAct8Eps / 127.0f));
}

TEST(ActInt8Ref, OneHugeValue) {
    const Quantized r = quantize({1e30f, 1.0f, -1.0f, 0.5f}, 1);
    EXPECT_EQ(as_ints(r.q), (std::vector<int>{127, 0, 0, 0}));
    EXPECT_EQ(bits(r.scale[0]), bits(1e30f / 127.0f));
    const Quantized m = quantize({FLT_MAX, -FLT_MAX, 1.0f}, 1);
    EXPECT_EQ(as_ints(m.q), (std::vector<int>{127, -127, 0}));
    EXPECT_TRUE(std::isfinite(m.scale[0]));
}

TEST(ActInt8Ref, NonFiniteRowsGiveZeroCodesAndNanScale) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const std::vector<float> x = {
        1.0f,  kNan,  2.0f,   //
        0.5f,  -1.0f, 0.25f,  // finite row between poisoned ones stays untouched
        kInf,  1.0f,  0.0f,   //
        0.0f,  0.0f,  -kInf,  //
        -kNan, 3.0f,  1.0f,
    };
    const Quantized r = quantize(x, 5);
    for (int row : {0, 2, 3, 4}) {
        SCOPED_TRACE(row);
        for (int j = 0; j < 3; ++j)
            EXPECT_EQ(r.q[row * 3 + j], 0);
        EXPECT_EQ(bits(r.scale[row]), 0x7fc00000u);
    }
    EXPECT_EQ(r.q[3], 64);
    EXPECT_EQ(r.q[4], -127);
    EXPECT_EQ(r.q[5], 32);
    EXPECT_EQ(bits(r.scale[1]), bits(1.0f / 127.0f));
}

TEST(ActInt8Ref, RandomRowsStayInSymmetricRangeAndDequantizeWithinHalfStep) {
    // The clamp to [-128, 127] never binds for finite rows: |x * qs| <= 127 up to rounding, so
    // codes are symmetric and the absmax element maps to +-127.
    constexpr int64_t kRows = 64;
    constexpr int64_t kCols = 333;
    std::mt19937 rng(20261122);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> x(kRows * kCols);
    for (int64_t r = 0; r < kRows; ++r) {
        const float mag = r % 3 == 0 ? 1.0f : (r % 3 == 1 ? 1e-3f : 1e3f);
        for (int64_t j = 0; j < kCols; ++j)
            x[r * kCols + j] = uni(rng) * mag;
    }
    const Quantized out = quantize(x, kRows);
    for (int64_t r = 0; r < kRows; ++r) {
        int max_code = 0;
        for (int64_t j = 0; j < kCols; ++j) {
            const int c = out.q[r * kCols + j];
            ASSERT_GE(c, -127) << "row " << r << " col " << j;
            max_code = std::max(max_code, std::abs(c));
            // Half a step plus slack for the roundings of qs, scale and x * qs (each one float
            // ulp of a value up to 127 steps: ~2e-5 steps in all).
            const double err = std::fabs(double(c) * out.scale[r] - x[r * kCols + j]);
            ASSERT_LE(err, (0.5 + 1e-4) * out.scale[r]) << "row " << r << " col " << j;
        }
        EXPECT_EQ(max_code, 127) << "row " << r;
    }
}

TEST(ActInt8Ref, RejectsBadShapesAndNullPointers) {
    float x[4] = {1, 2, 3, 4};
    int8_t q[4];
    float s[1];
    EXPECT_THROW(trit::act_int8_quantize_ref(x, 0, 4, q, s), trit::Error);
    EXPECT_THROW(trit::act_int8_quantize_ref(x, 1, 0, q, s), trit::Error);
    EXPECT_THROW(trit::act_int8_quantize_ref(x, -1, 4, q, s), trit::Error);
    EXPECT_THROW(trit::act_int8_quantize_ref(nullptr, 1, 4, q, s), trit::Error);
    EXPECT_THROW(trit::act_int8_quantize_ref(x, 1, 4, nullptr, s), trit::Error);
    EXPECT_THROW(trit::act_int8_quantize_ref(x, 1, 4, q, nullptr), trit::Error);
    try {
        trit::act_int8_quantize_ref(x, 0, 4, q, s);
    } catch (const trit::Error& e) {
        EXPECT_NE(std::string(e.what()).find("rows=0, cols=4"), std::string::npos) << e.what();
    }
}

}  // namespace
