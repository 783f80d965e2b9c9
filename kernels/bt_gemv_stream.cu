// The bt streaming GEMV, m <= 2 and d <= 2 (bt_gemv_stream, kernels/bt_gemv.h), the decode-step
// GEMV; bt_gemv.cu holds the warp-per-row kernel and the dispatch.
//
// Layout. Rows are cut into 16-byte chunks at 16-aligned addresses: with o = (row start) mod 16,
// chunk c of a row is its bytes [16 c - o, 16 c - o + 16), c < C = ceil((row_bytes + 15) / 16).
// Thread t of a block is row slot t / C and chunk t % C (row_slots * C threads rounded up to
// warps, plus one warp when split, at most 512). Rows start at any byte, but o repeats with period
// P = 16 / gcd(row_bytes, 16) in the row index, so block b takes only the rows j = b mod P + P i
// (its class, one o): a thread's chunk covers the same columns in every row it decodes, and its
// slice of x lives in registers for the whole kernel. The grid is P times the blocks per class, no
// more than fit on the GPU at once; a block walks tiles of R = row_slots * 4 (m = 2: * 2)
// consecutive rows of its class (tile = b / P, += grid / P), and each thread issues its rows of
// the next tile (ld.global.nc.L1::no_allocate.v4) before it decodes the current ones. With
// PackedWeights::pdl the first tile's loads and the table build go out before pdl_wait(); x, the
// scales and biases are read after it. Chunk bytes that are not whole-quintet bytes of the row
// (the previous row's, the tail, the next row's) meet x = 0; only bytes of the array are read (its
// first and last chunks byte by byte when it does not start or end on 16 bytes).
//
// Decode. Byte i of a chunk is plane (16 c - o + i) mod d of quintet floor((16 c - o + i) / d),
// fixed per thread once o is (d = 2: two code paths, o even or odd). A 64 KB shared table holds,
// for every byte value b and plane p, the byte's five trits times 3^p: trits 0..3 as signed bytes
// (a dp4a operand), trit 4 as an int32, replicated so that a warp's 8-byte reads take the minimum
// two passes (d = 2: 16 copies per plane at b * 256 + p * 128 + (lane % 16) * 8; d = 1: 32 copies
// at b * 256 + lane * 8). One byte permute forms that address from the weight word and a per-lane
// constant. Per byte and token: one dp4a with x's columns 0..3 of the byte's quintet and one
// multiply-add with its column 4; the 3^p weight is in the table, so planes are never combined
// and no digit offsets need correcting: 4 instructions per byte, 0.8 per weight at d = 2.
//
// Scale groups. group >= k: one sum per thread and row. Otherwise group >= the columns a chunk
// touches (45 at d = 2, 80 at d = 1; the row tail's columns are among them for the thread that
// holds tail bytes), so a thread meets at most two groups A and B, the same in every row: its x
// slice is kept twice, zero outside A and outside B (one more dp4a per byte), and column 4 is
// packed as x_A + 65536 x_B, so one multiply-add sums both groups in 16-bit halves (|sum| < 2^15
// over 9 quintets). Groups may end inside a quintet (group 64).
//
// Sums. Each thread stores its sums of each row (A, B per token) in a shared array of tile T mod
// 2, so one barrier per tile and no atomics. After it: one group, a warp per (row, token) adds the
// row's C sums and writes acc or y; split, the block's threads take (row, token, group) triples:
// group g adds the A sums of chunks [first(g), first(g + 1)) and the B sums of [first(g - 1),
// first(g)) (first(g): the first chunk whose group A is >= g, a table built per block), then
// writes acc, or w_scale * float(acc) to a products array; the block's last warp, which decodes
// nothing, adds each (row, token)'s products in group order one lane each after the next barrier,
// and scales and adds the bias (epilogue.cuh's arithmetic, step for step). Per-row scales and
// biases reach shared memory by cp.async a tile ahead. The row tail (k % 5 columns) is decoded by
// the threads whose chunks hold its bytes (read again as bytes a tile ahead), with the spec's trit
// order, and added to their own sums.
#include "kernels/bt_gemv.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.h"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using gemv::kWarp;

// ---------------------------------------------------------------------------------------------
// stream: m <= 2, d <= 2 (the header comment above describes it).
namespace stream {

constexpr int kChunk = 16;        // bytes of a row per thread: one 16-byte load
constexpr int kMaxThreads = 512;  // threads of a block: row slots x chunks, rounded to warps
constexpr int kMaxM = 2;
constexpr int kMaxDepth = 2;
constexpr int kPeriod = 16;  // row starts repeat mod 16 every 16 / gcd(row bytes, 16) rows
constexpr int kTableBytes = 256 * 256;  // entry (b, plane p, copy c) at b * 256 + p * 128 + c * 8
// Longest rows: one chunk per thread, a warp fewer when split (the chains' warp).
constexpr int64_t kMaxRowBytes = int64_t{kMaxThreads} * kChunk - (kChunk - 1);               // 8177
constexpr int64_t kMaxRowBytesSplit = int64_t{kMaxThreads - kWarp} * kChunk - (kChunk - 1);  // 7665

// Rows of a tile per thread, loaded a whole tile ahead: 4 for one token, 2 for two (registers).
__host__ __device__ constexpr int rows_per_thread(int64_t m) {
    return m == 1 ? 4 : 2;
}

// Quintet slots of a thread's 16 bytes (d = 2: 8 whole quintets, or 7 and two halves) and the
// columns they span: a scale group at least this long ends at most once inside them.
__host__ __device__ constexpr int slots(int d) {
    return d == 1 ? kChunk : kChunk / 2 + 1;
}
__host__ __device__ constexpr int window_cols(int d) {
    return fmt::kBtQuintet * slots(d);
}

// Table entry of plane byte b for a plane weighted `scale` (3^p): its trits 0..3 times scale as
// signed bytes (one dp4a operand), and trit 4 times scale. Bytes 243..255 never meet a non-zero x.
__device__ __forceinline__ uint2 table_entry(int b, int scale) {
    uint32_t lo = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int v = scale * fmt::bt_trit(static_cast<uint8_t>(b), j);
        lo |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(v))) << (8 * j);
    }
    return make_uint2(lo, static_cast<uint32_t>(scale * fmt::bt_trit(static_cast<uint8_t>(b), 4)));
}

// The table, 4096 16-byte stores (two copies each): d = 2 keeps 16 copies per plane (a half-warp's
// 8-byte reads never share a bank), d = 1 32 copies of plane 0.
template <int D>
__device__ void build_table(unsigned char* table, int t, int threads) {
    for (int v = t; v < kTableBytes / 16; v += threads) {
        const int b = v >> 4, p = D == 2 ? (v >> 3) & 1 : 0;
        const uint2 e = table_entry(b, p == 0 ? 1 : 3);
        reinterpret_cast<uint4*>(table)[v] = make_uint4(e.x, e.y, e.x, e.y);
    }
}

// 16 bytes at the 16-aligned address p, read once: no L1 allocation.
__device__ __forceinline__ uint4 load_chunk(uintptr_t p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// The same with the bytes outside [begin, end) read as 0, byte by byte: only the first and last
// chunk of an array that does not start or end on 16 bytes. A rolled loop keeps the code small.
__device__ __forceinline__ uint4 load_chunk_edge(uintptr_t p, uintptr_t begin, uintptr_t end) {
    uint64_t lo = 0, hi = 0;
#pragma unroll 1
    for (int i = 0; i < kChunk; ++i) {
        if (p + i < begin || p + i >= end) continue;
        const uint64_t b = *reinterpret_cast<const uint8_t*>(p + i);
        if (i < 8) {
            lo |= b << (8 * i);
        } else {
            hi |= b << (8 * (i - 8));
        }
    }
    return make_uint4(static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                      static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32));
}

using detail::cp_async4;
using detail::cp_async_commit;
using detail::cp_async_wait_all;

// A thread's x, per token and quintet slot s: a holds columns 0..3 (of group A when split, else
// all), b the same columns of group B, c4 column 4 (split: A + 65536 B). Zero outside the row.
template <int D, int M, bool kSplit>
struct XSlice {
    uint32_t a[M][slots(D)];
    uint32_t b[M][kSplit ? slots(D) : 1];
    uint32_t c4[M][slots(D)];
};

// sa (and sb) += the chunk's dot product with x: byte i of the chunk is plane (i + E) % D of
// quintet slot (i + E) / D. One table read per byte gives its trits already weighted by 3^plane,
// so the planes need no combining: per byte and token a dp4a (columns 0..3; split: one per group)
// and a multiply-add (column 4; split: both groups at once, 16 bits each).
template <int D, int M, bool kSplit, int E>
__device__ __forceinline__ void dot_chunk(const uint4& w, const unsigned char* table, uint32_t lb0,
                                          uint32_t lb1, const XSlice<D, M, kSplit>& xs,
                                          int32_t (&sa)[M], int32_t (&sb)[M]) {
    const uint32_t word[4] = {w.x, w.y, w.z, w.w};
    int32_t acc_a[M], acc_b[M];
    uint32_t acc_4[M];
#pragma unroll
    for (int t = 0; t < M; ++t)
        acc_a[t] = acc_b[t] = 0, acc_4[t] = 0;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
        const int plane = (i + E) % D, s = (i + E) / D;
        // Byte offset b * 256 + this lane's copy of the plane's entry, in one byte permute.
        const uint32_t addr =
            __byte_perm(word[i / 4], plane == 0 ? lb0 : lb1, 0x6604 | ((i % 4) << 4));
        const uint2 e = *reinterpret_cast<const uint2*>(table + addr);
#pragma unroll
        for (int t = 0; t < M; ++t) {
            acc_a[t] = __dp4a(static_cast<int>(e.x), static_cast<int>(xs.a[t][s]), acc_a[t]);
            if constexpr (kSplit)
                acc_b[t] = __dp4a(static_cast<int>(e.x), static_cast<int>(xs.b[t][s]), acc_b[t]);
            acc_4[t] += e.y * xs.c4[t][s];
        }
    }
#pragma unroll
    for (int t = 0; t < M; ++t) {
        if constexpr (kSplit) {
            // acc_4 = A4 + 65536 B4 with |A4|, |B4| < 2^15 (at most 9 quintets * 4 * 128).
            const int32_t lo = static_cast<int16_t>(acc_4[t] & 0xffffu);
            sa[t] = acc_a[t] + lo;
            sb[t] = acc_b[t] + (static_cast<int32_t>(acc_4[t] - static_cast<uint32_t>(lo)) >> 16);
        } else {
            sa[t] = acc_a[t] + static_cast<int32_t>(acc_4[t]);
        }
    }
}

struct Args {
    const uint8_t* w;  // packed rows, n * row_bytes bytes from w
    const int8_t* x;   // (m, k)
    int64_t n;
    int k, quintets, row_bytes, group, groups;
    int period;          // rows between two rows that start at the same address mod 16
    int chunks;          // C = ceil((row_bytes + 15) / 16): threads per row slot
    int row_slots;       // rows a block decodes side by side
    FastDiv groups_div;  // e -> e / groups
    FastDiv group_div;   // column -> scale group
    bool prefetch;       // load the first tile's weights before pdl_wait()
    ProductOut out;
};

// Shared memory after the table, each part 16-byte aligned: the threads' partial sums (2 tiles,
// rows, chunks, A and B when split, tokens), each group's first chunk (split), the staged weight
// scales (2 tiles, rows, groups; per tensor only the first row) and biases (2 tiles, rows), the
// products w_scale * acc and the biases of the (row, token) outputs (split: 2 tiles, rows * tokens,
// groups), and x scales (tokens).
struct Smem {
    int64_t part, starts, scales, bias, products, out_bias, xs, total;
};
__host__ __device__ constexpr int64_t round16(int64_t b) {
    return (b + 15) / 16 * 16;
}
__host__ __device__ constexpr Smem smem_layout(int64_t rows, int64_t chunks, int64_t m, bool split,
                                               int64_t groups) {
    Smem s{};
    s.part = kTableBytes;
    s.starts = s.part + round16(2 * rows * chunks * (split ? 2 : 1) * m * 4);
    s.scales = s.starts + round16(split ? (groups + 1) * 4 : 0);
    s.bias = s.scales + round16(2 * rows * groups * 4);
    s.products = s.bias + round16(2 * rows * 4);
    s.out_bias = s.products + round16(split ? 2 * rows * m * groups * 4 : 0);
    s.xs = s.out_bias + round16(split ? 2 * rows * m * 4 : 0);
    s.total = s.xs + 16;
    return s;
}

// Group A of chunk c (columns from quintet floor((16 c - o) / D) on): the group of its first
// column in the row, at most the last group. Non-decreasing in c.
template <int D>
__device__ __forceinline__ int chunk_group(int c, int o, const FastDiv& group_div, int groups) {
    const int start = kChunk * c - o;
    const int q0 = start >= 0 ? start / D : -((D - 1 - start) / D);
    return min(static_cast<int>(group_div.div(static_cast<uint32_t>(max(fmt::kBtQuintet * q0, 0)))),
               groups - 1);
}

template <int D, int M, bool kSplit>
__global__ void __launch_bounds__(kMaxThreads, 1) bt_gemv_stream_kernel(const Args a) {
    constexpr int NQ = slots(D);
    constexpr int RS = rows_per_thread(M);
    constexpr int NS = kSplit ? 2 : 1;  // sums per thread, row and token: groups A (and B)
    extern __shared__ __align__(16) unsigned char smem[];
    const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
    const int lane = t % kWarp, warp = t / kWarp, warps = threads / kWarp;
    const int P = a.period, cls = static_cast<int>(blockIdx.x % static_cast<unsigned>(P));
    const int64_t sub = blockIdx.x / static_cast<unsigned>(P),
                  subs = gridDim.x / static_cast<unsigned>(P);
    const int64_t class_rows = cls < a.n ? (a.n - 1 - cls) / P + 1 : 0;  // its rows: j = cls + P i
    const int RT = a.row_slots * RS;                                     // rows per tile
    const int64_t tiles = (class_rows + RT - 1) / RT;
    detail::pdl_launch_dependents();
    if (sub >= tiles) return;

    // This thread: row slot `slot` (rows tile * RT + s * row_slots + slot, s < RS) and chunk c,
    // the bytes [start, start + 16) of each of those rows, start = 16 c - o.
    const int rb = a.row_bytes, Q = a.quintets, k = a.k, C = a.chunks;
    const auto base = reinterpret_cast<uintptr_t>(a.w);
    const uintptr_t end = base + static_cast<uint64_t>(a.n) * rb;
    const int o = static_cast<int>((base + static_cast<uint64_t>(cls) * rb) % kChunk);
    const int slot = t / C, c = t % C;
    const bool live = slot < a.row_slots;
    const int start = kChunk * c - o;
    const bool loads = live && start < rb;
    const int64_t row_step = int64_t{P} * rb;  // bytes from row i to i + 1 of the class
    const int64_t slot_step = int64_t{a.row_slots} * row_step;  // from row slot s to s + 1
    const uintptr_t chunk0 = base + static_cast<uint64_t>(cls) * rb + start;
    // The row tail (k % 5 columns, weight-major trits in bytes D Q .. rb - 1): the threads whose
    // chunks hold tail bytes read them again as bytes and decode them after the tile's rows.
    const int tail_lo = max(D * Q, start),
              tail_n = live ? max(0, min(rb, start + kChunk) - tail_lo) : 0;

    uint4 next[RS];
    uint64_t tail_next = 0;  // tail byte u of row slot s at bits 8 (2 s + u)
    // The next tile to load: its row for s = 0 starts (chunk c) at p_tile; rows_left of the
    // class's rows are at or after that row.
    uintptr_t p_tile = chunk0 + static_cast<uint64_t>((sub * RT + slot) * row_step);
    int64_t rows_left = class_rows - (sub * RT + slot);
    const uint64_t tile_step = static_cast<uint64_t>(subs * RT * row_step);
    auto issue = [&]() {
        const int here = static_cast<int>(
            min(rows_left, int64_t{RT}));  // row slot s exists if s * row_slots < here
        const bool on = loads && here > 0;
        // Every chunk of the tile inside the array: plain loads (all but at the array's ends).
        const bool inside =
            p_tile >= base && p_tile + static_cast<uint64_t>((RS - 1) * slot_step) + kChunk <= end;
#pragma unroll
        for (int s = 0; s < RS; ++s) {
            const uintptr_t p = p_tile + static_cast<uint64_t>(s * slot_step);
            next[s] = make_uint4(0, 0, 0, 0);
            if (on && s * a.row_slots < here)
                next[s] = inside ? load_chunk(p) : load_chunk_edge(p, base, end);
        }
        if (tail_n > 0 && here > 0) {
            tail_next = 0;
#pragma unroll 1
            for (int s = 0; s < RS && s * a.row_slots < here; ++s)
                for (int u = 0; u < tail_n; ++u) {
                    const uintptr_t p =
                        p_tile + static_cast<uint64_t>(s * slot_step) + (tail_lo - start) + u;
                    tail_next |= uint64_t{__ldg(reinterpret_cast<const uint8_t*>(p))}
                                 << (8 * (2 * s + u));
                }
        }
        p_tile += tile_step;
        rows_left -= subs * RT;
    };
    int64_t tile = sub;
    if (a.prefetch) issue();
    unsigned char* const table = smem;
    build_table<D>(table, t, threads);
    detail::pdl_wait();
    if (!a.prefetch) issue();

    const ProductOut& out = a.out;
    const int G = a.groups;
    const Smem lay = smem_layout(RT, C, M, kSplit, G);
    auto* part = reinterpret_cast<int32_t*>(smem + lay.part);    // [2][RT][C][NS][M]
    auto* starts = reinterpret_cast<int*>(smem + lay.starts);    // [G + 1]: first chunk of group g
    auto* sws = reinterpret_cast<float*>(smem + lay.scales);     // [2][RT][G]
    auto* sbias = reinterpret_cast<float*>(smem + lay.bias);     // [2][RT]
    auto* prod = reinterpret_cast<float*>(smem + lay.products);  // [2][RT * M][G]
    auto* out_bias = reinterpret_cast<float*>(smem + lay.out_bias);  // [2][RT * M]
    auto* sxs = reinterpret_cast<float*>(smem + lay.xs);             // [M]
    const bool per_channel = out.y != nullptr && out.w_scale_rows != 1;
    if constexpr (kSplit) {  // starts[g] = the first chunk whose group A is >= g
        for (int cc = t; cc <= C; cc += threads) {
            const int g_lo = cc > 0 ? chunk_group<D>(cc - 1, o, a.group_div, G) + 1 : 0;
            const int g_hi = cc < C ? chunk_group<D>(cc, o, a.group_div, G) : G;
            for (int g = g_lo; g <= g_hi; ++g)
                starts[g] = cc;
        }
    }
    if (out.y != nullptr) {
        if (!per_channel)
            for (int g = t; g < G; g += threads)
                sws[g] = out.w_scale[g];
        if (t < M) sxs[t] = out.x_scale[out.x_scale_rows == 1 ? 0 : t];
    }
    // Scales and biases of a tile's rows into buffer `buf`, asked for a tile ahead (cp.async): the
    // epilogue must not wait on DRAM.
    auto prefetch_epilogue = [&](int64_t tl, int buf) {
        if (out.y == nullptr || tl >= tiles) return;
        if (per_channel) {
            for (int e = t; e < RT * G; e += threads) {
                const int r = static_cast<int>(a.groups_div.div(static_cast<uint32_t>(e))),
                          g = e - r * G;
                const int64_t i = tl * RT + r;
                if (i < class_rows)
                    cp_async4(sws + (buf * RT + r) * G + g, out.w_scale + (cls + P * i) * G + g);
            }
        }
        if (out.bias != nullptr && t < RT && tl * RT + t < class_rows)
            cp_async4(sbias + buf * RT + t, out.bias + cls + P * (tl * RT + t));
        cp_async_commit();
    };
    prefetch_epilogue(tile, 0);

    // After tile tl's barrier, its sums. One group: a warp per (row, token) adds the chunks' sums
    // and writes acc, or y (epilogue_add, then epilogue_finish's arithmetic). Split: the block's
    // threads take (row, token, group) triples: group g's sum is the A sums of the chunks
    // [starts[g], starts[g + 1]) and the B sums of [starts[g - 1], starts[g]); they write acc, or
    // the products w_scale * float(acc), added in group order by chains() a tile later.
    auto sums = [&](int64_t tl, int par) {
        if constexpr (!kSplit) {
            for (int job = warp; job < RT * M; job += warps) {
                const int r = job / M, tok = job % M;
                const int64_t i = tl * RT + r;
                if (i >= class_rows) continue;
                const int64_t j = cls + P * i;
                const int32_t* pr = part + (par * RT + r) * C * M + tok;
                uint32_t sum = 0;
                for (int cc = lane; cc < C; cc += kWarp)
                    sum += static_cast<uint32_t>(pr[cc * M]);
                sum = __reduce_add_sync(0xffffffffu, sum);
                if (lane != 0) continue;
                const auto acc = static_cast<int32_t>(sum);
                if (out.acc != nullptr) {
                    out.acc[tok * a.n + j] = acc;
                } else {
                    const float s =
                        detail::epilogue_add(0.0f, per_channel ? sws[par * RT + r] : sws[0], acc);
                    const float b = out.bias != nullptr ? sbias[par * RT + r] : 0.0f;
                    out.y[tok * a.n + j] = __fadd_rn(__fmul_rn(s, sxs[tok]), b);
                }
            }
        } else {
            for (int e = t; e < RT * M * G; e += threads) {
                const int job = static_cast<int>(a.groups_div.div(static_cast<uint32_t>(e))),
                          g = e - job * G;
                const int r = job / M, tok = job % M;
                const int64_t i = tl * RT + r;
                if (i >= class_rows) continue;
                const int32_t* pr = part + (par * RT + r) * C * 2 * M +
                                    tok;  // chunk c: A at 2 c M, B at (2 c + 1) M
                const int c_lo = g > 0 ? starts[g - 1] : 0, c_mid = starts[g], c_hi = starts[g + 1];
                uint32_t sum = 0;
                for (int cc = c_lo; cc < c_mid; ++cc)
                    sum += static_cast<uint32_t>(pr[(2 * cc + 1) * M]);
                for (int cc = c_mid; cc < c_hi; ++cc)
                    sum += static_cast<uint32_t>(pr[2 * cc * M]);
                const auto acc = static_cast<int32_t>(sum);
                if (out.acc != nullptr) {
                    out.acc[(tok * a.n + cls + P * i) * G + g] = acc;
                    continue;
                }
                const float* ws = per_channel ? sws + (par * RT + r) * G : sws;
                prod[(par * RT * M + job) * G + g] = __fmul_rn(ws[g], __int2float_rn(acc));
                if (g == 0)
                    out_bias[par * RT * M + job] = out.bias != nullptr ? sbias[par * RT + r] : 0.0f;
            }
        }
    };
    // Split, y: the last warp (no chunks of its own) adds tile tl's products in group order, a
    // (row, token) per lane, after the next barrier; then epilogue_finish's arithmetic.
    auto chains = [&](int64_t tl, int par) {
        if constexpr (kSplit) {
            if (out.y == nullptr || warp != warps - 1) return;
            for (int job = lane; job < RT * M; job += kWarp) {
                const int r = job / M, tok = job % M;
                const int64_t i = tl * RT + r;
                if (i >= class_rows) continue;
                const float* pp = prod + (par * RT * M + job) * G;
                float s = 0.0f;
                for (int g = 0; g < G; ++g)
                    s = __fadd_rn(s, pp[g]);
                out.y[tok * a.n + cls + P * i] =
                    __fadd_rn(__fmul_rn(s, sxs[tok]), out_bias[par * RT * M + job]);
            }
        }
    };

    // x of the thread's window, quintets q0 .. q0 + NQ - 1 (q0 = floor(start / D)), split at the
    // first group boundary after its first column: group A = chunk_group, B the next one.
    const int q0 = start >= 0 ? start / D : -((D - 1 - start) / D);
    const int64_t bound = kSplit ? int64_t{chunk_group<D>(c, o, a.group_div, G) + 1} * a.group : k;
    const int tail_trits = fmt::bt_tail_trits(k, D);
    uint32_t x_tail[M] = {};
    if (tail_n > 0) {
#pragma unroll
        for (int tok = 0; tok < M; ++tok)
            for (int jj = 0; jj < fmt::bt_tail_weights(k); ++jj)
                x_tail[tok] |=
                    uint32_t{static_cast<uint8_t>(a.x[tok * k + fmt::kBtQuintet * Q + jj])}
                    << (8 * jj);
    }
    // Lanes' table copies: d = 2, plane p at p * 128 + (lane % 16) * 8; d = 1, lane * 8.
    const uint32_t lb0 = D == 2 ? (lane % 16) * 8 : lane * 8, lb1 = lb0 + 128;
    const bool warp_decodes = warp * kWarp / C < a.row_slots;  // the chains' warp has no chunks

    __syncthreads();  // table, group starts, per-tensor scales

    auto run = [&](auto e_tag) {
        constexpr int E = decltype(e_tag)::value;
        XSlice<D, M, kSplit> xs;
#pragma unroll
        for (int tok = 0; tok < M; ++tok)
#pragma unroll
            for (int s = 0; s < NQ; ++s) {
                const int q = q0 + s;
                uint32_t xa = 0, xb = 0, x4 = 0;
                if (live && q >= 0 && q < Q) {
                    const int8_t* xq = a.x + tok * k + fmt::kBtQuintet * q;
#pragma unroll
                    for (int jj = 0; jj < fmt::kBtQuintet; ++jj) {
                        const int v = xq[jj];
                        const bool in_a = fmt::kBtQuintet * q + jj < bound;
                        if (jj < 4) {
                            const uint32_t byte = uint32_t{static_cast<uint8_t>(v)} << (8 * jj);
                            (in_a ? xa : xb) |= byte;
                        } else {
                            x4 = in_a ? static_cast<uint32_t>(v) : static_cast<uint32_t>(v) << 16;
                        }
                    }
                }
                xs.a[tok][s] = xa;
                if constexpr (kSplit) xs.b[tok][s] = xb;
                xs.c4[tok][s] = x4;
            }

        int64_t last = 0;
        int last_par = 0;
        for (int par = 0; tile < tiles; tile += subs, par ^= 1) {
            uint4 cur[RS];
#pragma unroll
            for (int s = 0; s < RS; ++s)
                cur[s] = next[s];
            const uint64_t tail_cur = tail_next;
            issue();
            // This thread's sums of row r at mine + r * C * NS * M (rows past the class are never
            // read).
            int32_t* const mine = part + (par * RT + slot) * C * NS * M + c * NS * M;
#pragma unroll
            for (int s = 0; s < RS && warp_decodes; ++s) {
                int32_t sa[M], sb[M];
                dot_chunk<D, M, kSplit, E>(cur[s], table, lb0, lb1, xs, sa, sb);
                if (!live) continue;
                int32_t* dst = mine + s * a.row_slots * C * NS * M;
                if constexpr (NS * M == 1) {
                    dst[0] = sa[0];
                } else if constexpr (NS * M == 2) {
                    *reinterpret_cast<int2*>(dst) =
                        kSplit ? make_int2(sa[0], sb[0]) : make_int2(sa[0], sa[M - 1]);
                } else {
                    *reinterpret_cast<int4*>(dst) = make_int4(sa[0], sa[M - 1], sb[0], sb[M - 1]);
                }
            }
            if (tail_n >
                0) {  // tail trit tt: trit tt % D of tail weight tt / D, slot tt % 5 of byte tt / 5
                const int rows_here = static_cast<int>(min(int64_t{RT}, class_rows - tile * RT));
#pragma unroll 1
                for (int s = 0; s < RS && s * a.row_slots + slot < rows_here; ++s) {
                    int32_t* dst = mine + s * a.row_slots * C * NS * M;
#pragma unroll 1
                    for (int u = 0; u < tail_n; ++u) {
                        auto rem = static_cast<uint32_t>(tail_cur >> (8 * (2 * s + u))) & 0xffu;
                        const int tb = tail_lo - D * Q + u;
#pragma unroll 1
                        for (int sl = 0;
                             sl < fmt::kBtQuintet && tb * fmt::kBtQuintet + sl < tail_trits; ++sl) {
                            const int tt = tb * fmt::kBtQuintet + sl, col = tt / D;
                            const int code =
                                (static_cast<int>(rem % 3) - 1) * (tt % D == 0 ? 1 : 3);
                            rem /= 3;
                            const int ab = fmt::kBtQuintet * Q + col < bound ? 0 : 1;
#pragma unroll
                            for (int tok = 0; tok < M; ++tok)
                                dst[ab * M + tok] +=
                                    code * static_cast<int8_t>(x_tail[tok] >> (8 * col));
                        }
                    }
                }
            }
            cp_async_wait_all();
            __syncthreads();
            if (tile != sub) chains(tile - subs, par ^ 1);
            prefetch_epilogue(tile + subs, par ^ 1);
            sums(tile, par);
            last = tile;
            last_par = par;
        }
        __syncthreads();
        chains(last, last_par);
    };
    if constexpr (D == 2) {
        if (start - D * q0 == 1) {  // o odd: byte i is plane (i + 1) % 2
            run(std::integral_constant<int, 1>{});
            return;
        }
    }
    run(std::integral_constant<int, 0>{});
}

// A launch plan: row slots side by side (threads = row_slots * chunks, rounded up to warps) and
// the grid (period * blocks per row class), picked for the fewest idle lanes and the shortest
// block (tiles per block * threads * blocks per SM), with the device's occupancy.
struct Plan {
    int chunks = 0, row_slots = 0, threads = 0, period = 0;
    int64_t groups = 0, smem = 0;
    unsigned grid = 0;
};

int64_t gcd64(int64_t a, int64_t b) {
    while (b != 0) {
        const int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

// The static part of a plan (no device queries), for the rules and the launch.
Plan static_plan(const PackedWeights& w, int64_t m, int64_t group, int row_slots) {
    Plan p;
    const int64_t rb = fmt::bt_row_bytes(w.k, w.depth);
    p.chunks = static_cast<int>((rb + kChunk - 1 + kChunk - 1) / kChunk);
    p.row_slots = row_slots;
    // Split: one more warp, for the epilogue's chains.
    p.threads = (row_slots * p.chunks + kWarp - 1) / kWarp * kWarp + (group < w.k ? kWarp : 0);
    p.period = static_cast<int>(kPeriod / gcd64(rb, kPeriod));
    p.groups = fmt::acc_num_groups(w.k, group);
    p.smem =
        smem_layout(int64_t{row_slots} * rows_per_thread(m), p.chunks, m, group < w.k, p.groups)
            .total;
    return p;
}

// The plan for a shape on the current device, computed once (the device queries cost about as
// much as a small GEMV).
template <int D, int M, bool kSplit>
Plan choose_plan(const PackedWeights& w, int64_t group) {
    auto kernel = bt_gemv_stream_kernel<D, M, kSplit>;
    int dev = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&dev));
    using Key = std::tuple<int, int64_t, int64_t, int64_t>;
    static std::mutex mutex;
    static std::map<Key, Plan> plans;
    const Key key{dev, w.n, w.k, std::min(group, w.k)};
    {
        std::lock_guard<std::mutex> lock(mutex);
        const auto it = plans.find(key);
        if (it != plans.end()) return it->second;
    }
    int sms = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    Plan best;
    int64_t best_cost = 0;
    const Plan one = static_plan(w, M, group, 1);
    const int max_slots = one.chunks >= kWarp ? kMaxThreads / one.chunks : 1;
    for (int rs = 1; rs <= max_slots; ++rs) {
        const Plan p = static_plan(w, M, group, rs);
        if (p.threads > kMaxThreads || p.smem > gemv::kSmemBudget) break;
        const int64_t rows = int64_t{rs} * rows_per_thread(M);
        const int64_t tiles = fmt::ceil_div(fmt::ceil_div(w.n, p.period), rows);
        // Blocks the device holds at once (persistent_blocks: one "row" per warp asked for).
        const int64_t resident =
            gemv::persistent_blocks("bt_gemv_stream", kernel, p.threads / kWarp, p.smem,
                                    std::numeric_limits<int32_t>::max());
        const int64_t per_class = std::max<int64_t>(1, std::min(resident / p.period, tiles));
        const int64_t blocks = per_class * p.period;
        const int64_t per_sm = fmt::ceil_div(blocks, std::max(sms, 1));
        const int64_t cost = fmt::ceil_div(tiles, per_class) * p.threads * per_sm;
        if (best.threads == 0 || cost < best_cost) {
            best = p;
            best.grid = static_cast<unsigned>(blocks);
            best_cost = cost;
        }
    }
    TRIT_CHECK(best.threads > 0, "bt_gemv_stream: no launch plan fits shared memory");
    std::lock_guard<std::mutex> lock(mutex);
    plans[key] = best;
    return best;
}

template <int D, int M, bool kSplit>
void launch(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
            cudaStream_t stream) {
    const Plan best = choose_plan<D, M, kSplit>(w, group);
    Args a{};
    a.w = w.a;
    a.x = x;
    a.n = w.n;
    a.k = static_cast<int>(w.k);
    a.quintets = static_cast<int>(fmt::bt_full_quintets(w.k));
    a.row_bytes = static_cast<int>(fmt::bt_row_bytes(w.k, D));
    a.group = static_cast<int>(std::min(group, w.k));
    a.groups = static_cast<int>(best.groups);
    a.period = best.period;
    a.chunks = best.chunks;
    a.row_slots = best.row_slots;
    a.groups_div = FastDiv(static_cast<uint32_t>(best.groups));
    a.group_div = FastDiv(static_cast<uint32_t>(a.group));
    a.prefetch = w.pdl;
    a.out = out;
    detail::launch_kernel(bt_gemv_stream_kernel<D, M, kSplit>, dim3(best.grid), dim3(best.threads),
                          static_cast<size_t>(best.smem), stream, true, a);
}

template <int D, int M>
void launch_split(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
                  cudaStream_t stream) {
    if (group >= w.k) return launch<D, M, false>(w, x, group, out, stream);
    return launch<D, M, true>(w, x, group, out, stream);
}

std::string rejects(const PackedWeights& w, int64_t m, int64_t group) {
    if (w.format != Format::kBt) return "bt_gemv_stream takes bt weights only";
    if (w.depth < 1 || w.depth > kMaxDepth) return "bt depth must be 1 or 2";
    if (m < 1 || m > kMaxM) return "m must be 1 or 2";
    if (w.k < 1 || fmt::bt_row_bytes(w.k, w.depth) > kMaxRowBytes)
        return "bt_row_bytes(k, d) must be in 1.." + std::to_string(kMaxRowBytes) +
               " (one 16-byte chunk of a row per thread, at most 512 threads)";
    if (group < 1) return "group must be >= 1";
    if (group < w.k && fmt::bt_row_bytes(w.k, w.depth) > kMaxRowBytesSplit)
        return "bt_row_bytes(k, d) must be <= " + std::to_string(kMaxRowBytesSplit) +
               " when group < k (one 16-byte chunk of a row per thread and a warp for the "
               "epilogue, "
               "at most 512 threads)";
    if (group < w.k && group < window_cols(w.depth))
        return "group must be >= k or >= " + std::to_string(window_cols(w.depth)) +
               " (the columns a thread's 16 bytes touch may meet at most two groups)";
    if (group < w.k && w.depth == 1 && m == 2)
        return "group must be >= k for d = 1 and m = 2 (two groups of two tokens' x do not fit "
               "registers)";
    if (w.n > (int64_t{1} << 40)) return "n must be <= 2^40";
    if (static_plan(w, m, group, 1).smem > gemv::kSmemBudget)
        return "the decode table (64 KB), a tile's partial sums (64 * m bytes per 16-byte chunk of "
               "a "
               "row) and scales (about 96 * ceil(k / group) bytes) must fit " +
               std::to_string(gemv::kSmemBudget) + " bytes of shared memory";
    return "";
}

void run(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
         cudaStream_t stream) {
    if (w.depth == 1) {
        if (m == 1) return launch_split<1, 1>(w, x, group, out, stream);
        return launch<1, 2, false>(w, x, group, out, stream);  // split: rejected
    }
    if (m == 1) return launch_split<2, 1>(w, x, group, out, stream);
    return launch_split<2, 2>(w, x, group, out, stream);
}

}  // namespace stream

}  // namespace

std::string bt_gemv_stream_rejects(const PackedWeights& w, const int8_t* /*x*/, int64_t m,
                                   int64_t group) {
    return stream::rejects(w, m, group);
}

void bt_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("bt_gemv_stream", w, x, m, group, out, stream::rejects(w, m, group));
    stream::run(w, x, m, group, out, stream);
}

}  // namespace trit::kernels
