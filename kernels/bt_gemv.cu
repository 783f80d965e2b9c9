// bt GEMV (kernels/bt_gemv.h): the warp-per-row kernel and the dispatch between it and the
// streaming kernel (bt_gemv_stream.cu).
//
// warp (every other call the contract takes: m <= 8, d = 1..4).
// Layout: a persistent grid of blocks of up to 8 warps; a warp takes
// one output row at a time; lane l reads chunks c = l, l + 32, ... of 8 quintets (8 d bytes: d
// 8-byte loads, the next step's prefetched while this one decodes). A bt row starts at any byte
// (k = 4096, d = 2: 1639-byte rows), so chunks are cut at 8-byte-aligned addresses and realigned in
// registers: the row's offset o = address % 8 is warp-uniform, a funnel shift by o % d bytes (with
// the next lane's first word, by shuffle) puts whole quintets in place, and the chunk's first
// quintet is 8 c - o / d. Quintets outside [0, floor(k / 5)) (neighbour rows, the tail) meet x = 0.
//
// x (m, k) is staged once per block in shared memory per quintet slot q + 8: a word of columns
// 5q..5q+3 and a byte of column 5q + 4, slot s stored at s + s / 8 so that the lanes' reads (8
// slots apart) fall in different banks.
//
// Decode, per plane byte b (0..242): trit 4 + 1 = b / 81 = (b * 810) >> 16 (exact below 243), the
// other four trits (+ 1) are the bytes of a table of b mod 81, 81 entries replicated per lane
// (10 KB, conflict-free). The planes combine as sum 3^i (trits + 1) + (128 - L) per byte (no carry:
// at most 168), and XOR 0x80 turns each byte into the signed code, so one dp4a (columns 0..3) and
// one multiply-add (column 4) per token and quintet. About 5 ops + 1 table load per plane byte,
// 2 d + 2 ops per quintet to combine, 2 loads + 2 ops per token and quintet.
//
// Scale groups: one group (group >= k) sums in registers; otherwise group >= 40, so a chunk's 40
// columns touch at most two groups g0, g0 + 1, split at a column that falls in one quintet qb: the
// lane snapshots its sum before quintet qb (a predicated copy per quintet), adds qb's columns in g0
// with one masked dp4a after the loop, and adds both parts to the warp's shared accumulators. A
// boundary inside a quintet is thus split exactly.
#include "kernels/bt_gemv.h"
#include "kernels/bt_nib4.h"

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
#include "kernels/fast_div.h"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using gemv::kWarp;

// ---------------------------------------------------------------------------------------------
// warp: one warp per row (the header comment above describes it).
namespace warp {

constexpr int kChunkQuintets = 8;  // a lane's step: 8 quintets, 40 columns, 8 d bytes
constexpr int kChunkCols = kChunkQuintets * fmt::kBtQuintet;
constexpr int kFrontSlots = 8;   // x slots before quintet 0: a chunk may start at quintet -7
constexpr int kExtraSlots = 24;  // front slots + the last chunk's reach past the last quintet
constexpr int kLoEntries = 81;

// Trits 0..3 (+ 1, one per byte) of any plane byte with this remainder mod 81.
struct LoTable {
    uint32_t w[kLoEntries];
};
constexpr LoTable make_lo_table() {
    LoTable t{};
    for (int r = 0; r < kLoEntries; ++r)
        for (int j = 0; j < 4; ++j)
            t.w[r] |= static_cast<uint32_t>((r / fmt::bt_pow3(j)) % 3) << (8 * j);
    return t;
}
__constant__ LoTable kLo = make_lo_table();

// b / 81 as (b * 810) >> 16: exact for every valid byte, and 3 for 243..255 (bytes of memory past
// an array's end never reach a result, but must index the table in range: b - 81 * 3 <= 12).
constexpr bool div81_exact() {
    for (int b = 0; b < 256; ++b) {
        const int q = (b * 810) >> 16;
        if (b <= fmt::kBtMaxByte ? q != b / 81 : q != 3) return false;
    }
    return true;
}
static_assert(div81_exact());
static_assert(make_lo_table().w[80] == 0x02020202u && make_lo_table().w[1] == 0x00000001u);

// 8 bytes at the 8-aligned address p, with bytes outside [begin, end) read as 0: only the first
// and last rows of an array that does not start or end on 8 bytes take the byte loop.
__device__ __forceinline__ uint2 load8(uintptr_t p, uintptr_t begin, uintptr_t end) {
    if (p >= begin && p + 8 <= end) return __ldg(reinterpret_cast<const uint2*>(p));
    uint32_t v[2] = {0, 0};
#pragma unroll
    for (int b = 0; b < 8; ++b)
        if (p + b >= begin && p + b < end)
            v[b / 4] |= uint32_t{*reinterpret_cast<const uint8_t*>(p + b)} << (8 * (b % 4));
    return make_uint2(v[0], v[1]);
}

// The 2 d words of chunk c (0 past the last chunk but its first word, which chunk c - 1 needs).
template <int D>
__device__ __forceinline__ void fetch(uint32_t (&wd)[2 * D], uintptr_t a0, int c, int chunks,
                                      uintptr_t begin, uintptr_t end) {
#pragma unroll
    for (int i = 0; i < D; ++i) {
        uint2 v = make_uint2(0, 0);
        if (c < chunks || (c == chunks && i == 0))
            v = load8(a0 + uintptr_t{8} * (D * static_cast<uint64_t>(c) + i), begin, end);
        wd[2 * i] = v.x;
        wd[2 * i + 1] = v.y;
    }
}

// Bytes of the staged x: per token, xl (words) then xh (bytes), each of `slots` spread slots.
__host__ __device__ constexpr int64_t x_words(int64_t k) {
    const int64_t slots = k / fmt::kBtQuintet + kExtraSlots;
    return slots + slots / 8 + 1;
}
__host__ __device__ constexpr int64_t x_bytes_per_token(int64_t k) {
    return (x_words(k) + 15) / 16 * 16;
}
__host__ __device__ constexpr int64_t x_bytes(int64_t m, int64_t k) {
    return (4 * m * x_words(k) + m * x_bytes_per_token(k) + 15) / 16 * 16;
}

// Slot of quintet q in the x arrays: q + 8, spread by one word every 8.
__device__ __forceinline__ int x_pos(int q) {
    const int s = q + kFrontSlots;
    return s + (s >> 3);
}

template <int M, int D, bool kSplit>
__global__ void __launch_bounds__(kWarp* gemv::kMaxWarps)
    bt_gemv_kernel(const uint8_t* __restrict__ wts, const uint8_t* wts_end,
                   const int8_t* __restrict__ x, int64_t n, int k, int group, int G,
                   FastDiv group_div, ProductOut out) {
    constexpr int kL = fmt::bt_levels(D);
    constexpr uint32_t kBias = static_cast<uint32_t>(128 - kL) * 0x01010101u;
    __shared__ uint32_t table[kLoEntries * kWarp];  // entry r for lane l at r * 32 + l
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    extern __shared__ __align__(16) unsigned char smem[];
    const int lane = static_cast<int>(threadIdx.x) % kWarp,
              warp = static_cast<int>(threadIdx.x) / kWarp;
    const int warps = static_cast<int>(blockDim.x) / kWarp;
    const int Q = k / fmt::kBtQuintet;
    const int slots = Q + kExtraSlots;
    const int sp = static_cast<int>(x_words(k));             // words per token of xl
    const int sph = static_cast<int>(x_bytes_per_token(k));  // bytes per token of xh
    auto* xl = reinterpret_cast<uint32_t*>(smem);
    auto* xh = reinterpret_cast<int8_t*>(smem + 4 * M * sp);
    int32_t* sacc_all = reinterpret_cast<int32_t*>(smem + x_bytes(M, k));
    int32_t* sacc = sacc_all + warp * M * G;

    for (int i = static_cast<int>(threadIdx.x); i < kLoEntries * kWarp; i += blockDim.x)
        table[i] = kLo.w[i / kWarp];
    for (int i = static_cast<int>(threadIdx.x); i < M * slots; i += blockDim.x) {
        const int t = i / slots, q = i % slots - kFrontSlots;
        uint32_t lo = 0;
        int8_t hi = 0;
        if (q >= 0 && q < Q) {
            const int8_t* xq = x + static_cast<int64_t>(t) * k + 5 * q;
            lo = uint32_t{static_cast<uint8_t>(xq[0])} |
                 uint32_t{static_cast<uint8_t>(xq[1])} << 8 |
                 uint32_t{static_cast<uint8_t>(xq[2])} << 16 |
                 uint32_t{static_cast<uint8_t>(xq[3])} << 24;
            hi = xq[4];
        }
        xl[t * sp + x_pos(q)] = lo;
        xh[t * sph + x_pos(q)] = hi;
    }
    if constexpr (kSplit) {
        for (int i = static_cast<int>(threadIdx.x); i < warps * M * G; i += blockDim.x)
            sacc_all[i] = 0;
    }
    __syncthreads();

    const uint32_t* lane_table = table + lane;
    const int64_t row_bytes = fmt::bt_row_bytes(k, D);
    const auto begin = reinterpret_cast<uintptr_t>(wts), end = reinterpret_cast<uintptr_t>(wts_end);
    for (int64_t j = blockIdx.x * int64_t{warps} + warp; j < n; j += int64_t{gridDim.x} * warps) {
        const uint8_t* row = wts + j * row_bytes;
        const uintptr_t a0 = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{7};
        const int o = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 7);
        const int shift = 8 * (o % D), first = o / D;  // chunk c starts at quintet 8 c - first
        const int chunks = (Q + first + kChunkQuintets - 1) / kChunkQuintets;
        uint32_t acc_a[M], acc_b[M];  // the sum; split: its value before the boundary quintet
#pragma unroll
        for (int i = 0; i < M; ++i)
            acc_a[i] = acc_b[i] = 0;

        uint32_t next[2 * D];
        fetch<D>(next, a0, lane, chunks, begin, end);
        for (int c0 = 0; c0 < chunks; c0 += kWarp) {  // warp-uniform: the shuffle needs all lanes
            const int c = c0 + lane;
            uint32_t wd[2 * D + 1];
#pragma unroll
            for (int i = 0; i < 2 * D; ++i)
                wd[i] = next[i];
            fetch<D>(next, a0, c + kWarp, chunks, begin, end);
            uint32_t nx = __shfl_down_sync(0xffffffffu, wd[0], 1);
            if (lane == kWarp - 1 && c < chunks)
                nx = load8(a0 + uintptr_t{8} * D * (static_cast<uint64_t>(c) + 1), begin, end).x;
            wd[2 * D] = nx;
            if (c >= chunks) continue;

            uint32_t v[2 * D];  // the chunk's 8 quintets, plane bytes in order
#pragma unroll
            for (int i = 0; i < 2 * D; ++i)
                v[i] = __funnelshift_r(wd[i], wd[i + 1], shift);
            const int q0 = kChunkQuintets * c - first;
            // Split: the chunk's first group g0 ends `edge` columns after its start 5 q0, inside
            // quintet qb (>= 8: not in this chunk) at position pb. acc_a takes every quintet;
            // acc_b snapshots it before quintet qb, whose columns below pb are added after the
            // loop.
            int g0 = 0, qb = kChunkQuintets, pb = 0, pos_b = 0;
            uint32_t lo_b = 0;
            if constexpr (kSplit) {
                g0 = static_cast<int>(group_div.div(static_cast<uint32_t>(max(0, 5 * q0))));
                const int edge = (g0 + 1) * group - 5 * q0;  // > 0: g0 holds column max(0, 5 q0)
                // A boundary at or past k: the columns beyond it are x = 0, all in g0.
                if (edge < kChunkCols && g0 + 1 < G) qb = edge / 5, pb = edge % 5;
            }
#pragma unroll
            for (int qi = 0; qi < kChunkQuintets; ++qi) {
                uint32_t lo = kBias;
                int hi = -kL;
#pragma unroll
                for (int p = 0; p < D; ++p) {
                    const int bi = qi * D + p;
                    const uint32_t b = __byte_perm(v[bi / 4], 0, 0x4440 | (bi % 4));
                    const uint32_t q4 = (b * 810u) >> 16;
                    const uint32_t r = b - 81u * q4;
                    lo += fmt::bt_pow3(p) * lane_table[r * kWarp];
                    hi += fmt::bt_pow3(p) * static_cast<int>(q4);
                }
                lo ^= 0x80808080u;  // signed codes of columns 5q..5q+3
                const int pos = x_pos(q0 + qi);
                if constexpr (kSplit) {
                    if (qi == qb) {
                        lo_b = lo;
                        pos_b = pos;
#pragma unroll
                        for (int t = 0; t < M; ++t)
                            acc_b[t] = acc_a[t];
                    }
                }
#pragma unroll
                for (int t = 0; t < M; ++t) {
                    const int xw = static_cast<int>(xl[t * sp + pos]);
                    const int x4 = xh[t * sph + pos];
                    acc_a[t] = static_cast<uint32_t>(
                                   __dp4a(static_cast<int>(lo), xw, static_cast<int>(acc_a[t]))) +
                               static_cast<uint32_t>(hi * x4);
                }
            }
            if constexpr (kSplit) {
                // Group g0 gets the quintets before qb and quintet qb's columns below pb (never its
                // column 4); g0 + 1 the rest.
                const uint32_t below = pb == 0 ? 0u : 0xffffffffu >> (32 - 8 * pb);
#pragma unroll
                for (int t = 0; t < M; ++t) {
                    uint32_t in_g0 = acc_a[t];
                    if (qb < kChunkQuintets)
                        in_g0 = static_cast<uint32_t>(__dp4a(static_cast<int>(lo_b & below),
                                                             static_cast<int>(xl[t * sp + pos_b]),
                                                             static_cast<int>(acc_b[t])));
                    atomicAdd(sacc + t * G + g0, static_cast<int>(in_g0));
                    if (qb < kChunkQuintets)
                        atomicAdd(sacc + t * G + g0 + 1, static_cast<int>(acc_a[t] - in_g0));
                    acc_a[t] = 0;
                }
            }
        }
        // The tail's k % 5 weight-major columns: a few per row, lane 0 with the spec helpers.
        const int tail = fmt::bt_tail_weights(k);
        if (lane == 0) {
            for (int jj = 0; jj < tail; ++jj) {
                const int code = fmt::bt_tail_code(row, k, D, jj);
                const int col = 5 * Q + jj;
#pragma unroll
                for (int t = 0; t < M; ++t) {
                    const uint32_t v =
                        static_cast<uint32_t>(code * x[static_cast<int64_t>(t) * k + col]);
                    if constexpr (kSplit) {
                        atomicAdd(sacc + t * G +
                                      static_cast<int>(group_div.div(static_cast<uint32_t>(col))),
                                  static_cast<int>(v));
                    } else {
                        acc_a[t] += v;
                    }
                }
            }
        }
        if constexpr (kSplit) {
            gemv::store_groups<M>(out, n, j, G, sacc, lane);
        } else {
#pragma unroll
            for (int i = 0; i < M; ++i)
                acc_a[i] = gemv::warp_sum(acc_a[i]);
            gemv::store_one_group<M>(out, n, j, acc_a, lane);
        }
    }
}

constexpr int64_t kStaticSmem = kLoEntries * kWarp * 4;

int64_t smem_bytes(int64_t m, int64_t k, int64_t groups, bool split, int warps) {
    return x_bytes(m, k) + (split ? int64_t{warps} * m * groups * 4 : 0);
}

template <int M, int D, bool kSplit>
void launch(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
            int warps, int64_t smem, cudaStream_t stream) {
    auto kernel = bt_gemv_kernel<M, D, kSplit>;
    const unsigned blocks = gemv::persistent_blocks("bt_gemv", kernel, warps, smem, w.n);
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const uint8_t* end = w.a + w.n * fmt::bt_row_bytes(w.k, D);
    detail::launch_kernel(kernel, dim3(blocks), dim3(warps * kWarp), static_cast<size_t>(smem),
                          stream, true, w.a, end, x, w.n, static_cast<int>(w.k),
                          static_cast<int>(kSplit ? group : w.k), static_cast<int>(groups),
                          FastDiv(static_cast<uint32_t>(kSplit ? group : 1)), out);
}

template <int M, int D>
void launch_split(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
                  int warps, int64_t smem, cudaStream_t stream) {
    if (group >= w.k) return launch<M, D, false>(w, x, group, out, warps, smem, stream);
    return launch<M, D, true>(w, x, group, out, warps, smem, stream);
}

template <int M>
void launch_m(const PackedWeights& w, const int8_t* x, int64_t group, const ProductOut& out,
              int warps, int64_t smem, cudaStream_t stream) {
    switch (w.depth) {
        case 1:
            return launch_split<M, 1>(w, x, group, out, warps, smem, stream);
        case 2:
            return launch_split<M, 2>(w, x, group, out, warps, smem, stream);
        case 3:
            return launch_split<M, 3>(w, x, group, out, warps, smem, stream);
        default:
            return launch_split<M, 4>(w, x, group, out, warps, smem, stream);
    }
}

std::string rejects(const PackedWeights& w, int64_t m, int64_t group) {
    if (w.format != Format::kBt) return "bt_gemv takes bt weights only";
    if (w.depth < fmt::kBtMinDepth || w.depth > fmt::kBtMaxDepth) return "bt depth must be in 1..4";
    if (m < 1 || m > gemv::kMaxTokens) return "m must be in 1..8";
    if (w.k < 1 || w.k > (int64_t{1} << 30)) return "k must be in 1..2^30";
    if (group < 1) return "group must be >= 1";
    if (group < w.k && group < kChunkCols)
        return "group must be >= k or >= 40 (a lane's 40 columns may meet at most two groups)";
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const bool split = group < w.k;
    if (gemv::fit_warps(
            [&](int warps) { return kStaticSmem + smem_bytes(m, w.k, groups, split, warps); }) == 0)
        return "x (about m * k * 9 / 8 bytes) and the group accumulators (m * ceil(k / group) * 4 "
               "bytes per warp) must fit " +
               std::to_string(gemv::kSmemBudget) + " bytes of shared memory";
    return "";
}

// Runs the kernel on a call rejects() accepted.
void run(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
         cudaStream_t stream) {
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    const bool split = group < w.k;
    const int warps = gemv::fit_warps(
        [&](int wp) { return kStaticSmem + smem_bytes(m, w.k, groups, split, wp); });
    const int64_t smem = smem_bytes(m, w.k, groups, split, warps);
    switch (m) {
        case 1:
            return launch_m<1>(w, x, group, out, warps, smem, stream);
        case 2:
            return launch_m<2>(w, x, group, out, warps, smem, stream);
        case 3:
            return launch_m<3>(w, x, group, out, warps, smem, stream);
        case 4:
            return launch_m<4>(w, x, group, out, warps, smem, stream);
        case 5:
            return launch_m<5>(w, x, group, out, warps, smem, stream);
        case 6:
            return launch_m<6>(w, x, group, out, warps, smem, stream);
        case 7:
            return launch_m<7>(w, x, group, out, warps, smem, stream);
        default:
            return launch_m<8>(w, x, group, out, warps, smem, stream);
    }
}

}  // namespace warp

}  // namespace

std::string bt_gemv_warp_rejects(const PackedWeights& w, const int8_t* /*x*/, int64_t m,
                                 int64_t group) {
    return warp::rejects(w, m, group);
}

void bt_gemv_warp(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                  const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("bt_gemv_warp", w, x, m, group, out, warp::rejects(w, m, group));
    warp::run(w, x, m, group, out, stream);
}

namespace {

// bt_gemv runs the streaming kernel for m = 1 only: at m = 2 it takes 1.5x its m = 1 time on the
// H100 (bt2, group 64, 14336 x 4096: 61.5 vs 41.2 us), more than the warp kernel, which decodes
// once for both tokens (docs/BENCHMARKS.md).
bool stream_takes(const PackedWeights& w, int64_t m, int64_t group) {
    return m == 1 && bt_gemv_stream_rejects(w, nullptr, m, group).empty();
}

// The one-shot nibble GEMV (bt_nib4_oneshot) runs every m = 1 call its contract takes, the
// streaming nibble GEMV (which takes no call the one-shot kernel does not) only under
// TRIT_ONESHOT=0. On the H100 (session 27, bt2, group 64, us, one-shot against streaming):
// 14336 x 4096 12.29-12.30 vs 18.21-18.28, 4096 x 14336 17.29-17.49 vs 21.10-21.18, 11008 x 4096
// 9.97-10.04 vs 15.34-15.46, 128256 x 4096 (beyond L2) 98.14 vs 115.54; below 6912 x 2560 the
// one-shot kernel ran already (session 26: 768 x 768 1.70 vs 3.19). Session 28 (staged pieces,
// pieces requested ahead): 14336 x 4096 11.15-11.16, 4096 x 14336 13.57-13.62, 11008 x 4096
// 9.63-9.67, 128256 x 4096 98.93.
constexpr int64_t kOneshotMaxWeights = std::numeric_limits<int64_t>::max();

bool oneshot_takes(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return detail::oneshot_runs(w.n * w.k, kOneshotMaxWeights, bt_nib4_oneshot_rejects(w, x, m, group).empty());
}

}  // namespace

const char* bt_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (oneshot_takes(w, x, m, group)) return "oneshot";
    if (bt_nib4_gemv_rejects(w, x, m, group).empty()) return "nib4";
    if (stream_takes(w, m, group)) return "stream";
    return warp::rejects(w, m, group).empty() ? "warp" : "";
}

std::string bt_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (oneshot_takes(w, x, m, group) || bt_nib4_gemv_rejects(w, x, m, group).empty() || stream_takes(w, m, group))
        return "";
    return warp::rejects(w, m, group);
}

// The one-shot kernel quantizes float x itself (every block reduces all k of x) for k <= 4096.
// On the H100 (session 27, bt2, group 64, m = 1, us, fused against the quantizer and then the
// one-shot kernel, TRIT_FUSE=1 / TRIT_FUSE=0): 768 x 768 2.43 vs 3.38, 3072 x 768 2.80 vs 3.64,
// 768 x 3072 4.39 vs 4.88, 1024 x 1024 2.71 vs 3.69, 2560 x 2560 5.10 vs 5.36, 6912 x 2560 6.36 vs
// 6.99, 11008 x 4096 12.16 vs 12.65, 14336 x 4096 14.40 vs 14.80; 4096 x 4096 7.16 vs 6.86 (the
// one shape of k <= 4096 where fusing lost, also in a second run: 7.24-7.29 vs 6.66); above k = 4096
// fusing lost: 2560 x 6912 8.56 vs 8.19, 4096 x 14336 24.91 vs 21.52.
constexpr int64_t kFuseMaxK = 4096;

bool bt_gemv_takes_float_x(const PackedWeights& w, const float* x, int64_t m, int64_t group) {
    const bool takes = bt_nib4_oneshot_rejects(w, reinterpret_cast<const int8_t*>(x), m, group).empty();
    return detail::fuse_runs(w.k <= kFuseMaxK && detail::oneshot_runs(w.n * w.k, kOneshotMaxWeights, takes), takes);
}

// Above 8 tokens, the chunks (3.6-7 us each on layers up to 1024 x 1024, a launch of the warp
// kernel) against the generic kernel (one launch, one thread per output: ~0.5 us per column of k
// while m * n fills the GPU; H200, session 35, docs/BENCHMARKS.md): the chunks were faster at every
// m <= 64 measured (256 x 256 at m = 64: 58 against 128 us) and at every m on 512 x 784 and
// 1024 x 1024 (m = 1024: 1219 against 2704 us, 2028 against 6904); on 256 x 256 and 256 x 512 the
// generic kernel won at m = 1024 (464 against 915 us, 922 against 1014) and on 256 x 256 at m =
// 256.
constexpr int64_t kChunksMaxM = 64, kChunksMinWeights = 262144;

void bt_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream) {
    if (oneshot_takes(w, x, m, group)) return bt_nib4_oneshot(w, x, m, group, out, stream);
    if (bt_nib4_gemv_rejects(w, x, m, group).empty()) return bt_nib4_gemv(w, x, m, group, out, stream);
    if (stream_takes(w, m, group)) {
        check_product("bt_gemv", w, x, m, group, out);
        return bt_gemv_stream(w, x, m, group, out, stream);
    }
    gemv::check_call("bt_gemv", w, x, m, group, out, warp::rejects(w, m, group));
    warp::run(w, x, m, group, out, stream);
}

std::string bt_gemv_chunks_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                   int64_t group) {
    if (m < 1) return "m must be >= 1";
    if (m > kChunksMaxM && w.n * w.k < kChunksMinWeights)
        return "above " + std::to_string(kChunksMaxM) +
               " tokens n * k must be >= " + std::to_string(kChunksMinWeights) +
               " (below it the generic kernel's one launch costs less than a GEMV launch per 8 "
               "tokens)";
    return bt_gemv_rejects(w, x, std::min<int64_t>(m, gemv::kMaxTokens), group);
}

void bt_gemv_chunks(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("bt_gemv_chunks", w, x, m, group, out, bt_gemv_chunks_rejects(w, x, m, group));
    const int64_t groups = fmt::acc_num_groups(w.k, group);
    for (int64_t i0 = 0; i0 < m; i0 += gemv::kMaxTokens) {
        const int64_t mm = std::min<int64_t>(gemv::kMaxTokens, m - i0);
        ProductOut o = out;
        if (o.acc != nullptr) o.acc += i0 * w.n * groups;
        if (o.y != nullptr) o.y += i0 * w.n;
        if (o.x_scale_rows == m) {
            o.x_scale += i0;
            o.x_scale_rows = mm;
        }
        bt_gemv(w, x + i0 * w.k, mm, group, o, stream);
    }
}

}  // namespace trit::kernels
