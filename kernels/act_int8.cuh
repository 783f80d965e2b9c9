// Device side of int8 per-token absmax activation quantization (core/act_int8.h), shared by the
// quantizer kernel (act_int8.cu) and the products that quantize their own float input
// (tern2_skinny.cu): the same float operations, so every user is bit-exact with
// act_int8_quantize_ref. Compile with --fmad=false or keep to these intrinsics (no contraction).
#pragma once

#include <cfloat>
#include <cstdint>

#include "core/act_int8.h"

namespace trit::kernels::act8 {

// NaN and +-Inf map to +Inf (a NaN compares false), as in the reference: one max reduction
// yields both the absmax and whether the row is non-finite. fmaxf is exact, so any reduction
// order gives the reference's value.
__device__ __forceinline__ float abs_or_inf(float v) {
    const float a = fabsf(v);
    return a <= FLT_MAX ? a : __int_as_float(0x7f800000);
}

__device__ __forceinline__ float abs_max4(const float4& v) {
    return fmaxf(fmaxf(abs_or_inf(v.x), abs_or_inf(v.y)), fmaxf(abs_or_inf(v.z), abs_or_inf(v.w)));
}

// A row's quantization from its reduced max |x| (abs_or_inf): the multiplier of the codes (0 for
// a non-finite row, whose codes are all 0) and the scale it stores (quiet NaN when non-finite).
struct RowQuant {
    bool finite;
    float qs, scale;
};
__device__ __forceinline__ RowQuant row_quant(float amax) {
    const bool finite = amax <= FLT_MAX;
    amax = fmaxf(amax, kAct8Eps);
    return {finite, finite ? __fdiv_rn(127.0f, amax) : 0.0f,
            finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000)};
}

// __fmul_rn is never contracted into an FMA and __float2int_rn rounds half to even, matching
// nearbyintf on the host. Only called for finite rows, where |v * qs| <= 127.
__device__ __forceinline__ signed char quantize_one(float v, float qs) {
    const int i = __float2int_rn(__fmul_rn(v, qs));
    return static_cast<signed char>(min(max(i, -128), 127));
}

// Four codes packed little-endian in a word (0 for a non-finite row).
__device__ __forceinline__ uint32_t quantize4(const float4& v, const RowQuant& r) {
    if (!r.finite) return 0u;
    return static_cast<uint32_t>(static_cast<uint8_t>(quantize_one(v.x, r.qs))) |
           static_cast<uint32_t>(static_cast<uint8_t>(quantize_one(v.y, r.qs))) << 8 |
           static_cast<uint32_t>(static_cast<uint8_t>(quantize_one(v.z, r.qs))) << 16 |
           static_cast<uint32_t>(static_cast<uint8_t>(quantize_one(v.w, r.qs))) << 24;
}

}  // namespace trit::kernels::act8
