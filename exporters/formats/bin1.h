// bin1: binary weights, 1 bit per weight, 8 per byte, LSB first. Spec header with device-usable
// helpers; bin1.cpp is the bit-exact CPU reference every kernel matches. docs/formats.md#bin1.
// Codes are {-1, +1} only: a zero weight cannot be stored (use tern2 or tern24 for that).
//
// Weight matrix (n, k) row-major int8 codes in {-1, +1}. Each row packs independently to
// bin1_row_bytes(k) = ceil(k / 8) bytes; weight j of a byte (column 8 * byte + j) is bit j:
//     bit 1 -> +1, bit 0 -> -1.
//     codes [+1, -1, -1, +1, +1, +1, -1, +1] -> bits 1,0,0,1,1,1,0,1 -> byte 0b1011'1001 = 0xB9.
// Padding bits (columns >= k in a row's last byte) are 0 and never enter a product (products run
// over k only). unpack/validate/gemm reject a non-zero padding bit naming row, byte and bit; pack
// rejects codes outside {-1, +1} (0 included) naming (row, col).
//
// Products: as tern2.h: acc[i][j][g] = sum over scale group g of x[i][c] * code[j][c], (m, n, G),
// G = ceil(k / group), int32 exact for min(group, k) <= 16777215; the float variant sums
// fl(sum + fl(x * code)) per group in increasing c from +0.0f over every column.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kBin1CodesPerByte = 8;

TRIT_HD constexpr int64_t bin1_row_bytes(int64_t k) {
    return ceil_div(k, kBin1CodesPerByte);
}

// Bit of a code in {-1, +1}.
TRIT_HD constexpr uint8_t bin1_encode(int code) {
    return code > 0 ? 1 : 0;
}

// Bit j (0..7) of a packed byte.
TRIT_HD constexpr int bin1_bit(uint8_t byte, int j) {
    return (byte >> j) & 1;
}

// Code of a bit: 2 * bit - 1.
TRIT_HD constexpr int bin1_decode(int bit) {
    return 2 * bit - 1;
}

static_assert(bin1_decode(bin1_bit(0xB9, 0)) == 1 && bin1_decode(bin1_bit(0xB9, 1)) == -1 &&
              bin1_encode(-1) == 0 && bin1_encode(1) == 1);

// codes (n, k) -> packed (n, bin1_row_bytes(k)).
void bin1_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* packed);
// packed (n, bin1_row_bytes(k)) -> codes (n, k); validates first, codes untouched on error.
void bin1_unpack(const uint8_t* packed, int64_t n, int64_t k, int8_t* codes);
// Throws trit::Error on the first non-zero padding bit.
void bin1_validate(const uint8_t* packed, int64_t n, int64_t k);

// x (m, k) int8, acc (m, n, G) int32. Validates packed first.
void bin1_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t m,
                   int64_t group, int32_t* acc);
// m = 1: x (k), acc (n, G).
void bin1_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t group,
                   int32_t* acc);
// x (m, k) float, acc (m, n, G) float.
void bin1_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, const float* x, int64_t m,
                       int64_t group, float* acc);

}  // namespace trit::formats
