// Device side of int8 per-token absmax quantization (core/act_int8.h), shared by the quantizer
// kernel (act_int8.cu) and the kernels that quantize their own x (the one-shot tern2 GEMV from
// float x, tern2_gemv_oneshot.cu): bit-exact with act_int8_quantize_ref. block_reduce also serves
// the training quantizers (train_quant.cu). No LibTorch.
#pragma once

#include <cfloat>

#include "core/act_int8.h"

namespace trit::kernels::act8dev {

// NaN and +-Inf map to +Inf (a NaN compares false), as in the reference: one max reduction
// yields both the absmax and whether the row is non-finite. fmaxf is exact, so any reduction
// order gives the reference's value.
__device__ __forceinline__ float abs_or_inf(float v) {
    const float a = fabsf(v);
    return a <= FLT_MAX ? a : __int_as_float(0x7f800000);
}

__device__ __forceinline__ float abs_or_inf(const float4& u) {
    return fmaxf(fmaxf(abs_or_inf(u.x), abs_or_inf(u.y)), fmaxf(abs_or_inf(u.z), abs_or_inf(u.w)));
}

// __fmul_rn is never contracted into an FMA and __float2int_rn rounds half to even, matching
// nearbyintf on the host. Only called for finite rows, where |v * qs| <= 127.
__device__ __forceinline__ signed char quantize_one(float v, float qs) {
    const int i = __float2int_rn(__fmul_rn(v, qs));
    return static_cast<signed char>(min(max(i, -128), 127));
}

// Reduces v over the block with op (an exact or order-fixed float op), returned to every thread:
// warp shuffles, one value per warp in `partial`, then each warp reduces the partials itself, so a
// single barrier suffices; `partial` (one float per warp) is written once per call.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* partial, Op op) {
    constexpr int kWarp = 32;
    for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x % kWarp;
    if (lane == 0) partial[threadIdx.x / kWarp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : 0.0f;
    for (int o = kWarp / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Max over the block (fmaxf is exact, so any order gives the same value).
__device__ __forceinline__ float block_max(float v, float* partial) {
    return block_reduce(v, partial, [](float a, float b) { return fmaxf(a, b); });
}

// A row's quantizer from its absmax (the reduction of abs_or_inf): whether the row is finite,
// the multiplier qs (0 when not) and the scale the product's epilogue uses (NaN when not).
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

}  // namespace trit::kernels::act8dev
