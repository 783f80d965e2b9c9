// tern24 GEMV (kernels/tern24_gemv.h): the streaming kernel (m <= 2) and the warp-per-row kernel.
// Both decode a 4-column group from a 6-bit index, bitmap | sign_pair << 4, through a table of its
// 4 int8 codes replicated once per lane in shared memory (lane l's copy in bank l: lookups never
// conflict), then multiply with one dp4a per group and token.
//
// Streaming kernel. Layout: a row is C = k / 128 chunks of 128 columns (16 mask + 8 sign bytes).
// A team of 32 * ceil(C / 32) threads covers a row: thread c of a team owns chunk c of every row,
// so its 128 bytes of x per token stay in registers for the whole kernel (threads c >= C hold
// zeros and load nothing). A block holds S = 256 / team teams (S = 8, 4, 2, 2 for teams of 1..4
// warps; blocks of 256 or 192 threads) and walks tiles of S * 2 consecutive rows, tile =
// blockIdx.x, + gridDim.x, ..., team s taking rows 2s and 2s + 1 of a tile; the grid is as many
// blocks as the GPU holds at once (occupancy x SMs, two blocks an SM at <= 128 registers).
// Loads: 16- and 8-byte ld.global.nc.L1::no_allocate per row. Two tiles are in flight per thread
// (96 bytes): register sets A and B hold a block's even and odd tiles, and right after a row of
// the current tile is decoded its registers receive the same row of the tile two ahead, so the
// ring needs no register copies.
//
// Decode, per 32-column word of a chunk (mask word M: byte b holds the bitmaps of groups 2b (low
// nibble) and 2b + 1; its 16 sign bits: nibble b holds the sign pairs of groups 2b (bits 0-1) and
// 2b + 1 (bits 2-3)). Per 32-bit sign register s (two words): em = s & 0x33333333, em4 = em << 4,
// om = s & 0xCCCCCCCC, om << 2, om >> 2 (5 instructions). Per word: E = LOP3(M low nibbles,
// PRMT(em, em4) high nibbles) holds in byte b the index of group 2b (2 instructions; the PRMT's
// high nibbles are exactly sign pair << 4), O = LOP3(M >> 4, PRMT(om << 2, om >> 2)) that of group
// 2b + 1 (3 instructions). The table's rows are 256 bytes apart, so PRMT(E or O, lane * 4) puts an
// index byte at address bits 8-15 next to the lane's bank bits: one instruction per lookup
// address (the LDS adds the table's base). Measured in the sm_90 SASS: per 32 weights
// 10 PRMT + 3 LOP3 + 2.5 shifts + 8 LDS + 8 IDP.4A = 31.5 instructions at m = 1 (39.5 at m = 2),
// 0.98 per weight; with the loads, reductions and barrier about 1.28 per weight at m = 1.
//
// Sums: each thread's chunk sum per row and token is reduced over its scale group's run of lanes
// (groups of 128 * 2^e <= 4096 columns: runs of 2^e lanes, shuffles; one group or groups of whole
// warps: a warp, REDUX), one partial per run goes to shared memory (double-buffered by tile parity:
// one barrier per tile), and the first S * 2 * m threads each finish one (row, token): they add
// each scale group's runs, then run the fused epilogue's arithmetic (kernels/epilogue.cuh: groups
// in increasing order from +0.0f, no FMA). Their row's weight scale and bias are requested into
// registers with the tile's weights, two tiles ahead (the rows of several groups' scales are
// prefetched into L1): a miss there would hold the whole block at the next barrier. Launch: with
// PackedWeights::pdl the first two tiles' weights, scales and bias are requested before
// pdl_wait() (none of them is written by the kernel before, kernels/pdl.cuh); x and x_scale,
// which it may write, after it. The code table is filled before pdl_wait() too.
//
// Warp kernel: a persistent grid of blocks of up to 8 warps; a warp takes one output row at a time;
// lane l reads the row's chunks l, l + 32, ... (two in flight). x (m, k) is staged once per block
// in shared memory, each chunk's 128 bytes padded to 144 so that the lanes' 16-byte reads (128 B
// apart) fall in different banks. Its decode builds E/O words with garbage above the index (5 ops
// a word) and masks each index with a shift and an AND-OR (two ops a lookup); groups of 32 or 64
// columns flush per word into per-warp shared accumulators.
#include "kernels/tern24_gemv.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "exporters/formats/tern24.h"
#include "kernels/fast_div.h"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using gemv::kWarp;

constexpr int kChunkCols = 128;   // 16 mask bytes, 8 sign bytes
constexpr int kTableEntries = 64;  // bitmap | sign_pair << 4

// The 4 codes (int8, column 4g + p in byte p) of a group with table index bitmap | sign_pair << 4.
constexpr uint32_t code_word(int idx) {
    uint32_t w = 0;
    for (int p = 0; p < fmt::kTern24GroupSize; ++p) {
        const int code = fmt::tern24_decode(idx & 0xF, idx >> 4, p);
        w |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(code))) << (8 * p);
    }
    return w;
}
struct CodeTable {
    uint32_t w[kTableEntries];
};
constexpr CodeTable make_code_table() {
    CodeTable t{};
    for (int i = 0; i < kTableEntries; ++i) t.w[i] = code_word(i);
    return t;
}
// Bitmap 0b0110 (columns 1, 2), signs (-, +): codes [0, -1, +1, 0].
static_assert(code_word(0b0110 | 0b01 << 4) == 0x0001FF00u);
// Threads read it while filling the shared tables.
__constant__ CodeTable kCodes = make_code_table();

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

bool power_of_two(int64_t v) {
    return v > 0 && (v & (v - 1)) == 0;
}

// ---------------------------------------------------------------------------------------------
// Streaming kernel.

namespace stream {

constexpr int kRows = 2;            // rows per slot and tile
constexpr int kMaxThreads = 256;    // per block: slots * team
constexpr int kTableStride = 64;    // words per table row (256 bytes: the index is address byte 1)
constexpr int kMaxGroupLanes = 32;  // groups of 128 * 2^e <= 4096 columns are runs of lanes

// Weights are read once: keep them out of L1.
__device__ __forceinline__ uint4 load_mask(const uint8_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint2 load_signs(const uint8_t* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}
// Asks for the 128-byte line at p in L1.
__device__ __forceinline__ void prefetch_l1(const void* p) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// The low nibbles of lo with the high nibbles of hi: one LOP3 (nvcc keeps the two masks apart).
__device__ __forceinline__ uint32_t merge_nibbles(uint32_t lo, uint32_t hi) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(d) : "r"(lo), "n"(0x0F0F0F0F), "r"(hi));
    return d;
}

// v & mask, opaque to nvcc: it would otherwise rewrite (v & m) << s as (v << s) & (m << s), one
// mask per shifted copy instead of one per sign word.
template <uint32_t kMask>
__device__ __forceinline__ uint32_t and_mask(uint32_t v) {
    uint32_t d;
    asm("and.b32 %0, %1, %2;" : "=r"(d) : "r"(v), "n"(kMask));
    return d;
}

// The code word for the index in byte B of an E/O word: PRMT makes the byte offset
// index * 256 + lane * 4 (lane4's bytes 2 and 3 are zero).
template <int B>
__device__ __forceinline__ uint32_t lookup(const uint32_t* table, uint32_t eo, uint32_t lane4) {
    const uint32_t off = __byte_perm(eo, lane4, 0x7604u | (B << 4));
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(table) + off);
}

// acc[i] += the chunk (mask words mk, sign bits sg) . x[i] (128 int8 codes, natural order).
template <int M>
__device__ __forceinline__ void dot_chunk(const uint4& mk, const uint2& sg,
                                          const uint32_t (&x)[M][32], const uint32_t* table,
                                          uint32_t lane4, int (&acc)[M]) {
    const uint32_t mw[4] = {mk.x, mk.y, mk.z, mk.w};
    const uint32_t sr[2] = {sg.x, sg.y};
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
        // Sign pairs of the even groups (em) and odd groups (om), placed so that a PRMT of two of
        // them gives a word whose byte b has group 2b's (or 2b + 1's) pair at bits 4-5, 0 at 6-7.
        const uint32_t em = and_mask<0x33333333u>(sr[h2]), em4 = em << 4;
        const uint32_t om = and_mask<0xCCCCCCCCu>(sr[h2]), oml = om << 2, omr = om >> 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int w = 2 * h2 + h;
            const uint32_t e =
                merge_nibbles(mw[w], __byte_perm(em, em4, h == 0 ? 0x1504u : 0x3726u));
            const uint32_t o =
                merge_nibbles(mw[w] >> 4, __byte_perm(oml, omr, h == 0 ? 0x5140u : 0x7362u));
            const uint32_t code[8] = {lookup<0>(table, e, lane4), lookup<0>(table, o, lane4),
                                      lookup<1>(table, e, lane4), lookup<1>(table, o, lane4),
                                      lookup<2>(table, e, lane4), lookup<2>(table, o, lane4),
                                      lookup<3>(table, e, lane4), lookup<3>(table, o, lane4)};
#pragma unroll
            for (int i = 0; i < M; ++i) {
#pragma unroll
                for (int q = 0; q < 8; ++q)
                    acc[i] = __dp4a(static_cast<int>(code[q]), static_cast<int>(x[i][8 * w + q]),
                                    acc[i]);
            }
        }
    }
}

struct Args {
    const uint8_t* mask;
    const uint8_t* signs;
    const int8_t* x;
    int64_t n;
    int k;
    int chunks;          // C = k / 128
    int team;            // threads per row slot: 32 * ceil(C / 32)
    int slots;           // teams per block
    int groups;          // G
    int run_lanes;       // lanes per partial (a power of two dividing 32)
    int runs_per_group;  // partials that make one scale group's sum
    bool prefetch;       // read the first tile's weights, scales and bias before pdl_wait()
    ProductOut out;
};

// A thread's chunks of one tile: kRows rows.
struct Tile {
    uint4 mask[kRows];
    uint2 signs[kRows];
};

template <int M>
__global__ void __launch_bounds__(kMaxThreads, 2) tern24_gemv_stream_kernel(const Args a) {
    // Entry e of lane l at word e * kTableStride + l; words 32..63 of a row are unused.
    __shared__ __align__(16) uint32_t table[kTableEntries * kTableStride];
    // Partials per (tile parity, (row of the tile) * M + token, run of lanes of the team).
    __shared__ int32_t partial[2][kRows * M * kMaxThreads];
    const int t = static_cast<int>(threadIdx.x), lane = t % kWarp;
    const int slot = t / a.team, c = t % a.team;
    const bool owns = c < a.chunks;
    const int tile_rows = a.slots * kRows;
    const int64_t tiles = fmt::ceil_div(a.n, int64_t{tile_rows});
    const int64_t grid_rows = int64_t{gridDim.x} * tile_rows;  // rows from one tile to the next
    const int64_t mask_row = a.k / 8, signs_row = a.k / 16;    // bytes

    // The next tile to request (tiles are requested in order): its first row for this thread's
    // slot and the chunk's addresses there (past the last row once the block is done: never
    // dereferenced then). A thread that owns no chunk never loads: its tiles stay zero.
    int64_t load_row = int64_t{blockIdx.x} * tile_rows + slot * kRows;
    const uint8_t* load_mask_p = a.mask + load_row * mask_row + int64_t{c} * 16;
    const uint8_t* load_signs_p = a.signs + load_row * signs_row + int64_t{c} * 8;
    // Row r of the next tile into d. Rows past n keep stale data: their sums are never used.
    auto load_row_r = [&](Tile& d, int r) {
        if (owns && load_row + r < a.n) {
            d.mask[r] = load_mask(load_mask_p + r * mask_row);
            d.signs[r] = load_signs(load_signs_p + r * signs_row);
        }
    };
    auto next_tile = [&] {
        load_row += grid_rows;
        load_mask_p += grid_rows * mask_row;
        load_signs_p += grid_rows * signs_row;
    };
    // Thread t < tile_rows * M finishes output (row t / M of the tile, token t % M); its scale and
    // bias are requested with the tile's weights.
    const bool finisher = t < tile_rows * M;
    const int e_row = t / M, e_tok = t % M;
    const bool fused = a.out.y != nullptr;
    int64_t scale_row = int64_t{blockIdx.x} * tile_rows + e_row;
    auto load_epilogue = [&](float& ws, float& bias) {
        const int64_t j = scale_row;
        scale_row += grid_rows;
        if (!finisher || !fused || j >= a.n) return;
        const float* w = detail::epilogue_w_scale(a.out, j, a.groups);
        if (a.groups == 1) {
            ws = __ldg(w);
        } else {
            for (int g = 0; g < a.groups; g += 32)
                prefetch_l1(w + g);
            prefetch_l1(w + a.groups - 1);
        }
        if (a.out.bias != nullptr) bias = __ldg(a.out.bias + j);
    };

    const int runs = a.team / a.run_lanes;  // partials per (row, token)
    // Token e_tok's x scale: written by the previous kernel, so read after pdl_wait().
    float sx = 0.0f;
    // Output (j, e_tok) from the finisher's partials p (its runs, in order).
    auto finish = [&](const int32_t* p, int64_t j, float ws, float bias) {
        auto group_sum = [&](int g) {
            const int begin = g * a.runs_per_group, end = min(begin + a.runs_per_group, runs);
            int32_t sum = 0;
            for (int e = begin; e < end; ++e)
                sum += p[e];
            return sum;
        };
        if (!fused) {
            int32_t* dst = a.out.acc + (e_tok * a.n + j) * a.groups;
            for (int g = 0; g < a.groups; ++g)
                dst[g] = group_sum(g);
            return;
        }
        // store_output's arithmetic: groups in order from +0.0f, then scale and bias.
        float s = 0.0f;
        if (a.groups == 1) {
            s = detail::epilogue_add(s, ws, group_sum(0));
        } else {
            const float* w = detail::epilogue_w_scale(a.out, j, a.groups);
            for (int g = 0; g < a.groups; ++g)
                s = detail::epilogue_add(s, w[g], group_sum(g));
        }
        a.out.y[e_tok * a.n + j] = __fadd_rn(__fmul_rn(s, sx), bias);
    };

    // Two tiles in flight: A holds the even tiles of the block, B the odd ones.
    Tile tile_a{}, tile_b{};
    float ws_a = 0.0f, bias_a = 0.0f, ws_b = 0.0f, bias_b = 0.0f;
    auto load_first = [&] {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            load_row_r(tile_a, r);
        next_tile();
        load_epilogue(ws_a, bias_a);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            load_row_r(tile_b, r);
        next_tile();
        load_epilogue(ws_b, bias_b);
    };
    if (a.prefetch) load_first();
    detail::pdl_launch_dependents();
    // The code table (constant memory and shared memory only: nothing the previous kernel writes).
    for (int q = t; q < kTableEntries * (kWarp / 4); q += static_cast<int>(blockDim.x)) {
        const uint32_t v = kCodes.w[q / (kWarp / 4)];
        reinterpret_cast<uint4*>(table + (q / (kWarp / 4)) * kTableStride)[q % (kWarp / 4)] =
            make_uint4(v, v, v, v);
    }
    detail::pdl_wait();
    if (!a.prefetch) load_first();
    uint32_t xr[M][32];
#pragma unroll
    for (int i = 0; i < M; ++i) {
        const auto* xp = reinterpret_cast<const uint4*>(a.x + int64_t{i} * a.k +
                                                        int64_t{owns ? c : 0} * kChunkCols);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const uint4 v = owns ? __ldg(xp + q) : make_uint4(0, 0, 0, 0);
            xr[i][4 * q] = v.x;
            xr[i][4 * q + 1] = v.y;
            xr[i][4 * q + 2] = v.z;
            xr[i][4 * q + 3] = v.w;
        }
    }
    if (finisher && fused) sx = a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : e_tok];
    const uint32_t lane4 = static_cast<uint32_t>(lane) * 4;
    const bool run_head = lane % a.run_lanes == 0;
    // This thread's partial of row r, token i: part_at + (r * M + i) * runs.
    const int part_at = slot * kRows * M * runs + c / a.run_lanes;
    __syncthreads();  // the table is filled

    // The current tile, its first row, and the partials' buffer it writes.
    int64_t tile = blockIdx.x, row = int64_t{blockIdx.x} * tile_rows;
    int par = 0;
    // Multiplies the tile in `cur`; each row's registers then receive the same row of the tile two
    // ahead (so the two tiles in flight need no register copies), and the scale registers, once
    // the epilogue has used them, that tile's scale and bias.
    auto step = [&](Tile& cur, float& ws, float& bias) {
        int32_t* part = partial[par];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            int acc[M];
#pragma unroll
            for (int i = 0; i < M; ++i)
                acc[i] = 0;
            dot_chunk<M>(cur.mask[r], cur.signs[r], xr, table, lane4, acc);
            load_row_r(cur, r);
#pragma unroll
            for (int i = 0; i < M; ++i) {
                int s = acc[i];
                if (a.run_lanes == kWarp) {
                    s = __reduce_add_sync(0xffffffffu, s);
                } else {
                    for (int o = a.run_lanes / 2; o > 0; o /= 2)
                        s += __shfl_xor_sync(0xffffffffu, s, o);
                }
                if (run_head) part[part_at + (r * M + i) * runs] = s;
            }
        }
        next_tile();
        __syncthreads();
        const int64_t j = row + e_row;
        if (finisher && j < a.n) finish(part + t * runs, j, ws, bias);
        load_epilogue(ws, bias);
        tile += gridDim.x;
        row += grid_rows;
        par ^= 1;
    };
    while (tile < tiles) {  // the same for the whole block
        step(tile_a, ws_a, bias_a);
        if (tile >= tiles) break;
        step(tile_b, ws_b, bias_b);
    }
}

// Blocks of `threads` threads of the kernel for M that the current device holds at once (cached
// per device, M and threads: the queries cost about as much as a small GEMV).
int64_t resident_blocks(int m, int threads) {
    static std::mutex mutex;
    static std::map<std::tuple<int, int, int>, int64_t> cache;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    const std::tuple<int, int, int> key{device, m, threads};
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int sms = 0, per_sm = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (m == 1) {
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, tern24_gemv_stream_kernel<1>, threads, 0));
    } else {
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, tern24_gemv_stream_kernel<2>, threads, 0));
    }
    const int64_t blocks = int64_t{sms} * std::max(per_sm, 1);
    cache.emplace(key, blocks);
    return blocks;
}

void launch(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
            const ProductOut& out, cudaStream_t stream) {
    Args a{};
    a.mask = w.a;
    a.signs = w.b;
    a.x = x;
    a.n = w.n;
    a.k = static_cast<int>(w.k);
    a.chunks = static_cast<int>(w.k / kChunkCols);
    a.team = static_cast<int>(fmt::ceil_div(int64_t{a.chunks}, int64_t{kWarp})) * kWarp;
    a.slots = std::max(1, kMaxThreads / a.team);
    a.groups = static_cast<int>(fmt::acc_num_groups(w.k, group));
    if (a.groups == 1) {
        a.run_lanes = kWarp;
        a.runs_per_group = a.team / kWarp;
    } else if (group < kChunkCols * kMaxGroupLanes) {
        a.run_lanes = static_cast<int>(group / kChunkCols);
        a.runs_per_group = 1;
    } else {
        a.run_lanes = kWarp;
        a.runs_per_group = static_cast<int>(group / (kChunkCols * kMaxGroupLanes));
    }
    a.prefetch = w.pdl;
    a.out = out;
    const int threads = a.slots * a.team;
    const int64_t tiles = fmt::ceil_div(w.n, int64_t{a.slots} * kRows);
    const dim3 grid(
        static_cast<unsigned>(std::min(tiles, resident_blocks(static_cast<int>(m), threads))));
    if (m == 1) {
        detail::launch_kernel(tern24_gemv_stream_kernel<1>, grid, dim3(threads), 0, stream, true,
                              a);
    } else {
        detail::launch_kernel(tern24_gemv_stream_kernel<2>, grid, dim3(threads), 0, stream, true,
                              a);
    }
}

}  // namespace stream

// ---------------------------------------------------------------------------------------------
// Warp-per-row kernel.

namespace warp {

constexpr int kXChunkBytes = 144;  // a chunk's 128 x bytes plus one 16-byte pad unit

enum class Groups { kOne, k32, k64, kChunks };  // group >= k, 32, 64, a multiple of 128

// The table entry for the 6-bit index in byte b of an E/O word: byte offset index * 128 (one
// entry is 32 lane copies of 4 bytes) into the lane's column of the table.
template <int B>
__device__ __forceinline__ uint32_t lookup(const uint32_t* lane_table, uint32_t eo) {
    const uint32_t off = (B == 0 ? eo << 7 : eo >> (8 * B - 7)) & (0x3Fu << 7);
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(lane_table) + off);
}

// One lane's 128-column chunk c: mask words mk (32 columns each), sign bytes sg (16 bits per mask
// word). Accumulates into acc and, for several scale groups, flushes each group's partial sum into
// the warp's shared accumulators sacc (M, G).
template <int M, Groups kG>
__device__ __forceinline__ void tern24_chunk(const uint4 mk, const uint2 sg, int c,
                                             const uint32_t* lane_table, const unsigned char* xs,
                                             int xstride, uint32_t (&acc)[M], int32_t* sacc, int G,
                                             FastDiv chunks_per_group) {
    const uint32_t mw[4] = {mk.x, mk.y, mk.z, mk.w};
    // Word w's 16 sign bits, one byte per 16-bit half: [lo byte, 0, hi byte, 0].
    const uint32_t sw[4] = {__byte_perm(sg.x, 0, 0x4140), __byte_perm(sg.x, 0, 0x4342),
                            __byte_perm(sg.y, 0, 0x4140), __byte_perm(sg.y, 0, 0x4342)};
    const unsigned char* xc = xs + c * kXChunkBytes;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        // t: byte b holds the sign pairs of groups 2b (bits 0-1) and 2b + 1 (bits 2-3).
        uint32_t t = sw[w];
        t = (t | (t << 4)) & 0x0F0F0F0Fu;
        // e byte b: bitmap of group 2b | its sign pair << 4 (bits 6-7: group 2b + 1's, masked later);
        // o byte b: the same for group 2b + 1.
        const uint32_t e = (mw[w] & 0x0F0F0F0Fu) | ((t << 4) & 0xF0F0F0F0u);
        const uint32_t o = ((mw[w] >> 4) & 0x0F0F0F0Fu) | ((t << 2) & 0xF0F0F0F0u);
        const uint32_t code[8] = {lookup<0>(lane_table, e), lookup<0>(lane_table, o),
                                  lookup<1>(lane_table, e), lookup<1>(lane_table, o),
                                  lookup<2>(lane_table, e), lookup<2>(lane_table, o),
                                  lookup<3>(lane_table, e), lookup<3>(lane_table, o)};
#pragma unroll
        for (int i = 0; i < M; ++i) {
            const auto* xw = reinterpret_cast<const uint4*>(xc + i * xstride + 32 * w);
            const uint4 xa = xw[0], xb = xw[1];
            int a = static_cast<int>(acc[i]);
            a = __dp4a(static_cast<int>(code[0]), static_cast<int>(xa.x), a);
            a = __dp4a(static_cast<int>(code[1]), static_cast<int>(xa.y), a);
            a = __dp4a(static_cast<int>(code[2]), static_cast<int>(xa.z), a);
            a = __dp4a(static_cast<int>(code[3]), static_cast<int>(xa.w), a);
            a = __dp4a(static_cast<int>(code[4]), static_cast<int>(xb.x), a);
            a = __dp4a(static_cast<int>(code[5]), static_cast<int>(xb.y), a);
            a = __dp4a(static_cast<int>(code[6]), static_cast<int>(xb.z), a);
            a = __dp4a(static_cast<int>(code[7]), static_cast<int>(xb.w), a);
            acc[i] = static_cast<uint32_t>(a);
        }
        // Flush where a scale group ends: after every word (32), every second word (64), or at
        // the chunk's end (multiples of 128, the group index c / (group / 128)).
        bool flush = false;
        int g = 0;
        if constexpr (kG == Groups::k32) flush = true, g = 4 * c + w;
        if constexpr (kG == Groups::k64) flush = (w % 2) == 1, g = 2 * c + w / 2;
        if constexpr (kG == Groups::kChunks)
            flush = w == 3, g = static_cast<int>(chunks_per_group.div(static_cast<uint32_t>(c)));
        if (flush) {
#pragma unroll
            for (int i = 0; i < M; ++i) {
                atomicAdd(sacc + i * G + g, static_cast<int>(acc[i]));
                acc[i] = 0;
            }
        }
    }
}

template <int M, Groups kG>
__global__ void __launch_bounds__(kWarp* gemv::kMaxWarps)
    tern24_gemv_warp_kernel(const uint8_t* __restrict__ mask, const uint8_t* __restrict__ signs,
                            const int8_t* __restrict__ x, int64_t n, int k, int G,
                            FastDiv chunks_per_group, ProductOut out) {
    __shared__ uint32_t table[kTableEntries * kWarp];  // entry e for lane l at e * 32 + l
    extern __shared__ __align__(16) unsigned char smem[];
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    const int chunks = k / kChunkCols;
    const int xstride = chunks * kXChunkBytes;  // bytes per token
    unsigned char* xs = smem;
    int32_t* sacc_all = reinterpret_cast<int32_t*>(smem + M * xstride);
    int32_t* sacc = sacc_all + warp * M * G;

    for (int i = static_cast<int>(threadIdx.x); i < kTableEntries * kWarp; i += blockDim.x)
        table[i] = kCodes.w[i / kWarp];
    const int units = k / 16;  // 16-byte units of an x row (x is 16-byte aligned, k % 128 == 0)
    for (int i = static_cast<int>(threadIdx.x); i < M * units; i += blockDim.x) {
        const int t = i / units, u = i % units;
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(x + static_cast<int64_t>(t) * k) + u);
        *reinterpret_cast<uint4*>(xs + t * xstride + (u / 8) * kXChunkBytes + (u % 8) * 16) = v;
    }
    if constexpr (kG != Groups::kOne) {
        for (int i = static_cast<int>(threadIdx.x); i < warps * M * G; i += blockDim.x) sacc_all[i] = 0;
    }
    __syncthreads();

    const uint32_t* lane_table = table + lane;
    const int64_t mask_row = k / 8, signs_row = k / 16;
    for (int64_t j = blockIdx.x * int64_t{warps} + warp; j < n; j += int64_t{gridDim.x} * warps) {
        const auto* mrow = reinterpret_cast<const uint4*>(mask + j * mask_row);
        const auto* srow = reinterpret_cast<const uint2*>(signs + j * signs_row);
        uint32_t acc[M];
#pragma unroll
        for (int i = 0; i < M; ++i) acc[i] = 0;
        // Two chunks per lane in flight before decoding either.
        for (int c = lane; c < chunks; c += 2 * kWarp) {
            const bool two = c + kWarp < chunks;
            const uint4 mk0 = __ldg(mrow + c);
            const uint2 sg0 = __ldg(srow + c);
            uint4 mk1 = make_uint4(0, 0, 0, 0);
            uint2 sg1 = make_uint2(0, 0);
            if (two) {
                mk1 = __ldg(mrow + c + kWarp);
                sg1 = __ldg(srow + c + kWarp);
            }
            tern24_chunk<M, kG>(mk0, sg0, c, lane_table, xs, xstride, acc, sacc, G, chunks_per_group);
            if (two)
                tern24_chunk<M, kG>(mk1, sg1, c + kWarp, lane_table, xs, xstride, acc, sacc, G,
                                    chunks_per_group);
        }
        if constexpr (kG == Groups::kOne) {
#pragma unroll
            for (int i = 0; i < M; ++i) acc[i] = gemv::warp_sum(acc[i]);
            gemv::store_one_group<M>(out, n, j, acc, lane);
        } else {
            gemv::store_groups<M>(out, n, j, G, sacc, lane);
        }
    }
}

// The group mode of an accepted call.
Groups group_mode(int64_t k, int64_t group) {
    if (group >= k) return Groups::kOne;
    if (group == 32) return Groups::k32;
    if (group == 64) return Groups::k64;
    return Groups::kChunks;
}

int64_t smem_bytes(int64_t m, int64_t k, int64_t groups, Groups mode, int warps) {
    const int64_t x = m * (k / kChunkCols) * kXChunkBytes;
    const int64_t sacc = mode == Groups::kOne ? 0 : int64_t{warps} * m * groups * 4;
    return x + sacc;
}

constexpr int64_t kStaticSmem = kTableEntries * kWarp * 4;

template <int M, Groups kG>
void launch(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
            int warps, int64_t smem, cudaStream_t stream) {
    auto kernel = tern24_gemv_warp_kernel<M, kG>;
    const unsigned blocks = gemv::persistent_blocks("tern24_gemv", kernel, warps, smem, w.n);
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const FastDiv cpg(kG == Groups::kChunks ? static_cast<uint32_t>(group / kChunkCols) : 1u);
    detail::launch_kernel(kernel, dim3(blocks), dim3(warps * kWarp), static_cast<size_t>(smem), stream, true,
                          w.a, w.b, x, w.n, static_cast<int>(w.k), static_cast<int>(groups), cpg, out);
}

template <int M>
void launch_m(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
              int warps, int64_t smem, cudaStream_t stream) {
    switch (group_mode(w.k, group)) {
        case Groups::kOne: return launch<M, Groups::kOne>(w, x, group, out, warps, smem, stream);
        case Groups::k32: return launch<M, Groups::k32>(w, x, group, out, warps, smem, stream);
        case Groups::k64: return launch<M, Groups::k64>(w, x, group, out, warps, smem, stream);
        case Groups::kChunks: return launch<M, Groups::kChunks>(w, x, group, out, warps, smem, stream);
    }
}

void run(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
         cudaStream_t stream) {
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const Groups mode = group_mode(w.k, group);
    const int warps = gemv::fit_warps(
        [&](int wp) { return kStaticSmem + smem_bytes(m, w.k, groups, mode, wp); });
    const int64_t smem = smem_bytes(m, w.k, groups, mode, warps);
    switch (m) {
        case 1: return launch_m<1>(w, x, group, out, warps, smem, stream);
        case 2: return launch_m<2>(w, x, group, out, warps, smem, stream);
        case 3: return launch_m<3>(w, x, group, out, warps, smem, stream);
        case 4: return launch_m<4>(w, x, group, out, warps, smem, stream);
        case 5: return launch_m<5>(w, x, group, out, warps, smem, stream);
        case 6: return launch_m<6>(w, x, group, out, warps, smem, stream);
        case 7: return launch_m<7>(w, x, group, out, warps, smem, stream);
        default: return launch_m<8>(w, x, group, out, warps, smem, stream);
    }
}

}  // namespace warp

bool stream_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return tern24_gemv_stream_rejects(w, x, m, group).empty();
}

// check_product, then `rule` (a kernel's own), naming `who`.
void check_call(const char* who, const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, const std::string& rule) {
    check_product(who, w, x, m, group, out);
    TRIT_CHECK(rule.empty(), who, " (", format_name(w.format), ", m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group, "): ", rule);
}

}  // namespace

std::string tern24_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group) {
    if (w.format != Format::kTern24) return "tern24_gemv_stream takes tern24 weights only";
    if (m < 1 || m > kTern24GemvStreamMaxM) return "m must be 1 or 2";
    if (w.k < kChunkCols || w.k % kChunkCols != 0) return "k must be a positive multiple of 128";
    if (w.k > kTern24GemvStreamMaxK) return "k must be <= 16384";
    if (group < 1) return "group must be >= 1";
    const int64_t warp_cols = kChunkCols * stream::kMaxGroupLanes;  // 4096
    if (group < w.k &&
        !(group % kChunkCols == 0 && power_of_two(group / kChunkCols) && group <= warp_cols) &&
        group % warp_cols != 0)
        return "group must be >= k (one scale group), 128 * 2^e <= 4096, or a multiple of 4096";
    if (!aligned(w.a, 16) || !aligned(x, 16)) return "the mask and x must be 16-byte aligned";
    if (!aligned(w.b, 8)) return "the signs must be 8-byte aligned";
    return "";
}

std::string tern24_gemv_warp_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                     int64_t group) {
    if (w.format != Format::kTern24) return "tern24_gemv takes tern24 weights only";
    if (m < 1 || m > kTern24GemvMaxM) return "m must be in 1..8";
    if (w.k < kChunkCols || w.k % kChunkCols != 0) return "k must be a positive multiple of 128";
    if (w.k > (int64_t{1} << 30)) return "k must be at most 2^30";
    if (group < 1) return "group must be >= 1";
    if (!(group >= w.k || group == 32 || group == 64 || group % kChunkCols == 0))
        return "group must be >= k, 32, 64 or a multiple of 128";
    if (!aligned(w.a, 16) || !aligned(x, 16)) return "the mask and x must be 16-byte aligned";
    if (!aligned(w.b, 8)) return "the signs must be 8-byte aligned";
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const warp::Groups mode = warp::group_mode(w.k, group);
    if (gemv::fit_warps([&](int warps) {
            return warp::kStaticSmem + warp::smem_bytes(m, w.k, groups, mode, warps);
        }) == 0)
        return "x (m * k * 9 / 8 bytes) and the group accumulators (m * ceil(k / group) * 4 bytes "
               "per "
               "warp) must fit " +
               std::to_string(gemv::kSmemBudget) + " bytes of shared memory";
    return "";
}

std::string tern24_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (stream_takes(w, x, m, group)) return "";
    return tern24_gemv_warp_rejects(w, x, m, group);
}

const char* tern24_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (stream_takes(w, x, m, group)) return "stream";
    return tern24_gemv_warp_rejects(w, x, m, group).empty() ? "warp" : "";
}

void tern24_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const ProductOut& out, cudaStream_t stream) {
    if (stream_takes(w, x, m, group)) {
        check_call("tern24_gemv", w, x, m, group, out, "");
        return stream::launch(w, x, m, group, out, stream);
    }
    check_call("tern24_gemv", w, x, m, group, out, tern24_gemv_warp_rejects(w, x, m, group));
    warp::run(w, x, m, group, out, stream);
}

void tern24_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream) {
    check_call("tern24_gemv_stream", w, x, m, group, out,
               tern24_gemv_stream_rejects(w, x, m, group));
    stream::launch(w, x, m, group, out, stream);
}

void tern24_gemv_warp(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                      const ProductOut& out, cudaStream_t stream) {
    check_call("tern24_gemv_warp", w, x, m, group, out, tern24_gemv_warp_rejects(w, x, m, group));
    warp::run(w, x, m, group, out, stream);
}

}  // namespace trit::kernels
