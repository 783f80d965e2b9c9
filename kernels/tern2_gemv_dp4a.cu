// tern2 x int8 streaming GEMV (m <= 2): see kernels/tern2_gemv_dp4a.h for the contract.
//
// Layout. Thread t of a block owns the 64-column piece t of every row (16 bytes of codes; T =
// 32 * ceil(k / 2048) threads), so its slice of x, permuted for the decode below, stays in
// registers for the whole kernel. A block walks tiles of kRows rows (tile = blockIdx.x, +grid,
// ...); the grid is as many blocks as fit on the GPU at once, and each thread loads the next
// tile's weights (one 16-byte load per row) before it multiplies the current one.
//
// Decode. A 32-bit word of 16 codes splits into lo = w & 0x33333333 (columns 0, 2 of each byte,
// a field per nibble) and hi = (w >> 2) & 0x33333333 (columns 1, 3); __byte_perm(0x00FF0100, 0,
// sel) maps four fields 0/1/2 to the int8 codes 0/+1/-1. The four registers hold columns
// [0 2 4 6], [8 10 12 14], [1 3 5 7], [9 11 13 15] of the word, x is permuted the same way once,
// and __dp4a multiplies: 9 integer instructions decode 16 weights, 4 multiply them.
//
// Sums. Each scale group is a run of gl lanes (a power of two; gl = 32 for one group or groups of
// whole warps): a shuffle (or warp) reduction gives one partial per run and tile, kept in shared
// memory (double-buffered by tile, so one barrier per tile); after the barrier kRows * m threads
// add each group's partials and run the shared epilogue in group order.
//
// Epilogue. The threads that run it hold their row's weight scale and bias in registers, loaded a
// tile ahead with the weights (one scale group; several groups: the scales are prefetched to L1),
// and the token's x scale from the start: only the partial sums come from shared memory.
//
// Launch. The first tile's weights, scales and bias are requested before pdl_wait() when
// PackedWeights::pdl says nothing writes them just before (kernels/pdl.cuh): the loads then
// overlap the previous kernel.
#include "kernels/tern2_gemv_dp4a.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels {
namespace {

using tern2dev::dot16;
using tern2dev::load_weights;
using tern2dev::permute_x;

constexpr int kWarp = 32;
constexpr int kRows = 2;                // rows per tile
constexpr int kPieceCols = 64;          // columns per thread and row (one 16-byte load)
constexpr int kMaxThreads = static_cast<int>(kTern2GemvDp4aMaxK / kPieceCols);  // 256

// Asks for the 128-byte line at p in L1 (after pdl_wait(): the data is final).
__device__ __forceinline__ void prefetch_l1(const void* p) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

struct Dp4aArgs {
    const uint8_t* codes;
    const int8_t* x;
    int64_t n, k;
    int groups;
    int run_lanes;      // gl: lanes per partial (a power of two dividing 32)
    int runs_per_group; // partials that make one scale group's sum (all of them for one group)
    bool prefetch;      // request the first tile's weights before pdl_wait()
    ProductOut out;
};

template <int M>
__global__ void __launch_bounds__(kMaxThreads) tern2_gemv_dp4a_kernel(const Dp4aArgs a) {
    // Partials per (tile parity, row * M + token, run of lanes).
    __shared__ int32_t partial[2][kRows * M][kMaxThreads];
    const int t = threadIdx.x, T = blockDim.x, lane = t % kWarp;
    const int pieces = static_cast<int>(a.k / kPieceCols);
    const int64_t row_bytes = a.k / formats::kTern2CodesPerByte;
    const int64_t tiles = formats::ceil_div(a.n, int64_t{kRows});
    const bool owns = t < pieces;
    const int runs = T / a.run_lanes;

    uint4 next[kRows];
    auto load = [&](int64_t tile) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            const int64_t row = tile * kRows + r;
            next[r] = owns && tile < tiles && row < a.n
                          ? load_weights(a.codes + row * row_bytes + int64_t{t} * 16)
                          : make_uint4(0, 0, 0, 0);
        }
    };
    int64_t tile = blockIdx.x;
    // The epilogue threads (t < kRows * M: row t / M, token t % M) hold their row's weight scale
    // and bias in registers a tile ahead, loaded with the weights: they come from DRAM like the
    // weights, and a miss in the epilogue would hold the whole block at the next tile's barrier.
    // With several scale groups the row's scales are only asked for in L1 a tile ahead.
    const bool epilogue_thread = a.out.y != nullptr && t < kRows * M;
    float next_ws = 0.0f, next_bias = 0.0f;
    auto load_epilogue = [&](int64_t tile) {
        if (!epilogue_thread || tile >= tiles) return;
        const int64_t j = tile * kRows + t / M;
        if (j >= a.n) return;
        const float* ws = detail::epilogue_w_scale(a.out, j, a.groups);
        if (a.groups == 1) {
            next_ws = __ldg(ws);
        } else {
            for (int g = 0; g < a.groups; g += 32) prefetch_l1(ws + g);
        }
        if (a.out.bias != nullptr) next_bias = __ldg(a.out.bias + j);
    };
    if (a.prefetch) {
        load(tile);
        load_epilogue(tile);
    }
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    if (!a.prefetch) {
        load(tile);
        load_epilogue(tile);
    }
    // x's scale comes from the kernel before (the quantizer): read after pdl_wait().
    const float x_scale = epilogue_thread ? a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : t % M] : 0.0f;

    uint32_t xq[M][16];
#pragma unroll
    for (int i = 0; i < M; ++i) {
        const uint4* xp = reinterpret_cast<const uint4*>(a.x + i * a.k + int64_t{owns ? t : 0} * kPieceCols);
#pragma unroll
        for (int q = 0; q < 4; ++q)
            permute_x(owns ? __ldg(xp + q) : make_uint4(0, 0, 0, 0), xq[i] + 4 * q);
    }

    for (int par = 0; tile < tiles; tile += gridDim.x, par ^= 1) {
        uint4 cur[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) cur[r] = next[r];
        const float ws = next_ws, bias = next_bias;
        load(tile + gridDim.x);
        load_epilogue(tile + gridDim.x);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
            for (int i = 0; i < M; ++i) {
                int s = 0;
                s = dot16(cur[r].x, xq[i] + 0, s);
                s = dot16(cur[r].y, xq[i] + 4, s);
                s = dot16(cur[r].z, xq[i] + 8, s);
                s = dot16(cur[r].w, xq[i] + 12, s);
                if (a.run_lanes == kWarp) {
                    s = __reduce_add_sync(0xffffffffu, s);
                } else {
                    for (int o = a.run_lanes / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
                }
                if (lane % a.run_lanes == 0) partial[par][r * M + i][t / a.run_lanes] = s;
            }
        }
        __syncthreads();
        if (t < kRows * M) {
            const int r = t / M, i = t % M;
            const int64_t j = tile * kRows + r;
            if (j < a.n) {
                const int32_t* p = partial[par][t];
                auto group_sum = [&](int64_t g) {
                    const int begin = static_cast<int>(g) * a.runs_per_group;
                    const int end = min(begin + a.runs_per_group, runs);
                    int32_t sum = 0;
                    for (int e = begin; e < end; ++e) sum += p[e];
                    return sum;
                };
                if (a.out.y != nullptr && a.groups == 1) {
                    // store_output's arithmetic for one group, with the scales from registers.
                    const float s = detail::epilogue_add(0.0f, ws, group_sum(0));
                    a.out.y[i * a.n + j] = __fadd_rn(__fmul_rn(s, x_scale), bias);
                } else {
                    detail::store_output(a.out, a.n, a.groups, i, j, group_sum);
                }
            }
        }
    }
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

bool power_of_two(int64_t v) {
    return v > 0 && (v & (v - 1)) == 0;
}

// Blocks of `threads` threads of the kernel for M that the current device holds at once (cached
// per device, M and threads: the queries cost about as much as a small GEMV).
int64_t resident_blocks(int m, int threads) {
    static std::mutex mutex;
    static std::map<std::pair<int, std::pair<int, int>>, int64_t> cache;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    const auto key = std::make_pair(device, std::make_pair(m, threads));
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int sms = 0, per_sm = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (m == 1) {
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tern2_gemv_dp4a_kernel<1>, threads, 0));
    } else {
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tern2_gemv_dp4a_kernel<2>, threads, 0));
    }
    const int64_t blocks = int64_t{sms} * std::max(per_sm, 1);
    cache.emplace(key, blocks);
    return blocks;
}

}  // namespace

std::string tern2_gemv_dp4a_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    if (m > kTern2GemvDp4aMaxM) return "m must be <= 2";
    if (w.k % kPieceCols != 0) return "k must be a multiple of 64";
    if (w.k > kTern2GemvDp4aMaxK) return "k must be <= 16384";
    if (!aligned16(w.a) || !aligned16(x)) return "the codes and x must be 16-byte aligned";
    if (group < w.k && !(group % kPieceCols == 0 && power_of_two(group / kPieceCols) && group <= 2048) &&
        group % 2048 != 0)
        return "group must be >= k (one scale group), 64 * 2^e <= 2048, or a multiple of 2048";
    return "";
}

void tern2_gemv_dp4a(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream) {
    check_product("tern2_gemv_dp4a", w, x, m, group, out);
    const std::string no = tern2_gemv_dp4a_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "tern2_gemv_dp4a (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
    Dp4aArgs a{};
    a.codes = w.a;
    a.x = x;
    a.n = w.n;
    a.k = w.k;
    a.groups = static_cast<int>(formats::acc_num_groups(w.k, group));
    const int threads = static_cast<int>(formats::ceil_div(w.k / kPieceCols, int64_t{kWarp}) * kWarp);
    if (a.groups == 1) {
        a.run_lanes = kWarp;
        a.runs_per_group = threads / kWarp;
    } else if (group < 2048) {
        a.run_lanes = static_cast<int>(group / kPieceCols);
        a.runs_per_group = 1;
    } else {
        a.run_lanes = kWarp;
        a.runs_per_group = static_cast<int>(group / 2048);
    }
    a.prefetch = w.pdl;
    a.out = out;
    const int64_t tiles = formats::ceil_div(w.n, int64_t{kRows});
    const dim3 grid(static_cast<unsigned>(std::min(tiles, resident_blocks(static_cast<int>(m), threads))));
    if (m == 1) {
        detail::launch_kernel(tern2_gemv_dp4a_kernel<1>, grid, dim3(threads), 0, stream, true, a);
    } else {
        detail::launch_kernel(tern2_gemv_dp4a_kernel<2>, grid, dim3(threads), 0, stream, true, a);
    }
}

}  // namespace trit::kernels
