// CUDA int8 per-token absmax activation quantization, bit-exact with act_int8_quantize_ref.
// One block per row: pass 1 reduces max |x| (warp shuffles, then one float per warp in shared
// memory), pass 2 writes codes from the values pass 1 kept in registers (rows longer than the
// block's registers hold are read again, from L1/L2). No LibTorch here.
#include "kernels/act_int8.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/act_int8.h"
#include "core/error.h"
#include "kernels/act_int8.cuh"
#include "kernels/cuda_check.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

using act8dev::abs_or_inf;
using act8dev::block_max;
using act8dev::quantize_one;

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
// Loads (float4 or float) per thread: amortizes the reduction, and a short row gets a small
// block instead of 1024 mostly idle threads.
constexpr int64_t kUnitsPerThread = 4;

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

    float amax = 0.0f;
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += kUnitsPerThread * T) {
#pragma unroll
        for (int u = 0; u < kUnitsPerThread; ++u) v[u] = load(i0 + u * T);
#pragma unroll
        for (int u = 0; u < kUnitsPerThread; ++u) amax = fmaxf(amax, abs_or_inf(v[u]));
    }
    amax = block_max(amax, partial);

    // Non-finite row: codes 0, scale NaN (core/act_int8.h). The branch is block-uniform.
    const act8dev::RowQuant rq = act8dev::row_quant(amax);
    const bool finite = rq.finite;
    const float qs = rq.qs;
    if (threadIdx.x == 0) scale[row] = rq.scale;

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
