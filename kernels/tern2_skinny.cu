// tern2 x int8 product for m <= 48 tokens that streams the weights: see kernels/tern2_skinny.h for
// the contract.
//
// Layout. The weights are read once, so each lane owns a fixed piece of every row and keeps the
// matching x in registers for the whole kernel. Warp w of cluster rank c owns the k-block
// kb = c * W + w (256 columns; W warps per CTA, C CTAs per cluster: geometry() below); lane
// (g, t) = (lane / 4, lane % 4) owns columns 64 t .. 64 t + 63 of it: 16 bytes of every row, and x
// of tokens g and g + 8 over those columns (permuted for the decode, 32 registers). A cluster walks
// tiles of 16 rows (tile = cluster id, + clusters, ...). Per tile a lane loads its 16 bytes of
// rows g and g + 8 into registers kDepth tiles ahead (kDepth = 3, or 2 when m > 8 and x takes 32
// more registers), decodes them (kernels/tern2_mma.cuh: 9 integer instructions per 16 weights)
// into the A operand of mma.sync m16n8k32: weights as the 16 rows, tokens as the 8 columns of B,
// one mma per k step and group of 8 tokens. Five variants by m: one group (m <= 8), two with x
// in registers (m <= 16), three or four (m <= 24, m <= 32) where x of tokens g + 8, g + 16 (and
// g + 24) lives in shared memory (32 or 48 more registers per thread than the 128 a thread of 512
// has; each lane writes its own 16 words per group once and reads one uint4 per group and
// 32-column word, a warp's 32 lanes 512 contiguous bytes), so the weights are still read and
// decoded once for all the tokens; six (m <= 48) the same way for k <= 3072, one CTA of at most
// 12 warps (156 registers a thread; 10 KiB of x a warp). Eight groups (m <= 64) ran slower than
// tern2_gemm on most shapes (BENCHMARKS session 33). (A 6-tile cp.async ring in shared memory in
// place of the registers measured slower on the H100: 12.7 vs 8.8 us at 14336 x 4096, m = 2.)
//
// Sums. A warp's partial tile (16 rows x 8 tokens per group) goes into its CTA's round buffer
// with shared int32 atomics (exact in any order). A round is R <= 8 tiles (R divides 2 C W, so
// 16 R divides the cluster's threads; the smallest such R that covers the busiest cluster's
// tiles, else the largest: tern2_skinny_round_tiles); at its end the cluster synchronises and
// cluster thread q finishes the four rows 4 (q % 4R) .. + 3 of the round for tokens q / 4R,
// + C W 32 / 4R, ...: it adds the C CTAs' 16-byte words of those rows (distributed shared memory,
// the C loads issued together) and runs the shared epilogue, one 16-byte store per token where
// n % 4 = 0. Its rows' weight scales and biases were loaded into registers when the round began
// (the first round's before pdl_wait(), PackedWeights::pdl allowing, with the first tiles'
// weights); the tokens' x scales are loaded once after pdl_wait() and stored to shared memory
// after the barrier that follows the x loads, which they would otherwise delay. (One row a
// thread, with generic loads of the peers' sums and x scales loaded per token, took up to 1.4 us
// more at m = 16.) Three buffers rotate: those the CTA uses are zeroed before pdl_wait(); after
// that a buffer is zeroed one round after its epilogue, once the round's synchronisation shows
// every peer has read it, and only when a later round uses it again (one more synchronisation
// later).
//
// Launch. Under PDL a CTA lets the next kernel start either before its pdl_wait() or in its first
// tile step with no weights left to request, x loaded (tern2_skinny_launches_late decides, from
// the grid).
#include "kernels/tern2_skinny.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/cuda_check.h"
#include "kernels/cluster.cuh"
#include "kernels/epilogue.cuh"
#include "kernels/fast_div.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using detail::peer_int4;
using detail::store_quad;
using tern2dev::decode_word;
using tern2dev::load_weights;
using tern2dev::mma_s8;
using tern2dev::permute_x;
using tern2dev::word;

constexpr int kWarp = 32;
constexpr int kTileRows = 16;          // mma m
constexpr int64_t kBlockCols = 256;    // a warp's k-block
constexpr int64_t kPieceCols = 64;     // a lane's columns of the k-block (16 bytes per row)
constexpr int kMaxWarps = 16;          // per CTA
constexpr int kMaxCluster = 8;         // portable cluster size
static_assert(kTern2SkinnyMaxK == kMaxCluster * kMaxWarps * kBlockCols);
constexpr int kMaxRoundTiles = 8;
// m = 33..48 (six token groups, x of groups 1.. in shared memory): k <= 3072, one CTA of at most
// 12 warps (156 registers a thread), 10 KiB of x a warp.
constexpr int kWideMaxWarps = 12;
static_assert(kTern2SkinnyWideMaxK == kWideMaxWarps * kBlockCols);
__host__ __device__ constexpr int max_warps(int groups) {
    return groups <= 4 ? kMaxWarps : kWideMaxWarps;
}
constexpr int kBuffers = 3;
constexpr int kGroupTokens = 8;  // tokens per mma (its n)
// A tile's sums in a round buffer: [token][row], token stride 20 and tile stride 336, 496, 656
// or 976 words (16, 24, 32 or 48 tokens: at least 20 (tokens - 1) + 16, and 16 mod 32), so that
// the atomics (lanes: token 2t + {0, 1}, row g + {0, 8}) and the epilogue's reads (a warp: 32
// consecutive rows of two tiles, one token) fall in distinct banks.
constexpr int kTokenStride = 20;
__host__ __device__ constexpr int tile_stride(int groups) {
    // 20 (8 groups - 1) + 16 rounded up to 16 mod 32: 336, 496, 656, 976 for 2, 3, 4, 6 groups.
    const int least = 20 * (8 * groups - 1) + 16;
    return groups <= 2 ? 336 : least + (16 - least % 32 + 32) % 32;
}
static_assert(tile_stride(3) == 496 && tile_stride(4) == 656 && tile_stride(6) == 976);
__host__ __device__ constexpr int sums_words(int groups) {
    return kBuffers * kMaxRoundTiles * tile_stride(groups);
}
// Token groups 1.. of the 3-, 4- and 6-group kernels (m > 16): each lane's permuted x, 16 words per
// group, in shared memory (the lane's own: written and read by the same thread), as uint4 words
// [warp][group - 1][word q of 4][lane] so that a warp's reads of one q take 512 contiguous bytes.
__host__ __device__ constexpr int smem_x_groups(int groups) {
    return groups >= 3 ? groups - 1 : 0;
}
constexpr size_t smem_bytes(int groups) {
    return sizeof(int32_t) * sums_words(groups) +
           sizeof(uint4) * max_warps(groups) * smem_x_groups(groups) * 4 * kWarp;
}
static_assert(kTern2SkinnyMaxM == 6 * kGroupTokens);
static_assert(smem_bytes(6) + sizeof(float) * kTern2SkinnyMaxM <= 227 * 1024,
              "one CTA's shared memory");

struct SkinnyArgs {
    const uint8_t* codes;
    const int8_t* x;
    int m;
    int64_t n, k;
    int kblocks;      // ceil(k / 256)
    int tiles;        // ceil(n / 16)
    int cluster;      // CTAs per cluster (its ranks split the k-blocks)
    int round_tiles;  // tiles per round: <= 8, dividing 2 * cluster * warps per CTA
    int token_step;   // cluster threads / (4 round_tiles): the epilogue's token stride
    FastDiv clusters;     // by the grid's cluster count
    FastDiv round_quads;  // by 4 round_tiles: the round's groups of four rows
    bool vector_scales;   // n % 4 = 0, per-row w scales, they and the bias 16-byte aligned
    bool vector_out;      // n % 4 = 0 and y (acc) 16-byte aligned: one 16-byte store per 4 rows
    bool prefetch;        // read the first tiles' weights, scales and bias before pdl_wait()
    bool late;            // let the next kernel launch once the CTA's weights are requested, not before pdl_wait()
    ProductOut out;
};

// The CTA's rank in its cluster, the cluster's index in the grid: special registers on sm_90
// (a launch without clusters has clusters of one CTA), where the kernel's first instructions
// would otherwise divide; below, clusters are never launched.
__device__ __forceinline__ void cluster_position(int& rank, int& cluster_id) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t r = 0, c = 0;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    asm("mov.u32 %0, %%clusterid.x;" : "=r"(c));
    rank = static_cast<int>(r), cluster_id = static_cast<int>(c);
#else
    rank = 0, cluster_id = static_cast<int>(blockIdx.x);
#endif
}

// A lane's 16 bytes of rows g and g + 8 of one tile.
struct RowPair {
    uint4 lo, hi;
};

__device__ __forceinline__ void sync_cluster_or_block(int cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (cluster > 1) {
        cooperative_groups::this_cluster().sync();
        return;
    }
#endif
    (void)cluster;
    __syncthreads();
}

// kGroups token groups of 8: 1 (m <= 8), 2 (m <= 16, x in registers), 3, 4 or 6 (m <= 24, 32
// or 48, groups 1.. of x in shared memory).
template <int kGroups>
__global__ void __launch_bounds__(max_warps(kGroups) * kWarp, 1)
    tern2_skinny_kernel(const SkinnyArgs a) {
    extern __shared__ int4 smem[];
    int32_t* const sums = reinterpret_cast<int32_t*>(smem);
    uint4* const xs = reinterpret_cast<uint4*>(sums + sums_words(kGroups));
    constexpr bool kTwo = kGroups == 2;
    constexpr int kTileStride = tile_stride(kGroups);
    // A round buffer: the round's tiles (shared memory holds kBuffers of kMaxRoundTiles).
    const int buffer_words = a.round_tiles * kTileStride;
    static_assert(kTileStride % 4 == 0, "a buffer is whole int4 words");
    constexpr int kDepth = kGroups == 1 ? 3 : 2;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
    const int g = lane / 4, t = lane % 4;
    const int C = a.cluster, T = static_cast<int>(blockDim.x), W = T / kWarp;
    // Index arithmetic in 32 bits where it fits (tiles < 2^31, host-checked), divisions by
    // launch constants as multiply-shifts: the weights' first loads wait for all of it.
    int rank = 0, cluster_id = 0;
    cluster_position(rank, cluster_id);
    const int clusters = static_cast<int>(a.clusters.divisor);
    const int kb = rank * W + warp;
    const int64_t col0 = int64_t{kb} * kBlockCols + kPieceCols * t;
    const bool piece = kb < a.kblocks && col0 < a.k;
    const int64_t row_bytes = a.k / fmt::kTern2CodesPerByte;
    const uint32_t later_tiles = static_cast<uint32_t>(a.tiles - 1 - cluster_id);  // id < tiles
    const int my_tiles = static_cast<int>(a.clusters.div(later_tiles)) + 1;
    const uint8_t* wp = a.codes + col0 / fmt::kTern2CodesPerByte;
    auto tile_row0 = [&](int i) { return int64_t{cluster_id + i * clusters} * kTileRows; };

    auto load = [&](int i) {
        RowPair p{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
        if (piece && i < my_tiles) {
            const int64_t row = tile_row0(i) + g;
            if (row < a.n) p.lo = load_weights(wp + row * row_bytes);
            if (row + 8 < a.n) p.hi = load_weights(wp + (row + 8) * row_bytes);
        }
        return p;
    };

    // The epilogue: cluster thread q finishes rows e_row .. e_row + 3 of the round's tile e_tile
    // (quad q % 4R) for tokens q / 4R, + token_step, ... (< m). Warp w of rank c takes
    // q = 32 (w C + c) + lane: when few tokens leave most q idle, the busy warps, and their loads
    // of the peers' sums, are spread over the cluster's CTAs.
    const int q = (warp * C + rank) * kWarp + lane;
    const int u0 = static_cast<int>(a.round_quads.div(static_cast<uint32_t>(q)));
    const int quad = q - u0 * 4 * a.round_tiles;
    const int e_tile = quad / 4, e_row = 4 * (quad % 4);
    const int token_step = a.token_step;
    float ws[4] = {}, bias[4] = {};
    auto load_epilogue = [&](int r0) {
        if (u0 >= a.m || a.out.y == nullptr || r0 + e_tile >= my_tiles) return;
        const int64_t j = tile_row0(r0 + e_tile) + e_row;
        if (j >= a.n) return;  // (n % 4 = 0 for the 16-byte loads: then j < n means j + 3 < n)
        if (a.vector_scales) {
            const float4 w4 = __ldg(reinterpret_cast<const float4*>(a.out.w_scale + j));
            ws[0] = w4.x, ws[1] = w4.y, ws[2] = w4.z, ws[3] = w4.w;
            if (a.out.bias != nullptr) {
                const float4 b4 = __ldg(reinterpret_cast<const float4*>(a.out.bias + j));
                bias[0] = b4.x, bias[1] = b4.y, bias[2] = b4.z, bias[3] = b4.w;
            }
            return;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (j + e < a.n) {
                ws[e] = __ldg(detail::epilogue_w_scale(a.out, j + e, 1));
                if (a.out.bias != nullptr) bias[e] = __ldg(a.out.bias + j + e);
            }
        }
    };

    RowPair ring[kDepth];
    if (a.prefetch) {
#pragma unroll
        for (int i = 0; i < kDepth; ++i) ring[i] = load(i);
        load_epilogue(0);
    }
    // The round buffers this CTA uses (one per round, at most 3) start at zero; shared memory
    // only, so this runs ahead of pdl_wait(), behind the first loads, with 16-byte stores.
    {
        const int R = a.round_tiles;
        const int words = (my_tiles > 2 * R ? 3 : (my_tiles > R ? 2 : 1)) * buffer_words;
        int4* const zero = reinterpret_cast<int4*>(sums);
        for (int i = tid; i < words / 4; i += T) zero[i] = make_int4(0, 0, 0, 0);
    }
    if (!a.late) detail::pdl_launch_dependents();
    detail::pdl_wait();
    // The tokens' x scales (written by the previous kernel), for the epilogues: loaded here,
    // stored to shared memory after the barrier below, so that it waits for none of them.
    __shared__ float x_scales[kTern2SkinnyMaxM];
    const bool x_scale_lane = tid < a.m && a.out.y != nullptr;
    const float x_scale = x_scale_lane ? a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : tid] : 0.0f;
    // Above m = 32 a CTA of one warp (k <= 256) has fewer threads than tokens: a second each.
    const bool x_scale_lane2 = kGroups > 4 && tid + T < a.m && a.out.y != nullptr;
    const float x_scale2 =
        x_scale_lane2 ? a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : tid + T] : 0.0f;
    if (!a.prefetch) {
#pragma unroll
        for (int i = 0; i < kDepth; ++i) ring[i] = load(i);
        load_epilogue(0);
    }

    // x of tokens g (x0) and g + 8 (x1; 3 or 4 groups: g + 8, g + 16 (, g + 24) in shared
    // memory) over the lane's 64 columns, in decode_word's order.
    uint32_t x0[16], x1[kTwo ? 16 : 1];
    auto x_piece = [&](int token, int w) {
        const bool ok = piece && token < a.m;
        return ok ? __ldg(reinterpret_cast<const uint4*>(a.x + int64_t{token} * a.k + col0) + w)
                  : make_uint4(0, 0, 0, 0);
    };
    // This lane's word q of token group h (1 .. kGroups - 1) in shared memory.
    constexpr int kXsGroups = smem_x_groups(kGroups);
    auto xs_at = [&](int h, int q) { return xs + ((warp * kXsGroups + h - 1) * 4 + q) * kWarp + lane; };
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        permute_x(x_piece(g, w), x0 + 4 * w);
        if constexpr (kTwo) permute_x(x_piece(g + kGroupTokens, w), x1 + 4 * w);
        if constexpr (kGroups >= 3) {
#pragma unroll
            for (int h = 1; h < kGroups; ++h) {
                uint32_t r[4];
                permute_x(x_piece(g + h * kGroupTokens, w), r);
                *xs_at(h, w) = make_uint4(r[0], r[1], r[2], r[3]);
            }
        }
    }
    __syncthreads();  // the zeroed buffers (and x in shared memory) are visible to every warp
    if (x_scale_lane) x_scales[tid] = x_scale;  // read after the round's barrier
    if (x_scale_lane2) x_scales[tid + T] = x_scale2;

    int buf = 0;
    for (int r0 = 0; r0 < my_tiles; r0 += a.round_tiles, buf = (buf + 1) % kBuffers) {
        const int r1 = r0 + a.round_tiles < my_tiles ? r0 + a.round_tiles : my_tiles;
        int32_t* s = sums + buf * buffer_words;
        for (int i = r0; i < r1; ++i) {
            const uint4 lo = ring[0].lo, hi = ring[0].hi;
#pragma unroll
            for (int d = 0; d + 1 < kDepth; ++d) ring[d] = ring[d + 1];
            ring[kDepth - 1] = load(i + kDepth);
            // Late: the first tile step with no weights left to request (x is in registers).
            if (a.late && i == max(my_tiles - kDepth, 0)) detail::pdl_launch_dependents();
            // No mma waits on the one before it: one group's two halves go to two accumulators
            // (added after the tile), two groups' alternate.
            int d[kGroups][4] = {}, d_hi[kGroups == 1 ? 4 : 1] = {};
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                uint32_t rlo[4], rhi[4];
                decode_word(word(lo, v), rlo);
                decode_word(word(hi, v), rhi);
                mma_s8(d[0], rlo[0], rhi[0], rlo[1], rhi[1], x0[4 * v], x0[4 * v + 1]);
                if constexpr (kTwo) {
                    mma_s8(d[1], rlo[0], rhi[0], rlo[1], rhi[1], x1[4 * v], x1[4 * v + 1]);
                    mma_s8(d[0], rlo[2], rhi[2], rlo[3], rhi[3], x0[4 * v + 2], x0[4 * v + 3]);
                    mma_s8(d[1], rlo[2], rhi[2], rlo[3], rhi[3], x1[4 * v + 2], x1[4 * v + 3]);
                } else if constexpr (kGroups == 1) {
                    mma_s8(d_hi, rlo[2], rhi[2], rlo[3], rhi[3], x0[4 * v + 2], x0[4 * v + 3]);
                } else {
                    mma_s8(d[0], rlo[2], rhi[2], rlo[3], rhi[3], x0[4 * v + 2], x0[4 * v + 3]);
                }
                if constexpr (kGroups >= 3) {
#pragma unroll
                    for (int h = 1; h < kGroups; ++h) {
                        const uint4 xv = *xs_at(h, v);
                        mma_s8(d[h], rlo[0], rhi[0], rlo[1], rhi[1], xv.x, xv.y);
                        mma_s8(d[h], rlo[2], rhi[2], rlo[3], rhi[3], xv.z, xv.w);
                    }
                }
            }
            if constexpr (kGroups == 1) {
#pragma unroll
                for (int e = 0; e < 4; ++e) d[0][e] += d_hi[e];
            }
            if (kb < a.kblocks) {
                // d[h]: rows g, g + 8 x tokens 8 h + 2t, 8 h + 2t + 1.
                int32_t* st = s + (i - r0) * kTileStride + g;
#pragma unroll
                for (int h = 0; h < kGroups; ++h) {
                    int32_t* sh = st + (kGroupTokens * h + 2 * t) * kTokenStride;
                    atomicAdd(sh, d[h][0]);
                    atomicAdd(sh + kTokenStride, d[h][1]);
                    atomicAdd(sh + 8, d[h][2]);
                    atomicAdd(sh + kTokenStride + 8, d[h][3]);
                }
            }
        }
        sync_cluster_or_block(C);
        if (r0 + e_tile < r1) {
            const int64_t j = tile_row0(r0 + e_tile) + e_row;
            if (j < a.n) {
                for (int u = u0; u < a.m; u += token_step) {
                    const int32_t* word = s + e_tile * kTileStride + u * kTokenStride + e_row;
                    int4 part[kMaxCluster];
#pragma unroll
                    for (int c = 0; c < kMaxCluster; ++c) {
                        part[c] = make_int4(0, 0, 0, 0);
                        if (c < C) part[c] = c == rank ? *reinterpret_cast<const int4*>(word)
                                                       : peer_int4(word, c);
                    }
                    int32_t acc[4] = {};
#pragma unroll
                    for (int c = 0; c < kMaxCluster; ++c) {
                        acc[0] += part[c].x, acc[1] += part[c].y;
                        acc[2] += part[c].z, acc[3] += part[c].w;
                    }
                    const int64_t at = u * a.n + j;
                    if (a.out.acc != nullptr) {
                        store_quad<int4>(a.out.acc + at, acc, a.vector_out, j, a.n);
                    } else {
                        // store_output's arithmetic for one group, the scales from registers.
                        const float sx = x_scales[u];
                        float v[4];
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const float sum = detail::epilogue_add(0.0f, ws[e], acc[e]);
                            v[e] = __fadd_rn(__fmul_rn(sum, sx), bias[e]);
                        }
                        store_quad<float4>(a.out.y + at, v, a.vector_out, j, a.n);
                    }
                }
            }
        }
        load_epilogue(r1);
        // The previous round's buffer, when a round after the next one will use it again: every
        // peer read it before this round's synchronisation.
        if (r1 + a.round_tiles < my_tiles) {
            int4* old =
                reinterpret_cast<int4*>(sums + ((buf + kBuffers - 1) % kBuffers) * buffer_words);
            for (int i = tid; i < buffer_words / 4; i += T)
                old[i] = make_int4(0, 0, 0, 0);
        }
    }
    // Peers may still read this CTA's buffers; the rounds' barriers published them.
    if (C > 1) detail::cluster_sync_relaxed();
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// A warp per 256-column k-block. Up to 16 k-blocks: one CTA of that many warps; more: clusters of
// 16-warp CTAs, but for m <= 16 with 33..56 k-blocks (8192 < k <= 14336) clusters of 8-warp CTAs,
// two of which fit an SM together, so that the next call's CTAs start and read their weights
// under PDL while this call's finish. On the H100 (docs/BENCHMARKS.md, session 17), 8 warps
// against 16: 4096 x 14336 at m = 16 12.5 against 13.6 us, 4096 x 11008 11.1 against 11.8; a tie
// at k = 8192 and 2-5 % slower at k = 6912 and 16384 (clusters of 8); above m = 16, where x
// takes shared memory, up to 17 % slower.
Tern2SkinnyGeometry geometry(int64_t k, int64_t m) {
    const int64_t kblocks = fmt::ceil_div(k, kBlockCols);
    const bool half = m <= 2 * kGroupTokens && kblocks > 2 * kMaxWarps &&
                      kblocks <= 7 * (kMaxWarps / 2);  // clusters of 5 to 7
    const int64_t cluster = fmt::ceil_div(kblocks, int64_t{half ? kMaxWarps / 2 : kMaxWarps});
    return {static_cast<int>(cluster), static_cast<int>(fmt::ceil_div(kblocks, cluster))};
}

// Clusters the device holds at once for this kernel and geometry, and its SM count (cached: the
// queries cost about as much as a small product).
struct Residency {
    int64_t clusters, sms;
};
template <typename Kernel>
Residency resident_clusters(Kernel kernel, int groups, const Tern2SkinnyGeometry& geo) {
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    using Key = std::tuple<int, int, int, int>;
    static std::mutex mutex;
    static std::map<Key, Residency> cache;
    const Key key{device, groups, geo.cluster, geo.warps};
    {
        std::lock_guard<std::mutex> lock(mutex);
        const auto it = cache.find(key);
        if (it != cache.end()) return it->second;
    }
    int sms = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    int64_t clusters = 0;
    if (geo.cluster == 1) {
        int per_sm = 0;
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, geo.warps * kWarp,
                                                                      smem_bytes(groups)));
        clusters = int64_t{sms} * std::max(per_sm, 1);
    } else {
        cudaLaunchConfig_t config = {};
        config.gridDim = dim3(static_cast<unsigned>(geo.cluster));
        config.blockDim = dim3(static_cast<unsigned>(geo.warps * kWarp));
        config.dynamicSmemBytes = smem_bytes(groups);
        cudaLaunchAttribute attribute[1] = {};
        attribute[0].id = cudaLaunchAttributeClusterDimension;
        attribute[0].val.clusterDim.x = static_cast<unsigned>(geo.cluster);
        attribute[0].val.clusterDim.y = 1;
        attribute[0].val.clusterDim.z = 1;
        config.attrs = attribute;
        config.numAttrs = 1;
        int n = 0;
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &config));
        clusters = std::max(n, 1);
    }
    const Residency r{clusters, sms};
    std::lock_guard<std::mutex> lock(mutex);
    cache[key] = r;
    return r;
}

template <int kGroups>
void launch(SkinnyArgs a, const Tern2SkinnyGeometry& geo, cudaStream_t stream) {
    const auto kernel = tern2_skinny_kernel<kGroups>;
    // Above the 48 KiB a launch gets by default (4 groups); set once per device.
    if constexpr (smem_bytes(kGroups) > 48 * 1024) {
        static std::mutex mutex;
        static std::map<int, bool> done;
        int device = 0;
        TRIT_CUDA_CHECK(cudaGetDevice(&device));
        std::lock_guard<std::mutex> lock(mutex);
        if (!done[device]) {
            TRIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem_bytes(kGroups))));
            done[device] = true;
        }
    }
    const Residency r = resident_clusters(kernel, kGroups, geo);
    const int64_t clusters = tern2_skinny_clusters(a.tiles, r.clusters, r.sms, geo.cluster, a.m);
    a.clusters = FastDiv(static_cast<uint32_t>(clusters));
    const int64_t most = fmt::ceil_div(int64_t{a.tiles}, clusters);
    a.round_tiles = tern2_skinny_round_tiles(most, geo.cluster, geo.warps, kMaxRoundTiles);
    a.round_quads = FastDiv(static_cast<uint32_t>(4 * a.round_tiles));
    a.token_step = geo.cluster * geo.warps * kWarp / (4 * a.round_tiles);
    a.late = a.prefetch && tern2_skinny_launches_late(clusters * geo.cluster, geo.cluster, geo.warps, r.sms);
    detail::launch_kernel_clustered(
        kernel, dim3(static_cast<unsigned>(clusters * geo.cluster)),
        dim3(static_cast<unsigned>(geo.warps * kWarp)), smem_bytes(kGroups), stream, true,
        dim3(static_cast<unsigned>(geo.cluster), 1, 1), a);
}

}  // namespace

std::string tern2_skinny_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    if (m < 1 || m > kTern2SkinnyMaxM) return "m must be in 1..48";
    if (m > kTern2SkinnyNarrowMaxM && w.k > kTern2SkinnyWideMaxK)
        return "m > 32 needs k <= 3072 (x of all tokens in one CTA's shared memory)";
    if (w.k % kPieceCols != 0) return "k must be a multiple of 64";
    if (w.k > kTern2SkinnyMaxK) return "k must be <= 32768";
    if (w.n > kTern2SkinnyMaxN)
        return "n must be at most 2^35 - 16 (its 16-row tiles are counted in 31 bits)";
    if (group < w.k) return "one scale group only (group >= k)";
    if (!aligned16(w.a) || !aligned16(x)) return "the codes and x must be 16-byte aligned";
    return "";
}

bool tern2_skinny_needs_cluster(int64_t k) {
    return geometry(k, 1).cluster > 1;
}

Tern2SkinnyGeometry tern2_skinny_geometry(int64_t k, int64_t m) {
    return geometry(k, m);
}

// Every CTA of a cluster of one covers all of k, so it loads all of x (m k bytes from L2, m / 4
// times a 16-row tile's weights): two such CTAs on one SM load it twice, one that walks two tiles
// loads it once for both. Hence above m = 2 at most one per SM; and where the busiest
// cluster walks at most two tiles, as few clusters as keep it at that (more tiles each would
// lengthen the call; fewer clusters with three or more tiles each measured slower where the
// weights are many, the SMs left idle reading none). On the H100 (docs/BENCHMARKS.md, session
// 20), m = 16: 3072 x 768 4.58 -> 3.99 us (192 -> 96 CTAs), 2560 x 2560 4.18 -> 4.08 (132 -> 80).
// Where that leaves one tile a CTA on at least 7/8 of the SMs (and at most two tiles a CTA on
// every SM), two tiles a CTA: session 32, us, one tile / two, three processes: 2048 x 2048 m = 4
// 2.82-2.85 / 2.60-2.62, m = 16 3.61-3.62 / 3.44-3.45 (128 tiles); 2048 x 4096 m = 8 3.70-3.71 /
// 3.44-3.45; 4096 x 2048 m = 2 3.09-3.12 / 2.92-2.94 (256 tiles, two 8-warp CTAs an SM);
// 2560 x 1024 m = 2 2.71 / 2.45-2.46; 3072 x 768 m = 2 2.57-2.60 / 2.43-2.44; within 1 % on 2048
// x 2560. With fewer tiles two a CTA lost: 1536 x 2560 (96 tiles) m = 16 3.39-3.40 / 3.59-3.60,
// 768 x 3072 (48) 3.50-3.52 / 3.95.
int64_t tern2_skinny_clusters(int64_t tiles, int64_t resident, int64_t sms, int cluster, int64_t m) {
    TRIT_CHECK(tiles >= 1 && resident >= 1 && sms >= 1 && cluster >= 1,
               "tern2_skinny_clusters: tiles, resident clusters, SMs and cluster size must be >= 1 (got ",
               tiles, ", ", resident, ", ", sms, ", ", cluster, ")");
    const int64_t cap = cluster == 1 && m > 2 ? std::min(resident, sms) : resident;
    int64_t most = fmt::ceil_div(tiles, cap);  // tiles the busiest cluster walks
    if (cluster == 1 && most == 1 && 8 * tiles >= 7 * sms && tiles <= 2 * sms) most = 2;
    return most <= 2 ? fmt::ceil_div(tiles, most) : std::min(tiles, cap);
}

// Where the next kernel starts. Early, its CTAs take the SMs' free slots and request their weights
// while this call's CTAs run; late, once each of this call's CTAs has requested all its weights
// and x (SkinnyArgs::late), so that those requests are not slowed by the next call's. On the H100
// (docs/BENCHMARKS.md, session 31; late against early, us), over 106 calls on 20 shapes at
// m = 1..32, late won 86 by more than 1 % and tied 13, e.g. m = 16: 2048 x 2048 3.62 vs 4.25,
// 4096 x 2048 3.75 vs 4.93, 2560 x 2560 3.83 vs 4.07, 6912 x 2560 5.43 vs 5.60; m = 1: 4096 x 4096
// 4.35 vs 4.43. It lost where single CTAs of 8 warps outnumbered the SMs (k = 2048, m <= 2: two
// CTAs fit an SM), m = 1 4096 x 2048 3.20 vs 3.05, 2560 x 2048 2.92 vs 2.76, which stay early
// (early, the next call's CTAs can start on the SMs holding one of this call's while the others
// finish two), and by 1-5 % at m = 8 on 1536 x 2560, 2048 x 4096 and 4096 x 14336 (where late
// won in another call), left late. (Since session 32 those two shapes run two tiles a CTA at
// m <= 2, as many CTAs as SMs or fewer, late: 4096 x 2048 m = 1 2.97-2.98 against 3.04 early.)
constexpr int kEarlyMinWarps = 8;

// Tiles per round. A round's 16 R rows must divide the cluster's threads (2 C W divisible by R),
// so that every thread finishes four rows of each round's tile for its tokens. Until session 33
// the largest such R: where a cluster walks fewer tiles than that, each epilogue thread finished
// several tokens of the few rows there were, the others idle. The smallest R that covers the
// tiles measured (H100, session 33, two processes, us, largest / smallest) m = 16: 768 x 768
// 3.14 / 2.40, 2048 x 2048 3.44-3.45 / 3.11-3.12, 3072 x 768 3.50-3.52 / 3.02-3.03, 4096 x 4096
// 5.68 / 5.49-5.59; m = 32: 2048 x 2048 4.78-4.82 / 4.24-4.25, 4096 x 2048 5.47 / 4.90-4.91;
// m = 48: 2048 x 2048 7.11-7.16 / 6.18-6.22; within 1 % at m = 2 and where a cluster walks more
// than 8 tiles (14336 x 4096).
int tern2_skinny_round_tiles(int64_t most, int cluster, int warps, int max_round) {
    TRIT_CHECK(
        most >= 1 && cluster >= 1 && warps >= 1 && max_round >= 1,
        "tern2_skinny_round_tiles: tiles, cluster size, warps and round size must be >= 1 (got ",
        most, ", ", cluster, ", ", warps, ", ", max_round, ")");
    const int threads_quads = 2 * cluster * warps;
    int largest = 1;
    for (int r = 1; r <= max_round; ++r) {
        if (threads_quads % r != 0) continue;
        if (r >= most) return r;  // the smallest that covers the busiest cluster's tiles
        largest = r;
    }
    return largest;
}

bool tern2_skinny_launches_late(int64_t ctas, int cluster, int warps, int64_t sms) {
    TRIT_CHECK(ctas >= 1 && cluster >= 1 && warps >= 1 && sms >= 1,
               "tern2_skinny_launches_late: CTAs, cluster size, warps and SMs must be >= 1 (got ", ctas, ", ",
               cluster, ", ", warps, ", ", sms, ")");
    return cluster > 1 || ctas <= sms || warps < kEarlyMinWarps;
}

void tern2_skinny(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                  const ProductOut& out, cudaStream_t stream) {
    check_product("tern2_skinny", w, x, m, group, out);
    const std::string no = tern2_skinny_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "tern2_skinny (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
    const Tern2SkinnyGeometry geo = geometry(w.k, m);
    if (geo.cluster > 1) {
        int device = 0, major = 0;
        TRIT_CUDA_CHECK(cudaGetDevice(&device));
        TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
        TRIT_CHECK(major >= 9, "tern2_skinny (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
                   "): k > 4096 runs as thread block clusters, which need compute capability >= 9.0 "
                   "(the device has ", major, ".x)");
    }
    SkinnyArgs a{};
    a.codes = w.a;
    a.x = x;
    a.m = static_cast<int>(m);
    a.n = w.n;
    a.k = w.k;
    a.kblocks = static_cast<int>(fmt::ceil_div(w.k, kBlockCols));
    a.tiles = static_cast<int>(fmt::ceil_div(w.n, int64_t{kTileRows}));
    a.cluster = geo.cluster;
    // Four rows' scales and biases in two 16-byte loads (fewer requests ahead of the wait: 2560 x
    // 2560 at m = 2 took 3.5 us with eight 4-byte loads, 3.3 with two 16-byte ones), and their
    // outputs in one store.
    a.vector_scales = w.n % 4 == 0 && out.y != nullptr && out.w_scale_rows != 1 &&
                      aligned16(out.w_scale) && (out.bias == nullptr || aligned16(out.bias));
    const void* const dst = out.acc != nullptr ? static_cast<const void*>(out.acc) : out.y;
    a.vector_out = w.n % 4 == 0 && aligned16(dst);
    a.prefetch = w.pdl;
    a.out = out;
    if (m > 4 * kGroupTokens) {
        launch<6>(a, geo, stream);
    } else if (m > 3 * kGroupTokens) {
        launch<4>(a, geo, stream);
    } else if (m > 2 * kGroupTokens) {
        launch<3>(a, geo, stream);
    } else if (m > kGroupTokens) {
        launch<2>(a, geo, stream);
    } else {
        launch<1>(a, geo, stream);
    }
}

}  // namespace trit::kernels
