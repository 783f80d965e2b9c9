// tern24: 2:4-sparse ternary weights in two arrays, a 4-bit position bitmap and 2 sign bits per
// group of 4 columns: 1.5 bits per weight (the 2:4 seed's layout). Spec header with device-usable
// helpers; tern24.cpp is the bit-exact CPU reference every kernel matches. docs/formats.md#tern24.
//
// Weight matrix (n, k) row-major int8 codes in {-1, 0, +1} with at most 2 non-zeros in every group
// of 4 consecutive columns (group g = columns 4g..4g+3; a partial last group's missing columns
// count as zero). Per row, G4 = tern24_groups(k) = ceil(k / 4) groups, packed into two arrays:
//   mask  (n, tern24_mask_row_bytes(k) = ceil(G4 / 2)): group g's bitmap in byte g / 2, low nibble
//         for even g, high nibble for odd g; bit p set = column 4g + p is non-zero.
//   signs (n, tern24_signs_row_bytes(k) = ceil(G4 / 4)): group g's sign pair in bits 2(g % 4) and
//         2(g % 4) + 1 of byte g / 4; bit 0 = sign of the group's first (lowest) non-zero, bit 1 =
//         of the second; 1 = negative, 0 = positive; sign bits without a non-zero are 0.
//   Example, k = 10: codes [0, +1, 0, -1 | -1, 0, 0, 0 | 0, +1]
//     bitmaps 0b1010, 0b0001, 0b0010 -> mask [0x1A, 0x02]; sign pairs 0b10, 0b01, 0b00 -> signs
//     [0b00'00'01'10 = 0x06].
// Padding: the unused high nibble / sign pairs past the last group are 0. unpack/validate/gemm
// reject a bitmap with more than 2 bits, a bitmap bit at a column >= k, a sign bit set without its
// non-zero and non-zero padding, naming row, group and byte; pack rejects codes outside
// {-1, 0, +1} naming (row, col) and a group with more than 2 non-zeros naming (row, group).
//
// Products: as tern2.h: acc[i][j][g] = sum over scale group g of x[i][c] * code[j][c], (m, n, G)
// with G = ceil(k / group) (scale groups are independent of the 4-column sparsity groups), int32
// exact for min(group, k) <= 16777215; the float variant sums fl(sum + fl(x * code)) per scale
// group in increasing c from +0.0f over every column, zero codes included.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kTern24GroupSize = 4;
constexpr int kTern24MaxNonzeros = 2;
constexpr int kTern24GroupsPerMaskByte = 2;
constexpr int kTern24GroupsPerSignsByte = 4;

TRIT_HD constexpr int64_t tern24_groups(int64_t k) {
    return ceil_div(k, kTern24GroupSize);
}
TRIT_HD constexpr int64_t tern24_mask_row_bytes(int64_t k) {
    return ceil_div(tern24_groups(k), kTern24GroupsPerMaskByte);
}
TRIT_HD constexpr int64_t tern24_signs_row_bytes(int64_t k) {
    return ceil_div(tern24_groups(k), kTern24GroupsPerSignsByte);
}

// Group g's 4-bit bitmap from a row of the mask array.
TRIT_HD constexpr int tern24_bitmap(const uint8_t* mask_row, int64_t g) {
    return (mask_row[g / kTern24GroupsPerMaskByte] >> (4 * (g % kTern24GroupsPerMaskByte))) & 0xF;
}

// Group g's 2 sign bits from a row of the signs array.
TRIT_HD constexpr int tern24_sign_pair(const uint8_t* signs_row, int64_t g) {
    return (signs_row[g / kTern24GroupsPerSignsByte] >> (2 * (g % kTern24GroupsPerSignsByte))) &
           0b11;
}

TRIT_HD constexpr int tern24_popcount4(int bitmap) {
    return (bitmap & 1) + ((bitmap >> 1) & 1) + ((bitmap >> 2) & 1) + ((bitmap >> 3) & 1);
}

// Code at position p (0..3) of a group: 0 where the bitmap bit is clear, else the sign bit of its
// rank among the group's non-zeros (0 for the first, 1 for the second). Assumes a validated group.
TRIT_HD constexpr int tern24_decode(int bitmap, int sign_pair, int p) {
    return ((bitmap >> p) & 1) == 0
               ? 0
               : (((sign_pair >> tern24_popcount4(bitmap & ((1 << p) - 1))) & 1) != 0 ? -1 : 1);
}

static_assert(tern24_decode(0b1010, 0b10, 1) == 1 && tern24_decode(0b1010, 0b10, 3) == -1 &&
              tern24_decode(0b1010, 0b10, 0) == 0 && tern24_decode(0b0001, 0b01, 0) == -1);

// codes (n, k) -> mask (n, tern24_mask_row_bytes(k)), signs (n, tern24_signs_row_bytes(k)).
void tern24_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* mask, uint8_t* signs);
// mask, signs -> codes (n, k); validates first, codes untouched on error.
void tern24_unpack(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k, int8_t* codes);
// Throws trit::Error on the first rule a row breaks (see the top of this header).
void tern24_validate(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k);

// x (m, k) int8, acc (m, n, G) int32. Validates mask and signs first.
void tern24_gemm_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                     const int8_t* x, int64_t m, int64_t group, int32_t* acc);
// m = 1: x (k), acc (n, G).
void tern24_gemv_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                     const int8_t* x, int64_t group, int32_t* acc);
// x (m, k) float, acc (m, n, G) float.
void tern24_gemm_f32_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                         const float* x, int64_t m, int64_t group, float* acc);

}  // namespace trit::formats
