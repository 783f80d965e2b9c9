// The streaming GEMV of kernels/tern24_gemv.h (tern24_gemv_stream, m <= 2; tern24_gemv.cu holds the
// warp-per-row kernel and the dispatch), kernels/tern2_gemv_stream.h (tern2_gemv_stream, m = 1) and
// kernels/bt_nib4.h (bt_nib4_gemv, m = 1): one kernel, gemv_stream_kernel<Codec, M, kOneGroup>,
// whose Codec says how a 128-column chunk is loaded and multiplied. Tern2Codec: 32 code bytes per
// chunk, the prmt decode of kernels/tern2_mma.cuh and dp4a, x permuted to match, no table.
// Nib4Codec: 64 nibble bytes per chunk, masks and dp4a, each 64-column half summed apart (groups of
// 64). Tern24Codec, as follows.
// The two tern24 kernels decode a 4-column group from a 6-bit index, bitmap | sign_pair << 4,
// through a table of its 4 int8 codes (kernels/tern24_table.cuh) replicated once per lane in shared
// memory (lane l's copy in bank l: lookups never conflict), then multiply with one dp4a per group
// and token.
//
// Streaming kernel. Layout: a row is C = k / 128 chunks of 128 columns (tern24: 16 mask + 8 sign
// bytes; tern2: 32 code bytes).
// A team of 32 * ceil(C / 32) threads covers a row: thread c of a team owns chunk c of every row,
// so its 128 bytes of x per token stay in registers for the whole kernel (threads c >= C hold
// zeros and load nothing). A block holds S = 256 / team teams (S = 8, 4, 2, 2 for teams of 1..4
// warps; blocks of 256 or 192 threads) and walks tiles of S * 2 consecutive rows, tile =
// blockIdx.x, + gridDim.x, ..., team s taking rows 2s and 2s + 1 of a tile; the grid is as many
// blocks as the GPU holds at once (occupancy x SMs, two blocks an SM at <= 128 registers).
// Loads: ld.global.nc.L1::no_allocate per row, 16 + 8 bytes (tern24) or 2 x 16 (tern2). Two tiles
// are in flight per thread (96 or 128 bytes): register sets A and B hold a block's even and odd
// tiles, and right after a row of the current tile is decoded its registers receive the same row of
// the tile two ahead, so the ring needs no register copies.
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
// one barrier per tile). With one scale group and a team of one warp (k <= 4096) the REDUX leaves
// each row's whole sum in every lane: the warp finishes its own outputs, with no partials and no
// barrier, so a warp that waits on its loads holds no other (tern2, 128256 x 4096 on the H200:
// 39.8 -> 39.0-39.2 us; tern24 35.1 -> 33.7-33.8 us; docs/BENCHMARKS.md, session 36). It keeps
// the sums of 32 / 2M tiles, one a lane, and finishes them together, each lane one output: the
// epilogue's instructions and its scale and bias loads are issued once for 32 outputs, not once a
// tile for 2M lanes (session 37).
// With one scale group the first S * 2 * m threads each finish one (row, token): they add the runs,
// then run the fused epilogue's arithmetic (kernels/epilogue.cuh: groups in increasing order from
// +0.0f, no FMA). With several, the epilogue takes two steps a tile apart (group_terms, group_sums
// below): the warps form the terms w_scale[g] * float(sum), one warp adds them in order. Their
// row's weight scale and bias are requested into registers with the tile's weights, two tiles ahead
// (the rows of several groups' scales are prefetched into L1): a miss there would hold the whole
// block at the next barrier. Launch: with PackedWeights::pdl the first two tiles' weights, scales
// and bias are requested before pdl_wait() (none of them is written by the kernel before,
// kernels/pdl.cuh); x and x_scale, which it may write, after it. The code table is filled before
// pdl_wait() too. The blocks let the next kernel start before pdl_wait(), or (tern24 at m = 1) once
// x is loaded.
//
#include "kernels/tern24_gemv.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "exporters/formats/tern24.h"
#include "kernels/bt_nib4.h"
#include "kernels/fast_div.h"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern24_decode.cuh"
#include "kernels/tern24_table.cuh"
#include "kernels/tern2_gemv_stream.h"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using gemv::dp4a_us;
using gemv::kWarp;
using tern24dev::CodeTable;
using tern24dev::index_words;
using tern24dev::kChunkCols;
using tern24dev::kTableEntries;
using tern24dev::load_signs;
using tern24dev::lookup;
using tern24dev::make_code_table;
using tern24dev::sign_words;
using tern24dev::SignWords;

// Threads read it while filling the shared tables.
__constant__ CodeTable kCodes = make_code_table();

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

static_assert(kTern24GemvStreamMaxK == kTern2GemvStreamMaxK, "one kernel, one k limit");

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
// A tile's outputs times its groups: (256 / team) * kRows * M * G with G <= team * 128 / 64 (M = 1,
// groups of 64) or team (M = 2, groups >= 128 columns): 1024, and one pad column per output
// (at most 32).
constexpr int kMaxTerms = 1024 + 32;

// The streaming kernel's rules on k and the scale group (both formats; kTern24GemvStreamMaxK ==
// kTern2GemvStreamMaxK): a thread owns one 128-column chunk of every row, and a scale group is a
// power-of-two run of a warp's lanes or whole warps. nullptr when the shape is in them.
// `halves`: the codec also sums each half chunk apart (Nib4Codec), so groups of 64 columns work.
const char* shape_rule(int64_t k, int64_t group, bool halves = false) {
    if (k < kChunkCols || k % kChunkCols != 0) return "k must be a positive multiple of 128";
    if (k > kTern24GemvStreamMaxK) return "k must be <= 16384";
    if (group < 1) return "group must be >= 1";
    const int64_t warp_cols = kChunkCols * kMaxGroupLanes;  // 4096
    if (halves && group == kChunkCols / 2) return nullptr;
    if (group < k && !(group % kChunkCols == 0 && power_of_two(group / kChunkCols) && group <= warp_cols) &&
        group % warp_cols != 0)
        return halves ? "group must be >= k (one scale group), 64 * 2^e <= 4096, or a multiple of 4096"
                      : "group must be >= k (one scale group), 128 * 2^e <= 4096, or a multiple of 4096";
    return nullptr;
}

// Asks for the 128-byte line at p in L1.
__device__ __forceinline__ void prefetch_l1(const void* p) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
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
        const SignWords sw = sign_words(sr[h2]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int w = 2 * h2 + h;
            uint32_t e, o;
            index_words(mw[w], sw, h, e, o);
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

// How a format's 128-column chunk is loaded and multiplied: the kernel below is the same for both.
// tern24: 16 mask bytes (array a) and 8 sign bytes (array b) per chunk, decoded through the
// shared-memory table, x in natural column order.
struct Tern24Codec {
    static constexpr bool kTable = true;
    static constexpr bool kHalves = false;
    static constexpr int kMaxM = 2;
    static constexpr int kABytes = 16, kBBytes = 8;  // per chunk
    struct Chunk {
        uint4 mask;
        uint2 signs;
    };
    __device__ static Chunk load(const uint8_t* pa, const uint8_t* pb) {
        return {tern2dev::load_weights(pa), load_signs(pb)};
    }
    __device__ static void load_x(const uint4& v, uint32_t* r) { r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w; }
    template <int M>
    __device__ static void x_offsets(const uint32_t (&)[M][32], int (&off)[M][1]) {
        for (int i = 0; i < M; ++i) off[i][0] = 0;
    }
    template <int M>
    __device__ static void dot(const Chunk& c, const uint32_t (&x)[M][32], const uint32_t* table,
                               uint32_t lane4, int (&acc)[M][1]) {
        int s[M];
#pragma unroll
        for (int i = 0; i < M; ++i) s[i] = acc[i][0];
        dot_chunk<M>(c.mask, c.signs, x, table, lane4, s);
#pragma unroll
        for (int i = 0; i < M; ++i) acc[i][0] = s[i];
    }
};

// tern2: 32 code bytes per chunk (array a), decoded as in kernels/tern2_mma.cuh (9 integer
// instructions for 16 weights, 4 dp4a), x permuted to match per 16 columns.
struct Tern2Codec {
    static constexpr bool kTable = false;
    static constexpr bool kHalves = false;
    static constexpr int kMaxM = 1;  // two tokens' x and two tiles of 32-byte chunks spill
    static constexpr int kABytes = 32, kBBytes = 0;
    struct Chunk {
        uint4 lo, hi;
    };
    __device__ static Chunk load(const uint8_t* pa, const uint8_t*) { return {tern2dev::load_weights(pa), tern2dev::load_weights(pa + 16)}; }
    __device__ static void load_x(const uint4& v, uint32_t* r) { tern2dev::permute_x(v, r); }
    template <int M>
    __device__ static void x_offsets(const uint32_t (&)[M][32], int (&off)[M][1]) {
        for (int i = 0; i < M; ++i) off[i][0] = 0;
    }
    template <int M>
    __device__ static void dot(const Chunk& c, const uint32_t (&x)[M][32], const uint32_t*, uint32_t,
                               int (&acc)[M][1]) {
        const uint32_t w[8] = {c.lo.x, c.lo.y, c.lo.z, c.lo.w, c.hi.x, c.hi.y, c.hi.z, c.hi.w};
#pragma unroll
        for (int i = 0; i < M; ++i) {
            int s[2] = {acc[i][0], 0};  // two chains
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                uint32_t d[4];
                tern2dev::decode_word(w[q], d);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    s[q & 1] = __dp4a(static_cast<int>(d[e]), static_cast<int>(x[i][4 * q + e]), s[q & 1]);
            }
            acc[i][0] = s[0] + s[1];
        }
    }
};


// bt nibbles (kernels/bt_nib4.h): 64 bytes per chunk (array a: PackedWeights::dense), word q of
// the chunk = columns 8q .. 8q + 7 as code + 8, low nibbles first; x in natural order. Per word:
// two masks and two dp4a (the high nibbles stay in place, 16 (code + 8), in their own sums,
// shifted right by 4 at the end: exact). The sums start at -8 * the x of their half chunk, so
// they end as the codes' sums. Each half chunk (64 columns) is summed apart: groups of 64.
struct Nib4Codec {
    static constexpr bool kTable = false;
    static constexpr bool kHalves = true;
    static constexpr int kMaxM = 1;  // as tern2: two tokens' x and the 64-byte chunks would spill
    static constexpr int kABytes = 64, kBBytes = 0;
    struct Chunk {
        uint4 q[4];
    };
    __device__ static Chunk load(const uint8_t* pa, const uint8_t*) {
        return {{tern2dev::load_weights(pa), tern2dev::load_weights(pa + 16), tern2dev::load_weights(pa + 32),
                 tern2dev::load_weights(pa + 48)}};
    }
    __device__ static void load_x(const uint4& v, uint32_t* r) { r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w; }
    template <int M>
    __device__ static void x_offsets(const uint32_t (&x)[M][32], int (&off)[M][2]) {
        constexpr uint32_t kMinus8 = 0xF8F8F8F8u;  // -8 in every byte
#pragma unroll
        for (int i = 0; i < M; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int s = 0;
#pragma unroll
                for (int e = 0; e < 16; ++e)
                    s = __dp4a(static_cast<int>(x[i][16 * h + e]), static_cast<int>(kMinus8), s);
                off[i][h] = s;
            }
    }
    template <int M>
    __device__ static void dot(const Chunk& c, const uint32_t (&x)[M][32], const uint32_t*, uint32_t,
                               int (&acc)[M][2]) {
        const uint32_t w[16] = {c.q[0].x, c.q[0].y, c.q[0].z, c.q[0].w, c.q[1].x, c.q[1].y, c.q[1].z, c.q[1].w,
                                c.q[2].x, c.q[2].y, c.q[2].z, c.q[2].w, c.q[3].x, c.q[3].y, c.q[3].z, c.q[3].w};
#pragma unroll
        for (int i = 0; i < M; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int lo = acc[i][h], hi = 0;
#pragma unroll
                for (int q = 8 * h; q < 8 * h + 8; ++q) {
                    lo = dp4a_us(w[q] & 0x0F0F0F0Fu, x[i][2 * q], lo);
                    hi = dp4a_us(w[q] & 0xF0F0F0F0u, x[i][2 * q + 1], hi);
                }
                acc[i][h] = lo + (hi >> 4);
            }
    }
};

struct Args {
    const uint8_t* a;    // tern24: the mask; tern2: the codes
    const uint8_t* b;    // tern24: the signs; tern2: unused
    const int8_t* x;
    int64_t n;
    int k;
    int chunks;          // C = k / 128
    int team;            // threads per row slot: 32 * ceil(C / 32)
    int slots;           // teams per block
    int groups;          // G
    int run_lanes;       // lanes per partial (a power of two dividing 32; 1 with halves)
    int runs_per_group;  // partials that make one scale group's sum
    int runs;            // partials per (row, token): team / run_lanes, or 2 * team with halves
    bool halves;         // groups of 64 (Codec::kHalves): a partial per half chunk
    bool prefetch;       // read the first tile's weights, scales and bias before pdl_wait()
    bool late;           // let the next kernel launch once x is loaded, not before pdl_wait()
    detail::EpilogueOut out;  // the kernels read no fp16 scales
};

// A thread's chunks of one tile: kRows rows.
template <class Codec>
struct Tile {
    typename Codec::Chunk row[kRows];
};

// kOneGroup: a.groups == 1 (one finisher thread per output, its scale in registers); else the
// warps finish a tile's outputs together (finish_groups). Two kernels: each keeps only its
// epilogue's registers. kWarpTeam (one group and a team of one warp, k <= 4096): a row's sum is
// whole in every lane after the warp's REDUX, so each warp finishes its own rows and the tiles
// need no partials and no barrier: the warps stream apart. It finishes them a batch of
// kWarp / (kRows * M) tiles at a time, one output a lane (lane l: output l % (kRows * M) of the
// batch's tile l / (kRows * M)), so the epilogue's instructions, scale and bias loads are issued
// once a batch rather than once a tile for kRows * M lanes.
template <class Codec, int M, bool kOneGroup, bool kWarpTeam = false>
__global__ void __launch_bounds__(kMaxThreads, 2) gemv_stream_kernel(const Args a) {
    static_assert(kOneGroup || !kWarpTeam, "a warp team finishes one scale group");
    using Tile = stream::Tile<Codec>;
    constexpr int H = Codec::kHalves ? 2 : 1;  // sums per chunk and token
    // Entry e of lane l at word e * kTableStride + l; words 32..63 of a row are unused.
    __shared__ __align__(16) uint32_t table[Codec::kTable ? kTableEntries * kTableStride : 1];
    // Partials per (tile parity, (row of the tile) * M + token, run of lanes of the team).
    __shared__ __align__(8) int32_t partial[2][kWarpTeam ? 1 : kRows * M * kMaxThreads * H];
    // Several groups: the group terms of a tile's outputs per tile parity, (tile_rows * M, G)
    // with rows G | 1 apart (<= kMaxTerms).
    __shared__ float terms[2][kOneGroup ? 1 : kMaxTerms];
    const int t = static_cast<int>(threadIdx.x), lane = t % kWarp;
    const int slot = t / a.team, c = t % a.team;
    const bool owns = c < a.chunks;
    const int tile_rows = a.slots * kRows;
    const int64_t grid_rows = int64_t{gridDim.x} * tile_rows;  // rows from one tile to the next
    const int64_t a_row = int64_t{a.chunks} * Codec::kABytes, b_row = int64_t{a.chunks} * Codec::kBBytes;

    // The next tile to request (tiles are requested in order): its first row for this thread's
    // slot and the chunk's addresses there (past the last row once the block is done: never
    // dereferenced then). A thread that owns no chunk never loads: its tiles stay zero.
    int64_t load_row = int64_t{blockIdx.x} * tile_rows + slot * kRows;
    const uint8_t* load_a_p = a.a + load_row * a_row + int64_t{c} * Codec::kABytes;
    const uint8_t* load_b_p = a.b + load_row * b_row + int64_t{c} * Codec::kBBytes;
    // Row r of the next tile into d. Rows past n keep stale data: their sums are never used. A
    // thread that owns no chunk sees no rows.
    const int64_t rows_owned = owns ? a.n : 0;
    auto load_row_r = [&](Tile& d, int r) {
        if (load_row < rows_owned - r)
            d.row[r] = Codec::load(load_a_p + r * a_row, load_b_p + r * b_row);
    };
    auto next_tile = [&] {
        load_row += grid_rows;
        load_a_p += grid_rows * a_row;
        load_b_p += grid_rows * b_row;
    };
    // Thread t < tile_rows * M finishes output (row t / M of the tile, token t % M); its scale and
    // bias are requested with the tile's weights. With a warp team, lane l of slot s finishes
    // output s * kRows * M + l % (kRows * M) of its batch's tile l / (kRows * M), its scale and
    // bias requested a batch ahead.
    constexpr int kTileOuts = kRows * M;
    static_assert(kWarp % kTileOuts == 0, "a batch of warp-team tiles fills the warp's lanes");
    constexpr int kBatch = kWarp / kTileOuts;
    const bool finisher = kWarpTeam || t < tile_rows * M;
    const int e_out = kWarpTeam ? slot * kTileOuts + lane % kTileOuts : t;
    const int batch_tile = lane / kTileOuts;
    const int e_row = e_out / M, e_tok = e_out % M;
    const bool fused = a.out.y != nullptr;
    int64_t scale_row = int64_t{blockIdx.x} * tile_rows + e_row;
    auto load_epilogue = [&](float& ws, float& bias) {
        const int64_t j = scale_row;
        scale_row += grid_rows;
        if (!finisher || !fused || j >= a.n) return;
        const float* w = detail::epilogue_w_scale(a.out, j, a.groups);
        if constexpr (kOneGroup) {
            ws = __ldg(w);
            if (a.out.bias != nullptr) bias = __ldg(a.out.bias + j);
        } else {
            for (int g = 0; g < a.groups; g += 32)
                prefetch_l1(w + g);
            prefetch_l1(w + a.groups - 1);
        }
    };

    const int runs = a.runs;  // partials per (row, token)
    // Scale group g's sum from the partials p of one (row, token): its runs, in order.
    auto group_sum = [&](const int32_t* p, int g) {
        const int begin = g * a.runs_per_group, end = min(begin + a.runs_per_group, runs);
        int32_t sum = 0;
        for (int e = begin; e < end; ++e)
            sum += p[e];
        return sum;
    };
    // The x scales: written by the previous kernel, so read after pdl_wait().
    float sx[M] = {};
    auto sx_of = [&](int tok) { return tok == 0 ? sx[0] : sx[M - 1]; };  // registers, not a local array
    // One group: output (j, e_tok) from its sum.
    auto finish = [&](int32_t sum, int64_t j, float ws, float bias) {
        if (!fused) {
            a.out.acc[e_tok * a.n + j] = sum;
            return;
        }
        // store_output's arithmetic: from +0.0f, then scale and bias.
        const float s = detail::epilogue_add(0.0f, ws, sum);
        a.out.y[e_tok * a.n + j] = __fadd_rn(__fmul_rn(s, sx_of(e_tok)), bias);
    };
    // Several groups, in two steps a tile apart (no barrier of their own). Terms: right after a
    // tile's barrier the warps form its group terms w_scale[g] * float(sum) into shared memory
    // (outputs o = (row o / M, token o % M) spread over the warps, groups over the lanes). Sums:
    // after the next tile's barrier, lane o of the last warp adds output o's terms in increasing
    // g from +0.0f (store_output's arithmetic) while the other warps go on. One thread per output
    // doing it all waited on a scale load per group and held the block at every barrier; a warp
    // per output ran its chain of G dependent adds in every warp.
    const int warp = t / kWarp, warps = static_cast<int>(blockDim.x) / kWarp;
    const int outputs = tile_rows * M;
    const int stride = a.groups | 1;  // odd: the lanes' rows of terms start in distinct banks
    auto group_terms = [&](const int32_t* part_tile, float* tile_terms, int64_t row0) {
        for (int o = warp; o < outputs; o += warps) {
            const int64_t j = row0 + o / M;
            if (j >= a.n) break;  // o only grows: the same for the whole warp
            const int32_t* p = part_tile + o * runs;
            if (!fused) {
                int32_t* dst = a.out.acc + ((o % M) * a.n + j) * a.groups;
                for (int g = lane; g < a.groups; g += kWarp)
                    dst[g] = group_sum(p, g);
                continue;
            }
            const float* w = detail::epilogue_w_scale(a.out, j, a.groups);
            for (int g = lane; g < a.groups; g += kWarp)
                tile_terms[o * stride + g] = __fmul_rn(__ldg(w + g), __int2float_rn(group_sum(p, g)));
        }
    };
    auto group_sums = [&](const float* tile_terms, int64_t row0) {
        const int o = lane;
        const int64_t j = row0 + o / M;
        if (!fused || warp != warps - 1 || o >= outputs || j >= a.n) return;
        const float bias = a.out.bias != nullptr ? __ldg(a.out.bias + j) : 0.0f;
        const float* term = tile_terms + o * stride;
        float s = 0.0f;
        for (int g = 0; g < a.groups; ++g)
            s = __fadd_rn(s, term[g]);
        a.out.y[(o % M) * a.n + j] = __fadd_rn(__fmul_rn(s, sx_of(o % M)), bias);
    };

    // Warp team: the sum of this lane's output in the current batch, whose first tile starts at
    // row batch_row, and that output's scale and bias (requested a batch ahead of their use).
    int32_t own = 0;
    int in_batch = 0;  // tiles of the batch done
    int64_t batch_row = int64_t{blockIdx.x} * tile_rows;
    float ws_w = 0.0f, bias_w = 0.0f;
    // Row j of this lane's output in the batch at batch_row (>= n for tiles past the last).
    auto batch_out_row = [&] { return batch_row + batch_tile * grid_rows + e_row; };
    auto load_batch_epilogue = [&] {
        const int64_t j = batch_out_row();
        if (!fused || j >= a.n) return;
        ws_w = __ldg(detail::epilogue_w_scale(a.out, j, 1));
        if (a.out.bias != nullptr) bias_w = __ldg(a.out.bias + j);
    };

    // Two tiles in flight: A holds the even tiles of the block, B the odd ones.
    Tile tile_a{}, tile_b{};
    float ws_a = 0.0f, bias_a = 0.0f, ws_b = 0.0f, bias_b = 0.0f;
    auto load_first = [&] {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            load_row_r(tile_a, r);
        next_tile();
        if constexpr (!kWarpTeam) load_epilogue(ws_a, bias_a);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            load_row_r(tile_b, r);
        next_tile();
        if constexpr (kWarpTeam) {
            load_batch_epilogue();
        } else {
            load_epilogue(ws_b, bias_b);
        }
    };
    if (a.prefetch) load_first();
    if (!a.late) detail::pdl_launch_dependents();
    // The code table (constant memory and shared memory only: nothing the previous kernel writes).
    for (int q = t; Codec::kTable && q < kTableEntries * (kWarp / 4); q += static_cast<int>(blockDim.x)) {
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
        for (int q = 0; q < 8; ++q)
            Codec::load_x(owns ? __ldg(xp + q) : make_uint4(0, 0, 0, 0), xr[i] + 4 * q);
    }
    if (fused) {
#pragma unroll
        for (int i = 0; i < M; ++i)
            sx[i] = a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : i];
    }
    // What each chunk sum starts from (Nib4Codec: -8 * the half chunk's x; else 0).
    int xoff[M][H];
    Codec::template x_offsets<M>(xr, xoff);
    const uint32_t lane4 = static_cast<uint32_t>(lane) * 4;
    const bool run_head = lane % a.run_lanes == 0;
    // This thread's partial of row r, token i: part_at + (r * M + i) * runs (with halves, that
    // of its first half chunk; the second follows).
    const int part_at = slot * kRows * M * runs + (a.halves ? 2 * c : c / a.run_lanes);
    __syncthreads();  // the table is filled
    if (a.late) detail::pdl_launch_dependents();  // x is in registers

    // The current tile, its first row, and the partials' buffer it writes.
    const int64_t first_row = int64_t{blockIdx.x} * tile_rows;
    int64_t row = first_row;
    int par = 0;
    // acc = row r of `cur` . x; then the row's registers receive the same row of the tile two
    // ahead.
    auto dot_row = [&](Tile& cur, int r, int(&acc)[M][H]) {
#pragma unroll
        for (int i = 0; i < M; ++i)
#pragma unroll
            for (int h = 0; h < H; ++h)
                acc[i][h] = xoff[i][h];
        Codec::template dot<M>(cur.row[r], xr, table, lane4, acc);
        load_row_r(cur, r);
    };
    // Warp team: this lane's output of the batch (none past the last row).
    auto finish_own = [&] {
        const int64_t j = batch_out_row();
        if (j < a.n) finish(own, j, ws_w, bias_w);
    };
    // Warp team: the batch's outputs, one a lane, then the next batch's scales and bias.
    auto finish_batch = [&] {
        finish_own();
        in_batch = 0;
        batch_row += kBatch * grid_rows;
        load_batch_epilogue();
    };
    // Multiplies the tile in `cur`; each row's registers then receive the same row of the tile two
    // ahead (so the two tiles in flight need no register copies), and the scale registers, once
    // the epilogue has used them, that tile's scale and bias.
    auto step = [&](Tile& cur, float& ws, float& bias) {
        if constexpr (kWarpTeam) {
            const int first = in_batch * kTileOuts;  // the lane of this tile's first output
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                int acc[M][H];
                dot_row(cur, r, acc);
#pragma unroll
                for (int i = 0; i < M; ++i) {
                    int s = acc[i][0];
                    if constexpr (H == 2) s += acc[i][1];
                    s = __reduce_add_sync(0xffffffffu, s);
                    if (lane == first + r * M + i) own = s;
                }
            }
            next_tile();
            if (++in_batch == kBatch) finish_batch();
            row += grid_rows;
            return;
        }
        int32_t* part = partial[par];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            int acc[M][H];
            dot_row(cur, r, acc);
#pragma unroll
            for (int i = 0; i < M; ++i) {
                if constexpr (H == 2) {
                    if (a.halves) {  // run_lanes 1: every thread's two sums are partials
                        *reinterpret_cast<int2*>(part + part_at + (r * M + i) * runs) =
                            make_int2(acc[i][0], acc[i][1]);
                        continue;
                    }
                }
                int s = acc[i][0];
                if constexpr (H == 2) s += acc[i][1];
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
        if constexpr (kOneGroup) {
            if (finisher && j < a.n) finish(group_sum(part + t * runs, 0), j, ws, bias);
        } else {
            if (row != first_row) group_sums(terms[par ^ 1], row - grid_rows);  // the previous tile
            group_terms(part, terms[par], row);
        }
        load_epilogue(ws, bias);
        row += grid_rows;
        par ^= 1;
    };
    while (row < a.n) {  // the same for the whole block
        step(tile_a, ws_a, bias_a);
        if (row >= a.n) break;
        step(tile_b, ws_b, bias_b);
    }
    if constexpr (kWarpTeam) {
        if (in_batch > 0) finish_own();  // the last batch, in part
    }
    if constexpr (!kOneGroup) {
        if (row != first_row) {  // the last tile's sums
            __syncthreads();
            group_sums(terms[par ^ 1], row - grid_rows);
        }
    }
}

// Blocks of `threads` threads of `kernel` that the current device holds at once (cached per
// device, kernel and threads: the queries cost about as much as a small GEMV).
int64_t resident_blocks(void (*kernel)(Args), int threads) {
    static std::mutex mutex;
    static std::map<std::tuple<int, uintptr_t, int>, int64_t> cache;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    const std::tuple<int, uintptr_t, int> key{device, reinterpret_cast<uintptr_t>(kernel), threads};
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    int sms = 0, per_sm = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    const int64_t blocks = int64_t{sms} * std::max(per_sm, 1);
    cache.emplace(key, blocks);
    return blocks;
}

// `late`: the blocks let the next PDL-launched kernel start once they have loaded x (Args::late),
// not before their pdl_wait().
template <class Codec>
void launch(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
            const ProductOut& out, cudaStream_t stream, bool late) {
    Args a{};
    a.a = w.a;
    a.b = Codec::kBBytes > 0 ? w.b : w.a;
    a.x = x;
    a.n = w.n;
    a.k = static_cast<int>(w.k);
    a.chunks = static_cast<int>(w.k / kChunkCols);
    a.team = static_cast<int>(fmt::ceil_div(int64_t{a.chunks}, int64_t{kWarp})) * kWarp;
    a.slots = std::max(1, kMaxThreads / a.team);
    a.groups = static_cast<int>(fmt::acc_num_groups(w.k, group));
    a.halves = Codec::kHalves && a.groups > 1 && group == kChunkCols / 2;
    if (a.halves) {
        a.run_lanes = 1;
        a.runs_per_group = 1;
    } else if (a.groups == 1) {
        a.run_lanes = kWarp;
        a.runs_per_group = a.team / kWarp;
    } else if (group < kChunkCols * kMaxGroupLanes) {
        a.run_lanes = static_cast<int>(group / kChunkCols);
        a.runs_per_group = 1;
    } else {
        a.run_lanes = kWarp;
        a.runs_per_group = static_cast<int>(group / (kChunkCols * kMaxGroupLanes));
    }
    a.runs = a.halves ? 2 * a.team : a.team / a.run_lanes;
    TRIT_CHECK(a.groups == 1 || (a.slots * kRows * m <= kWarp && int64_t{a.slots} * kRows * m * (a.groups | 1) <= kMaxTerms),
               "gemv_stream: ", a.slots * kRows * m, " outputs of ", a.groups, " groups exceed the tile's terms");
    a.prefetch = w.pdl;
    a.late = w.pdl && late;
    a.out = detail::epilogue_out(out);
    const int threads = a.slots * a.team;
    const int64_t tiles = fmt::ceil_div(w.n, int64_t{a.slots} * kRows);
    const bool warp_team = a.groups == 1 && a.team == kWarp;
    void (*kernel)(Args) = warp_team ? gemv_stream_kernel<Codec, 1, true, true>
                                     : (a.groups == 1 ? gemv_stream_kernel<Codec, 1, true>
                                                      : gemv_stream_kernel<Codec, 1, false>);
    if constexpr (Codec::kMaxM == 2) {  // the rules keep m <= kMaxM
        if (m == 2)
            kernel = warp_team ? gemv_stream_kernel<Codec, 2, true, true>
                               : (a.groups == 1 ? gemv_stream_kernel<Codec, 2, true>
                                                : gemv_stream_kernel<Codec, 2, false>);
    }
    const dim3 grid(static_cast<unsigned>(std::min(tiles, resident_blocks(kernel, threads))));
    detail::launch_kernel(kernel, grid, dim3(threads), 0, stream, true, a);
}

}  // namespace stream


}  // namespace

std::string tern24_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group) {
    if (w.format != Format::kTern24) return "tern24_gemv_stream takes tern24 weights only";
    if (m < 1 || m > kTern24GemvStreamMaxM) return "m must be 1 or 2";
    if (const char* rule = stream::shape_rule(w.k, group)) return rule;
    if (!aligned(w.a, 16) || !aligned(x, 16)) return "the mask and x must be 16-byte aligned";
    if (!aligned(w.b, 8)) return "the signs must be 8-byte aligned";
    return "";
}

void tern24_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("tern24_gemv_stream", w, x, m, group, out,
               tern24_gemv_stream_rejects(w, x, m, group));
    // The next call launched once x is loaded at m = 1: on the H100 (docs/BENCHMARKS.md, session
    // 31; us, against before the wait) it won on all nine default shapes, 768 x 3072 2.48 vs 2.95,
    // 2560 x 2560 3.49 vs 3.74-3.83, 2560 x 6912 5.08 vs 5.47, 4096 x 4096 5.17 vs 5.42, 14336 x 4096
    // 7.95 vs 8.21; at m = 2 it won on seven but lost on 4096 x 4096, 8.17 vs 7.58.
    stream::launch<stream::Tern24Codec>(w, x, m, group, out, stream, m == 1);
}

std::string tern2_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kTern2) return "tern2_gemv_stream takes tern2 weights only";
    if (m != 1) return "m must be 1";
    if (const char* rule = stream::shape_rule(w.k, group)) return rule;
    if (!aligned(w.a, 16) || !aligned(x, 16)) return "the codes and x must be 16-byte aligned";
    return "";
}

void tern2_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                       const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("tern2_gemv_stream", w, x, m, group, out, tern2_gemv_stream_rejects(w, x, m, group));
    stream::launch<stream::Tern2Codec>(w, x, m, group, out, stream, false);
}

std::string bt_nib4_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kBt || w.depth < 1 || w.depth > kBtNib4MaxDepth)
        return "bt_nib4_gemv takes bt weights of depth 1 or 2 only";
    if (w.dense == nullptr) return "needs the weights' nibbles (PackedWeights::dense, bt_to_nib4)";
    if (m != 1) return "m must be 1";
    if (const char* rule = stream::shape_rule(w.k, group, /*halves=*/true)) return rule;
    if (!aligned(w.dense, 16) || !aligned(x, 16)) return "the nibbles and x must be 16-byte aligned";
    return "";
}

void bt_nib4_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
                  cudaStream_t stream) {
    gemv::check_call("bt_nib4_gemv", w, x, m, group, out, bt_nib4_gemv_rejects(w, x, m, group));
    static_assert(kBtNib4MaxK == kTern24GemvStreamMaxK, "one kernel, one k limit");
    PackedWeights nib = w;  // the kernel reads the nibbles as its array a
    nib.a = w.dense;
    nib.b = nullptr;
    stream::launch<stream::Nib4Codec>(nib, x, m, group, out, stream, false);
}

}  // namespace trit::kernels
