// tern2: dense ternary weights, 2 bits per weight, 4 per byte, LSB first (the blog seed's layout).
// Spec header: constants and device-usable helpers; pack/unpack/validate and the integer products
// are the bit-exact CPU reference (tern2.cpp) that every kernel matches. docs/formats.md#tern2.
//
// Weight matrix (n, k) = (out_features, in_features), row-major int8 codes in {-1, 0, +1}. Each row
// is packed independently to tern2_row_bytes(k) = ceil(k / 4) bytes; weight j of a byte (column
// 4 * byte + j) sits in bits 2j..2j+1:
//     field 00 -> 0, 01 -> +1, 10 -> -1, 11 invalid.
//     codes [+1, -1, 0, +1] -> fields 01, 10, 00, 01 -> byte 0b01'00'10'01 = 0x49.
// Padding fields (columns >= k in a row's last byte) are 00. unpack/validate/gemm reject a field
// 11 and non-zero padding, naming row, byte and column; pack rejects codes outside {-1, 0, +1}
// naming (row, col). Scales are not part of the format: the container stores them separately.
//
// Products (m, k) int8 x times codes^T with int32 accumulation per scale group along k:
//     G = ceil(k / group); group >= k is one group;
//     acc[i][j][g] = sum_{c in [g * group, min(k, (g + 1) * group))} x[i][c] * code[j][c],
// acc laid out (m, n, G) row-major. Exact: |sum| <= 128 * min(group, k) <= 2^31 - 1 is checked
// (min(group, k) <= 16777215). The float variant accumulates sum = fl(sum + fl(x * code)) per
// group in increasing c from +0.0f over every column, zero codes included (a NaN or Inf x gives
// NaN, as the dense fake-quant forward); kernels are compared with it under a tolerance.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kTern2CodesPerByte = 4;
constexpr int kTern2BitsPerCode = 2;
constexpr uint8_t kTern2FieldZero = 0b00;
constexpr uint8_t kTern2FieldPlus = 0b01;
constexpr uint8_t kTern2FieldMinus = 0b10;
constexpr uint8_t kTern2FieldInvalid = 0b11;

TRIT_HD constexpr int64_t tern2_row_bytes(int64_t k) {
    return ceil_div(k, kTern2CodesPerByte);
}

// 2-bit field of a code in {-1, 0, +1} (other codes are the caller's error: pack checks them).
TRIT_HD constexpr uint8_t tern2_encode(int code) {
    return code > 0 ? kTern2FieldPlus : (code < 0 ? kTern2FieldMinus : kTern2FieldZero);
}

// Field j (0..3) of a packed byte.
TRIT_HD constexpr uint8_t tern2_field(uint8_t byte, int j) {
    return static_cast<uint8_t>((byte >> (kTern2BitsPerCode * j)) & 0b11);
}

// Code of a field, branch-free: bit 0 adds +1, bit 1 adds -1. The invalid field 11 decodes to 0
// here; it never reaches a kernel because validate (run on import) rejects it.
TRIT_HD constexpr int tern2_decode(uint8_t field) {
    return static_cast<int>(field & 1) - static_cast<int>(field >> 1);
}

static_assert(tern2_encode(1) == 0b01 && tern2_encode(-1) == 0b10 && tern2_encode(0) == 0b00);
static_assert(tern2_decode(0b01) == 1 && tern2_decode(0b10) == -1 && tern2_decode(0b00) == 0);
static_assert(tern2_field(0x49, 0) == 0b01 && tern2_field(0x49, 1) == 0b10 &&
              tern2_field(0x49, 2) == 0b00 && tern2_field(0x49, 3) == 0b01);

// codes (n, k) -> packed (n, tern2_row_bytes(k)).
void tern2_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* packed);
// packed (n, tern2_row_bytes(k)) -> codes (n, k); validates first, codes untouched on error.
void tern2_unpack(const uint8_t* packed, int64_t n, int64_t k, int8_t* codes);
// Throws trit::Error on the first field 11 or non-zero padding bit.
void tern2_validate(const uint8_t* packed, int64_t n, int64_t k);

// x (m, k) int8, acc (m, n, G) int32. Validates packed first.
void tern2_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t m,
                    int64_t group, int32_t* acc);
// m = 1: x (k), acc (n, G).
void tern2_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t group,
                    int32_t* acc);
// x (m, k) float, acc (m, n, G) float.
void tern2_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, const float* x, int64_t m,
                        int64_t group, float* acc);

}  // namespace trit::formats
