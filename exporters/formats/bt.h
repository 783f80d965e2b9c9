// bt: balanced-ternary weights of depth d = 1..4, each code written as d trits, 5 trits per byte
// (3^5 = 243 <= 256): 1.6 bits per trit, 1.6 d bits per weight. Spec header with device-usable
// helpers; bt.cpp is the bit-exact CPU reference every kernel matches. docs/formats.md#bt.
//
// Weight matrix (n, k) row-major int8 codes in [-L, L], L = bt_levels(d) = (3^d - 1) / 2 (1, 4,
// 13, 40). A code is its standard (unique) balanced-ternary digits t_0..t_{d-1} in {-1, 0, 1}, code
// = sum_i t_i 3^i. A row is cut into Q = ceil(k / 5) quintets of 5 consecutive columns (the last
// one padded with code-0 weights); quintet q takes d bytes, byte q * d + i of the row is trit plane
// i of its weights w_0..w_4 (columns 5q..5q+4):
//     byte = sum_{j < 5} (t_i(w_j) + 1) * 3^j  in [0, 242];  243..255 are invalid.
// bt_row_bytes(k, d) = d * Q. All-zero plane byte = 121. Example, d = 2, codes [4, -4, 0, 2, -3]:
//     trits (t_0, t_1): (1, 1), (-1, -1), (0, 0), (-1, 1), (0, -1)
//     plane 0: t + 1 = [2, 0, 1, 0, 1] -> 2 + 9 + 81 = 92 = 0x5C
//     plane 1: t + 1 = [2, 0, 1, 2, 0] -> 2 + 9 + 54 = 65 = 0x41      -> bytes [0x5C, 0x41].
// unpack/validate/gemm reject a byte > 242 and a non-zero padding trit, naming row, byte, quintet
// and plane; pack rejects codes outside [-L, L] naming (row, col); d outside 1..4 is rejected.
//
// Products: as tern2.h: acc[i][j][g] = sum over scale group g of x[i][c] * code[j][c], (m, n, G),
// G = ceil(k / group); int32 exact while min(group, k) * 128 * L <= 2^31 - 1, checked (d = 4:
// min(group, k) <= 419430). The float variant sums fl(sum + fl(x * code)) per group in increasing
// c from +0.0f over every column. Scales (fp16 per group of 64 by default) live in the container.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kBtMinDepth = 1;
constexpr int kBtMaxDepth = 4;
constexpr int kBtQuintet = 5;         // weights (trits of one plane) per byte
constexpr uint8_t kBtZeroByte = 121;  // five trits 0: 1 + 3 + 9 + 27 + 81
constexpr uint8_t kBtMaxByte = 242;   // 3^5 - 1

TRIT_HD constexpr int bt_pow3(int i) {
    int p = 1;
    for (int e = 0; e < i; ++e)
        p *= 3;
    return p;
}

// Largest |code| at depth d: (3^d - 1) / 2.
TRIT_HD constexpr int bt_levels(int d) {
    return (bt_pow3(d) - 1) / 2;
}

TRIT_HD constexpr int64_t bt_quintets(int64_t k) {
    return ceil_div(k, kBtQuintet);
}

TRIT_HD constexpr int64_t bt_row_bytes(int64_t k, int d) {
    return d * bt_quintets(k);
}

// code mod 3 taken in {-1, 0, 1}: the lowest balanced trit.
TRIT_HD constexpr int bt_balanced_residue(int code) {
    const int r = ((code % 3) + 3) % 3;
    return r == 2 ? -1 : r;
}

// Balanced trit i of code: t_0 is its balanced residue, then recurse on (code - t_0) / 3 (exact).
TRIT_HD constexpr int bt_code_trit(int code, int i) {
    for (int e = 0; e < i; ++e)
        code = (code - bt_balanced_residue(code)) / 3;
    return bt_balanced_residue(code);
}

// Plane-i byte of the 5 codes of a quintet (codes[j] for column 5q + j).
TRIT_HD constexpr uint8_t bt_encode_plane(const int8_t* codes, int i) {
    int byte = 0;
    for (int j = kBtQuintet - 1; j >= 0; --j)
        byte = byte * 3 + bt_code_trit(codes[j], i) + 1;
    return static_cast<uint8_t>(byte);
}

// Trit j (0..4, column 5q + j) of a plane byte <= 242, in {-1, 0, 1}.
TRIT_HD constexpr int bt_trit(uint8_t byte, int j) {
    return (byte / bt_pow3(j)) % 3 - 1;
}

// The 5 trits of a plane byte: the entry of a 243-entry decode table (built in bt.cpp for the
// reference; a kernel can build its own, e.g. in __constant__ memory, from this function).
struct BtTrits {
    int8_t t[kBtQuintet];
};
TRIT_HD constexpr BtTrits bt_decode_byte(uint8_t byte) {
    BtTrits out{};
    for (int j = 0; j < kBtQuintet; ++j)
        out.t[j] = static_cast<int8_t>(bt_trit(byte, j));
    return out;
}

static_assert(bt_levels(1) == 1 && bt_levels(2) == 4 && bt_levels(3) == 13 && bt_levels(4) == 40);
static_assert(bt_code_trit(2, 0) == -1 && bt_code_trit(2, 1) == 1 && bt_code_trit(-40, 3) == -1);
static_assert(bt_trit(kBtZeroByte, 0) == 0 && bt_trit(kBtZeroByte, 4) == 0 &&
              bt_trit(kBtMaxByte, 4) == 1 && bt_trit(0, 2) == -1);
static_assert(bt_decode_byte(92).t[0] == 1 && bt_decode_byte(92).t[1] == -1 &&
              bt_decode_byte(92).t[4] == 0);

// codes (n, k) -> packed (n, bt_row_bytes(k, d)).
void bt_pack(const int8_t* codes, int64_t n, int64_t k, int d, uint8_t* packed);
// packed (n, bt_row_bytes(k, d)) -> codes (n, k); validates first, codes untouched on error.
void bt_unpack(const uint8_t* packed, int64_t n, int64_t k, int d, int8_t* codes);
// Throws trit::Error on the first byte > 242 or non-zero padding trit.
void bt_validate(const uint8_t* packed, int64_t n, int64_t k, int d);

// x (m, k) int8, acc (m, n, G) int32. Validates packed first.
void bt_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const int8_t* x, int64_t m,
                 int64_t group, int32_t* acc);
// m = 1: x (k), acc (n, G).
void bt_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const int8_t* x, int64_t group,
                 int32_t* acc);
// x (m, k) float, acc (m, n, G) float.
void bt_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const float* x, int64_t m,
                     int64_t group, float* acc);

}  // namespace trit::formats
