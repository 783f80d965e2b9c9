// CPU tests of the packed weight formats and activation codes (exporters/formats): golden bytes
// worked by hand, pack -> unpack round trips over awkward shapes, every rejection naming its row
// and index, and the int32 / float products against naive sums over the unpacked codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "exporters/formats/act_levels.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/tern2.h"
#include "exporters/formats/tern24.h"

namespace {

namespace f = trit::formats;
using Bytes = std::vector<uint8_t>;
using Codes = std::vector<int8_t>;
using ::testing::HasSubstr;

// Runs fn, expects a trit::Error whose message holds every part (row, index, rule).
void expect_error(const std::function<void()>& fn, std::initializer_list<const char*> parts) {
    try {
        fn();
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        for (const char* p : parts)
            EXPECT_THAT(e.what(), HasSubstr(p));
    }
}

// First few mismatches of two (rows, cols, depth) arrays, with their indices; empty if equal.
template <typename T>
std::string mismatches(const std::vector<T>& got, const std::vector<T>& want, int64_t cols = 1,
                       int64_t depth = 1) {
    std::ostringstream os;
    if (got.size() != want.size()) os << "size " << got.size() << " vs " << want.size() << "; ";
    int shown = 0;
    int64_t count = 0;
    for (size_t e = 0; e < std::min(got.size(), want.size()); ++e) {
        if (got[e] == want[e]) continue;
        ++count;
        if (shown++ >= 5) continue;
        const int64_t idx = static_cast<int64_t>(e);
        os << "[" << idx / (cols * depth) << "][" << idx / depth % cols << "][" << idx % depth
           << "] got " << +got[e] << " want " << +want[e] << "; ";
    }
    if (count > 0) os << count << " mismatches";
    return os.str();
}

// ---- one table over all weight formats -----------------------------------------------------

struct Packed {
    Bytes a;  // tern2/bin1/bt: codes; tern24: mask
    Bytes b;  // tern24: signs
};

struct Format {
    std::string name;
    int max_code;  // |code| bound, for the random codes
    bool has_zero;
    std::function<int64_t(int64_t k)> row_bytes_a;
    std::function<int64_t(int64_t k)> row_bytes_b;  // 0: no second array
    std::function<void(const int8_t*, int64_t, int64_t, Packed&)> pack;
    std::function<void(const Packed&, int64_t, int64_t, int8_t*)> unpack;
    std::function<void(const Packed&, int64_t, int64_t, const int8_t*, int64_t, int64_t, int32_t*)>
        gemm;
    std::function<void(const Packed&, int64_t, int64_t, const int8_t*, int64_t, int32_t*)> gemv;
    std::function<void(const Packed&, int64_t, int64_t, const float*, int64_t, int64_t, float*)>
        gemm_f32;
};

Format bt_format(int d) {
    return {"bt" + std::to_string(d),
            f::bt_levels(d),
            true,
            [d](int64_t k) { return f::bt_row_bytes(k, d); },
            [](int64_t) { return int64_t{0}; },
            [d](const int8_t* c, int64_t n, int64_t k, Packed& p) {
                f::bt_pack(c, n, k, d, p.a.data());
            },
            [d](const Packed& p, int64_t n, int64_t k, int8_t* c) {
                f::bt_unpack(p.a.data(), n, k, d, c);
            },
            [d](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t m, int64_t g,
                int32_t* acc) { f::bt_gemm_ref(p.a.data(), n, k, d, x, m, g, acc); },
            [d](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t g, int32_t* acc) {
                f::bt_gemv_ref(p.a.data(), n, k, d, x, g, acc);
            },
            [d](const Packed& p, int64_t n, int64_t k, const float* x, int64_t m, int64_t g,
                float* acc) { f::bt_gemm_f32_ref(p.a.data(), n, k, d, x, m, g, acc); }};
}

std::vector<Format> all_formats() {
    auto none = [](int64_t) { return int64_t{0}; };
    std::vector<Format> out = {
        {"tern2", 1, true, f::tern2_row_bytes, none,
         [](const int8_t* c, int64_t n, int64_t k, Packed& p) {
             f::tern2_pack(c, n, k, p.a.data());
         },
         [](const Packed& p, int64_t n, int64_t k, int8_t* c) {
             f::tern2_unpack(p.a.data(), n, k, c);
         },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t m, int64_t g,
            int32_t* acc) { f::tern2_gemm_ref(p.a.data(), n, k, x, m, g, acc); },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t g, int32_t* acc) {
             f::tern2_gemv_ref(p.a.data(), n, k, x, g, acc);
         },
         [](const Packed& p, int64_t n, int64_t k, const float* x, int64_t m, int64_t g,
            float* acc) { f::tern2_gemm_f32_ref(p.a.data(), n, k, x, m, g, acc); }},
        {"tern24", 1, true, f::tern24_mask_row_bytes, f::tern24_signs_row_bytes,
         [](const int8_t* c, int64_t n, int64_t k, Packed& p) {
             f::tern24_pack(c, n, k, p.a.data(), p.b.data());
         },
         [](const Packed& p, int64_t n, int64_t k, int8_t* c) {
             f::tern24_unpack(p.a.data(), p.b.data(), n, k, c);
         },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t m, int64_t g,
            int32_t* acc) { f::tern24_gemm_ref(p.a.data(), p.b.data(), n, k, x, m, g, acc); },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t g, int32_t* acc) {
             f::tern24_gemv_ref(p.a.data(), p.b.data(), n, k, x, g, acc);
         },
         [](const Packed& p, int64_t n, int64_t k, const float* x, int64_t m, int64_t g,
            float* acc) { f::tern24_gemm_f32_ref(p.a.data(), p.b.data(), n, k, x, m, g, acc); }},
        {"bin1", 1, false, f::bin1_row_bytes, none,
         [](const int8_t* c, int64_t n, int64_t k, Packed& p) {
             f::bin1_pack(c, n, k, p.a.data());
         },
         [](const Packed& p, int64_t n, int64_t k, int8_t* c) {
             f::bin1_unpack(p.a.data(), n, k, c);
         },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t m, int64_t g,
            int32_t* acc) { f::bin1_gemm_ref(p.a.data(), n, k, x, m, g, acc); },
         [](const Packed& p, int64_t n, int64_t k, const int8_t* x, int64_t g, int32_t* acc) {
             f::bin1_gemv_ref(p.a.data(), n, k, x, g, acc);
         },
         [](const Packed& p, int64_t n, int64_t k, const float* x, int64_t m, int64_t g,
            float* acc) { f::bin1_gemm_f32_ref(p.a.data(), n, k, x, m, g, acc); }},
    };
    for (int d = f::kBtMinDepth; d <= f::kBtMaxDepth; ++d)
        out.push_back(bt_format(d));
    return out;
}

// Random codes of a format; tern24 rows get at most 2 non-zeros per 4-column group (a random
// subset of the group's non-zeros is zeroed, so groups with 0, 1 and 2 non-zeros all occur).
Codes random_codes(const Format& fmt, std::mt19937& rng, int64_t n, int64_t k) {
    Codes c(static_cast<size_t>(n * k));
    std::uniform_int_distribution<int> level(-fmt.max_code, fmt.max_code);
    for (auto& v : c) {
        int code = level(rng);
        while (!fmt.has_zero && code == 0)
            code = level(rng);
        v = static_cast<int8_t>(code);
    }
    if (fmt.name == "tern24") {
        for (int64_t r = 0; r < n; ++r) {
            for (int64_t g0 = 0; g0 < k; g0 += 4) {
                int8_t* grp = &c[static_cast<size_t>(r * k + g0)];
                const int len = static_cast<int>(std::min<int64_t>(4, k - g0));
                int nonzeros = 0;
                for (int p = 0; p < len; ++p)
                    nonzeros += grp[p] != 0;
                while (nonzeros > 2) {
                    const int p = static_cast<int>(rng() % len);
                    if (grp[p] != 0) {
                        grp[p] = 0;
                        --nonzeros;
                    }
                }
            }
        }
    }
    return c;
}

// Packs into exact-size arrays followed by guard bytes that must survive (no overrun).
constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardBytes = 16;

Packed pack(const Format& fmt, const Codes& codes, int64_t n, int64_t k) {
    Packed p{Bytes(static_cast<size_t>(n * fmt.row_bytes_a(k)) + kGuardBytes, kGuard),
             Bytes(static_cast<size_t>(n * fmt.row_bytes_b(k)) + kGuardBytes, kGuard)};
    fmt.pack(codes.data(), n, k, p);
    for (Bytes* arr : {&p.a, &p.b}) {
        for (size_t e = arr->size() - kGuardBytes; e < arr->size(); ++e) {
            EXPECT_EQ((*arr)[e], kGuard)
                << fmt.name << " pack wrote past the end, n=" << n << " k=" << k;
        }
        arr->resize(arr->size() - kGuardBytes);
    }
    return p;
}

Codes unpack(const Format& fmt, const Packed& p, int64_t n, int64_t k) {
    Codes c(static_cast<size_t>(n * k));
    fmt.unpack(p, n, k, c.data());
    return c;
}

const std::vector<int64_t> kShapesK = {1, 3, 4, 5, 7, 8, 9, 63, 64, 65, 130, 131, 197};

TEST(Formats, RoundTripBitExactOverShapes) {
    std::mt19937 rng(20261122);
    for (const Format& fmt : all_formats()) {
        for (int64_t n : {1, 2, 5}) {
            for (int64_t k : kShapesK) {
                SCOPED_TRACE(fmt.name + " n=" + std::to_string(n) + " k=" + std::to_string(k));
                const Codes codes = random_codes(fmt, rng, n, k);
                const Packed p = pack(fmt, codes, n, k);
                const Codes back = unpack(fmt, p, n, k);
                EXPECT_EQ(back, codes) << mismatches(back, codes, k);
                // Re-packing the unpacked codes reproduces the bytes: padding is canonical.
                const Packed again = pack(fmt, back, n, k);
                EXPECT_EQ(again.a, p.a) << mismatches(again.a, p.a, fmt.row_bytes_a(k));
                EXPECT_EQ(again.b, p.b);
            }
        }
    }
}

// ---- golden bytes, worked by hand -----------------------------------------------------------

TEST(Formats, RowBytesAtUnitBoundaries) {
    // Each k below and just above a whole unit: 4 codes (tern2), 4 / 8 / 16 columns (a tern24
    // group, a mask byte, a signs byte), 8 bits (bin1), a quintet times d (bt).
    EXPECT_EQ(f::tern2_row_bytes(1), 1);
    EXPECT_EQ(f::tern2_row_bytes(4), 1);
    EXPECT_EQ(f::tern2_row_bytes(5), 2);
    EXPECT_EQ(f::tern24_groups(4), 1);
    EXPECT_EQ(f::tern24_groups(5), 2);
    EXPECT_EQ(f::tern24_mask_row_bytes(8), 1);
    EXPECT_EQ(f::tern24_mask_row_bytes(9), 2);
    EXPECT_EQ(f::tern24_signs_row_bytes(16), 1);
    EXPECT_EQ(f::tern24_signs_row_bytes(17), 2);
    EXPECT_EQ(f::bin1_row_bytes(8), 1);
    EXPECT_EQ(f::bin1_row_bytes(9), 2);
    // bt: d * floor(k / 5) + ceil((k mod 5) * d / 5) (whole quintets, then the weight-major tail).
    EXPECT_EQ(f::bt_row_bytes(5, 2), 2);
    EXPECT_EQ(f::bt_row_bytes(6, 2), 3);          // 2 + ceil(2 / 5)
    EXPECT_EQ(f::bt_row_bytes(7, 2), 3);          // 2 + ceil(4 / 5)
    EXPECT_EQ(f::bt_row_bytes(8, 2), 4);          // 2 + ceil(6 / 5)
    EXPECT_EQ(f::bt_row_bytes(256, 2), 103);      // 102 + ceil(2 / 5)
    EXPECT_EQ(f::bt_row_bytes(784, 2), 314);      // 312 + ceil(8 / 5)
    EXPECT_EQ(f::bt_row_bytes(784, 4), 4 * 157);  // 624 + ceil(16 / 5)
    EXPECT_EQ(f::bt_row_bytes(4, 4), 4);          // tail only: ceil(16 / 5)
    EXPECT_EQ(f::bt_row_bytes(3, 1), 1);          // tail only: ceil(3 / 5)
    EXPECT_EQ(f::bt_row_bytes(9, 3), 6);          // 3 + ceil(12 / 5)
    EXPECT_EQ(f::bt_tail_bytes(7, 2), 1);
    EXPECT_EQ(f::bt_tail_bytes(10, 4), 0);
    EXPECT_EQ(f::acc_num_groups(64, 64), 1);
    EXPECT_EQ(f::acc_num_groups(65, 64), 2);
    EXPECT_EQ(f::acc_num_groups(5, std::numeric_limits<int64_t>::max()), 1);
}

TEST(Tern2, GoldenBytes) {
    // Row 0, k = 4: [+1, -1, 0, +1] -> fields 01, 10, 00, 01 (weight j in bits 2j..2j+1)
    //   byte = 01'00'10'01 = 0b01001001 = 0x49.
    Bytes one(1);
    f::tern2_pack(Codes{1, -1, 0, 1}.data(), 1, 4, one.data());
    EXPECT_EQ(one, Bytes{0x49});
    // k = 6, two rows of 2 bytes each:
    //   row 0 [-1, -1, +1, 0 | 0, -1]: byte 0 = 00'01'10'10 = 0x1A; byte 1 = pad 00'00, 10, 00
    //   = 0b00001000 = 0x08.  row 1 [0, 0, 0, 0 | 0, +1]: byte 0 = 0x00; byte 1 = 0b0100 = 0x04.
    Bytes two(4);
    f::tern2_pack(Codes{-1, -1, 1, 0, 0, -1, 0, 0, 0, 0, 0, 1}.data(), 2, 6, two.data());
    EXPECT_EQ(two, (Bytes{0x1A, 0x08, 0x00, 0x04}));
}

TEST(Tern24, GoldenBytes) {
    // k = 10: groups {0..3}, {4..7}, {8, 9} (partial).
    //   row 0 [0, +1, 0, -1 | -1, 0, 0, 0 | 0, +1]
    //     bitmaps 0b1010, 0b0001, 0b0010; sign pairs (bit 0 = first non-zero, 1 = negative):
    //     g0 (+1, -1) -> 0b10, g1 (-1) -> 0b01, g2 (+1) -> 0b00
    //     mask  byte 0 = g1 << 4 | g0 = 0x1A, byte 1 = g2 = 0x02 (high nibble padding 0)
    //     signs byte 0 = g2 << 4 | g1 << 2 | g0 = 0b00'00'01'10 = 0x06
    //   row 1 [-1, -1, 0, 0 | 0, 0, 0, 0 | +1, -1]
    //     bitmaps 0b0011, 0b0000, 0b0011; pairs 0b11, 0b00, 0b10
    //     mask [0x03, 0x03]; signs 0b00'10'00'11 = 0x23
    Bytes mask(4), signs(2);
    f::tern24_pack(Codes{0, 1, 0, -1, -1, 0, 0, 0, 0, 1, -1, -1, 0, 0, 0, 0, 0, 0, 1, -1}.data(), 2,
                   10, mask.data(), signs.data());
    EXPECT_EQ(mask, (Bytes{0x1A, 0x02, 0x03, 0x03}));
    EXPECT_EQ(signs, (Bytes{0x06, 0x23}));
}

TEST(Bin1, GoldenBytes) {
    // k = 10: [+1, -1, -1, +1, +1, +1, -1, +1 | -1, +1] (bit j of a byte = column 8b + j, 1 = +1)
    //   byte 0 bits 7..0 = 1,0,1,1,1,0,0,1 = 0xB9; byte 1 = bit 1 set = 0x02 (bits 2..7 padding).
    Bytes p(2);
    f::bin1_pack(Codes{1, -1, -1, 1, 1, 1, -1, 1, -1, 1}.data(), 1, 10, p.data());
    EXPECT_EQ(p, (Bytes{0xB9, 0x02}));
}

TEST(Bt, GoldenBytes) {
    // d = 2, k = 7: quintet 0 = [4, -4, 0, 2, -3], tail (r = 2) = [1, -1].
    //   balanced trits (t0, t1): 4 = 1 + 3 -> (1, 1); -4 -> (-1, -1); 0 -> (0, 0);
    //   2 = -1 + 3 -> (-1, 1); -3 -> (0, -1); 1 -> (1, 0); -1 -> (-1, 0).
    //   quintet 0 plane 0: t + 1 = [2, 0, 1, 0, 1] -> 2 + 0*3 + 1*9 + 0*27 + 1*81 = 92
    //             plane 1: t + 1 = [2, 0, 1, 2, 0] -> 2 + 0 + 9 + 54 + 0 = 65
    //   tail, 4 trits weight-major t0(1), t1(1), t0(-1), t1(-1) = 1, 0, -1, 0, slot 4 unused (0):
    //     t + 1 = [2, 1, 0, 1, 1] -> 2 + 1*3 + 0*9 + 1*27 + 1*81 = 113   (was [119, 121]: 4 bytes)
    Bytes d2(3);
    f::bt_pack(Codes{4, -4, 0, 2, -3, 1, -1}.data(), 1, 7, 2, d2.data());
    EXPECT_EQ(d2, (Bytes{92, 65, 113}));
    // d = 1: [-1, 0, 1, 1, -1] -> [0, 1, 2, 2, 0] -> 0 + 3 + 18 + 54 + 0 = 75.
    Bytes d1(1);
    f::bt_pack(Codes{-1, 0, 1, 1, -1}.data(), 1, 5, 1, d1.data());
    EXPECT_EQ(d1, Bytes{75});
    // d = 3: 13 = 1 + 3 + 9 -> (1, 1, 1); -13 -> (-1, -1, -1); 5 = -1 - 3 + 9 -> (-1, -1, 1);
    //   0 -> (0, 0, 0); 1 -> (1, 0, 0).  plane 0 [2, 0, 0, 1, 2] = 2 + 27 + 162 = 191;
    //   plane 1 [2, 0, 0, 1, 1] = 2 + 27 + 81 = 110; plane 2 [2, 0, 2, 1, 1] = 2 + 18 + 27 + 81 =
    //   128.
    Bytes d3(3);
    f::bt_pack(Codes{13, -13, 5, 0, 1}.data(), 1, 5, 3, d3.data());
    EXPECT_EQ(d3, (Bytes{191, 110, 128}));
    // d = 4: 40 -> four trits 1, -40 -> four -1: every plane [2, 0, 1, 1, 1] = 119.
    Bytes d4(4);
    f::bt_pack(Codes{40, -40, 0, 0, 0}.data(), 1, 5, 4, d4.data());
    EXPECT_EQ(d4, (Bytes{119, 119, 119, 119}));
    // The device decode helpers agree with the table of the reference.
    const f::BtTrits t = f::bt_decode_byte(92);
    EXPECT_EQ(std::vector<int>(t.t, t.t + 5), (std::vector<int>{1, -1, 0, -1, 0}));
    EXPECT_EQ(f::bt_levels(2), 4);
    EXPECT_EQ(f::bt_tail_code(d2.data(), 7, 2, 0), 1);
    EXPECT_EQ(f::bt_tail_code(d2.data(), 7, 2, 1), -1);
    EXPECT_EQ(f::bt_tail_trit(d2.data(), 7, 2, 2), -1);
}

TEST(Bt, GoldenTail) {
    // d = 2, k = 6: quintet [4, -4, 0, 2, -3] -> [92, 65] as above; tail r = 1: code 2 = -1 + 3
    //   -> trits (t0, t1) = (-1, 1) in slots 0, 1; slots 2..4 unused (0):
    //   t + 1 = [0, 2, 1, 1, 1] -> 0 + 2*3 + 1*9 + 1*27 + 1*81 = 123.
    Bytes d2(3);
    f::bt_pack(Codes{4, -4, 0, 2, -3, 2}.data(), 1, 6, 2, d2.data());
    EXPECT_EQ(d2, (Bytes{92, 65, 123}));
    // d = 2, k = 1 (tail only): code -4 -> (-1, -1): [0, 0, 1, 1, 1] -> 9 + 27 + 81 = 117.
    Bytes one(1);
    f::bt_pack(Codes{-4}.data(), 1, 1, 2, one.data());
    EXPECT_EQ(one, Bytes{117});
    // d = 3, k = 7: quintet [13, -13, 5, 0, 1] -> [191, 110, 128] (GoldenBytes); tail r = 2 = [11,
    // -7]:
    //   11 = -1 + 3 + 9 -> (-1, 1, 1); -7 = -1 + 3 - 9 -> (-1, 1, -1); 6 trits weight-major
    //   -1, 1, 1, -1, 1 | -1 -> tail byte 0: t + 1 = [0, 2, 2, 0, 2] -> 2*3 + 2*9 + 2*81 = 186;
    //   tail byte 1: slot 0 = -1, slots 1..4 unused: [0, 1, 1, 1, 1] -> 3 + 9 + 27 + 81 = 120.
    Bytes d3(5);
    f::bt_pack(Codes{13, -13, 5, 0, 1, 11, -7}.data(), 1, 7, 3, d3.data());
    EXPECT_EQ(d3, (Bytes{191, 110, 128, 186, 120}));
    Codes back(7);
    f::bt_unpack(d3.data(), 1, 7, 3, back.data());
    EXPECT_EQ(back, (Codes{13, -13, 5, 0, 1, 11, -7}));
    // d = 4, k = 4 (tail only): 16 trits in 4 bytes, slots 1..4 of the last unused. [40, 0, 0, -40]
    //   -> trits 1, 1, 1, 1, 0 | 0, 0, 0, 0, 0 | 0, 0, -1, -1, -1 | -1: [2, 2, 2, 2, 1] =
    //   2 + 6 + 18 + 54 + 81 = 161; 121; [1, 1, 0, 0, 0] = 1 + 3 = 4; [0, 1, 1, 1, 1] = 120.
    Bytes d4(4);
    f::bt_pack(Codes{40, 0, 0, -40}.data(), 1, 4, 4, d4.data());
    EXPECT_EQ(d4, (Bytes{161, 121, 4, 120}));
    // Product over a quintet and the tail, one group: x [1, 1, 1, 1, 1, 2, 3] with the d = 3
    // row: 13 - 13 + 5 + 0 + 1 + 22 - 21 = 7; groups of 6: [6 + 22, -21] = [28, -21].
    std::vector<int32_t> acc(2);
    const Codes x{1, 1, 1, 1, 1, 2, 3};
    f::bt_gemv_ref(d3.data(), 1, 7, 3, x.data(), 7, acc.data());
    EXPECT_EQ(acc[0], 7);
    f::bt_gemv_ref(d3.data(), 1, 7, 3, x.data(), 6, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{28, -21}));
}

TEST(Formats, GoldenProduct) {
    // tern2 [+1, -1, 0, +1] . x [10, 20, 30, 40]: group 2 -> [10 - 20, 0 + 40] = [-10, 40];
    // group 4 (and any group >= k) -> 30; group 3 -> [10 - 20 + 0, 40] = [-10, 40].
    const Bytes p{0x49};
    const Codes x{10, 20, 30, 40};
    std::vector<int32_t> acc(2);
    f::tern2_gemv_ref(p.data(), 1, 4, x.data(), 2, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{-10, 40}));
    f::tern2_gemv_ref(p.data(), 1, 4, x.data(), 3, acc.data());
    EXPECT_EQ(acc, (std::vector<int32_t>{-10, 40}));
    f::tern2_gemv_ref(p.data(), 1, 4, x.data(), 1000, acc.data());
    EXPECT_EQ(acc[0], 30);
    f::tern2_gemv_ref(p.data(), 1, 4, x.data(), std::numeric_limits<int64_t>::max(), acc.data());
    EXPECT_EQ(acc[0], 30);
    // bt d = 2 quintet [4, -4, 0, 2, -3] . x [1, 2, 3, 4, -128], one group: 4 - 8 + 0 + 8 + 384.
    const Bytes q{92, 65};
    const Codes y{1, 2, 3, 4, -128};
    f::bt_gemv_ref(q.data(), 1, 5, 2, y.data(), 5, acc.data());
    EXPECT_EQ(acc[0], 388);
}

// ---- products against naive sums ------------------------------------------------------------

// Naive exact products over unpacked codes: acc (m, n, G) in int64, and in double for float x.
template <typename X, typename Acc>
std::vector<Acc> naive(const Codes& w, int64_t n, int64_t k, const std::vector<X>& x, int64_t m,
                       int64_t group) {
    const int64_t groups = (k + group - 1) / group;
    std::vector<Acc> acc(static_cast<size_t>(m * n * groups), Acc{0});
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < k; ++c)
                acc[(i * n + j) * groups + c / group] +=
                    static_cast<Acc>(x[i * k + c]) * static_cast<Acc>(w[j * k + c]);
    return acc;
}

TEST(Formats, Int32ProductsEqualNaiveSums) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> act(-128, 127);  // -128 included: the bound uses it
    for (const Format& fmt : all_formats()) {
        for (int64_t m : {1, 3, 8}) {
            for (int64_t k : {1, 5, 7, 64, 65, 130, 197}) {
                const int64_t n = 5;
                const Codes w = random_codes(fmt, rng, n, k);
                const Packed p = pack(fmt, w, n, k);
                Codes x(static_cast<size_t>(m * k));
                for (auto& v : x)
                    v = static_cast<int8_t>(act(rng));
                for (int64_t group : {int64_t{64}, int64_t{7}, int64_t{1}, k, k + 100}) {
                    SCOPED_TRACE(fmt.name + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                                 " group=" + std::to_string(group));
                    const int64_t groups = f::acc_num_groups(k, group);
                    std::vector<int32_t> acc(static_cast<size_t>(m * n * groups) + 4, -7);
                    fmt.gemm(p, n, k, x.data(), m, group, acc.data());
                    EXPECT_EQ(std::count(acc.end() - 4, acc.end(), -7), 4) << "wrote past acc";
                    acc.resize(acc.size() - 4);
                    const std::vector<int64_t> want = naive<int8_t, int64_t>(w, n, k, x, m, group);
                    const std::vector<int64_t> got(acc.begin(), acc.end());
                    EXPECT_EQ(got, want) << mismatches(got, want, n, groups);
                    if (m == 1) {
                        std::vector<int32_t> gv(static_cast<size_t>(n * groups));
                        fmt.gemv(p, n, k, x.data(), group, gv.data());
                        EXPECT_EQ(gv, acc) << mismatches(gv, acc, n, groups);
                    }
                }
            }
        }
    }
}

// Sequential float summation of len terms, each a rounded product, is within
// (len + 1) * u * sum |terms| of the exact sum (u = 2^-24, Higham's gamma_n bound to first
// order); FLT_EPSILON = 2u leaves a factor 2 of slack for the second-order terms.
double f32_bound(int64_t len, double abs_sum) {
    return static_cast<double>(len + 1) * FLT_EPSILON * abs_sum + 1e-30;
}

TEST(Formats, FloatProductsCloseToDoubleSums) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> act(-1.0f, 1.0f);
    for (const Format& fmt : all_formats()) {
        for (int64_t m : {1, 4}) {
            for (int64_t k : {3, 64, 65, 197}) {
                const int64_t n = 3;
                const Codes w = random_codes(fmt, rng, n, k);
                const Packed p = pack(fmt, w, n, k);
                std::vector<float> x(static_cast<size_t>(m * k));
                for (auto& v : x)
                    v = act(rng);
                std::vector<float> ax(x.size());
                for (size_t e = 0; e < x.size(); ++e)
                    ax[e] = std::fabs(x[e]);
                Codes aw(w.size());
                for (size_t e = 0; e < w.size(); ++e)
                    aw[e] = static_cast<int8_t>(std::abs(w[e]));
                for (int64_t group : {int64_t{64}, int64_t{7}, k}) {
                    SCOPED_TRACE(fmt.name + " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                                 " group=" + std::to_string(group));
                    const int64_t groups = f::acc_num_groups(k, group);
                    std::vector<float> acc(static_cast<size_t>(m * n * groups));
                    fmt.gemm_f32(p, n, k, x.data(), m, group, acc.data());
                    const auto want = naive<float, double>(w, n, k, x, m, group);
                    const auto abs_sum = naive<float, double>(aw, n, k, ax, m, group);
                    int bad = 0;
                    for (size_t e = 0; e < acc.size(); ++e) {
                        const double err = std::fabs(acc[e] - want[e]);
                        if (err <= f32_bound(std::min(group, k), abs_sum[e]) || bad++ >= 5)
                            continue;
                        ADD_FAILURE() << "acc[" << e / (n * groups) << "][" << e / groups % n
                                      << "][" << e % groups << "] = " << acc[e] << ", want "
                                      << want[e] << " (err " << err << ")";
                    }
                }
            }
        }
    }
}

TEST(Formats, ProductsSumFloatsInIncreasingColumnOrder) {
    // 1e8 + 1 - 1e8 in that order rounds the 1 away (ulp of 1e8 is 8): the sum is 0, not 1.
    // Any other order or a wider accumulator would give 1.
    const Bytes p{0b00'01'01'01};  // tern2 [+1, +1, +1]
    const std::vector<float> x{1e8f, 1.0f, -1e8f};
    float acc = -1.0f;
    f::tern2_gemm_f32_ref(p.data(), 1, 3, x.data(), 1, 3, &acc);
    EXPECT_EQ(acc, 0.0f);
}

TEST(Formats, ProductsRejectInt32OverflowOnly) {
    // bt d = 4: |code| <= 40, so a group of 419431 columns could reach 128 * 40 * 419431 > 2^31.
    const int64_t k = 419431;
    const Bytes p(static_cast<size_t>(f::bt_row_bytes(k, 4)), f::kBtZeroByte);
    const Codes x(static_cast<size_t>(k), 1);
    std::vector<int32_t> acc(2);
    expect_error([&] { f::bt_gemv_ref(p.data(), 1, k, 4, x.data(), k, acc.data()); },
                 {"bt_gemm_ref", "overflow", "419430"});
    f::bt_gemv_ref(p.data(), 1, k, 4, x.data(), 419430, acc.data());  // 2 groups: fine
    EXPECT_EQ(acc, (std::vector<int32_t>{0, 0}));
    const std::vector<float> xf(static_cast<size_t>(k), 1.0f);
    float af = -1.0f;
    f::bt_gemm_f32_ref(p.data(), 1, k, 4, xf.data(), 1, k, &af);  // float: no such bound
    EXPECT_EQ(af, 0.0f);
}

// ---- rejections name the row and the index --------------------------------------------------

TEST(Formats, RejectBadShapesAndPointers) {
    Bytes p(8);
    Codes c(8), x(8);
    std::vector<int32_t> acc(8);
    expect_error([&] { f::tern2_pack(c.data(), 0, 4, p.data()); }, {"n=0"});
    expect_error([&] { f::tern24_unpack(p.data(), p.data(), 1, 0, c.data()); }, {"k=0"});
    expect_error([&] { f::bin1_validate(nullptr, 1, 4); }, {"non-null"});
    expect_error([&] { f::bt_pack(c.data(), 1, 5, 0, p.data()); }, {"d=0"});
    expect_error([&] { f::bt_unpack(p.data(), 1, 5, 5, c.data()); }, {"d=5"});
    expect_error([&] { f::tern2_gemm_ref(p.data(), 1, 4, x.data(), 0, 4, acc.data()); }, {"m=0"});
    expect_error([&] { f::bin1_gemm_ref(p.data(), 1, 4, x.data(), 1, 0, acc.data()); },
                 {"group=0"});
}

TEST(Tern2, Rejections) {
    Bytes p(4);
    // Pack: code 2 at (row 1, col 3).
    Codes c(8, 0);
    c[7] = 2;
    expect_error([&] { f::tern2_pack(c.data(), 2, 4, p.data()); },
                 {"(row 1, col 3)", "{-1, 0, +1}"});
    // Field 11: k = 8, row 1 byte 1 = 0b00001100 -> field 1 (column 5) is 11.
    p = {0x00, 0x00, 0x00, 0x0C};
    expect_error([&] { f::tern2_unpack(p.data(), 2, 8, c.data()); },
                 {"tern2_unpack", "row 1", "byte 1", "field 1", "column 5", "11"});
    Codes x(8, 1);
    std::vector<int32_t> acc(2);
    expect_error([&] { f::tern2_gemm_ref(p.data(), 2, 8, x.data(), 1, 8, acc.data()); },
                 {"tern2_gemm_ref", "row 1", "byte 1"});
    // Padding: k = 5, row 0 byte 1 field 2 (column 6 >= k) = 01; then field 1 (column 5 = k).
    p = {0x00, 0x10};
    expect_error([&] { f::tern2_validate(p.data(), 1, 5); },
                 {"row 0", "byte 1", "padding field 2", "column 6", "expected 0"});
    p = {0x00, 0x04};
    expect_error([&] { f::tern2_validate(p.data(), 1, 5); }, {"padding field 1", "column 5"});
}

TEST(Tern24, Rejections) {
    Bytes mask(4), signs(2);
    // Pack, k = 12: row 1 has 3 non-zeros in group 2 (columns 8, 9, 10), then a code 3 there.
    Codes c12(24, 0);
    c12[12 + 8] = 1;
    c12[12 + 9] = -1;
    c12[12 + 10] = 1;
    expect_error([&] { f::tern24_pack(c12.data(), 2, 12, mask.data(), signs.data()); },
                 {"row 1, group 2", "more than 2 non-zeros"});
    c12[12 + 10] = 3;
    expect_error([&] { f::tern24_pack(c12.data(), 2, 12, mask.data(), signs.data()); },
                 {"(row 1, col 10)"});
    // Unpack, k = 10, 2 rows: mask (2, 2), signs (2, 1); each case breaks one rule.
    Codes c(20);
    auto check = [&](std::initializer_list<const char*> parts) {
        expect_error([&] { f::tern24_unpack(mask.data(), signs.data(), 2, 10, c.data()); }, parts);
    };
    // Popcount 3: row 1, group 1 (mask byte 0 of row 1, high nibble) = 0b0111.
    mask = {0, 0, 0x70, 0};
    signs = {0, 0};
    check({"row 1, group 1", "mask byte 0", "high nibble", "3 non-zeros"});
    // Bitmap bit at column 10 >= k: row 0, group 2, bit 2.
    mask = {0, 0x04, 0, 0};
    check({"row 0, group 2", "mask byte 1", "column 10", "k = 10"});
    // Unused sign bit: row 0, group 1 has one non-zero (0b0001) but sign pair 0b10.
    mask = {0x10, 0, 0, 0};
    signs = {0b1000, 0};
    check({"row 0, group 1", "signs byte 0", "bits 2..3", "unused sign bits"});
    // Empty group with a sign bit: row 1, group 0, pair 0b01.
    mask = {0, 0, 0, 0};
    signs = {0, 0b01};
    check({"row 1, group 0", "signs byte 0"});
    // Padding nibble: row 0, mask byte 1 high nibble (no group 3 with k = 10).
    signs = {0, 0};
    mask = {0, 0x20, 0, 0};
    check({"row 0, mask byte 1", "padding", "0x2"});
    // Padding sign bits: row 1, signs byte 0 bits 6..7 (past group 2).
    mask = {0, 0, 0, 0};
    signs = {0, 0x40};
    check({"row 1, signs byte 0", "bits 6..7", "padding"});
    Codes x(10, 1);
    std::vector<float> acc(2);
    std::vector<float> xf(10, 1.0f);
    expect_error(
        [&] {
            f::tern24_gemm_f32_ref(mask.data(), signs.data(), 2, 10, xf.data(), 1, 10, acc.data());
        },
        {"tern24_gemm_f32_ref", "row 1"});
}

TEST(Bin1, Rejections) {
    Bytes p(4);
    Codes c(20, 1);
    c[2] = 0;
    expect_error([&] { f::bin1_pack(c.data(), 2, 10, p.data()); }, {"(row 0, col 2)", "no zero"});
    // Padding: k = 10, row 1 byte 1 bit 5 (column 13).
    p = {0, 0, 0, 0x20};
    expect_error([&] { f::bin1_unpack(p.data(), 2, 10, c.data()); },
                 {"row 1", "byte 1", "padding bit 5", "column 13"});
    p = {0, 0x04, 0, 0};  // row 0 byte 1 bit 2: column 10 = k, the first padding bit
    expect_error([&] { f::bin1_validate(p.data(), 2, 10); }, {"row 0", "padding bit 2"});
}

TEST(Bt, Rejections) {
    // Pack: d = 2 allows [-4, 4]; code 5 at (row 0, col 4), then in the tail at (row 0, col 6).
    Bytes p(6);
    Codes c{0, 0, 0, 0, 5, 0, 0};
    expect_error([&] { f::bt_pack(c.data(), 1, 7, 2, p.data()); },
                 {"(row 0, col 4)", "[-4, 4]", "d = 2"});
    c = {0, 0, 0, 0, 0, 0, -5};
    expect_error([&] { f::bt_pack(c.data(), 1, 7, 2, p.data()); }, {"(row 0, col 6)", "-5"});
    // Byte 243: d = 2, k = 7 (3 bytes a row), row 1 byte 1 = quintet 0, plane 1.
    p = {121, 121, 121, 121, 243, 121};
    expect_error([&] { f::bt_unpack(p.data(), 2, 7, 2, c.data()); },
                 {"row 1", "byte 1", "quintet 0", "plane 1", "243", "242"});
    // Tail byte 243: row 0 byte 2 (tail byte 0).
    p = {121, 121, 243, 121, 121, 121};
    expect_error([&] { f::bt_validate(p.data(), 2, 7, 2); },
                 {"row 0", "byte 2", "tail byte 0", "243", "242"});
    // Unused tail slot: k = 7, d = 2 -> tail of 4 trits, slot 4 of row 0 byte 2 = +1: 121 + 81.
    p = {121, 121, 202, 121, 121, 121};
    expect_error([&] { f::bt_validate(p.data(), 2, 7, 2); },
                 {"row 0", "byte 2", "tail byte 0", "unused slot 4", "tail trit 4", "is 1"});
    // k = 6, d = 2 -> tail of 2 trits; slot 2 (the first unused) = -1 in row 1 byte 2: 121 - 9.
    p = {121, 121, 121, 121, 121, 112};
    expect_error([&] { f::bt_validate(p.data(), 2, 6, 2); },
                 {"row 1", "byte 2", "unused slot 2", "is -1", "expected 0"});
    std::vector<float> xf(6, 1.0f), af(2);
    expect_error([&] { f::bt_gemm_f32_ref(p.data(), 2, 6, 2, xf.data(), 1, 6, af.data()); },
                 {"bt_gemm_f32_ref", "row 1", "unused slot 2"});
    // The same 6 bytes as one row of k = 15 (3 quintets, no tail) are valid: 112 is a plane byte.
    f::bt_validate(p.data(), 1, 15, 2);
}

// ---- activation codes ------------------------------------------------------------------------

Codes levels(const std::vector<float>& x, float scale, int lv) {
    Codes q(x.size(), 99);
    f::act_levels_quantize_ref(x.data(), 1, static_cast<int64_t>(x.size()), scale, lv, q.data());
    return q;
}

TEST(ActLevels, Golden) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    // levels 3, scale 0.5: x / s = 0.5 -> 0 (tie to even), 1.5 -> 2 -> 1, -0.5 -> 0, -0.6 -> -1.
    EXPECT_EQ(levels({0.25f, 0.75f, -0.25f, -0.3f, 0.0f, kNan, kInf, -kInf}, 0.5f, 3),
              (Codes{0, 1, 0, -1, 0, 0, 1, -1}));
    // levels 5 (L = 2), scale 1: 2.5 -> 2, 3.5 -> 4 -> 2, -1.5 -> -2, 0.5 -> 0, -7 -> -2.
    EXPECT_EQ(levels({2.5f, 3.5f, -1.5f, 0.5f, 1.5f, -7.0f, 1e30f}, 1.0f, 5),
              (Codes{2, 2, -2, 0, 2, -2, 2}));
    // True division, not x * (1 / scale): 0x1.599998p+0 / 0.9f = 1.49999988 -> 1, while the
    // reciprocal product rounds to 1.5 -> 2; 0x1.a66666p+0 / 1.1f = 1.5 exactly -> 2 (reciprocal:
    // 1.49999988 -> 1).
    EXPECT_EQ(levels({0x1.599998p+0f}, 0.9f, 5), Codes{1});
    EXPECT_EQ(levels({0x1.a66666p+0f}, 1.1f, 5), Codes{2});
    // levels 255: the full int8 symmetric range.
    EXPECT_EQ(levels({-1000.0f, 126.5f, 1000.0f}, 1.0f, 255), (Codes{-127, 126, 127}));
}

TEST(ActLevels, BoolGolden) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const std::vector<float> x{0.5f, 0.51f, 1.5f, -3.0f, kNan, kInf, 0.49f, -kInf};
    Codes q(x.size(), 99);
    f::act_bool_quantize_ref(x.data(), 2, 4, 1.0f, q.data());
    EXPECT_EQ(q, (Codes{0, 1, 1, 0, 0, 1, 0, 0}));
}

TEST(ActLevels, Rejections) {
    const std::vector<float> x(4, 1.0f);
    Codes q(4);
    for (int lv : {1, 2, 4, 257}) {
        expect_error([&] { f::act_levels_quantize_ref(x.data(), 1, 4, 1.0f, lv, q.data()); },
                     {"levels must be odd in 3..255", ("got " + std::to_string(lv)).c_str()});
    }
    for (float s : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
        expect_error([&] { f::act_bool_quantize_ref(x.data(), 1, 4, s, q.data()); },
                     {"scale must be finite and > 0"});
    }
    expect_error([&] { f::act_levels_quantize_ref(x.data(), 0, 4, 1.0f, 3, q.data()); },
                 {"rows=0"});
}

}  // namespace
