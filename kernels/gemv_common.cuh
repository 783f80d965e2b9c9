// Pieces the fast GEMV kernels (tern24_gemv.cu, bt_gemv.cu) share: a warp sum, the per-row store
// of one output row over its scale groups (int32 accumulators, or the fused epilogue summing the
// groups in increasing g), and the launch geometry (warps per block fitted to shared memory, a
// persistent grid sized by occupancy). Device code plus host launch helpers; no LibTorch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/error.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/product.h"

namespace trit::kernels::gemv {

constexpr int kWarp = 32;
constexpr int kMaxTokens = 8;
constexpr int kMaxWarps = 8;
// Static + dynamic shared memory a block may ask for: under the H100's 227 KB opt-in limit (the
// launcher also checks the device's). A shape needing more is rejected (the generic kernel runs).
constexpr int64_t kSmemBudget = 200 * 1024;

// dp4a of unsigned bytes a with signed bytes b (PTX's mixed form; CUDA's __dp4a has none).
__device__ __forceinline__ int dp4a_us(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Integer sum over the warp, in every lane. Exact in any order (wraps mod 2^32 like the int32 sum).
__device__ __forceinline__ uint32_t warp_sum(uint32_t v) {
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Output row j for a single scale group: tot[t] (every lane holds it) for tokens t < M.
template <int M>
__device__ __forceinline__ void store_one_group(const ProductOut& o, int64_t n, int64_t j,
                                                const uint32_t (&tot)[M], int lane) {
#pragma unroll
    for (int t = 0; t < M; ++t) {
        if (lane != t) continue;  // token t's lane writes: indices stay compile-time
        const auto a = static_cast<int32_t>(tot[t]);
        if (o.acc != nullptr) {
            o.acc[t * n + j] = a;
        } else {
            const float s = detail::epilogue_add(0.0f, detail::epilogue_w_scale(o, j, 1)[0], a);
            o.y[t * n + j] = detail::epilogue_finish(o, s, t, j);
        }
    }
}

// Output row j over G scale groups from the warp's shared accumulators sacc (M, G), which the
// lanes filled with atomics; leaves sacc zeroed for the next row. The fused epilogue forms the
// products w_scale * acc in parallel, then lane t sums them for token t in increasing g: the same
// operations, in the same order, as epilogue_add.
template <int M>
__device__ void store_groups(const ProductOut& o, int64_t n, int64_t j, int G, int32_t* sacc,
                             int lane) {
    __syncwarp();
    if (o.acc != nullptr) {
#pragma unroll
        for (int t = 0; t < M; ++t) {
            int32_t* dst = o.acc + (t * n + j) * G;
            for (int g = lane; g < G; g += kWarp) {
                dst[g] = sacc[t * G + g];
                sacc[t * G + g] = 0;
            }
        }
        __syncwarp();
        return;
    }
    const float* ws = detail::epilogue_w_scale(o, j, G);
    for (int g = lane; g < G; g += kWarp) {
        const float s = ws[g];
#pragma unroll
        for (int t = 0; t < M; ++t)
            sacc[t * G + g] = __float_as_int(__fmul_rn(s, __int2float_rn(sacc[t * G + g])));
    }
    __syncwarp();
    if (lane < M) {
        const int32_t* p = sacc + lane * G;
        float s = 0.0f;
        for (int g = 0; g < G; ++g) s = __fadd_rn(s, __int_as_float(p[g]));
        o.y[lane * n + j] = detail::epilogue_finish(o, s, lane, j);
    }
    __syncwarp();
#pragma unroll
    for (int t = 0; t < M; ++t)
        for (int g = lane; g < G; g += kWarp) sacc[t * G + g] = 0;
    __syncwarp();
}

// Gives `kernel` `smem` bytes of dynamic shared memory a block: raises its limit where it needs more
// than it was given (the default is 48 KB) and throws (naming `who`) when the device cannot give
// that much with the kernel's static shared memory. The limit is the kernel's, not the call's: it
// is raised to the largest size any call has needed (setting it per new size would lower it under
// a cached larger one: seen as a launch's "invalid argument" when the same kernel ran with several
// sizes). The device queries run once per kernel, device and larger size.
template <typename Kernel>
void allow_smem(const char* who, Kernel kernel, int64_t smem) {
    int dev = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mutex;
    static std::map<std::pair<const void*, int>, int64_t> limit;
    std::lock_guard<std::mutex> lock(mutex);
    int64_t& have = limit[{reinterpret_cast<const void*>(kernel), dev}];
    if (smem <= have) return;
    int optin = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaFuncAttributes attr{};
    TRIT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    const int64_t total = smem + static_cast<int64_t>(attr.sharedSizeBytes);
    TRIT_CHECK(total <= optin, who, ": needs ", total, " bytes of shared memory per block, the device gives at most ",
               optin);
    TRIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    have = smem;
}

// The SMs of the current device (queried once per device).
inline int sm_count() {
    int dev = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mutex;
    static std::map<int, int> count;
    std::lock_guard<std::mutex> lock(mutex);
    int& sms = count[dev];
    if (sms == 0) TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

// The SMs of the current device, or 0 where the process sees none: the dispatch rules that depend
// on the SMs are then asked on a host without a GPU (the contract tests), where nothing launches.
inline int sm_count_or_zero() {
    static const bool any = [] {
        int devices = 0;
        const bool ok = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
        if (!ok) (void)cudaGetLastError();
        return ok;
    }();
    return any ? sm_count() : 0;
}

// Blocks of `warps` warps and `smem` bytes of dynamic shared memory the device holds at once (its
// SMs times the blocks an SM holds). Gives the kernel `smem` bytes (allow_smem). The queries run
// once per kernel, device, warps and shared memory size: a GEMV takes a few microseconds, the
// queries about as long.
template <typename Kernel>
int64_t resident_blocks(const char* who, Kernel kernel, int warps, int64_t smem) {
    allow_smem(who, kernel, smem);
    int dev = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&dev));
    using Key = std::tuple<const void*, int, int, int64_t>;
    static std::mutex mutex;
    static std::map<Key, int64_t> resident;  // blocks the device holds at once
    const Key key{reinterpret_cast<const void*>(kernel), dev, warps, smem};
    int64_t at_once = 0;
    {
        std::lock_guard<std::mutex> lock(mutex);
        const auto it = resident.find(key);
        if (it != resident.end()) at_once = it->second;
    }
    if (at_once == 0) {
        int per_sm = 0;
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel, warps * kWarp, static_cast<size_t>(smem)));
        at_once = int64_t{sm_count()} * std::max(per_sm, 1);
        std::lock_guard<std::mutex> lock(mutex);
        resident[key] = at_once;
    }
    return at_once;
}

// Blocks of a persistent grid over `rows` rows, `warps` rows at a time: no more blocks than fit on
// the device at once (resident_blocks), so each block builds its tables and stages x once for
// several rows.
template <typename Kernel>
unsigned persistent_blocks(const char* who, Kernel kernel, int warps, int64_t smem, int64_t rows) {
    const int64_t want = (rows + warps - 1) / warps;
    return static_cast<unsigned>(std::max<int64_t>(1, std::min(want, resident_blocks(who, kernel, warps, smem))));
}

// A GEMV launcher's checks: check_product, then `rule` (the kernel's own, "" when it takes the
// call), failing with "who (format, m=.., n=.., k=.., group=..): rule".
inline void check_call(const char* who, const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                       const ProductOut& out, const std::string& rule) {
    check_product(who, w, x, m, group, out);
    TRIT_CHECK(rule.empty(), who, " (", format_name(w.format), ", m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group, "): ", rule);
}

// Largest warps per block (8, 4, 2, 1) whose shared memory, smem_for(warps), fits the budget; 0
// when none does.
template <typename SmemFor>
int fit_warps(SmemFor smem_for) {
    for (int w = kMaxWarps; w >= 1; w /= 2)
        if (smem_for(w) <= kSmemBudget) return w;
    return 0;
}

}  // namespace trit::kernels::gemv
