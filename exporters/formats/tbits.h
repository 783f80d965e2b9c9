// tbits: bit planes of low-level activations (and binary weights) for the b1 tensor-core GEMMs of
// kernels/bin1_gemm.h. Spec header with device-usable helpers; tbits.cpp is the bit-exact CPU
// reference (pack, unpack, validate, the four BWTA products). docs/formats.md, "tbits".
//
// A (rows, k) matrix is stored as P bit planes, each (rows, tbits_row_words(k)) uint32,
// plane-major:
//     word w of row r of plane p = planes[(p * rows + r) * tbits_row_words(k) + w]
//     bit b (LSB = 0) of that word is column 32 * w + b.
// Rows are padded to a whole 256-bit block (the k of one m16n8k256 mma): 8 words per block. The
// padding bits (columns >= k) are 0: the kernels' popcounts run over whole blocks.
//     ternary {-1, 0, +1}: 2 planes, plane 0 "pos" (bit = code == +1), plane 1 "neg" (code == -1);
//                          pos & neg == 0 everywhere.
//     bool {0, 1}:          1 plane, bit = code == 1.
//     binary {-1, +1}:      1 plane, bit = code == +1 (bin1's convention). Read as little-endian
//                          words, a bin1 packed array (n, k / 8 bytes) IS this plane when
//                          k % 256 == 0; tbits_from_bin1 repacks any k.
// Products (exact int32, (m, n) row-major, acc[i][j] = sum over c < k of a[i][c] * b[j][c]):
//     bin_tern:  ternary a (m, k) x binary w (n, k)       W · Aᵀ of a linear layer (bin1 weights)
//     bool_tern: bool att (m, k) x ternary v (n, k)        Att · V, with V given as Vᵀ rows
//     tern_tern: ternary q (m, k) x ternary kk (n, k)      Q · Kᵀ
//     bool_bin:  bool a (m, k) x binary w (n, k)            W · Aᵀ of a linear layer on a bool input
#pragma once

#include <cstddef>
#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::formats {

constexpr int kTbitsWordBits = 32;
constexpr int kTbitsBlockBits = 256;  // row padding unit: the k of one b1 mma
constexpr int kTbitsBlockWords = kTbitsBlockBits / kTbitsWordBits;
constexpr int kTbitsTernaryPlanes = 2;
constexpr int kTbitsPosPlane = 0;
constexpr int kTbitsNegPlane = 1;
// Largest k of the products: |acc| <= k, and the kernels form 2 * popcount (see bin1_gemm.h).
constexpr int64_t kTbitsMaxK = int64_t{1} << 30;

// Words per row of one plane: 8 per started 256-column block.
TRIT_HD constexpr int64_t tbits_row_words(int64_t k) {
    return ceil_div(k, kTbitsBlockBits) * kTbitsBlockWords;
}

// Bit of column c within its word, and the word holding it.
TRIT_HD constexpr uint32_t tbits_bit(int64_t c) {
    return uint32_t{1} << (c % kTbitsWordBits);
}
TRIT_HD constexpr int64_t tbits_word(int64_t c) {
    return c / kTbitsWordBits;
}

// Ternary code from its (pos, neg) bits; (1, 1) is invalid (validate rejects it).
TRIT_HD constexpr int tbits_ternary_decode(int pos, int neg) {
    return pos - neg;
}

static_assert(tbits_row_words(1) == 8 && tbits_row_words(256) == 8 && tbits_row_words(257) == 16);
static_assert(tbits_bit(33) == 2u && tbits_word(33) == 1 && tbits_ternary_decode(0, 1) == -1);

// ---- pack / unpack / validate (rows, k >= 1; non-null pointers; else trit::Error) -------------
// pack rejects a code outside the type's set naming (row, col); the planes are fully written
// (padding 0). unpack validates first and leaves codes untouched on error. validate reports the
// first non-zero padding bit (plane, row, column) or, for ternary, the first column set in both
// planes.
void tbits_ternary_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* planes);
void tbits_ternary_unpack(const uint32_t* planes, int64_t rows, int64_t k, int8_t* codes);
void tbits_ternary_validate(const uint32_t* planes, int64_t rows, int64_t k);

void tbits_bool_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane);
void tbits_bool_unpack(const uint32_t* plane, int64_t rows, int64_t k, int8_t* codes);
void tbits_bool_validate(const uint32_t* plane, int64_t rows, int64_t k);

void tbits_binary_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane);
void tbits_binary_unpack(const uint32_t* plane, int64_t rows, int64_t k, int8_t* codes);
void tbits_binary_validate(const uint32_t* plane, int64_t rows, int64_t k);

// bin1 packed (n, bin1_row_bytes(k)) -> binary plane (n, tbits_row_words(k)); bin1_validate first.
void tbits_from_bin1(const uint8_t* packed, int64_t n, int64_t k, uint32_t* plane);

// ---- products: acc (m, n) int32, exact; operands validated first; k <= kTbitsMaxK -------------
// Defined by the sums above; computed here with popcounts over whole words (the direct algebra,
// not the kernels' complement form, so the two cross-check each other):
//     bin_tern:  2 popc(P & W) - popc(P) - 2 popc(N & W) + popc(N)
//     bool_tern: popc(A & Pv) - popc(A & Nv)
//     tern_tern: popc(Pq & Pk) + popc(Nq & Nk) - popc(Pq & Nk) - popc(Nq & Pk)
//     bool_bin:  popc(A & W) - popc(A & ~W)
void tbits_gemm_bin_tern_ref(const uint32_t* w, int64_t n, int64_t k, const uint32_t* a, int64_t m,
                             int32_t* acc);
void tbits_gemm_bool_tern_ref(const uint32_t* v, int64_t n, int64_t k, const uint32_t* att,
                              int64_t m, int32_t* acc);
void tbits_gemm_tern_tern_ref(const uint32_t* kk, int64_t n, int64_t k, const uint32_t* q,
                              int64_t m, int32_t* acc);
void tbits_gemm_bool_bin_ref(const uint32_t* w, int64_t n, int64_t k, const uint32_t* a, int64_t m,
                             int32_t* acc);

}  // namespace trit::formats
