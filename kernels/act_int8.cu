// CUDA int8 per-token absmax activation quantization, bit-exact with act_int8_quantize_ref.
// One block per row: pass 1 reduces max |x| (warp shuffles, then one float per warp in shared
// memory), pass 2 writes codes from the values pass 1 kept in registers (rows longer than the
// block's registers hold are read again, from L1/L2). No LibTorch here.
#include "kernels/act_int8.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/act_int8.h"
#include "core/error.h"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
// Loads (float4 or float) per thread: amortizes the reduction, and a short row gets a small
// block instead of 1024 mostly idle threads.
constexpr int64_t kUnitsPerThread = 4;

// NaN and +-Inf map to +Inf (a NaN compares false), as in the reference: one max reduction
// yields both the absmax and whether the row is non-finite. fmaxf is exact, so any reduction
// order gives the reference's value.
__device__ __forceinline__ float abs_or_inf(float v) {
    const float a = fabsf(v);
    return a <= FLT_MAX ? a : __int_as_float(0x7f800000);
}

// __fmul_rn is never contracted into an FMA and __float2int_rn rounds half to even, matching
// nearbyintf on the host. Only called for finite rows, where |v * qs| <= 127.
__device__ __forceinline__ signed char quantize_one(float v, float qs) {
    const int i = __float2int_rn(__fmul_rn(v, qs));
    return static_cast<signed char>(min(max(i, -128), 127));
}

// Max over the block, returned to every thread. Each warp reduces the per-warp partials itself,
// so a single barrier suffices; `partial` is written once per block (one row per block).
__device__ __forceinline__ float block_max(float v, float* partial) {
    for (int o = kWarp / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x % kWarp;
    if (lane == 0) partial[threadIdx.x / kWarp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : 0.0f;
    for (int o = kWarp / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// kVec: x rows read as float4, q rows written as char4 (needs cols % 4 == 0 and alignment).
template <bool kVec>
__global__ void __launch_bounds__(kMaxThreads)
    act_int8_kernel(const float* __restrict__ x, int64_t cols, int8_t* __restrict__ q,
                    float* __restrict__ scale) {
    __shared__ float partial[kMaxThreads / kWarp];
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    int8_t* qr = q + row * cols;
    const int64_t n = kVec ? cols / 4 : cols;
    const auto* xv = reinterpret_cast<const float4*>(xr);

    // A row of at most kUnitsPerThread units per thread (cols <= 16384 with float4, the launcher's
    // block size) is read once, all of a thread's loads in flight together, and stays in
    // registers for pass 2: one memory latency instead of one per unit. Longer rows loop.
    const int64_t T = blockDim.x;
    const bool in_registers = n <= kUnitsPerThread * T;
    using Unit = std::conditional_t<kVec, float4, float>;
    Unit v[kUnitsPerThread];
    auto load = [&](int64_t i) -> Unit {
        if constexpr (kVec) {
            return i < n ? xv[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else {
            return i < n ? xr[i] : 0.0f;
        }
    };
    auto unit_max = [](const Unit& u) {
        if constexpr (kVec) {
            return fmaxf(fmaxf(abs_or_inf(u.x), abs_or_inf(u.y)), fmaxf(abs_or_inf(u.z), abs_or_inf(u.w)));
        } else {
            return abs_or_inf(u);
        }
    };

    float amax = 0.0f;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += kUnitsPerThread * T) {
#pragma unroll
        for (int u = 0; u < kUnitsPerThread; ++u) v[u] = load(i0 + u * T);
#pragma unroll
        for (int u = 0; u < kUnitsPerThread; ++u) amax = fmaxf(amax, unit_max(v[u]));
    }
    amax = block_max(amax, partial);

    // Non-finite row: codes 0, scale NaN (core/act_int8.h). The branch is block-uniform.
    const bool finite = amax <= FLT_MAX;
    amax = fmaxf(amax, kAct8Eps);
    const float qs = finite ? __fdiv_rn(127.0f, amax) : 0.0f;
    if (threadIdx.x == 0)
        scale[row] = finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000);

    for (int64_t i0 = threadIdx.x; i0 < n; i0 += kUnitsPerThread * T) {
        if (!in_registers) {
#pragma unroll
            for (int u = 0; u < kUnitsPerThread; ++u) v[u] = load(i0 + u * T);
        }
#pragma unroll
        for (int u = 0; u < kUnitsPerThread; ++u) {
            const int64_t i = i0 + u * T;
            if (i >= n) break;
            if constexpr (kVec) {
                char4 c = make_char4(0, 0, 0, 0);
                if (finite)
                    c = make_char4(quantize_one(v[u].x, qs), quantize_one(v[u].y, qs),
                                   quantize_one(v[u].z, qs), quantize_one(v[u].w, qs));
                reinterpret_cast<char4*>(qr)[i] = c;
            } else {
                qr[i] = finite ? quantize_one(v[u], qs) : 0;
            }
        }
    }
}

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

void act_int8_quantize(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scale,
                       cudaStream_t stream) {
    TRIT_CHECK(rows >= 1 && cols >= 1,
               "act_int8_quantize: rows and cols must be >= 1 (got rows=", rows, ", cols=", cols,
               ")");
    TRIT_CHECK(rows <= std::numeric_limits<int32_t>::max(), "act_int8_quantize: rows=", rows,
               " exceeds 2^31 - 1 (one block per row; cols=", cols, ")");
    TRIT_CHECK(cols <= std::numeric_limits<int64_t>::max() / rows, "act_int8_quantize: rows=", rows,
               " * cols=", cols, " overflows int64");
    TRIT_CHECK(x != nullptr && q != nullptr && scale != nullptr,
               "act_int8_quantize: x, q and scale must be non-null (rows=", rows, ", cols=", cols,
               "; x=", static_cast<const void*>(x), ", q=", static_cast<const void*>(q),
               ", scale=", static_cast<const void*>(scale), ")");
    TRIT_CHECK(aligned(x, alignof(float)) && aligned(scale, alignof(float)),
               "act_int8_quantize: x and scale must be 4-byte aligned float pointers (rows=", rows,
               ", cols=", cols, ")");

    const bool vec = cols % 4 == 0 && aligned(x, 16) && aligned(q, 4);
    const int64_t units = vec ? cols / 4 : cols;
    const int64_t want = (units + kUnitsPerThread - 1) / kUnitsPerThread;
    const int64_t warps = (std::min<int64_t>(want, kMaxThreads) + kWarp - 1) / kWarp;
    const dim3 block(static_cast<unsigned>(warps * kWarp));
    const dim3 grid(static_cast<unsigned>(rows));
    if (vec) {
        detail::launch_kernel(act_int8_kernel<true>, grid, block, 0, stream, true, x, cols, q, scale);
    } else {
        detail::launch_kernel(act_int8_kernel<false>, grid, block, 0, stream, true, x, cols, q, scale);
    }
}

}  // namespace trit::kernels
