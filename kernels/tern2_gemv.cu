// tern2 x int8 GEMV on the int8 tensor cores: see kernels/tern2_gemv.h for the contract.
//
// Layout. A block owns a tile of 16 weight rows; its warps split k into k-blocks of 256 columns
// (warp w takes k-blocks w, w + warps, ...). In a k-block, lane (g, t) = (lane / 4, lane % 4)
// loads 16 bytes = 64 weights of rows g and g + 8 (columns 64t .. 64t + 63 of the k-block) and
// the same 64 columns of x for token g. The 16 rows x 256 columns then go through eight
// mma.sync.m16n8k32: weights are the A operand (16 x 32), the tokens the B operand's 8 columns
// (tokens >= m are zero), so one to eight tokens cost the same.
//
// Decode. The mma sums over its 32 k slots in any order, so the k index may be permuted as long
// as A and B see the same permutation. A 32-bit word of 16 packed weights splits into
// lo = w & 0x33333333 (fields of columns 0, 2 of each byte, one per nibble) and
// hi = (w >> 2) & 0x33333333 (columns 1, 3); __byte_perm(0x00FF0100, 0, sel) maps each nibble,
// a field 0/1/2, to the int8 code 0/+1/-1 in one instruction per 4 weights. The registers hold
// columns [0 2 4 6], [8 10 12 14], [1 3 5 7], [9 11 13 15] of the word; x is permuted the same
// way with two __byte_perm per 4 codes. About 9 integer instructions decode 16 weights.
//
// Sums. Each warp keeps its partial sums in the mma accumulators while its k-blocks stay in one
// scale group, then adds them to the block's per-group sums in shared memory (int32 atomics:
// exact in any order). After a barrier, each output runs the shared epilogue in group order.
#include "kernels/tern2_gemv.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_gemm.h"
#include "kernels/tern2_gemv_dp4a.h"
#include "kernels/tern2_gemv_oneshot.h"
#include "kernels/tern2_gemv_stream.h"
#include "kernels/tern2_skinny.h"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels {
namespace {

using tern2dev::decode_word;
using tern2dev::load_weights;
using tern2dev::mma_s8;
using tern2dev::permute_x;
using tern2dev::word;

constexpr int kWarp = 32;
constexpr int kTileRows = 16;         // mma m
constexpr int kTokens = 8;            // mma n
constexpr int64_t kBlockCols = 256;   // columns of one warp k-block
constexpr int64_t kBlockBytes = kBlockCols / formats::kTern2CodesPerByte;
constexpr int64_t kChunkCols = 64;    // columns per lane per k-block (one 16-byte load per row)
constexpr int kMaxWarps = 8;
constexpr int kDepth = 3;             // k-blocks of weights in flight per warp
constexpr int64_t kMaxGroups = 64;    // shared sums: 64 * 16 * 8 * 4 bytes = 32 KiB
constexpr int64_t kMaxXBytes = 112 * 1024;  // x staged in shared memory: m * k bytes

// x is small and read by every row tile: the read-only path, cached.
__device__ __forceinline__ uint4 load_x(const int8_t* p) {
    return __ldg(reinterpret_cast<const uint4*>(p));
}

// A lane's weights of one k-block: 16 bytes of rows g and g + 8.
struct WeightLoads {
    uint4 lo, hi;
};

__device__ __forceinline__ WeightLoads load_kblock(const uint8_t* w_lo, const uint8_t* w_hi,
                                                   int64_t b, bool chunk, bool row_lo,
                                                   bool row_hi) {
    WeightLoads l{};
    if (chunk && row_lo) l.lo = load_weights(w_lo + b * kBlockBytes);
    if (chunk && row_hi) l.hi = load_weights(w_hi + b * kBlockBytes);
    return l;
}

// x[q]: 16 codes already in decode_word's column order (staged by the block, permute_x).
__device__ __forceinline__ void multiply_kblock(const WeightLoads& l, const uint4 (&x)[4],
                                                int (&d)[4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        uint32_t a_lo[4], a_hi[4];
        decode_word(word(l.lo, q), a_lo);
        decode_word(word(l.hi, q), a_hi);
        mma_s8(d, a_lo[0], a_hi[0], a_lo[1], a_hi[1], x[q].x, x[q].y);
        mma_s8(d, a_lo[2], a_hi[2], a_lo[3], a_hi[3], x[q].z, x[q].w);
    }
}

__global__ void __launch_bounds__(kMaxWarps* kWarp, 3)
    tern2_gemv_kernel(const uint8_t* __restrict__ codes, const int8_t* __restrict__ x, int m,
                      int64_t n, int64_t k, int64_t group, int groups, ProductOut out) {
    // [groups][kTileRows][kTokens] int32 sums, then x (m, k) int8 in decode_word's column order.
    extern __shared__ __align__(16) int32_t sums[];
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    int8_t* xs = reinterpret_cast<int8_t*>(sums + groups * kTileRows * kTokens);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int warps = blockDim.x / kWarp;
    const int g = lane / 4, t = lane % 4;
    const int64_t row0 = int64_t{blockIdx.x} * kTileRows;
    const int64_t row_bytes = k / formats::kTern2CodesPerByte;

    for (int i = threadIdx.x; i < groups * kTileRows * kTokens; i += blockDim.x) sums[i] = 0;
    // Stage x once per block, permuted: the main loop then reads it from shared memory (~30
    // cycles) instead of waiting on L2 for every k-block (measured: 45% of the stalls).
    for (int64_t u = threadIdx.x; u < m * k / 16; u += blockDim.x) {
        uint32_t r[4];
        permute_x(load_x(x + 16 * u), r);
        reinterpret_cast<uint4*>(xs)[u] = make_uint4(r[0], r[1], r[2], r[3]);
    }
    __syncthreads();

    const bool row_lo = row0 + g < n, row_hi = row0 + g + 8 < n, token = g < m;
    // Row pointers only dereferenced when their row exists.
    const uint8_t* w_lo = codes + (row0 + g) * row_bytes + (kChunkCols / 4) * t;
    const uint8_t* w_hi = w_lo + 8 * row_bytes;
    const int8_t* xg = xs + int64_t{g} * k + kChunkCols * t;
    const int64_t kblocks = formats::ceil_div(k, kBlockCols);

    int d[4] = {0, 0, 0, 0};
    int64_t cur = -1;  // scale group of the sums in d
    auto flush = [&]() {
        int32_t* s = sums + (cur * kTileRows + g) * kTokens + 2 * t;
        atomicAdd(s, d[0]);
        atomicAdd(s + 1, d[1]);
        atomicAdd(s + 8 * kTokens, d[2]);
        atomicAdd(s + 8 * kTokens + 1, d[3]);
        d[0] = d[1] = d[2] = d[3] = 0;
    };

    // A ring of kDepth k-blocks of weights in flight per warp: DRAM latency is ~1 us, and one
    // k-block (1 KiB a warp) at a time leaves the memory system mostly idle.
    auto chunk_ok = [&](int64_t kb) { return kb * kBlockCols + kChunkCols * t < k; };
    WeightLoads ring[kDepth];
#pragma unroll
    for (int s = 0; s < kDepth; ++s) {
        const int64_t kb = warp + int64_t{s} * warps;
        ring[s] = kb < kblocks ? load_kblock(w_lo, w_hi, kb, chunk_ok(kb), row_lo, row_hi)
                               : WeightLoads{};
    }
    for (int64_t base = warp; base < kblocks; base += int64_t{kDepth} * warps) {
#pragma unroll
        for (int s = 0; s < kDepth; ++s) {
            const int64_t kb = base + int64_t{s} * warps;
            if (kb >= kblocks) break;  // warp-uniform
            const WeightLoads w = ring[s];
            const int64_t nb = kb + int64_t{kDepth} * warps;
            if (nb < kblocks) ring[s] = load_kblock(w_lo, w_hi, nb, chunk_ok(nb), row_lo, row_hi);
            uint4 xv[4] = {};
            if (token && chunk_ok(kb)) {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    xv[q] = reinterpret_cast<const uint4*>(xg + kb * kBlockCols)[q];
            }
            const int64_t gi = groups == 1 ? 0 : kb * kBlockCols / group;
            if (gi != cur) {
                if (cur >= 0) flush();
                cur = gi;
            }
            multiply_kblock(w, xv, d);
        }
    }
    if (cur >= 0) flush();
    __syncthreads();

    for (int idx = threadIdx.x; idx < kTileRows * m; idx += blockDim.x) {
        const int r = idx / m, i = idx % m;
        const int64_t j = row0 + r;
        if (j >= n) continue;
        detail::store_output(out, n, groups, i, j, [&](int64_t gi) {
            return sums[(gi * kTileRows + r) * kTokens + i];
        });
    }
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

std::string tern2_gemv_mma_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    if (m > kTern2GemvMmaMaxM) return "m must be <= 8";
    if (w.k % kChunkCols != 0) return "k must be a multiple of 64";
    if (!aligned16(w.a) || !aligned16(x)) return "the codes and x must be 16-byte aligned";
    const int64_t groups = formats::acc_num_groups(w.k, group);
    if (groups > 1 && group % kBlockCols != 0)
        return "group must be >= k (one scale group) or a multiple of 256";
    if (groups > kMaxGroups) return "at most 64 scale groups (k / group <= 64)";
    if (m * w.k > kMaxXBytes) return "m * k must be <= 114688 (x is staged in shared memory)";
    if (formats::ceil_div(w.n, kTileRows) > std::numeric_limits<int32_t>::max())
        return "n must be <= 16 * (2^31 - 1) (one block per 16 rows)";
    return "";
}

namespace {

// The streaming tensor-core kernel runs the calls it takes (one scale group), but for m = 1 only
// when one CTA spans k (k <= 4096): on the H100 it measured faster than the mma GEMV at m = 2..8
// and than the dp4a kernel at m = 1, except where it needs clusters (docs/BENCHMARKS.md).
// Up to m = 32 it runs every call it takes: on the H200 (session 34; 18 shapes from 768 x 768 to
// 14336 x 4096, m = 17, 24, 32, against tern2_gemm's mma.sync and wgmma kernels, each forced) it
// was the fastest on all 54, e.g. 768 x 768 at m = 24 2.44 us against 3.54 / 5.12, 2560 x 2560
// 4.35 against 6.53 / 10.41, 14336 x 4096 11.18 against 33.46 / 16.00.
// From m = 33 to 48 (six token groups, k <= 3072 by its contract) it runs where n <= 8192 and
// either k <= 1024 or n >= 5 k / 4 (same machine, m = 33, 40, 48, against mma.sync): 768 x 768
// 3.29 against 3.63 at m = 48, 3072 x 768 4.50 against 4.80, 2048 x 1536 (n = 1.33 k) 5.11
// against 6.04, 4096 x 2560 8.38 against 8.67, 6144 x 3072 10.96 against 13.37, 8192 x 2048 8.99
// against 15.78 (wgmma 9.51), but for 3072 x 2048 at m = 48 (6.94 against 6.87); the mma.sync
// kernel was faster where n <= k above k = 1024 (2560 x 2560 at m = 40 / 48: 6.85 / 7.03 against
// 7.20 / 7.90; 3072 x 3072 8.03 / 8.11 against 8.46 / 9.36; 768 x 2048 4.28 against 5.17 at
// m = 48), but for 2048 x 2048 at m = 40 (5.68 against 5.89). From 11008 rows up the wgmma kernel
// was faster (H100, session 33: 14336 x 2048 at m = 40, 10.73 against 9.90; 16384 x 3072 15.88
// against 13.25).
constexpr int64_t kSkinnyShortK = 1024;
constexpr int64_t kSkinnySixGroupsMaxN = 8192;

// Why auto dispatch leaves a call the skinny kernel could run to tern2_gemm; nullptr where it
// runs it.
const char* skinny_declines(const PackedWeights& w, int64_t m) {
    if (m <= kTern2SkinnyNarrowMaxM) return nullptr;
    if (w.n > kSkinnySixGroupsMaxN || (w.k > kSkinnyShortK && 4 * w.n < 5 * w.k))
        return "m = 33..48 runs here only when n <= 8192, and where k > 1024 only when "
               "n >= 5 k / 4 (tern2_gemm is faster elsewhere)";
    return nullptr;
}

bool skinny_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return (m > 1 || !tern2_skinny_needs_cluster(w.k)) && skinny_declines(w, m) == nullptr &&
           tern2_skinny_rejects(w, x, m, group).empty();
}

// The dp4a kernel runs the m = 1 calls the streaming kernel declines (several scale groups): at
// m = 2 it re-decodes the weights per token and measured slower than the mma kernel.
// The tern24-layout streaming kernel runs the m = 1 calls it takes on matrices of >= 16 MiB of
// codes. On the H100 it beat the kernels below from there on: 8192 x 8192, a tie; 16384 x 8192,
// 15.2 vs 17.6 us; the 131 MB 128256 x 4096, 46.7 vs 57.8 us. Below that it lost by up to 19 %
// (docs/BENCHMARKS.md, session 9).
constexpr int64_t kStreamMinBytes = int64_t{16} << 20;

bool stream_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return m == 1 && w.n * (w.k / formats::kTern2CodesPerByte) >= kStreamMinBytes &&
           tern2_gemv_stream_rejects(w, x, m, group).empty();
}

// The one-shot kernel runs the m = 1 calls with one scale group on matrices of at most
// 3072 x 768 weights, and on larger ones where its blocks let the next call launch after their
// products (tern2_gemv_oneshot_launches_late: at most 3 blocks an SM, 1, 3 or 4 units a lane).
// On the H100: session 25, us, against the kernel that ran before it, 768 x 768 1.70 vs 2.33
// (skinny), 1024 x 1024 1.91 vs 2.35, 3072 x 768 2.27 vs 2.72, 768 x 3072 2.40 vs 2.61. Session 30,
// one-shot (TRIT_ONESHOT=1) against skinny, late: 4096 x 768 2.00-2.01 vs 2.79, 6144 x 768 2.30 vs
// 2.86-2.88, 8192 x 1024 2.94 vs 3.30, 4096 x 1024 2.39 vs 2.94-2.95, 3072 x 1024 2.26-2.27 vs
// 2.69-2.71, 2048 x 2048 2.47-2.48 vs 2.90-2.91, 1024 x 4096 2.52-2.59 vs 2.98-3.01, 768 x 4096
// 2.38-2.45 vs 2.83, 1024 x 3072 2.09 vs 2.73; early (5 or more units a lane), it lost: 2560 x 2560
// 4.34-4.36 vs 3.10, 2048 x 4096 4.81-4.82 vs 3.18-3.19, 4096 x 2048 3.95 vs 3.05-3.06, 4096 x 4096
// 7.90-7.91 vs 4.42-4.43, 6912 x 2560 6.93 vs 4.63-4.66.
constexpr int64_t kOneshotMaxWeights = int64_t{3072} * 768;

bool oneshot_measured(const PackedWeights& w, bool float_x) {
    return w.n * w.k <= kOneshotMaxWeights ||
           tern2_gemv_oneshot_launches_late(w.n, w.k, float_x, gemv::sm_count_or_zero());
}

bool oneshot_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    const bool takes = tern2_gemv_oneshot_rejects(w, x, m, group).empty();
    return detail::policy_runs(detail::oneshot_policy(), takes && oneshot_measured(w, false), takes);
}

bool dp4a_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return m == 1 && !oneshot_takes(w, x, m, group) && !skinny_takes(w, x, m, group) &&
           tern2_gemv_dp4a_rejects(w, x, m, group).empty();
}

}  // namespace

std::string tern2_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (stream_takes(w, x, m, group) || oneshot_takes(w, x, m, group) || dp4a_takes(w, x, m, group) ||
        skinny_takes(w, x, m, group))
        return "";
    // Above the mma.sync GEMV's m the skinny kernel's own contract is the one that matters, then
    // the dispatch rule that keeps it off.
    if (m <= kTern2GemvMmaMaxM) return tern2_gemv_mma_rejects(w, x, m, group);
    const std::string rule = tern2_skinny_rejects(w, x, m, group);
    if (!rule.empty()) return rule;
    const char* why = skinny_declines(w, m);
    return why != nullptr ? why : "";
}

const char* tern2_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (stream_takes(w, x, m, group)) return "stream";
    if (oneshot_takes(w, x, m, group)) return "oneshot";
    if (dp4a_takes(w, x, m, group)) return "dp4a";
    if (skinny_takes(w, x, m, group)) return "skinny";
    return tern2_gemv_mma_rejects(w, x, m, group).empty() ? "mma" : "";
}

namespace {

// From float x the one-shot kernel, which quantizes x itself, runs up to 3072 x 768 weights, and
// for k <= 4096 where its blocks let the next call launch after their products (from float x: at
// most 3 blocks an SM). On the H100 (m = 1, us, quantizer + product): session 27, 1024 x 1024
// fused 2.37 against 3.67; session 30, fused (TRIT_ONESHOT=1) against the quantizer and then
// skinny, late: 2560 x 2560 4.40-4.41 vs 5.46-5.48, 4096 x 4096 6.37 vs 6.71-6.78, 4096 x 2048
// 3.71-3.72 vs 5.26, 2048 x 4096 4.54 vs 5.56-5.60, 4096 x 768 2.50 vs 4.67-4.69, 8192 x 1024 3.17 vs
// 5.38-5.39; lost: 6912 x 2560 (early) 9.58-9.59 vs 6.85-6.89, 2560 x 6912 (late, k = 6912: every
// block quantizes x's 6912 columns) 8.60-8.63 vs 7.78-7.81 (the dp4a kernel).
constexpr int64_t kFuseMaxK = 4096;

}  // namespace

bool tern2_gemv_takes_float_x(const PackedWeights& w, const float* x, int64_t m, int64_t group) {
    const bool takes = tern2_gemv_oneshot_rejects(w, reinterpret_cast<const int8_t*>(x), m, group).empty();
    const bool fused = takes && (w.n * w.k <= kOneshotMaxWeights || (w.k <= kFuseMaxK && oneshot_measured(w, true)));
    return detail::fuse_runs(detail::policy_runs(detail::oneshot_policy(), fused, takes), takes);
}

void tern2_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream) {
    // Each launcher runs the shared checks itself.
    if (stream_takes(w, x, m, group)) return tern2_gemv_stream(w, x, m, group, out, stream);
    if (oneshot_takes(w, x, m, group)) return tern2_gemv_oneshot(w, x, m, group, out, stream);
    if (dp4a_takes(w, x, m, group)) return tern2_gemv_dp4a(w, x, m, group, out, stream);
    if (skinny_takes(w, x, m, group)) {
        bool clusters = true;
        if (tern2_skinny_needs_cluster(w.k)) {
            int device = 0, major = 0;
            TRIT_CUDA_CHECK(cudaGetDevice(&device));
            TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
            clusters = major >= 9;
        }
        if (clusters) return tern2_skinny(w, x, m, group, out, stream);
        if (!tern2_gemv_mma_rejects(w, x, m, group).empty()) return tern2_gemm(w, x, m, group, out, stream);
    }
    if (m > kTern2GemvMmaMaxM) {  // no kernel of the path takes it: name the skinny kernel's rule
        check_product("tern2_gemv", w, x, m, group, out);
        TRIT_CHECK(false, "tern2_gemv (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
                   "): ", tern2_gemv_rejects(w, x, m, group));
    }
    tern2_gemv_mma(w, x, m, group, out, stream);
}

void tern2_gemv_mma(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream) {
    check_product("tern2_gemv", w, x, m, group, out);
    const std::string no = tern2_gemv_mma_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "tern2_gemv (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
               "): ", no);
    const int64_t groups = formats::acc_num_groups(w.k, group);
    const int64_t kblocks = formats::ceil_div(w.k, kBlockCols);
    const int warps = static_cast<int>(std::min<int64_t>(kMaxWarps, kblocks));
    const size_t smem = static_cast<size_t>(groups * kTileRows * kTokens) * sizeof(int32_t) +
                        static_cast<size_t>(m * w.k);
    TRIT_CUDA_CHECK(cudaFuncSetAttribute(tern2_gemv_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(formats::ceil_div(w.n, kTileRows)));
    detail::launch_kernel(tern2_gemv_kernel, grid, dim3(warps * kWarp), smem, stream, true, w.a, x,
                          static_cast<int>(m), w.n, w.k, group, static_cast<int>(groups), out);
}

}  // namespace trit::kernels
