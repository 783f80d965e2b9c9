// fp16 (IEEE binary16) and bf16 (bfloat16) conversions as raw uint16_t bit patterns: float -> 16
// bits rounds to nearest, ties to even; overflow gives inf; NaN stays NaN (payload kept where it
// fits). Header-only, standard library only; the *_bits_* forms on integer bits are constexpr.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace trit {

// f32 bit pattern -> f16 bit pattern.
constexpr uint16_t f32_bits_to_f16_bits(uint32_t x) {
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) {  // NaN: keep the top payload bits, force a nonzero mantissa
        const uint32_t m = (abs >> 13) & 0x3FFu;
        return static_cast<uint16_t>(sign | 0x7C00u | (m != 0 ? m : 0x200u));
    }
    // 65520 = 65504 + half an ulp ties to the even neighbour 65536, which overflows: inf.
    if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
    if (abs >= 0x38800000u) {  // normal f16 (>= 2^-14): rebias the exponent, round 13 bits off
        const uint32_t v = abs - 0x38000000u;
        return static_cast<uint16_t>(sign | ((v + 0xFFFu + ((v >> 13) & 1u)) >> 13));
    }
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    // Subnormal f16 (units of 2^-24): mantissa with the implicit bit, shifted by 14..24.
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - (abs >> 23);
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // q may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
}

// f16 bit pattern -> f32 bit pattern (exact: every f16 value is a float).
constexpr uint32_t f16_bits_to_f32_bits(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0x1F) return sign | 0x7F800000u | (m << 13);  // inf, NaN (payload kept)
    if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0) return sign;
    uint32_t e32 = 113;  // subnormal m * 2^-24: normalise
    while ((m & 0x400u) == 0) {
        m <<= 1;
        --e32;
    }
    return sign | (e32 << 23) | ((m & 0x3FFu) << 13);
}

// f32 bit pattern -> bf16 bit pattern (the top 16 bits, rounded).
constexpr uint16_t f32_bits_to_bf16_bits(uint32_t x) {
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: truncate, keep the mantissa nonzero
        const uint32_t top = x >> 16;
        return static_cast<uint16_t>((top & 0x7Fu) != 0 ? top : top | 0x40u);
    }
    return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

constexpr uint32_t bf16_bits_to_f32_bits(uint16_t b) {
    return static_cast<uint32_t>(b) << 16;
}

inline uint32_t f32_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

inline float f32_from_bits(uint32_t x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline uint16_t f32_to_f16_bits(float f) {
    return f32_bits_to_f16_bits(f32_bits(f));
}
inline float f16_bits_to_f32(uint16_t h) {
    return f32_from_bits(f16_bits_to_f32_bits(h));
}
inline uint16_t f32_to_bf16_bits(float f) {
    return f32_bits_to_bf16_bits(f32_bits(f));
}
inline float bf16_bits_to_f32(uint16_t b) {
    return f32_from_bits(bf16_bits_to_f32_bits(b));
}

// Rounds every value of v to fp16 in place (f32_to_f16_bits's rounding) and returns their fp16
// bit patterns, entry for entry.
inline std::vector<uint16_t> round_to_f16(std::vector<float>& v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t e = 0; e < v.size(); ++e) {
        bits[e] = f32_to_f16_bits(v[e]);
        v[e] = f16_bits_to_f32(bits[e]);
    }
    return bits;
}

}  // namespace trit
