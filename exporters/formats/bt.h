// bt: balanced-ternary weights of depth d = 1..4, each code written as d trits, 5 trits per byte
// (3^5 = 243 <= 256): 1.6 bits per trit, 1.6 d bits per weight. Spec header with device-usable
// helpers; bt.cpp is the bit-exact CPU reference every kernel matches. docs/formats.md#bt.
//
// Weight matrix (n, k) row-major int8 codes in [-L, L], L = bt_levels(d) = (3^d - 1) / 2 (1, 4,
// 13, 40). A code is its standard (unique) balanced-ternary digits t_0..t_{d-1} in {-1, 0, 1}, code
// = sum_i t_i 3^i. A row is Q = floor(k / 5) whole quintets of 5 consecutive columns, then a tail
// of r = k mod 5 (0..4) columns. Quintet q takes d bytes, byte q * d + i of the row is trit plane i
// of its weights w_0..w_4 (columns 5q..5q+4):
//     byte = sum_{j < 5} (t_i(w_j) + 1) * 3^j  in [0, 242];  243..255 are invalid.
// The tail's r * d trits, weight-major (t_0(w_0), .., t_{d-1}(w_0), t_0(w_1), ..; tail trit
// t = j * d + i is trit i of tail weight j, column 5Q + j), fill ceil(r * d / 5) bytes from byte
// d * Q on: trit t sits in slot s = t mod 5 of tail byte t / 5, weighted (t + 1) * 3^s like a plane
// byte; unused slots of the last tail byte hold the zero trit (digit 1).
// bt_row_bytes(k, d) = d * Q + ceil(r * d / 5). All-zero byte = 121. Example, d = 2, k = 7,
// codes [4, -4, 0, 2, -3 | 1, -1]:
//     trits (t_0, t_1): (1, 1), (-1, -1), (0, 0), (-1, 1), (0, -1) | (1, 0), (-1, 0)
//     plane 0: t + 1 = [2, 0, 1, 0, 1] -> 2 + 9 + 81 = 92 = 0x5C
//     plane 1: t + 1 = [2, 0, 1, 2, 0] -> 2 + 9 + 54 = 65 = 0x41
//     tail: t + 1 = [2, 1, 0, 1, (1)] -> 2 + 3 + 0 + 27 + 81 = 113 = 0x71  -> [0x5C, 0x41, 0x71].
// unpack/validate/gemm reject a byte > 242 (naming row, byte and quintet and plane or tail byte)
// and a non-zero unused tail slot (row, byte, tail byte, slot); pack rejects codes outside [-L, L]
// naming (row, col); d outside 1..4 is rejected.
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

// Whole quintets of a row, floor(k / 5): the row's first d * floor(k / 5) bytes.
TRIT_HD constexpr int64_t bt_full_quintets(int64_t k) {
    return k / kBtQuintet;
}

// Tail weights r = k mod 5 (0..4): columns 5 * floor(k / 5) .. k - 1.
TRIT_HD constexpr int bt_tail_weights(int64_t k) {
    return static_cast<int>(k % kBtQuintet);
}

// Tail trits r * d (0..16).
TRIT_HD constexpr int bt_tail_trits(int64_t k, int d) {
    return bt_tail_weights(k) * d;
}

// Tail bytes ceil(r * d / 5) (0..4).
TRIT_HD constexpr int bt_tail_bytes(int64_t k, int d) {
    return (bt_tail_trits(k, d) + kBtQuintet - 1) / kBtQuintet;
}

// Row byte where the tail starts: d * floor(k / 5).
TRIT_HD constexpr int64_t bt_tail_offset(int64_t k, int d) {
    return d * bt_full_quintets(k);
}

TRIT_HD constexpr int64_t bt_row_bytes(int64_t k, int d) {
    return bt_tail_offset(k, d) + bt_tail_bytes(k, d);
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

// Tail trit t (0 <= t < r * d) of the row whose first byte row points at: trit t % d of tail weight
// t / d, in slot t % 5 of tail byte t / 5.
TRIT_HD constexpr int bt_tail_trit(const uint8_t* row, int64_t k, int d, int t) {
    return bt_trit(row[bt_tail_offset(k, d) + t / kBtQuintet], t % kBtQuintet);
}

// Trit i (plane i) of column c of the row whose first byte row points at: from its quintet's
// plane-i byte, or from the tail.
TRIT_HD constexpr int bt_plane_trit(const uint8_t* row, int64_t k, int d, int i, int64_t c) {
    const int64_t q = c / kBtQuintet;
    const int j = static_cast<int>(c - q * kBtQuintet);
    if (q >= bt_full_quintets(k)) return bt_tail_trit(row, k, d, j * d + i);
    return bt_trit(row[q * d + i], j);
}

// Code of tail weight j (0 <= j < r, column 5 * floor(k / 5) + j): its d weight-major trits.
TRIT_HD constexpr int bt_tail_code(const uint8_t* row, int64_t k, int d, int j) {
    int code = 0;
    for (int i = d - 1; i >= 0; --i)
        code = code * 3 + bt_tail_trit(row, k, d, j * d + i);
    return code;
}

// Tail byte b (0 <= b < ceil(r * d / 5)) of the r tail codes tail[0..r-1]: slot s carries tail
// trit 5b + s, or the zero trit past r * d.
TRIT_HD constexpr uint8_t bt_encode_tail_byte(const int8_t* tail, int r, int d, int b) {
    int byte = 0;
    for (int s = kBtQuintet - 1; s >= 0; --s) {
        const int t = b * kBtQuintet + s;
        byte = byte * 3 + (t < r * d ? bt_code_trit(tail[t / d], t % d) : 0) + 1;
    }
    return static_cast<uint8_t>(byte);
}

static_assert(bt_levels(1) == 1 && bt_levels(2) == 4 && bt_levels(3) == 13 && bt_levels(4) == 40);
static_assert(bt_code_trit(2, 0) == -1 && bt_code_trit(2, 1) == 1 && bt_code_trit(-40, 3) == -1);
static_assert(bt_trit(kBtZeroByte, 0) == 0 && bt_trit(kBtZeroByte, 4) == 0 &&
              bt_trit(kBtMaxByte, 4) == 1 && bt_trit(0, 2) == -1);
static_assert(bt_decode_byte(92).t[0] == 1 && bt_decode_byte(92).t[1] == -1 &&
              bt_decode_byte(92).t[4] == 0);
// Row bytes: whole quintets plus the tail's ceil(r * d / 5) bytes.
static_assert(bt_row_bytes(256, 2) == 103 && bt_row_bytes(7, 2) == 3 &&
              bt_row_bytes(784, 2) == 314 && bt_row_bytes(4, 4) == 4 && bt_row_bytes(3, 1) == 1 &&
              bt_row_bytes(5, 3) == 3 && bt_row_bytes(784, 4) == 628);
// The header example's tail, d = 2, [1, -1]: t + 1 = [2, 1, 0, 1, (1)] -> 2 + 3 + 27 + 81 = 113.
constexpr int8_t kBtExampleTail[2] = {1, -1};
constexpr uint8_t kBtExampleRow[3] = {92, 65, 113};
static_assert(bt_encode_tail_byte(kBtExampleTail, 2, 2, 0) == 113);
static_assert(bt_tail_code(kBtExampleRow, 7, 2, 0) == 1 &&
              bt_tail_code(kBtExampleRow, 7, 2, 1) == -1 &&
              bt_tail_trit(kBtExampleRow, 7, 2, 2) == -1);
// Codes 4 (1, 1), 2 (-1, 1), -3 (0, -1) | 1 (1, 0), -1 (-1, 0): columns 0, 3, 4 | 5, 6.
static_assert(bt_plane_trit(kBtExampleRow, 7, 2, 0, 0) == 1 &&
              bt_plane_trit(kBtExampleRow, 7, 2, 1, 3) == 1 &&
              bt_plane_trit(kBtExampleRow, 7, 2, 0, 3) == -1 &&
              bt_plane_trit(kBtExampleRow, 7, 2, 1, 4) == -1 &&
              bt_plane_trit(kBtExampleRow, 7, 2, 0, 5) == 1 &&
              bt_plane_trit(kBtExampleRow, 7, 2, 1, 6) == 0);

// codes (n, k) -> packed (n, bt_row_bytes(k, d)).
void bt_pack(const int8_t* codes, int64_t n, int64_t k, int d, uint8_t* packed);
// packed (n, bt_row_bytes(k, d)) -> codes (n, k); validates first, codes untouched on error.
void bt_unpack(const uint8_t* packed, int64_t n, int64_t k, int d, int8_t* codes);
// Throws trit::Error on the first byte > 242 or non-zero unused tail slot.
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
