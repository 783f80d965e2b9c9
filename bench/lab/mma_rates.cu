// Instruction-rate lab: what one SM of this GPU retires per clock for the instructions packed
// kernels are built from: mma.sync s8 / b1 (AND and XOR popc) / f16, wgmma s8 / f16 from shared
// memory, the integer ALU ops of the unpack paths (dp4a, prmt, lop3, iadd3, shf, imad) and
// conflict-free LDS.32. Each kernel runs one CTA per SM on every SM (its dynamic shared memory is
// over half an SM's, so two never fit), loops on independent accumulator chains, and is timed
// with CUDA events (whole-GPU rate) and with clock64 + %globaltimer on each SM (per-SM-per-clock
// rate and the SM clock actually held during the run). mma.sync s8 / b1 / f16 and the wgmma
// descriptors are checked against a CPU product first ("ok"). Standalone, not part of the build;
// sized to run in a few seconds. On the GPU machine:
// nvcc -O3 -std=c++17 -arch=sm_90a bench/lab/mma_rates.cu -o mma_rates && ./mma_rates
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

#define CK(x)                                                                         \
    do {                                                                              \
        cudaError_t e_ = (x);                                                         \
        if (e_ != cudaSuccess) {                                                      \
            printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Per-CTA timing probe, written by thread 0 of each CTA.
struct Probe {
    long long c0, c1;           // clock64 after the setup / after the loop (SM cycles)
    unsigned long long g0, g1;  // %globaltimer at the same points (ns)
    unsigned smid, pad;
};

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned sm_id() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

struct SmClock {
    long long c0;
    unsigned long long g0;
    __device__ __forceinline__ void begin() {
        __syncthreads();
        c0 = clock64();
        g0 = global_ns();
    }
    __device__ __forceinline__ void end(Probe* pr) {
        __syncthreads();
        if (threadIdx.x == 0) {
            const long long c1 = clock64();
            const unsigned long long g1 = global_ns();
            pr[blockIdx.x] = Probe{c0, c1, g0, g1, sm_id(), 0};
        }
    }
};

__host__ __device__ __forceinline__ uint32_t mix(uint32_t a) {
    a ^= a >> 16;
    a *= 0x7feb352du;
    a ^= a >> 15;
    a *= 0x846ca68bu;
    a ^= a >> 16;
    return a;
}

// Every timed kernel has this signature; the sum of its results is stored only if it equals
// `magic` (never, in practice), so the loop's work is live.
using RateKernel = void (*)(int iters, uint32_t seed, uint32_t magic, uint32_t* sink, Probe* pr);

// ---------------------------------------------------------------------------------------------
// mma.sync. All three shapes use the same register addressing: A is 16 rows x 8 b32 words
// (32 s8, 256 b1 or 16 f16 along k), B is 8 columns x 8 words; thread (g = lane/4, t = lane%4)
// holds A words (g,t) (g+8,t) (g,4+t) (g+8,4+t), B words (g,t) (g,4+t), and C/D elements
// (g,2t) (g,2t+1) (g+8,2t) (g+8,2t+1) (PTX ISA, mma fragments for m16n8k32 / k256 / k16).
enum MmaOp { kMmaS8, kMmaB1And, kMmaB1Xor, kMmaF16 };

template <int Op>
using MmaAcc = std::conditional_t<Op == kMmaF16, float, uint32_t>;

template <int Op>
__device__ __forceinline__ void mma(MmaAcc<Op> (&d)[4], const uint32_t (&a)[4],
                                    const uint32_t (&b)[2]) {
    if constexpr (Op == kMmaS8) {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (Op == kMmaB1And) {
        asm volatile(
            "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else if constexpr (Op == kMmaB1Xor) {
        asm volatile(
            "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

__device__ __forceinline__ uint32_t bits(uint32_t v) {
    return v;
}
__device__ __forceinline__ uint32_t bits(float v) {
    return __float_as_uint(v);
}
__device__ __forceinline__ void from_bits(uint32_t& v, uint32_t b) {
    v = b;
}
__device__ __forceinline__ void from_bits(float& v, uint32_t b) {
    v = __uint_as_float(b);
}

// One warp: D = A * B + C on 16x8 words of A, 8x8 of B, 16x8 of C (bits), as laid out above.
template <int Op>
__global__ void mma_check(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* d) {
    const int g = threadIdx.x / 4, t = threadIdx.x % 4;
    const uint32_t fa[4] = {a[g * 8 + t], a[(g + 8) * 8 + t], a[g * 8 + 4 + t],
                            a[(g + 8) * 8 + 4 + t]};
    const uint32_t fb[2] = {b[g * 8 + t], b[g * 8 + 4 + t]};
    const int at[4] = {g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t,
                       (g + 8) * 8 + 2 * t + 1};
    MmaAcc<Op> acc[4];
    for (int i = 0; i < 4; ++i)
        from_bits(acc[i], c[at[i]]);
    mma<Op>(acc, fa, fb);
    for (int i = 0; i < 4; ++i)
        d[at[i]] = bits(acc[i]);
}

// kMmaChains independent accumulators per warp, one mma each per iteration.
constexpr int kMmaChains = 8;

template <int Op>
__global__ void mma_rate(int iters, uint32_t seed, uint32_t magic, uint32_t* sink, Probe* pr) {
    const uint32_t s = mix(seed + threadIdx.x);
    // f16 operands are kept in [1, 2) so the sums stay finite (the rate does not depend on it).
    const uint32_t m = Op == kMmaF16 ? 0x03ff03ffu : 0xffffffffu;
    const uint32_t o = Op == kMmaF16 ? 0x3c003c00u : 0u;
    const uint32_t a[4] = {(s & m) | o, (mix(s + 1) & m) | o, (mix(s + 2) & m) | o,
                           (mix(s + 3) & m) | o};
    const uint32_t b[2] = {(mix(s + 4) & m) | o, (mix(s + 5) & m) | o};
    MmaAcc<Op> acc[kMmaChains][4] = {};
    SmClock clk;
    clk.begin();
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < kMmaChains; ++c)
            mma<Op>(acc[c], a, b);
    }
    clk.end(pr);
    uint32_t x = 0;
#pragma unroll
    for (int c = 0; c < kMmaChains; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i)
            x += bits(acc[c][i]);
    if (x == magic) sink[0] = x;
}

// ---------------------------------------------------------------------------------------------
// Integer ALU ops: kAluChains values per thread, each op takes the next chain's value as a second
// input (so no chain of ops folds into fewer ops) and a per-unroll-step constant as the third.
enum AluOp { kDp4a, kPrmt, kLop3, kIadd3, kShf, kImad };
constexpr int kAluChains = 8, kAluUnroll = 16;

template <int Op>
__global__ void alu_rate(int iters, uint32_t seed, uint32_t magic, uint32_t* sink, Probe* pr) {
    uint32_t x[kAluChains], k[4];
#pragma unroll
    for (int c = 0; c < kAluChains; ++c)
        x[c] = mix(seed + threadIdx.x * kAluChains + c);
#pragma unroll
    for (int j = 0; j < 4; ++j)
        k[j] = mix(seed ^ (0x9e3779b9u * (j + 1)));
    const uint32_t sel = k[0] & 0x7777u;   // prmt selector, known only at run time
    const uint32_t sh = (k[1] & 15u) + 1;  // funnel-shift amount
    const uint32_t mul = k[2] | 1u;
    SmClock clk;
    clk.begin();
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < kAluUnroll; ++u)
#pragma unroll
            for (int c = 0; c < kAluChains; ++c) {
                const uint32_t y = x[(c + 1) % kAluChains], kk = k[u % 4];
                if constexpr (Op == kDp4a) {
                    x[c] = static_cast<uint32_t>(
                        __dp4a(static_cast<int>(y), static_cast<int>(kk), static_cast<int>(x[c])));
                } else if constexpr (Op == kPrmt) {
                    x[c] = __byte_perm(x[c], y, sel);
                } else if constexpr (Op == kLop3) {
                    asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(x[c]) : "r"(x[c]), "r"(y), "r"(kk));
                } else if constexpr (Op == kIadd3) {
                    x[c] = x[c] + y + kk;
                } else if constexpr (Op == kShf) {
                    x[c] = __funnelshift_r(x[c], y, sh);
                } else {
                    x[c] = x[c] * mul + y;
                }
            }
    }
    clk.end(pr);
    uint32_t r = 0;
#pragma unroll
    for (int c = 0; c < kAluChains; ++c)
        r ^= x[c];
    if (r == magic) sink[0] = r;
}

// Conflict-free LDS.32: lane l of every load reads word base + 32u + l (32 distinct banks);
// `base` walks a 32 KB table so no load repeats an address the compiler could reuse.
constexpr int kLdsWords = 8192, kLdsUnroll = 16;

__global__ void lds_rate(int iters, uint32_t seed, uint32_t magic, uint32_t* sink, Probe* pr) {
    extern __shared__ __align__(1024) uint32_t words[];
    for (int i = threadIdx.x; i < kLdsWords; i += blockDim.x)
        words[i] = mix(seed + i);
    const uint32_t lane = threadIdx.x % 32;
    uint32_t base = (threadIdx.x / 32) * 32 * kLdsUnroll % kLdsWords;
    uint32_t acc0 = 0, acc1 = 0;
    SmClock clk;
    clk.begin();
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
        const uint32_t* p = words + base + lane;
#pragma unroll
        for (int u = 0; u < kLdsUnroll; u += 2) {
            acc0 ^= p[32 * u];
            acc1 ^= p[32 * (u + 1)];
        }
        base = (base + 32 * kLdsUnroll) % kLdsWords;
    }
    clk.end(pr);
    if ((acc0 ^ acc1) == magic) sink[0] = acc0;
}

// ---------------------------------------------------------------------------------------------
// wgmma m64n256k32 s8 / m64n256k16 f16, both operands from shared memory, K-major, no swizzle.
// A is 64 rows x 32 bytes of k, B 256 rows (n) x 32 bytes. Layout: 8-row x 16-byte core matrices
// of 128 contiguous bytes; the two core matrices along k of one 8-row group are adjacent
// (128 B apart), 8-row groups follow each other (256 B apart). Descriptor (PTX ISA, "matrix
// descriptor"): bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4 (between
// core matrices along k), 32-45 stride-dimension byte offset >> 4 (between 8-row groups),
// 49-51 base offset 0, 62-63 swizzle 0. wgmma_check tries the two offsets both ways and
// g_wg_swap records which one matched (either is legal; the rate does not depend on it).
enum WgKind { kWgS8, kWgF16 };
constexpr int kWgABytes = 64 * 32, kWgBBytes = 256 * 32, kWgLbo = 128, kWgSbo = 256;
constexpr int kWgPerGroup = 4;  // wgmma per commit group in the rate loop

__host__ __device__ constexpr int wg_offset(int row, int byte) {
    return ((row / 8) * 2 + byte / 16) * 128 + (row % 8) * 16 + byte % 16;
}

__device__ int g_wg_swap = 0;

__device__ __forceinline__ uint64_t wg_desc(const void* p, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    return uint64_t{(a >> 4) & 0x3FFFu} | uint64_t{(lbo >> 4) & 0x3FFFu} << 16 |
           uint64_t{(sbo >> 4) & 0x3FFFu} << 32;
}

template <int Kind>
using WgAcc = std::conditional_t<Kind == kWgF16, float, uint32_t>;

#define WG_D128                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "    \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "     \
    "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "     \
    "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "     \
    "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "     \
    "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, " \
    "%104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, "      \
    "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_OP8(c, d, i)                                                                    \
    c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), \
        c(d[i + 7])
#define WG_OP128(c, d)                                                                            \
    WG_OP8(c, d, 0), WG_OP8(c, d, 8), WG_OP8(c, d, 16), WG_OP8(c, d, 24), WG_OP8(c, d, 32),       \
        WG_OP8(c, d, 40), WG_OP8(c, d, 48), WG_OP8(c, d, 56), WG_OP8(c, d, 64), WG_OP8(c, d, 72), \
        WG_OP8(c, d, 80), WG_OP8(c, d, 88), WG_OP8(c, d, 96), WG_OP8(c, d, 104),                  \
        WG_OP8(c, d, 112), WG_OP8(c, d, 120)

template <int Kind>
__device__ __forceinline__ void wgmma(WgAcc<Kind> (&d)[128], uint64_t da, uint64_t db,
                                      int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (Kind == kWgS8) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 " WG_D128 ", %128, %129, p;\n}\n"
            : WG_OP128("+r", d)
            : "l"(da), "l"(db), "r"(scale_d));
    } else {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WG_D128
            ", %128, %129, p, 1, 1, 0, 0;\n}\n"
            : WG_OP128("+f", d)
            : "l"(da), "l"(db), "r"(scale_d));
    }
#endif
}

__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// Pins the accumulators' reads and writes between the volatile wgmma asm statements: the zero
// fill stays before the first wgmma.fence, the reads after the wait that completes them.
__device__ __forceinline__ void pin(uint32_t& v) {
    asm volatile("" : "+r"(v)::"memory");
}
__device__ __forceinline__ void pin(float& v) {
    asm volatile("" : "+f"(v)::"memory");
}
template <class T>
__device__ __forceinline__ void wg_fence_operands(T (&d)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i)
        pin(d[i]);
}
// Generic-proxy smem writes become visible to wgmma (the async proxy) after this + a barrier.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One warpgroup: D (64 x 256, row-major bits) = A (64 x 32 B) * B (256 x 32 B)^T, inputs given
// row-major; swap = 1 puts the k offset in the SBO field and the row-group offset in LBO.
template <int Kind>
__global__ void __launch_bounds__(128)
    wgmma_check(const uint4* a, const uint4* b, uint32_t* d_out, int swap) {
    extern __shared__ __align__(1024) uint8_t smem[];
    for (int i = threadIdx.x; i < (kWgABytes + kWgBBytes) / 16; i += 128) {
        const bool in_a = i < kWgABytes / 16;
        const int j = in_a ? i : i - kWgABytes / 16;
        uint8_t* dst = smem + (in_a ? 0 : kWgABytes) + wg_offset(j / 2, (j % 2) * 16);
        *reinterpret_cast<uint4*>(dst) = in_a ? a[j] : b[j];
    }
    fence_proxy_async();
    __syncthreads();
    const uint32_t lbo = swap ? kWgSbo : kWgLbo, sbo = swap ? kWgLbo : kWgSbo;
    const uint64_t da = wg_desc(smem, lbo, sbo), db = wg_desc(smem + kWgABytes, lbo, sbo);
    WgAcc<Kind> d[128] = {};
    wg_fence_operands(d);
    wg_fence();
    wgmma<Kind>(d, da, db, 0);
    wg_commit();
    wg_wait<0>();
    wg_fence_operands(d);
    // Accumulator layout: warp w holds rows 16w..16w+15 as mma.sync m16n8 tiles, tile i/4 covering
    // columns 8(i/4)..8(i/4)+7 (PTX ISA, wgmma register fragments for D).
    const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int i = 0; i < 128; ++i) {
        const int row = 16 * w + g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * t + i % 2;
        d_out[row * 256 + col] = bits(d[i]);
    }
}

template <int Kind, int Groups>
__global__ void __launch_bounds__(128 * Groups, 1)
    wgmma_rate(int iters, uint32_t seed, uint32_t magic, uint32_t* sink, Probe* pr) {
    extern __shared__ __align__(1024) uint8_t smem[];
    uint32_t* w = reinterpret_cast<uint32_t*>(smem);
    for (int i = threadIdx.x; i < (kWgABytes + kWgBBytes) / 4; i += blockDim.x) {
        const uint32_t v = mix(seed + i);
        w[i] = Kind == kWgF16 ? (v & 0x03ff03ffu) | 0x30003000u : v;  // f16 in [0.125, 0.25)
    }
    fence_proxy_async();
    const uint32_t lbo = g_wg_swap ? kWgSbo : kWgLbo, sbo = g_wg_swap ? kWgLbo : kWgSbo;
    const uint64_t da = wg_desc(smem, lbo, sbo), db = wg_desc(smem + kWgABytes, lbo, sbo);
    WgAcc<Kind> d[128] = {};
    wg_fence_operands(d);
    SmClock clk;
    clk.begin();
#pragma unroll 1
    for (int it = 0; it < iters; ++it) {
        wg_fence();
#pragma unroll
        for (int u = 0; u < kWgPerGroup; ++u)
            wgmma<Kind>(d, da, db, 1);
        wg_commit();
        wg_wait<1>();
    }
    wg_wait<0>();
    wg_fence_operands(d);
    clk.end(pr);
    uint32_t x = 0;
#pragma unroll
    for (int i = 0; i < 128; ++i)
        x += bits(d[i]);
    if (x == magic) sink[0] = x;
}

// ---------------------------------------------------------------------------------------------
// Host side.
struct Gpu {
    int sms = 0;
    size_t smem = 0;  // dynamic smem per CTA: over half an SM's, so one CTA per SM
    double attr_mhz = 0;
    cudaEvent_t e0, e1;
    uint32_t* sink = nullptr;
    Probe* probe = nullptr;
};

struct Sample {
    int warps = 0;
    double ms = 0;         // event time of the timed launch
    double instr = 0;      // counted instructions, whole grid
    double per_clk = 0;    // counted instructions per SM per clock64 cycle
    double mhz_timer = 0;  // clock64 cycles / %globaltimer ns on the SMs
    double mhz_event = 0;  // longest SM's clock64 cycles / event time (a lower bound)
    int sms_seen = 0;      // distinct %smid values among the CTAs
};

constexpr uint32_t kSeed = 12345u, kMagic = 0x9e3779b1u;
constexpr double kTargetMs = 20.0;

// instr_per_iter: counted instructions one CTA issues per loop iteration.
Sample measure(Gpu& g, RateKernel k, int threads, double instr_per_iter, double target_ms) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(g.smem)));
    auto once = [&](int iters) {
        CK(cudaEventRecord(g.e0));
        k<<<g.sms, threads, g.smem>>>(iters, kSeed, kMagic, g.sink, g.probe);
        CK(cudaGetLastError());
        CK(cudaEventRecord(g.e1));
        CK(cudaEventSynchronize(g.e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, g.e0, g.e1));
        return static_cast<double>(ms);
    };
    double iters = 16, ms = once(16);
    while (ms < 2.0 && iters < 1e8) {
        iters = std::floor(iters * std::min(64.0, std::max(2.0, 4.0 / ms)));
        ms = once(static_cast<int>(iters));
    }
    const int n = static_cast<int>(std::min(1e9, std::max(1.0, iters * target_ms / ms)));
    struct Rep {
        double ms;
        std::vector<Probe> probes;
    };
    std::vector<Rep> reps;
    for (int r = 0; r < 3; ++r) {
        Rep rep{once(n), std::vector<Probe>(g.sms)};
        CK(cudaMemcpy(rep.probes.data(), g.probe, g.sms * sizeof(Probe), cudaMemcpyDeviceToHost));
        reps.push_back(std::move(rep));
    }
    std::sort(reps.begin(), reps.end(), [](const Rep& a, const Rep& b) { return a.ms < b.ms; });
    const Rep& med = reps[1];
    double cyc = 0, ns = 0, cyc_max = 0;
    std::set<unsigned> sms;
    for (const Probe& p : med.probes) {
        cyc += static_cast<double>(p.c1 - p.c0);
        ns += static_cast<double>(p.g1 - p.g0);
        cyc_max = std::max(cyc_max, static_cast<double>(p.c1 - p.c0));
        sms.insert(p.smid);
    }
    Sample s;
    s.warps = threads / 32;
    s.ms = med.ms;
    s.instr = instr_per_iter * n * g.sms;
    s.per_clk = instr_per_iter * n / (cyc / g.sms);
    s.mhz_timer = cyc / ns * 1e3;
    s.mhz_event = cyc_max / (med.ms * 1e3);
    s.sms_seen = static_cast<int>(sms.size());
    return s;
}

struct Row {
    const char* name;  // PTX / source form and the SASS it becomes
    double ops;        // ops counted per instruction
    const char* unit;  // what an op is ("op" and "flop" are 2 per multiply-add)
    Sample best;
};

struct Config {
    RateKernel k;
    int warps;
    double instr_per_warp_iter;  // counted instructions per warp (wgmma: per warpgroup / 4)
};

Row sweep(Gpu& g, const char* name, double ops, const char* unit, std::vector<Config> configs) {
    Row row{name, ops, unit, {}};
    for (const Config& c : configs) {
        const Sample s = measure(g, c.k, 32 * c.warps, c.instr_per_warp_iter * c.warps, kTargetMs);
        printf(
            "  %-46s warps/SM %2d: %8.3f instr/clk/SM  %9.2f Ginstr/s  %6.0f MHz (timer) "
            "%6.0f MHz (event)  %d/%d SMs\n",
            name, s.warps, s.per_clk, s.instr / s.ms / 1e6, s.mhz_timer, s.mhz_event, s.sms_seen,
            g.sms);
        if (s.per_clk > row.best.per_clk) row.best = s;
    }
    return row;
}

// ---- CPU references for the checks
int8_t byte_of(uint32_t w, int j) {
    return static_cast<int8_t>((w >> (8 * j)) & 0xFF);
}

float half_to_float(uint16_t h) {  // normal numbers and zero only (the checks use small ints)
    if ((h & 0x7FFF) == 0) return 0.f;
    const uint32_t f = (uint32_t{h & 0x8000u} << 16) | ((((h >> 10) & 0x1F) + 112u) << 23) |
                       (uint32_t{h & 0x3FFu} << 13);
    float r;
    memcpy(&r, &f, 4);
    return r;
}

uint16_t small_half(int v) {  // -2..2 as f16 bits
    static const uint16_t t[5] = {0xC000, 0xBC00, 0x0000, 0x3C00, 0x4000};
    return t[v + 2];
}

uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

template <int Op>
bool check_mma(std::mt19937& rng) {
    std::vector<uint32_t> a(128), b(64), c(128), d(128), ref(128);
    for (auto* v : {&a, &b}) {
        for (auto& w : *v) {
            if (Op == kMmaF16)
                w = small_half(static_cast<int>(rng() % 5) - 2) |
                    uint32_t{small_half(static_cast<int>(rng() % 5) - 2)} << 16;
            else
                w = static_cast<uint32_t>(rng());
        }
    }
    for (auto& w : c) {
        const int v = static_cast<int>(rng() % 201) - 100;
        w = Op == kMmaF16 ? float_bits(static_cast<float>(v)) : static_cast<uint32_t>(v);
    }
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
            int64_t s = 0;
            float f = 0;
            for (int wd = 0; wd < 8; ++wd) {
                const uint32_t x = a[m * 8 + wd], y = b[n * 8 + wd];
                if (Op == kMmaS8)
                    for (int j = 0; j < 4; ++j)
                        s += int{byte_of(x, j)} * byte_of(y, j);
                if (Op == kMmaB1And) s += __builtin_popcount(x & y);
                if (Op == kMmaB1Xor) s += __builtin_popcount(x ^ y);
                if (Op == kMmaF16)
                    for (int j = 0; j < 2; ++j)
                        f += half_to_float(static_cast<uint16_t>(x >> (16 * j))) *
                             half_to_float(static_cast<uint16_t>(y >> (16 * j)));
            }
            uint32_t& r = ref[m * 8 + n];
            if (Op == kMmaF16) {
                float cf;
                memcpy(&cf, &c[m * 8 + n], 4);
                r = float_bits(cf + f);
            } else {
                r = static_cast<uint32_t>(static_cast<int32_t>(c[m * 8 + n]) + s);
            }
        }
    uint32_t* dev;
    CK(cudaMalloc(&dev, 448 * 4));
    CK(cudaMemcpy(dev, a.data(), 512, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dev + 128, b.data(), 256, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dev + 192, c.data(), 512, cudaMemcpyHostToDevice));
    mma_check<Op><<<1, 32>>>(dev, dev + 128, dev + 192, dev + 320);
    CK(cudaGetLastError());
    CK(cudaMemcpy(d.data(), dev + 320, 512, cudaMemcpyDeviceToHost));
    CK(cudaFree(dev));
    int bad = 0;
    for (int i = 0; i < 128; ++i)
        if (d[i] != ref[i] && bad++ < 3)
            printf("    (m %d, n %d): got 0x%08x, expected 0x%08x\n", i / 8, i % 8, d[i], ref[i]);
    return bad == 0;
}

// Returns the descriptor variant that matched (0: offsets as documented above, 1: swapped), or
// -1 if neither did.
template <int Kind>
int check_wgmma(std::mt19937& rng) {
    std::vector<uint8_t> a(kWgABytes), b(kWgBBytes);
    for (auto* v : {&a, &b})
        for (size_t i = 0; i < v->size(); i += 2) {
            if (Kind == kWgF16) {
                const uint16_t h = small_half(static_cast<int>(rng() % 5) - 2);
                memcpy(&(*v)[i], &h, 2);
            } else {
                (*v)[i] = static_cast<uint8_t>(rng());
                (*v)[i + 1] = static_cast<uint8_t>(rng());
            }
        }
    std::vector<uint32_t> ref(64 * 256), d(64 * 256);
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 256; ++n) {
            int s = 0;
            float f = 0;
            for (int k = 0; k < 32; ++k)
                if (Kind == kWgS8)
                    s += int{static_cast<int8_t>(a[m * 32 + k])} *
                         static_cast<int8_t>(b[n * 32 + k]);
            for (int k = 0; k < 16 && Kind == kWgF16; ++k) {
                uint16_t x, y;
                memcpy(&x, &a[m * 32 + 2 * k], 2);
                memcpy(&y, &b[n * 32 + 2 * k], 2);
                f += half_to_float(x) * half_to_float(y);
            }
            ref[m * 256 + n] = Kind == kWgF16 ? float_bits(f) : static_cast<uint32_t>(s);
        }
    uint8_t* dev;
    CK(cudaMalloc(&dev, kWgABytes + kWgBBytes + 64 * 256 * 4));
    CK(cudaMemcpy(dev, a.data(), kWgABytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dev + kWgABytes, b.data(), kWgBBytes, cudaMemcpyHostToDevice));
    uint32_t* out = reinterpret_cast<uint32_t*>(dev + kWgABytes + kWgBBytes);
    int found = -1;
    for (int swap = 0; swap < 2 && found < 0; ++swap) {
        CK(cudaMemset(out, 0xFF, 64 * 256 * 4));
        wgmma_check<Kind><<<1, 128, kWgABytes + kWgBBytes>>>(
            reinterpret_cast<const uint4*>(dev), reinterpret_cast<const uint4*>(dev + kWgABytes),
            out, swap);
        CK(cudaGetLastError());
        CK(cudaMemcpy(d.data(), out, d.size() * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (size_t i = 0; i < d.size(); ++i)
            if (d[i] != ref[i] && bad++ < 3)
                printf("    descriptor variant %d (m %zu, n %zu): got 0x%08x, expected 0x%08x\n",
                       swap, i / 256, i % 256, d[i], ref[i]);
        if (bad == 0) found = swap;
    }
    CK(cudaFree(dev));
    return found;
}

int main() {
    Gpu g;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    g.sms = prop.multiProcessorCount;
    g.attr_mhz = clock_khz / 1e3;
    g.smem = std::min(prop.sharedMemPerBlockOptin, prop.sharedMemPerMultiprocessor / 2 + 4096);
    CK(cudaEventCreate(&g.e0));
    CK(cudaEventCreate(&g.e1));
    CK(cudaMalloc(&g.sink, 64));
    CK(cudaMalloc(&g.probe, g.sms * sizeof(Probe)));
    printf("device %s (sm_%d%d), %d SMs, cudaDevAttrClockRate %.0f MHz, %zu B dynamic smem/CTA\n",
           prop.name, prop.major, prop.minor, g.sms, g.attr_mhz, g.smem);

    std::mt19937 rng(7);
    printf("checks against a CPU product:\n");
    printf("  mma.sync m16n8k32 s8:             %s\n", check_mma<kMmaS8>(rng) ? "ok" : "MISMATCH");
    printf("  mma.sync m16n8k256 b1 and.popc:   %s\n",
           check_mma<kMmaB1And>(rng) ? "ok" : "MISMATCH");
    printf("  mma.sync m16n8k256 b1 xor.popc:   %s\n",
           check_mma<kMmaB1Xor>(rng) ? "ok" : "MISMATCH");
    printf("  mma.sync m16n8k16 f16 (f32 acc):  %s\n", check_mma<kMmaF16>(rng) ? "ok" : "MISMATCH");
    const bool hopper = prop.major == 9;
    int wg_s8 = -1, wg_f16 = -1;
    if (hopper) {
        CK(cudaFuncSetAttribute(wgmma_check<kWgS8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kWgABytes + kWgBBytes));
        CK(cudaFuncSetAttribute(wgmma_check<kWgF16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                kWgABytes + kWgBBytes));
        wg_s8 = check_wgmma<kWgS8>(rng);
        wg_f16 = check_wgmma<kWgF16>(rng);
        auto say = [](int v) {
            return v == 0   ? "ok (LBO = k step 128 B, SBO = row-group step 256 B)"
                   : v == 1 ? "ok only with LBO/SBO swapped (LBO = 256 B, SBO = 128 B)"
                            : "MISMATCH";
        };
        printf("  wgmma m64n256k32 s8, smem desc:   %s\n", say(wg_s8));
        printf("  wgmma m64n256k16 f16, smem desc:  %s\n", say(wg_f16));
        const int swap = wg_s8 == 1 ? 1 : 0;
        CK(cudaMemcpyToSymbol(g_wg_swap, &swap, sizeof(int)));
    }

    // Bring the clocks up before anything is timed.
    measure(g, mma_rate<kMmaS8>, 512, 16.0 * kMmaChains, 300.0);

    printf("sweeps (per-SM-per-clock from clock64 on each SM):\n");
    std::vector<Row> rows;
    auto mma_cfg = [](RateKernel k) {
        return std::vector<Config>{{k, 4, kMmaChains}, {k, 8, kMmaChains}, {k, 16, kMmaChains}};
    };
    rows.push_back(sweep(g, "mma.sync m16n8k32 s8 (IMMA)", 2.0 * 16 * 8 * 32, "op",
                         mma_cfg(mma_rate<kMmaS8>)));
    rows.push_back(sweep(g, "mma.sync m16n8k256 b1 and.popc (BMMA)", 2.0 * 16 * 8 * 256, "op",
                         mma_cfg(mma_rate<kMmaB1And>)));
    // sm_90 has no XOR BMMA: ptxas turns each xor.popc mma into a CALL of a routine with two
    // BMMA (AND) and some integer ops, so this row is the rate of that emulation.
    rows.push_back(sweep(g, "mma.sync m16n8k256 b1 xor.popc (CALL 2xBMMA)", 2.0 * 16 * 8 * 256,
                         "op", mma_cfg(mma_rate<kMmaB1Xor>)));
    rows.push_back(sweep(g, "mma.sync m16n8k16 f16 f32acc (HMMA)", 2.0 * 16 * 8 * 16, "flop",
                         mma_cfg(mma_rate<kMmaF16>)));
    const double per_iter = kAluUnroll * kAluChains;
    auto alu_cfg = [&](RateKernel k) {
        return std::vector<Config>{{k, 4, per_iter}, {k, 8, per_iter}, {k, 16, per_iter}};
    };
    rows.push_back(sweep(g, "dp4a (IDP)", 32, "lane", alu_cfg(alu_rate<kDp4a>)));
    rows.push_back(sweep(g, "prmt, runtime selector (PRMT)", 32, "lane", alu_cfg(alu_rate<kPrmt>)));
    rows.push_back(sweep(g, "lop3.b32 (a&b)^c (LOP3)", 32, "lane", alu_cfg(alu_rate<kLop3>)));
    rows.push_back(sweep(g, "a+b+c (IADD3)", 32, "lane", alu_cfg(alu_rate<kIadd3>)));
    rows.push_back(sweep(g, "__funnelshift_r (SHF)", 32, "lane", alu_cfg(alu_rate<kShf>)));
    rows.push_back(sweep(g, "a*b+c (IMAD)", 32, "lane", alu_cfg(alu_rate<kImad>)));
    rows.push_back(
        sweep(g, "ld.shared.b32 conflict-free (LDS)", 128, "B",
              {{lds_rate, 4, kLdsUnroll}, {lds_rate, 8, kLdsUnroll}, {lds_rate, 16, kLdsUnroll}}));
    if (hopper) {
        // One wgmma is one instruction of the warpgroup: 1/4 per warp.
        const double q = kWgPerGroup / 4.0;
        rows.push_back(sweep(g, "wgmma m64n256k32 s8 smem/smem (IGMMA)", 2.0 * 64 * 256 * 32, "op",
                             {{wgmma_rate<kWgS8, 1>, 4, q}, {wgmma_rate<kWgS8, 2>, 8, q}}));
        rows.push_back(sweep(g, "wgmma m64n256k16 f16 f32acc (HGMMA)", 2.0 * 64 * 256 * 16, "flop",
                             {{wgmma_rate<kWgF16, 1>, 4, q}, {wgmma_rate<kWgF16, 2>, 8, q}}));
    }

    printf("\n%-46s %12s %5s %10s %9s %12s %11s %10s %6s %6s %8s\n", "instruction (SASS)",
           "ops/instr", "warps", "Ginstr/s", "T ops/s", "instr/clk/SM", "ops/clk/SM", "MAC/clk/SM",
           "MHz", "MHz ev", "T@attr");
    double lo = 1e30, hi = 0;
    for (const Row& r : rows) {
        const Sample& s = r.best;
        char ops[32], macs[32] = "-";
        snprintf(ops, sizeof ops, "%.0f %s", r.ops, r.unit);
        if (!strcmp(r.unit, "op") || !strcmp(r.unit, "flop"))
            snprintf(macs, sizeof macs, "%.1f", s.per_clk * r.ops / 2);
        printf("%-46s %12s %5d %10.2f %9.2f %12.3f %11.1f %10s %6.0f %6.0f %8.2f\n", r.name, ops,
               s.warps, s.instr / s.ms / 1e6, s.instr * r.ops / s.ms / 1e9, s.per_clk,
               s.per_clk * r.ops, macs, s.mhz_timer, s.mhz_event,
               s.per_clk * r.ops * g.sms * g.attr_mhz / 1e6);
        lo = std::min(lo, s.mhz_timer);
        hi = std::max(hi, s.mhz_timer);
    }
    const char* legend[] = {
        "warps: warps per SM of the best tried count (wgmma: 4 = one warpgroup, 8 = two).",
        "instr: one warp instruction (mma.sync, ALU, LDS) or one warpgroup instruction (wgmma).",
        "ops: 2*m*n*k per mma (a multiply-add is 2 ops, 1 MAC); lane: one 32-bit lane op (dp4a:",
        "  4 int8 MACs); B: bytes loaded. instr/clk/SM and ops/clk/SM divide by the clock64",
        "  cycles of each SM over the timed loop, so they hold at whatever clock the SM ran.",
        "Ginstr/s, T ops/s: whole GPU (one CTA on every SM), CUDA event time of one launch.",
        "MHz: SM clock during that launch, clock64 cycles / %globaltimer ns, mean over SMs;",
        "  MHz ev: longest SM's clock64 cycles / event time (a lower bound: launch overhead).",
        "T@attr: ops/clk/SM x SMs x cudaDevAttrClockRate, the rate at the clock the driver",
        "  reports as the peak; a GPU under load may hold a lower clock than that."};
    printf("\n");
    for (const char* line : legend)
        printf("%s\n", line);
    printf("SM clock over the rows: %.0f-%.0f MHz measured; cudaDevAttrClockRate %.0f MHz.\n", lo,
           hi, g.attr_mhz);
    return 0;
}
