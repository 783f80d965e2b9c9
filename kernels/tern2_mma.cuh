// Device pieces the tern2 streaming products share (tern2_gemv.cu, tern2_gemv_dp4a.cu,
// tern2_skinny.cu, tern2_gemv_oneshot.cu): the weights' read-once load, the decode of 16 packed codes
// to int8 with the matching permutation of x, their dp4a dot product, and the int8 mma.sync
// m16n8k32. No LibTorch.
//
// Decode. A 32-bit word of 16 codes splits into lo = w & 0x33333333 (the 2-bit fields of columns
// 0, 2 of each byte, one per nibble) and hi = (w >> 2) & 0x33333333 (columns 1, 3);
// __byte_perm(0x00FF0100, 0, sel) maps four fields 0/1/2 to the int8 codes 0/+1/-1. The four
// registers hold columns [0 2 4 6], [8 10 12 14], [1 3 5 7], [9 11 13 15] of the word: 9 integer
// instructions for 16 weights. A dot product (dp4a, or an mma summing over its k slots) does not
// depend on the order of k, so x is permuted the same way (permute_x) and multiplied as is.
#pragma once

#include <cstdint>

namespace trit::kernels::tern2dev {

constexpr uint32_t kDecodeTable = 0x00FF0100u;  // bytes: field 0 -> 0, 1 -> +1, 2 -> -1, 3 -> 0

// 16 bytes of packed codes, read once: not kept in L1.
__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// __byte_perm(kDecodeTable, 0, sel): the int8 codes of the four fields in sel's low nibbles. In
// asm, so nvcc does not see that prmt reads only sel's low 16 bits: with __byte_perm it rewrote
// hi >> 16 = ((w >> 2) & 0x33333333) >> 16 as (w >> 18) & 0x3333 and so on, 7 integer
// instructions to split a word where lo, hi, lo >> 16 and hi >> 16 take 5 (the PTX of every tern2
// decode). Measured on the H200 (docs/BENCHMARKS.md, session 36): the streaming GEMV on
// 128256 x 4096 39.0 -> 35.8 us, the skinny GEMV at m = 1 3-4 % faster; the wgmma GEMM's SASS has
// 629 LOP3 instead of 917.
__device__ __forceinline__ uint32_t decode4(uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(d) : "r"(kDecodeTable), "r"(sel));
    return d;
}

// 16 packed codes -> int8 codes of columns [0 2 4 6], [8 10 12 14], [1 3 5 7], [9 11 13 15].
__device__ __forceinline__ void decode_word(uint32_t w, uint32_t* r) {
    const uint32_t lo = w & 0x33333333u, hi = (w >> 2) & 0x33333333u;
    r[0] = decode4(lo);
    r[1] = decode4(lo >> 16);
    r[2] = decode4(hi);
    r[3] = decode4(hi >> 16);
}

// 16 int8 x codes (columns 0..15) -> decode_word's column order.
__device__ __forceinline__ void permute_x(const uint4& v, uint32_t* r) {
    r[0] = __byte_perm(v.x, v.y, 0x6420);
    r[1] = __byte_perm(v.z, v.w, 0x6420);
    r[2] = __byte_perm(v.x, v.y, 0x7531);
    r[3] = __byte_perm(v.z, v.w, 0x7531);
}

// a + (16 codes of word w) . (16 x codes permuted by permute_x, xq[0..3]): 9 integer
// instructions decode, 4 dp4a multiply.
__device__ __forceinline__ int dot16(uint32_t w, const uint32_t* xq, int a) {
    uint32_t c[4];
    decode_word(w, c);
#pragma unroll
    for (int q = 0; q < 4; ++q) a = __dp4a(static_cast<int>(c[q]), static_cast<int>(xq[q]), a);
    return a;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int q) {
    return q == 0 ? v.x : (q == 1 ? v.y : (q == 2 ? v.z : v.w));
}

// d += A (16 x 32 int8: a0 row g, a1 row g + 8, a2/a3 the same rows' upper k slots) x B (32 x 8),
// where lane = 4 g + t holds A's k slots 4t..4t+3 (a0, a1) and 16+4t.. (a2, a3), B's column g at
// the same k slots (b0, b1), and d = rows g, g + 8 x columns 2t, 2t + 1.
__device__ __forceinline__ void mma_s8(int* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                       uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace trit::kernels::tern2dev
