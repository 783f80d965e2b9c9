// CPU tests of the tbits bit planes (exporters/formats/tbits.h): golden words worked by hand,
// pack -> unpack round trips, every rejection naming its plane/row/column, bin1 interop, and the
// three int32 products against naive sums over the codes (and bin_tern against bin1_gemm_ref).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/tbits.h"

namespace {

namespace f = trit::formats;
using Codes = std::vector<int8_t>;
using Words = std::vector<uint32_t>;
using ::testing::HasSubstr;

void expect_error(const std::function<void()>& fn, std::initializer_list<const char*> parts) {
    try {
        fn();
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        for (const char* p : parts)
            EXPECT_THAT(e.what(), HasSubstr(p));
    }
}

Codes random_codes(int64_t count, int lo, int hi, bool no_zero, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dist(lo, hi);
    Codes c(count);
    for (auto& v : c) {
        int x = dist(rng);
        while (no_zero && x == 0)
            x = dist(rng);
        v = static_cast<int8_t>(x);
    }
    return c;
}

// Naive acc[i][j] = sum_c a[i][c] * b[j][c].
std::vector<int32_t> naive(const Codes& a, int64_t m, const Codes& b, int64_t n, int64_t k) {
    std::vector<int32_t> acc(m * n);
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            int32_t s = 0;
            for (int64_t c = 0; c < k; ++c)
                s += a[i * k + c] * b[j * k + c];
            acc[i * n + j] = s;
        }
    }
    return acc;
}

std::string first_mismatches(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                             int64_t n) {
    std::ostringstream os;
    int shown = 0;
    for (size_t e = 0; e < got.size() && shown < 5; ++e) {
        if (got[e] == want[e]) continue;
        ++shown;
        os << "[" << e / n << "][" << e % n << "] got " << got[e] << " want " << want[e] << "; ";
    }
    return os.str();
}

// ---- layout --------------------------------------------------------------------------------

TEST(Tbits, RowWordsPadTo256Bits) {
    EXPECT_EQ(f::tbits_row_words(1), 8);
    EXPECT_EQ(f::tbits_row_words(255), 8);
    EXPECT_EQ(f::tbits_row_words(256), 8);
    EXPECT_EQ(f::tbits_row_words(257), 16);
    EXPECT_EQ(f::tbits_row_words(768), 24);
    EXPECT_EQ(f::tbits_row_words(3072), 96);
}

TEST(Tbits, TernaryGoldenWords) {
    // Row 0, k = 40: +1 at columns 0, 4, 8, 9, 39; -1 at 1, 5, 6, 32.
    // Row 1: -1 at 0, +1 at 33, -1 at 39.
    constexpr int64_t kK = 40;
    Codes c(2 * kK, 0);
    for (int col : {0, 4, 8, 9, 39})
        c[col] = 1;
    for (int col : {1, 5, 6, 32})
        c[col] = -1;
    c[kK + 0] = -1, c[kK + 33] = 1, c[kK + 39] = -1;
    Words p(2 * 2 * 8, 0xdeadbeef);
    f::tbits_ternary_pack(c.data(), 2, kK, p.data());
    Words want(32, 0);
    want[0 * 8 + 0] = 0x0000'0311;  // pos, row 0, word 0: bits 0, 4, 8, 9
    want[0 * 8 + 1] = 0x0000'0080;  // pos, row 0, word 1: column 39 = bit 7
    want[1 * 8 + 1] = 0x0000'0002;  // pos, row 1, word 1: column 33 = bit 1
    want[2 * 8 + 0] = 0x0000'0062;  // neg, row 0, word 0: bits 1, 5, 6
    want[2 * 8 + 1] = 0x0000'0001;  // neg, row 0, word 1: column 32 = bit 0
    want[3 * 8 + 0] = 0x0000'0001;  // neg, row 1, word 0: column 0
    want[3 * 8 + 1] = 0x0000'0080;  // neg, row 1, word 1: column 39
    EXPECT_EQ(p, want);
    Codes back(c.size(), 7);
    f::tbits_ternary_unpack(p.data(), 2, kK, back.data());
    EXPECT_EQ(back, c);
}

TEST(Tbits, BoolAndBinaryGoldenWords) {
    Words p(8, 0xffffffffu);
    f::tbits_bool_pack(Codes{1, 0, 0, 1, 1, 1, 0, 1, 0, 1}.data(), 1, 10, p.data());
    EXPECT_EQ(p, (Words{0x2B9, 0, 0, 0, 0, 0, 0, 0}));
    // bin1.h's golden row: the same bits, bytes 0xB9 0x02.
    const Codes bin{1, -1, -1, 1, 1, 1, -1, 1, -1, 1};
    f::tbits_binary_pack(bin.data(), 1, 10, p.data());
    EXPECT_EQ(p, (Words{0x2B9, 0, 0, 0, 0, 0, 0, 0}));
    std::vector<uint8_t> b1(f::bin1_row_bytes(10));
    f::bin1_pack(bin.data(), 1, 10, b1.data());
    Words from(8, 0xffffffffu);
    f::tbits_from_bin1(b1.data(), 1, 10, from.data());
    EXPECT_EQ(from, p);
}

TEST(Tbits, RoundTripsOverShapes) {
    for (int64_t rows : {1, 3, 17}) {
        for (int64_t k : {1, 31, 32, 33, 255, 256, 257, 300, 513}) {
            SCOPED_TRACE("rows=" + std::to_string(rows) + " k=" + std::to_string(k));
            const int64_t rw = f::tbits_row_words(k);
            const Codes t = random_codes(rows * k, -1, 1, false, uint32_t(rows * 1000 + k));
            Words tp(2 * rows * rw);
            f::tbits_ternary_pack(t.data(), rows, k, tp.data());
            f::tbits_ternary_validate(tp.data(), rows, k);
            Codes back(t.size());
            f::tbits_ternary_unpack(tp.data(), rows, k, back.data());
            EXPECT_EQ(back, t);

            const Codes bo = random_codes(rows * k, 0, 1, false, uint32_t(rows * 1000 + k + 1));
            Words bp(rows * rw);
            f::tbits_bool_pack(bo.data(), rows, k, bp.data());
            f::tbits_bool_unpack(bp.data(), rows, k, back.data());
            EXPECT_EQ(back, bo);

            const Codes bi = random_codes(rows * k, -1, 1, true, uint32_t(rows * 1000 + k + 2));
            f::tbits_binary_pack(bi.data(), rows, k, bp.data());
            f::tbits_binary_unpack(bp.data(), rows, k, back.data());
            EXPECT_EQ(back, bi);
            std::vector<uint8_t> b1(rows * f::bin1_row_bytes(k));
            f::bin1_pack(bi.data(), rows, k, b1.data());
            Words from(rows * rw);
            f::tbits_from_bin1(b1.data(), rows, k, from.data());
            EXPECT_EQ(from, bp);
        }
    }
}

TEST(Tbits, Bin1ArrayIsThePlaneWhenKIsAMultipleOf256) {
    // Little-endian words: byte j of word w holds columns 32 w + 8 j .. + 7, LSB first, as bin1.
    constexpr int64_t kN = 3, kK = 512;
    const Codes bi = random_codes(kN * kK, -1, 1, true, 5u);
    std::vector<uint8_t> b1(kN * f::bin1_row_bytes(kK));
    f::bin1_pack(bi.data(), kN, kK, b1.data());
    Words plane(kN * f::tbits_row_words(kK));
    f::tbits_binary_pack(bi.data(), kN, kK, plane.data());
    ASSERT_EQ(b1.size(), plane.size() * sizeof(uint32_t));
    Words cast(plane.size());
    std::memcpy(cast.data(), b1.data(), b1.size());
    EXPECT_EQ(cast, plane);
}

// ---- rejections ----------------------------------------------------------------------------

TEST(Tbits, PackRejectsCodesOutsideTheSet) {
    Codes c = {0, 1, -1, 2, 0, 0};
    Words p(2 * 2 * 8);
    expect_error([&] { f::tbits_ternary_pack(c.data(), 2, 3, p.data()); },
                 {"code 2", "(row 1, col 0)", "{-1, 0, +1}"});
    c = {0, 1, -1};
    expect_error([&] { f::tbits_bool_pack(c.data(), 1, 3, p.data()); },
                 {"code -1", "(row 0, col 2)", "{0, 1}"});
    expect_error([&] { f::tbits_binary_pack(c.data(), 1, 3, p.data()); },
                 {"code 0", "(row 0, col 0)", "no zero"});
}

TEST(Tbits, ValidateRejectsPaddingAndDoubleBits) {
    constexpr int64_t kRows = 2, kK = 45;
    const Codes t = random_codes(kRows * kK, -1, 1, false, 9u);
    Words p(2 * kRows * 8);
    f::tbits_ternary_pack(t.data(), kRows, kK, p.data());
    Words bad = p;
    bad[(1 * kRows + 1) * 8 + 1] |= 1u << 13;  // neg plane, row 1, column 45
    expect_error([&] { f::tbits_ternary_validate(bad.data(), kRows, kK); },
                 {"plane 1, row 1, word 1", "padding column 45", "k = 45"});
    bad = p;
    bad[(0 * kRows + 0) * 8 + 7] = 0x80000000u;  // pos plane, row 0, last word: column 255
    expect_error([&] { f::tbits_ternary_validate(bad.data(), kRows, kK); },
                 {"plane 0, row 0, word 7", "padding column 255"});
    bad = p;
    bad[(0 * kRows + 1) * 8 + 0] |= 1u << 5;
    bad[(1 * kRows + 1) * 8 + 0] |= 1u << 5;  // row 1, column 5 in both planes
    expect_error([&] { f::tbits_ternary_validate(bad.data(), kRows, kK); },
                 {"row 1, column 5", "both"});
    Codes out(kRows * kK, 7);
    expect_error([&] { f::tbits_ternary_unpack(bad.data(), kRows, kK, out.data()); }, {"both"});
    EXPECT_EQ(out, Codes(kRows * kK, 7));  // untouched on error

    Words one(8, 0);
    one[0] = 1u << 10;  // column 10 >= k = 10
    expect_error([&] { f::tbits_bool_validate(one.data(), 1, 10); }, {"padding column 10"});
    expect_error([&] { f::tbits_binary_validate(one.data(), 1, 10); }, {"padding column 10"});
    expect_error([&] { f::tbits_bool_unpack(one.data(), 1, 10, out.data()); }, {"padding"});
    expect_error([&] { f::tbits_binary_unpack(one.data(), 1, 10, out.data()); }, {"padding"});
}

TEST(Tbits, RejectBadShapesAndPointers) {
    Codes c(8, 0);
    Words p(16, 0);
    int32_t acc[4] = {};
    expect_error([&] { f::tbits_ternary_pack(c.data(), 0, 4, p.data()); }, {"rows=0, k=4"});
    expect_error([&] { f::tbits_bool_pack(c.data(), 1, 0, p.data()); }, {"rows=1, k=0"});
    expect_error([&] { f::tbits_binary_unpack(nullptr, 1, 4, c.data()); }, {"non-null"});
    expect_error([&] { f::tbits_ternary_validate(nullptr, 1, 4); }, {"non-null"});
    expect_error([&] { f::tbits_from_bin1(nullptr, 1, 4, p.data()); }, {"non-null"});
    expect_error([&] { f::tbits_gemm_bin_tern_ref(p.data(), 1, 4, p.data(), 0, acc); },
                 {"m and group must be >= 1"});
    expect_error([&] { f::tbits_gemm_bool_tern_ref(p.data(), 0, 4, p.data(), 1, acc); }, {"n=0"});
    expect_error([&] { f::tbits_gemm_tern_tern_ref(p.data(), 1, 4, p.data(), 1, nullptr); },
                 {"non-null"});
    // k is checked before any word is read, so no 2^30-bit buffers are needed.
    expect_error(
        [&] { f::tbits_gemm_tern_tern_ref(p.data(), 1, (int64_t{1} << 30) + 1, p.data(), 1, acc); },
        {"k=1073741825", "exceeds 2^30"});
}

TEST(Tbits, ProductsValidateTheirOperands) {
    Words w(8, 0), a(16, 0);
    int32_t acc = 0;
    w[0] = 1u << 20;  // padding of a k = 10 binary plane
    expect_error([&] { f::tbits_gemm_bin_tern_ref(w.data(), 1, 10, a.data(), 1, &acc); },
                 {"tbits_gemm_bin_tern_ref", "padding column 20"});
    w[0] = 0;
    a[0] = a[8] = 1;  // column 0 in both planes
    expect_error([&] { f::tbits_gemm_bin_tern_ref(w.data(), 1, 10, a.data(), 1, &acc); }, {"both"});
    expect_error([&] { f::tbits_gemm_tern_tern_ref(a.data(), 1, 10, a.data(), 1, &acc); },
                 {"both"});
    expect_error([&] { f::tbits_gemm_bool_tern_ref(a.data(), 1, 10, w.data(), 1, &acc); },
                 {"both"});
}

// ---- products ------------------------------------------------------------------------------

TEST(Tbits, GoldenProducts) {
    // k = 5. w = [+1 -1 +1 +1 -1], a = [1 1 0 -1 -1]: 1 - 1 + 0 - 1 + 1 = 0.
    // a2 = [-1 0 1 1 1] -> -1 + 0 + 1 + 1 - 1 = 0;  a3 = [1 -1 -1 1 -1] -> 1 + 1 - 1 + 1 + 1 = 3.
    const Codes w = {1, -1, 1, 1, -1};
    const Codes a = {1, 1, 0, -1, -1, -1, 0, 1, 1, 1, 1, -1, -1, 1, -1};
    Words wp(8), ap(2 * 3 * 8);
    f::tbits_binary_pack(w.data(), 1, 5, wp.data());
    f::tbits_ternary_pack(a.data(), 3, 5, ap.data());
    std::vector<int32_t> acc(3);
    f::tbits_gemm_bin_tern_ref(wp.data(), 1, 5, ap.data(), 3, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{0, 0, 3}));
    // Att = [1 0 1 1 0] against the rows of a as V rows (columns 0, 2, 3 count).
    const Codes att = {1, 0, 1, 1, 0};
    Words tp(8);
    f::tbits_bool_pack(att.data(), 1, 5, tp.data());
    f::tbits_gemm_bool_tern_ref(ap.data(), 3, 5, tp.data(), 1, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{1 + 0 - 1, -1 + 1 + 1, 1 - 1 + 1}));
    // Q = row 3 of a, K = a: q . k_j.
    Words qp(2 * 8);
    f::tbits_ternary_pack(a.data() + 10, 1, 5, qp.data());
    f::tbits_gemm_tern_tern_ref(ap.data(), 3, 5, qp.data(), 1, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{1 - 1 + 0 - 1 + 1, -1 + 0 - 1 + 1 - 1, 5}));
}

struct Shape {
    int64_t m, n, k;
};

TEST(Tbits, ProductsEqualNaiveSumsOverShapes) {
    const std::vector<Shape> shapes = {{1, 1, 1},    {1, 7, 33},   {3, 5, 255}, {2, 9, 256},
                                       {5, 3, 257},  {1, 13, 300}, {4, 4, 513}, {7, 1, 31},
                                       {6, 11, 768}, {1, 2, 1000}, {2, 3, 3072}};
    for (const Shape& s : shapes) {
        SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k));
        const int64_t rw = f::tbits_row_words(s.k);
        const uint32_t seed = uint32_t(s.m * 7919 + s.n * 131 + s.k);
        const Codes ta = random_codes(s.m * s.k, -1, 1, false, seed);
        const Codes tb = random_codes(s.n * s.k, -1, 1, false, seed + 1);
        const Codes bo = random_codes(s.m * s.k, 0, 1, false, seed + 2);
        const Codes bi = random_codes(s.n * s.k, -1, 1, true, seed + 3);
        Words pa(2 * s.m * rw), pb(2 * s.n * rw), pbool(s.m * rw), pbin(s.n * rw);
        f::tbits_ternary_pack(ta.data(), s.m, s.k, pa.data());
        f::tbits_ternary_pack(tb.data(), s.n, s.k, pb.data());
        f::tbits_bool_pack(bo.data(), s.m, s.k, pbool.data());
        f::tbits_binary_pack(bi.data(), s.n, s.k, pbin.data());
        std::vector<int32_t> acc(s.m * s.n);

        f::tbits_gemm_bin_tern_ref(pbin.data(), s.n, s.k, pa.data(), s.m, acc.data());
        auto want = naive(ta, s.m, bi, s.n, s.k);
        EXPECT_EQ(acc, want) << "bin_tern: " << first_mismatches(acc, want, s.n);
        // The same product through bin1's reference, one scale group.
        std::vector<uint8_t> b1(s.n * f::bin1_row_bytes(s.k));
        f::bin1_pack(bi.data(), s.n, s.k, b1.data());
        std::vector<int32_t> acc_b1(s.m * s.n);
        f::bin1_gemm_ref(b1.data(), s.n, s.k, ta.data(), s.m, /*group=*/s.k, acc_b1.data());
        EXPECT_EQ(acc, acc_b1) << "vs bin1_gemm_ref: " << first_mismatches(acc, acc_b1, s.n);

        f::tbits_gemm_bool_tern_ref(pb.data(), s.n, s.k, pbool.data(), s.m, acc.data());
        want = naive(bo, s.m, tb, s.n, s.k);
        EXPECT_EQ(acc, want) << "bool_tern: " << first_mismatches(acc, want, s.n);

        f::tbits_gemm_tern_tern_ref(pb.data(), s.n, s.k, pa.data(), s.m, acc.data());
        want = naive(ta, s.m, tb, s.n, s.k);
        EXPECT_EQ(acc, want) << "tern_tern: " << first_mismatches(acc, want, s.n);
    }
}

// bool activations x binary weights (a linear layer on a ReLU output): naive sums, bin1's
// reference with the bool codes as int8 x, the extremes, and rejected padding.
TEST(Tbits, BoolBinProductEqualsNaiveSumsAndBin1Reference) {
    const std::vector<Shape> shapes = {{1, 1, 1},   {1, 7, 33},  {3, 5, 255},  {2, 9, 256},
                                       {5, 3, 257}, {4, 4, 513}, {6, 11, 768}, {2, 3, 3072}};
    for (const Shape& s : shapes) {
        SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k));
        const int64_t rw = f::tbits_row_words(s.k);
        const uint32_t seed = uint32_t(s.m * 31 + s.n * 17 + s.k);
        const Codes bo = random_codes(s.m * s.k, 0, 1, false, seed);
        const Codes bi = random_codes(s.n * s.k, -1, 1, true, seed + 1);
        Words pbool(s.m * rw), pbin(s.n * rw);
        f::tbits_bool_pack(bo.data(), s.m, s.k, pbool.data());
        f::tbits_binary_pack(bi.data(), s.n, s.k, pbin.data());
        std::vector<int32_t> acc(s.m * s.n);
        f::tbits_gemm_bool_bin_ref(pbin.data(), s.n, s.k, pbool.data(), s.m, acc.data());
        const auto want = naive(bo, s.m, bi, s.n, s.k);
        EXPECT_EQ(acc, want) << "bool_bin: " << first_mismatches(acc, want, s.n);
        std::vector<uint8_t> b1(s.n * f::bin1_row_bytes(s.k));
        f::bin1_pack(bi.data(), s.n, s.k, b1.data());
        std::vector<int32_t> acc_b1(s.m * s.n);
        f::bin1_gemm_ref(b1.data(), s.n, s.k, bo.data(), s.m, /*group=*/s.k, acc_b1.data());
        EXPECT_EQ(acc, acc_b1) << "vs bin1_gemm_ref: " << first_mismatches(acc, acc_b1, s.n);
    }
    constexpr int64_t kK = 777;
    const Codes ones(kK, 1), minus(kK, -1);
    Words a(f::tbits_row_words(kK)), w(f::tbits_row_words(kK)), wm(f::tbits_row_words(kK));
    f::tbits_bool_pack(ones.data(), 1, kK, a.data());
    f::tbits_binary_pack(ones.data(), 1, kK, w.data());
    f::tbits_binary_pack(minus.data(), 1, kK, wm.data());
    int32_t acc = 0;
    f::tbits_gemm_bool_bin_ref(w.data(), 1, kK, a.data(), 1, &acc);
    EXPECT_EQ(acc, kK);
    f::tbits_gemm_bool_bin_ref(wm.data(), 1, kK, a.data(), 1, &acc);
    EXPECT_EQ(acc, -kK);
    a[f::tbits_word(kK)] |= f::tbits_bit(kK);  // a padding column of the activations
    expect_error([&] { f::tbits_gemm_bool_bin_ref(w.data(), 1, kK, a.data(), 1, &acc); },
                 {"tbits_gemm_bool_bin_ref", "padding column 777"});
    expect_error([&] { f::tbits_gemm_bool_bin_ref(w.data(), 0, kK, a.data(), 1, &acc); }, {"n=0"});
}

TEST(Tbits, ExtremeSumsAreExact) {
    // All +1 against all +1 / all -1: |acc| = k, the bound the kernels' 2 * popc relies on.
    constexpr int64_t kK = 777;
    const Codes ones(kK, 1), minus(kK, -1);
    Words a(2 * f::tbits_row_words(kK)), w(f::tbits_row_words(kK));
    f::tbits_ternary_pack(minus.data(), 1, kK, a.data());
    f::tbits_binary_pack(ones.data(), 1, kK, w.data());
    int32_t acc = 0;
    f::tbits_gemm_bin_tern_ref(w.data(), 1, kK, a.data(), 1, &acc);
    EXPECT_EQ(acc, -kK);
    f::tbits_gemm_tern_tern_ref(a.data(), 1, kK, a.data(), 1, &acc);
    EXPECT_EQ(acc, kK);
}

}  // namespace
