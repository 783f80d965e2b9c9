// Device side of the products' fused epilogue (kernels/product.h): the CPU runtime's float
// arithmetic, step for step, with explicit round-to-nearest intrinsics so that nvcc can never
// contract a multiply and an add into an FMA (which would change the last bit).
#pragma once

#include <cstdint>

#include "kernels/product.h"

namespace trit::kernels::detail {

// s + w_scale * float(acc), the term of one scale group.
__device__ __forceinline__ float epilogue_add(float s, float w_scale, int32_t acc) {
    return __fadd_rn(s, __fmul_rn(w_scale, __int2float_rn(acc)));
}

// ProductOut less its fp16 scale copy (ProductOut::w_scale_half), field for field: the kernel
// parameter of the streaming GEMVs (kernels/gemv_stream.cu), which never read halves. With the copy
// in their parameter (8 bytes more) nvcc 13.0 reached the parameter through a generic address and
// changed every streaming kernel's code; with this one their PTX is what it was before the copy.
// H200, m = 1 on 128256 x 4096 (docs/BENCHMARKS.md, session 45): tern24 29.65-29.85 us against
// 30.54-30.57 (8.01-8.08x cuBLAS FP16 against 7.84-7.92x), tern2 34.74-34.79 against 34.45-34.55.
struct EpilogueOut {
    int32_t* acc = nullptr;
    float* y = nullptr;
    const float* w_scale = nullptr;
    int64_t w_scale_rows = 1;
    const float* x_scale = nullptr;
    int64_t x_scale_rows = 1;
    const float* bias = nullptr;
};

inline EpilogueOut epilogue_out(const ProductOut& o) {
    return EpilogueOut{o.acc, o.y, o.w_scale, o.w_scale_rows, o.x_scale, o.x_scale_rows, o.bias};
}
static_assert(sizeof(EpilogueOut) + sizeof(ProductOut::w_scale_half) == sizeof(ProductOut),
              "EpilogueOut holds every field of ProductOut but w_scale_half: update both");

// Row of weight scales for output j (G entries); Out: ProductOut or EpilogueOut.
template <class Out>
__device__ __forceinline__ const float* epilogue_w_scale(const Out& o, int64_t j, int64_t groups) {
    return o.w_scale + (o.w_scale_rows == 1 ? 0 : j * groups);
}

// The same row in the scales' fp16 copy (ProductOut::w_scale_half).
__device__ __forceinline__ const uint16_t* epilogue_w_scale_half(const ProductOut& o, int64_t j,
                                                                 int64_t groups) {
    return o.w_scale_half + (o.w_scale_rows == 1 ? 0 : j * groups);
}

// y[i][j] from the finished group sum s.
__device__ __forceinline__ float epilogue_finish(const ProductOut& o, float s, int64_t i,
                                                 int64_t j) {
    const float sx = o.x_scale[o.x_scale_rows == 1 ? 0 : i];
    return __fadd_rn(__fmul_rn(s, sx), o.bias != nullptr ? o.bias[j] : 0.0f);
}

// Writes output (i, j) from its G accumulators acc_at(g), in group order.
template <typename AccAt>
__device__ __forceinline__ void store_output(const ProductOut& o, int64_t n, int64_t groups,
                                             int64_t i, int64_t j, AccAt acc_at) {
    if (o.acc != nullptr) {
        int32_t* dst = o.acc + (i * n + j) * groups;
        for (int64_t g = 0; g < groups; ++g) dst[g] = acc_at(g);
        return;
    }
    const float* ws = epilogue_w_scale(o, j, groups);
    float s = 0.0f;
    for (int64_t g = 0; g < groups; ++g) s = epilogue_add(s, ws[g], acc_at(g));
    o.y[i * n + j] = epilogue_finish(o, s, i, j);
}

// Outputs dst[0 .. 3] of one token, columns j .. j + 3 of n: one 16-byte store of a V (int4 or
// float4) where `vector` (n % 4 = 0, the output 16-byte aligned), else one store per column < n.
template <typename V, typename T>
__device__ __forceinline__ void store_quad(T* dst, const T (&v)[4], bool vector, int64_t j,
                                           int64_t n) {
    if (vector) {
        *reinterpret_cast<V*>(dst) = V{v[0], v[1], v[2], v[3]};
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e)
        if (j + e < n) dst[e] = v[e];
}

}  // namespace trit::kernels::detail
