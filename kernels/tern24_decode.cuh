// Device side of the tern24 table decode shared by the streaming dp4a GEMV (gemv_stream.cu) and
// the tensor-core GEMV (tern24_gemv_mma.cu): a 128-column chunk is 4 mask words (byte b: the
// bitmaps of groups 2b, low nibble, and 2b + 1) and 2 sign words (nibble b: the sign pairs of
// groups 2b, bits 0-1, and 2b + 1, bits 2-3; one sign word per two mask words). Per sign word
// (SignWords, 5 instructions) and mask word (index_words, 2 + 3), E byte b holds the 6-bit table
// index, bitmap | sign pair << 4, of group 2b of the word and O byte b that of group 2b + 1;
// lookup<B> turns byte B of E or O into the group's 4 int8 codes from the per-lane table of
// kernels/tern24_table.cuh (rows 256 bytes apart, lane l's copy in word l of a row).
#pragma once

#include <cstdint>

namespace trit::kernels::tern24dev {

// The 8 sign bytes of a chunk; weights are read once, so they stay out of L1 (16 bytes:
// tern2dev::load_weights).
__device__ __forceinline__ uint2 load_signs(const uint8_t* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}

// The low nibbles of lo with the high nibbles of hi: one LOP3 (nvcc keeps the two masks apart).
__device__ __forceinline__ uint32_t merge_nibbles(uint32_t lo, uint32_t hi) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(d) : "r"(lo), "n"(0x0F0F0F0F), "r"(hi));
    return d;
}

// v & mask, opaque to nvcc: it would otherwise rewrite (v & m) << s as (v << s) & (m << s), one
// mask per shifted copy instead of one per sign word.
template <uint32_t kMask>
__device__ __forceinline__ uint32_t and_mask(uint32_t v) {
    uint32_t d;
    asm("and.b32 %0, %1, %2;" : "=r"(d) : "r"(v), "n"(kMask));
    return d;
}

// Sign pairs of the even groups (em, em4) and odd groups (oml, omr) of one sign word, placed so
// that a PRMT of two of them gives a word whose byte b has group 2b's (or 2b + 1's) pair at bits
// 4-5, 0 at 6-7.
struct SignWords {
    uint32_t em, em4, oml, omr;
};
__device__ __forceinline__ SignWords sign_words(uint32_t sr) {
    const uint32_t em = and_mask<0x33333333u>(sr), em4 = em << 4;
    const uint32_t om = and_mask<0xCCCCCCCCu>(sr);
    return {em, em4, om << 2, om >> 2};
}

// E and O of mask word mw, the h-th (0, 1) of the two mask words that sign word s covers.
__device__ __forceinline__ void index_words(uint32_t mw, const SignWords& s, int h, uint32_t& e,
                                            uint32_t& o) {
    e = merge_nibbles(mw, __byte_perm(s.em, s.em4, h == 0 ? 0x1504u : 0x3726u));
    o = merge_nibbles(mw >> 4, __byte_perm(s.oml, s.omr, h == 0 ? 0x5140u : 0x7362u));
}

// The code word for the index in byte B of an E/O word: PRMT makes the byte offset
// index * 256 + lane * 4 (lane4's bytes 2 and 3 are zero).
template <int B>
__device__ __forceinline__ uint32_t lookup(const uint32_t* table, uint32_t eo, uint32_t lane4) {
    const uint32_t off = __byte_perm(eo, lane4, 0x7604u | (B << 4));
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(table) + off);
}

}  // namespace trit::kernels::tern24dev
