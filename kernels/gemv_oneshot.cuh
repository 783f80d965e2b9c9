// The one-shot GEMV for one token, over the weights' codec: tern2's 2-bit codes
// (tern2_gemv_oneshot.cu) and bt's 4-bit nibbles (bt_nib4_oneshot.cu). Device code and its host
// launch helper; no LibTorch. The public contracts are in kernels/tern2_gemv_oneshot.h and
// kernels/bt_nib4.h.
//
// Layout. A row is k / 64 units of 64 columns, each made of P 16-byte pieces (tern2: P = 1,
// nibbles: P = 2, a piece of 32 columns). L lanes of a warp form a lane group (tern2: L = 4, 8, 16
// or 32; nibbles: 16 or 32; 32 / L groups a warp), which takes R consecutive rows (tern2: R = 1;
// nibbles: 1 or 2): lane l of the group holds
// the pieces l, l + L, ... of each of its rows, so that one load instruction reads L * 16 bytes in
// a row, and reads the x of each of its pieces once for the R rows. The first V pieces a row go to
// registers; a nibble lane group of two rows with more than 8 pieces a lane and row copies the
// rest (S more, cp.async) to shared memory, so that the 4096 x 14336 matrix fits the SMs' registers
// and shared memory in one wave (in registers alone, one row and 16 pieces a lane: 128 registers,
// 4 blocks of 4 rows an SM, two waves). Every lane requests its pieces, and the scales and bias
// the epilogue needs, before pdl_wait() when PackedWeights::pdl allows it: the whole matrix is in
// flight while the previous kernel ends, with no tile loop. A block lets the next kernel launch
// before its wait or, in small grids, after its products (late_launch()). After the wait a lane
// reads the x of its pieces (from L1 / L2, each piece's x requested before the previous piece's
// products), decodes and multiplies with dp4a, and then:
//   - one scale group: the group's lanes add their int32 sums with shuffles (exact in any order);
//   - several groups: a unit's sum is its P pieces' (adjacent lanes, a shuffle); the lane holding
//     a unit's first piece writes its int32 sum to shared memory, or, for groups of one unit, its
//     term w_scale[u] * float(sum); for larger groups, after a barrier, the block's threads add up
//     the groups' sums and form their terms side by side; after a barrier thread t of the block
//     adds up row t's terms in increasing g: kernels/product.h's epilogue, bit for bit. A chain
//     of additions per row, run by the rows of a block side by side; the first version passed every
//     term to the row's first lane by shuffle, a warp instruction per unit (session 27: 4096 x
//     14336 17.98 us against 16.98 in the lab, bench/lab/gemv_bounds.cu nib);
//   - groups of one unit in the staged kernels (kChain): no entries, barrier or finisher; each
//     warp adds its rows' terms in the same order itself, a round of units at a time, through a
//     small shared-memory buffer of the round's terms, each round's adds inside the next round's
//     products.
// Several groups: the scale of group g is requested early by the lane holding the first piece of
// the group's last unit, into a register (groups of one unit: from the scales' fp16 copy where
// ProductOut::w_scale_half is given, half the bytes), or, in the 16-piece and staged kernels
// (kCopiesScales), copied (cp.async) to the row's entries, where the finishing thread (groups of
// one unit) or the block's threads (larger groups) multiply; the staged kernels' chain (groups of
// one unit) loads the register pieces' scales to registers and copies the staged pieces' with them
// (as halves where given).
// One group: the row's scale is loaded early into a register. Where the blocks an SM holds request
// many weights (ahead()), a lane requests only its first D pieces early and each later one D ahead
// of its products. From float x (kFloatX), every block first reduces x's absmax and writes its int8
// codes to shared memory with act_int8_quantize's arithmetic (act_int8.cuh), and uses that scale in
// the epilogue.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "kernels/act_int8.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/epilogue.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels::oneshot {

constexpr int kWarp = 32;
// Warps per block: 4, and 8 for the float-x kernels with k <= 1024, where every block's pass over x
// (its absmax and codes) costs more than the blocks' spread over the SMs gains. On the H100
// (session 26, m = 1, quantizer + product, us, 4 / 8 warps): tern2 768 x 768 2.56 / 2.22, 1024 x
// 1024 2.83-2.84 / 2.41, 3072 x 768 2.63-2.65 / 2.40-2.42; bt2 768 x 768 2.67-2.71 / 2.29-2.31,
// 1024 x 1024 3.34-3.35 / 2.70-2.71, 3072 x 768 2.96 / 2.71-2.74; at larger k mixed (768 x 3072
// tern2 4.16-4.17 / 4.24-4.29, bt2 4.32-4.33 / 4.54-4.59; bt2 4096 x 4096 8.76-8.80 / 7.89-7.92).
// The int8-x kernels measured fastest with 4 (768 x 768: tern2 1.58 with 4 warps, 1.66 with 2,
// 1.71-1.76 with 1; bt2 1.70-1.71 / 1.75-1.77 with 8).
constexpr int kWarps = 4;
constexpr int kWideWarps = 8;
constexpr int64_t kWideMaxK = 1024;  // float x, k <= this: kWideWarps
constexpr int kUnitCols = 64;
constexpr int kMaxPiecesPerLane = 16;  // over a lane's R rows: 64 registers of weights
constexpr int kMaxUnitsPerLane = 8;    // tern2 (one piece a unit)
constexpr int64_t kMaxK = int64_t{kWarp} * kMaxUnitsPerLane * kUnitCols;  // 16384
constexpr int64_t kGridThreads = 16384;  // the grid size lanes() aims under

// Warps a block: kWideWarps from float x with k <= kWideMaxK, else kWarps.
inline int block_warps(bool float_x, int64_t k) {
    return float_x && k <= kWideMaxK ? kWideWarps : kWarps;
}

// Rows a block: its threads' lane groups of `lanes` lanes (up to 64: two warps), `rows` rows each.
inline int64_t block_rows(bool float_x, int64_t k, int lanes, int rows) {
    return int64_t{block_warps(float_x, k)} * kWarp * rows / lanes;
}

// How a row's int32 sums become its scale groups' sums: one group (the lanes add up), groups of
// one unit (group = 64: each unit's term w_scale[g] * float(sum) added in order) or groups of
// several units (the units' int32 sums added per group, then the groups' terms in order).
enum class Groups { kOne, kUnit, kUnits };

struct Args {
    const uint8_t* codes;
    const int8_t* x;   // int8 x, or null when xf is given
    const float* xf;   // float x, quantized by every block (kFloatX)
    int64_t n;
    int units;        // k / 64
    int pieces;       // units * Codec::kPieces
    int unit_groups;  // units per scale group
    // Several groups of several units (Groups::kUnits): ceil(2^32 / unit_groups), so that
    // u / unit_groups = __umulhi(u, unit_groups_magic), exact for u, unit_groups < 2^16 (the error
    // term u * (magic * unit_groups - 2^32) / 2^32 stays below 1): no integer division per piece.
    uint32_t unit_groups_magic;
    int groups;       // ceil(units / unit_groups)
    int stride;       // 32-bit words per row of the shared epilogue entries: 4 mod 8 (16-byte rows whose
                      // first words fall in different banks for 8 rows)
    int scale_at;     // the word of a row's entries where its groups' scales start (a multiple of 4)
    bool prefetch;    // request the weights, scales and bias before pdl_wait()
    bool late;        // the next kernel launched after the products (late_launch()), else before pdl_wait()
    ProductOut out;
};

// tern2: a unit is one 16-byte piece; tern2_mma.cuh's decode (9 integer instructions per 16
// codes) against the permuted x.
struct Tern2Codec {
    static constexpr int kPieces = 1;
    static constexpr int kXVecs = 4;  // 16-byte words of x per piece
    using Vs = std::integer_sequence<int, 1, 2, 3, 4, 5, 6, 7, 8>;  // pieces a lane: every count
    static constexpr const char* kLaneRule =
        "lanes per row must be 4, 8, 16 or 32 with at most 8 units of 64 columns each, in one row a lane group";
    struct X {
        uint32_t q[16];
    };
    __device__ static X prepare(const uint4 (&x)[kXVecs]) {
        X r;
#pragma unroll
        for (int q = 0; q < 4; ++q) tern2dev::permute_x(x[q], r.q + 4 * q);
        return r;
    }
    __device__ static int dot(const uint4& w, const X& x) {
        int s = tern2dev::dot16(w.x, x.q + 0, 0);
        s = tern2dev::dot16(w.y, x.q + 4, s);
        s = tern2dev::dot16(w.z, x.q + 8, s);
        return tern2dev::dot16(w.w, x.q + 12, s);
    }
};

// bt nibbles (kernels/bt_nib4.h): a unit is two 16-byte pieces, word q = columns 8q .. 8q + 7 as
// code + 8, low nibbles first, against x in natural order. Per word two masks and two dp4a (the
// high nibbles stay in place, 16 (code + 8), in a sum of their own shifted right by 4: exact);
// the sum starts at -8 * the piece's sum of x (8 dp4a, once for the lane's R rows), so the result
// is the codes' sum.
struct Nib4Codec {
    static constexpr int kPieces = 2;
    static constexpr int kXVecs = 2;
    // Pieces a lane holds per row: the kernel for the next of these (its extra pieces are not read).
    using Vs = std::integer_sequence<int, 1, 2, 4, 8, 16>;
    static constexpr const char* kLaneRule =
        "lanes per row must be 16 or 32 and rows per lane group 1, 2 or 4, with at most 16 pieces "
        "of 32 columns a lane and row (4 with four rows), or, from int8 x with several scale "
        "groups, 64 lanes and 1 or 2 rows with at most 8";
    struct X {
        uint32_t w[8];
        int offset;
    };
    __device__ static X prepare(const uint4 (&x)[kXVecs]) {
        X r = {{x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w}, 0};
        constexpr uint32_t kMinus8 = 0xF8F8F8F8u;  // -8 in every byte
#pragma unroll
        for (int e = 0; e < 8; ++e) r.offset = __dp4a(static_cast<int>(r.w[e]), static_cast<int>(kMinus8), r.offset);
        return r;
    }
    __device__ static int dot(const uint4& w, const X& x) {
        const uint32_t wq[4] = {w.x, w.y, w.z, w.w};
        int lo = x.offset, hi = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            lo = gemv::dp4a_us(wq[q] & 0x0F0F0F0Fu, x.w[2 * q], lo);
            hi = gemv::dp4a_us(wq[q] & 0xF0F0F0F0u, x.w[2 * q + 1], hi);
        }
        return lo + (hi >> 4);
    }
};

template <int L, int R, int W>
constexpr int kRowsPerBlock = (W * kWarp * R) / L;  // a lane group of 64 lanes is two warps

// Nibble kernels of 4 warps whose lane holds at most 8 pieces: at most 72 registers, so that 7 blocks
// fit an SM (6912 x 2560, groups of 64, 864 blocks in one wave: at 80 registers the last 72
// blocks ran as a second wave, 6.18 us against 4.84 before; session 27).
// Kernels that stage pieces in shared memory: at most 128 registers, so that 4 blocks fit an SM.
template <class Codec, int V, int R, int S, int W>
constexpr int kMinBlocks = Codec::kPieces == 2 && W == kWarps ? (S > 0 ? 4 : V * R <= 8 ? 7 : 0) : 0;  // 0: no minimum

// Pieces a lane stages per row in shared memory past its V in registers (nibbles, two rows a lane
// group, more than 8 pieces a lane and row).
constexpr int kStaged = 8;

// The D of the kernels that request a lane's pieces ahead of its products (ahead()).
constexpr int kAheadFew = 2;
constexpr int kAheadMore = 4;
constexpr int64_t kAheadBytes = 96 * 1024;

// Several groups: the kernels that copy the groups' scales to shared memory (cp.async, no
// registers) rather than load them to registers: those that stage pieces, and the int8-x kernels
// of four rows and 4 pieces a lane and row. On the H100 (bt2, groups of 64, us, copied /
// registers): four rows (session 29) 2560 x 2560 2.61-2.62 / 2.96, 768 x 3072 2.09 / 2.35, the
// shapes four rows are picked for (nib4_rows); from float x the registers won, 2560 x 2560
// 4.80-4.81 / 4.57-4.58, 11008 x 4096 14.53-14.57 / 12.14-12.16. Two rows of 8 pieces (session
// 29): the registers won on 4096 x 8192 8.72-8.73 / 7.96-7.97, 8192 x 8192 16.80 / 14.84-14.87,
// 6912 x 5120 9.32 / 9.20-9.25 and 1024 x 8192 4.46 / 4.42, lost on 2560 x 6912 5.29 / 5.57-5.58
// and 2560 x 5120 4.32-4.33 / 4.38-4.40, and behind the quantizer won on four shapes of six. With
// fewer pieces the copies cost more than the registers they free (session 28, two rows,
// registers / copied: 768 x 768 1.60 / 1.64-1.66, 2560 x 2560 3.02 / 3.21, 4096 x 4096 4.26-4.31
// / 4.55-4.56).
template <int V, int R, int S, bool kFloatX>
constexpr bool kCopiesScales = S > 0 || (!kFloatX && R == 4 && V * R >= kMaxPiecesPerLane);

// An fp16 scale (ProductOut::w_scale_half) as the float it equals.
__device__ __forceinline__ float half_bits_to_float(uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

// An fp16 scale's bits, zero-extended in a 32-bit register by the load itself: no instruction
// waits for it until the epilogue converts it. (Converting at the load stalled every thread on its
// scales, requested after its weights, before pdl_launch_dependents(): the next kernel launched at
// the end of this one, e.g. bt2 4096 x 4096 3.69 -> 4.59 us, 768 x 768 1.58 -> 2.27 on the H200.)
__device__ __forceinline__ uint32_t load_half_bits(const uint16_t* p) {
    uint32_t bits;
    asm volatile("ld.global.nc.u16 %0, [%1];" : "=r"(bits) : "l"(p));
    return bits;
}

template <class Codec, int L, int V, int R, int S, int D, bool kFloatX, Groups kG, int W>
__global__ void __launch_bounds__(W* kWarp, (kMinBlocks<Codec, V, R, S, W>)) kernel(const Args a) {
    // kFloatX: the k int8 codes of x (k bytes, a multiple of 64); then, for several groups, the
    // rows' epilogue entries (kRows * a.stride words: the units' int32 sums and, with y, the
    // groups' scales from word a.scale_at); then (S > 0) the staged pieces, S * R 16-byte slots a
    // thread, slot (s, r) of all threads side by side.
    extern __shared__ uint4 smem[];
    __shared__ float partial[W];
    constexpr int kP = Codec::kPieces;
    constexpr int kRows = kRowsPerBlock<L, R, W>;
    constexpr int kThreads = W * kWarp;
    constexpr int kV = V + S;  // pieces a lane per row
    constexpr bool kGroups = kG != Groups::kOne;
    // The chain (kChain): the staged nibble kernels with groups of one unit, y written. Each lane
    // group adds its rows' terms in column order itself, round by round as its products complete
    // (round v: units v * L / 2 .. v * L / 2 + L / 2 - 1, one a lane pair), with no entries, block
    // barrier or finisher: the finisher's arithmetic in its order, so y is the same bits
    // (bench/lab/oneshot/chain_order.cpp checks the order on the CPU). Lane parity q adds row
    // 2P + q (P < kChainRows; one row: row 0 in both lanes of a pair). Only the staged kernels: on
    // the H200 (session 42, bt2, groups of 64, us, finisher / chain, the chain in every kernel of
    // groups of one unit, bench/lab/oneshot/chain_smem.patch): staged, 4096 x 14336 11.04-11.34 /
    // 10.80-10.82, 4096 x 11008 9.05-9.07 / 9.03; in registers, 4096 x 4096 3.67-3.69 / 4.14,
    // 2560 x 2560 2.32-2.34 / 2.71-2.72, 6912 x 2560 4.00-4.01 / 4.04-4.05, 14336 x 4096 9.62-9.65
    // / 9.49-9.50. Adding each round's terms by shuffles instead (18 a warp and round) was slower
    // still on the one-wave grids (4096 x 4096 4.66-4.69). Each round's adds inside the next
    // round's products (session 43, bench/lab/oneshot/chain_pipe.patch; staged, 4096 x 14336 10.82
    // -> 10.50-10.54, 4096 x 11008 9.01-9.06 -> 8.80-8.84; in every kernel of groups of one unit,
    // 4096 x 4096 4.39, 2560 x 2560 2.79), then the staged pieces' scales as halves (10.44-10.49).
    constexpr bool kChain = kG == Groups::kUnit && L <= kWarp && Codec::kPieces == 2 && S > 0;
    constexpr int kChainRows = R > 1 ? R / 2 : 1;
    static_assert(!kChain || R == 2, "the chain runs in the staged kernels, two rows a lane group");
    // Several groups: the scales copied to shared memory by cp.async where registers are scarce
    // (kCopiesScales), else loaded to registers (kChain: those of the register pieces; the staged
    // pieces' are copied with the piece).
    constexpr bool kCopy = kGroups && !kChain && kCopiesScales<V, R, S, kFloatX>;
    // A lane group of 64 lanes spans two warps: several groups only, whose units' sums go to
    // shared memory (no shuffle crosses a warp; a unit's two pieces are adjacent lanes).
    static_assert(L <= kWarp || (kGroups && Codec::kPieces == 2),
                  "64 lanes: nibbles, several groups");
    const int t = static_cast<int>(threadIdx.x), sub = t % L;
    const int local0 = t / L * R;  // the lane group's first row in the block
    const int64_t block_row = int64_t{blockIdx.x} * kRows;
    const int64_t row_bytes = int64_t{a.pieces} * 16;
    const bool y_out = a.out.y != nullptr;
    // Groups of one unit with fp16 scales given (ProductOut::w_scale_half), in the kernels that
    // load the scales to registers: read as halves, half the bytes. The kernels that copy them
    // (kCopiesScales) read the floats: with halves they measured 1.1-4.9 us slower a call on the
    // H200 (bt2 2560 x 2560 2.58 -> 4.05 us, 4096 x 14336 11.97 -> 16.85), and with the halves'
    // code compiled in but unused 0.2-0.9 us slower than without it (2.34 -> 2.58, 11.09 -> 11.97;
    // session 40, cause not found).
    const bool half_scales = kG == Groups::kUnit && !kCopy && a.out.w_scale_half != nullptr;
    // kChain with halves: the staged pieces' scales copied as the aligned 4-byte word of halves
    // that holds them (units 2i and 2i + 1 of a row; cp.async copies 4, 8 or 16 bytes), where
    // the copy is 4-byte aligned and every row's halves start 4-byte aligned: one row of scales
    // for all, or an even number of groups (else the floats). One row of an odd number of groups
    // would have its last word reach 2 bytes past the array: launch() gives these kernels no
    // fp16 copy there. (Session 44, on the H200, 4096 x 14336: this condition 10.46-10.47 us;
    // `a.groups % 2 == 0` in its place, as fc4b725 had it, 10.53-10.60, from the compiler's code
    // alone; this condition with the last word copied in part by cp.async's src-size 10.35-10.37,
    // but compute-sanitizer counts that copy's 4 bytes as read: an error.)
    const bool half_staged = kChain && half_scales &&
                             (a.out.w_scale_rows == 1 || a.groups % 2 == 0) &&
                             (reinterpret_cast<uintptr_t>(a.out.w_scale_half) & 3) == 0;
    // Several groups: thread t < kRows finishes the block's row t.
    const int64_t fin_j = block_row + t;
    const bool finisher = kGroups && t < kRows && fin_j < a.n;
    uint32_t* const entries = reinterpret_cast<uint32_t*>(smem) + (kFloatX ? a.units * (kUnitCols / 4) : 0);
    uint4* const staged = reinterpret_cast<uint4*>(entries + (kGroups ? kRows * a.stride : 0));

    uint4 wv[R][V];
    // One group: the row's scale; several (not kCopy): the scale of the group a piece's unit ends
    // (with half_scales its fp16 bits, converted where the term is formed).
    // (kChain: row P of the lane's P-th chain; the epilogue after the chain's return, which reads
    // ws[r] for r < R, runs there only without y, where it reads no scale.)
    float ws[kChain ? kChainRows : R][kGroups && !kCopy ? V : 1] = {};
    // The bias of the lane group's rows, or of the finisher's row (kChain: of the lane's rows).
    float bias[kChain ? kChainRows : kGroups ? 1 : R] = {};
    // kChain: the row of the lane's P-th chain, and its staged pieces' scales (floats, or with
    // half_staged the word of two halves that holds the scale, copied with the piece into the
    // entries' words, which kChain does not use: (ceil(pieces / L) - V) *
    // kThreads words, fewer than kRows * units <= kRows * stride, as V >= 1 and kRows = 2 *
    // kThreads / L).
    auto chain_row = [&](int P) { return R > 1 ? 2 * P + (sub & 1) : 0; };
    // kChain: two rounds' terms, [round & 1][P][lane group's first thread + parity * L / 2 + unit],
    // and this lane's slot in them.
    __shared__ __align__(16) float round_terms[kChain ? 2 * kChainRows * kThreads : 4];
    const int term_slot = (t - sub) + (sub & 1) * (L / 2) + (sub >> 1);
    float* const staged_scales = reinterpret_cast<float*>(entries);
    // The group whose scale a piece's lane requests (the piece is the first of its unit, which ends
    // the group), else -1; the same for the lane's R rows.
    auto scale_group = [&](int v) {
        const int p = sub + v * L, u = p / kP;
        if (p >= a.pieces || p % kP != 0) return -1;
        if constexpr (kG == Groups::kUnit) return u;
        // u ends its group where u + 1 falls in the next one, or is the row's last unit.
        const int g = static_cast<int>(__umulhi(static_cast<unsigned>(u), a.unit_groups_magic));
        const int g_next =
            static_cast<int>(__umulhi(static_cast<unsigned>(u + 1), a.unit_groups_magic));
        return g_next != g || u + 1 == a.units ? g : -1;
    };
    // Requests piece v of row r to registers (zeros past the rows and the row's pieces).
    auto request_row = [&](int v, int r) {
        const int p = sub + v * L;
        const int64_t j = block_row + local0 + r;
        const bool ok = j < a.n;
        const uint8_t* row = a.codes + (ok ? j : 0) * row_bytes;
        wv[r][v < V ? v : 0] = ok && p < a.pieces ? tern2dev::load_weights(row + int64_t{p} * 16) : make_uint4(0, 0, 0, 0);
    };
    // Requests piece v of the R rows: to registers (v < V), or a staged piece to shared memory as a
    // commit group of its own, empty past the row's pieces, so that the products wait for each
    // staged piece alone.
    auto request = [&](int v) {
        const int p = sub + v * L;
        if (v < V) {
#pragma unroll
            for (int r = 0; r < R; ++r) request_row(v, r);
        } else {
            if (p < a.pieces) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int64_t j = block_row + local0 + r;
                    const bool ok = j < a.n;
                    detail::cp_async16(staged + ((v - V) * R + r) * kThreads + t,
                                       a.codes + (ok ? j * row_bytes + p * 16 : 0), ok ? 16 : 0);
                }
                if constexpr (kChain) {
                    if (y_out) {
#pragma unroll
                        for (int P = 0; P < kChainRows; ++P) {
                            const int64_t j = block_row + local0 + chain_row(P);
                            if (j >= a.n) continue;
                            float* const dst =
                                staged_scales + ((v - V) * kChainRows + P) * kThreads + t;
                            if (half_staged)
                                detail::cp_async4(
                                    dst, detail::epilogue_w_scale_half(a.out, j, a.groups) +
                                             (p / kP & ~1));
                            else
                                detail::cp_async4(
                                    dst, detail::epilogue_w_scale(a.out, j, a.groups) + p / kP);
                        }
                    }
                }
            }
            detail::cp_async_commit();
        }
    };
    // The pieces requested before the products: all of them (D = 0), or the first D, the others
    // D pieces ahead of the products. Every row's register pieces first, then the staged ones,
    // then the scales (several groups: copied to the rows' entries, or to registers) and biases.
    constexpr int kFirst = D == 0 || D > kV ? kV : D;
    auto load = [&] {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int v = 0; v < (kFirst < V ? kFirst : V); ++v) request_row(v, r);
#pragma unroll
        for (int v = V; v < kFirst; ++v) request(v);
        if (!y_out) return;
        if constexpr (kCopy) {
#pragma unroll
            for (int v = 0; v < kV; ++v) {
                const int g = scale_group(v);
                if (g < 0) continue;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int64_t j = block_row + local0 + r;
                    if (j < a.n)
                        detail::cp_async4(entries + (local0 + r) * a.stride + a.scale_at + g,
                                          detail::epilogue_w_scale(a.out, j, a.groups) + g);
                }
            }
            if (finisher && a.out.bias != nullptr) bias[0] = __ldg(a.out.bias + fin_j);
        } else if constexpr (kChain) {
#pragma unroll
            for (int P = 0; P < kChainRows; ++P) {
                const int64_t j = block_row + local0 + chain_row(P);
                if (j >= a.n) continue;
                const float* wsr = detail::epilogue_w_scale(a.out, j, a.groups);
                const uint16_t* wsh =
                    half_scales ? detail::epilogue_w_scale_half(a.out, j, a.groups) : nullptr;
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    const int p = sub + v * L;
                    if (p >= a.pieces) continue;
                    ws[P][v] = half_scales ? __uint_as_float(load_half_bits(wsh + p / kP))
                                           : __ldg(wsr + p / kP);
                }
                if (sub < 2 && a.out.bias != nullptr) bias[P] = __ldg(a.out.bias + j);
            }
        } else if constexpr (kGroups) {
            int g[V];
#pragma unroll
            for (int v = 0; v < V; ++v) g[v] = scale_group(v);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t j = block_row + local0 + r;
                if (j >= a.n) continue;
                if (half_scales) {
                    const uint16_t* wsh = detail::epilogue_w_scale_half(a.out, j, a.groups);
#pragma unroll
                    for (int v = 0; v < V; ++v)
                        ws[r][v] = g[v] >= 0 ? __uint_as_float(load_half_bits(wsh + g[v])) : 0.0f;
                    continue;
                }
                const float* wsr = detail::epilogue_w_scale(a.out, j, a.groups);
#pragma unroll
                for (int v = 0; v < V; ++v) ws[r][v] = g[v] >= 0 ? __ldg(wsr + g[v]) : 0.0f;
            }
            if (finisher && a.out.bias != nullptr) bias[0] = __ldg(a.out.bias + fin_j);
        } else {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t j = block_row + local0 + r;
                if (j >= a.n || sub != 0) continue;
                ws[r][0] = __ldg(detail::epilogue_w_scale(a.out, j, 1));
                if (a.out.bias != nullptr) bias[r] = __ldg(a.out.bias + j);
            }
        }
    };
    if (a.prefetch) load();
    if (!a.late) detail::pdl_launch_dependents();
    detail::pdl_wait();
    if (!a.prefetch) load();

    float sx = 0.0f;
    if constexpr (kFloatX) {
        const float4* xv = reinterpret_cast<const float4*>(a.xf);
        const int quads = a.units * (kUnitCols / 4);
        float amax = 0.0f;
#pragma unroll 4
        for (int i = t; i < quads; i += W * kWarp) amax = fmaxf(amax, act8dev::abs_or_inf(__ldg(xv + i)));
        const act8dev::RowQuant rq = act8dev::row_quant(act8dev::block_max(amax, partial));
        sx = rq.scale;
        auto* codes = reinterpret_cast<char4*>(smem);
#pragma unroll 4
        for (int i = t; i < quads; i += W * kWarp) {
            const float4 v = __ldg(xv + i);
            codes[i] = rq.finite ? make_char4(act8dev::quantize_one(v.x, rq.qs), act8dev::quantize_one(v.y, rq.qs),
                                              act8dev::quantize_one(v.z, rq.qs), act8dev::quantize_one(v.w, rq.qs))
                                 : make_char4(0, 0, 0, 0);
        }
        __syncthreads();
    } else {
        // Read by the threads that write y only: one request a block (several groups: the
        // finishers, in warp 0) or a lane group.
        if (y_out && (kChain ? sub < 2 : kGroups ? finisher : sub == 0)) sx = a.out.x_scale[0];
    }

    // The int32 sum of each piece and row; x read once per piece for the R rows, the next piece's
    // x requested before this piece's products.
    const uint4* xbase = kFloatX ? smem : reinterpret_cast<const uint4*>(a.x);
    auto load_x = [&](int v, uint4 (&xv)[Codec::kXVecs]) {
        const int p = sub + v * L;
        const uint4* xp = xbase + int64_t{p < a.pieces ? p : 0} * Codec::kXVecs;
#pragma unroll
        for (int q = 0; q < Codec::kXVecs; ++q) xv[q] = kFloatX ? xp[q] : __ldg(xp + q);
    };
    int sum[R][kV];
    // kChain: the lane's rows' sums of terms so far (from +0: the pads' +0 terms leave them exact).
    float chain_y[kChainRows] = {};
    // kChain: adds round u's terms of the lane's rows to chain_y in column order, four terms a
    // load. Only lanes 0 and 1 (y written) load; the others add +0, so that the call needs no
    // branch of its own where it sits inside the next round's products.
    auto add_round = [&](int u) {
#pragma unroll
        for (int P = 0; P < kChainRows; ++P) {
            const float4* q4 = reinterpret_cast<const float4*>(
                round_terms + ((u & 1) * kChainRows + P) * kThreads + (t - sub) +
                (sub & 1) * (L / 2));
#pragma unroll
            for (int c = 0; c < L / 8; ++c) {
                const float4 q = y_out && sub < 2 ? q4[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                chain_y[P] =
                    __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(chain_y[P], q.x), q.y), q.z), q.w);
            }
        }
    };
    uint4 xnext[Codec::kXVecs];
    load_x(0, xnext);
#pragma unroll
    for (int v = 0; v < kV; ++v) {
        uint4 xv[Codec::kXVecs];
#pragma unroll
        for (int q = 0; q < Codec::kXVecs; ++q) xv[q] = xnext[q];
        if (kFirst < kV && v + kFirst < kV) request(v + kFirst);
        if (v + 1 < kV) load_x(v + 1, xnext);
        const int p = sub + v * L;
#pragma unroll
        for (int r = 0; r < R; ++r) sum[r][v] = 0;
        if (p < a.pieces) {  // lanes past the row's last piece hold zeros from here on
            // kChain: round v - 1's adds, with this round's products (they read the terms stored
            // before the last __syncwarp), ahead of a staged piece's wait. Lanes 0 and 1 hold a
            // piece in every round that has one (a unit is two pieces), so they skip none.
            if constexpr (kChain) {
                if (v > 0) add_round(v - 1);
            }
            // A staged piece: its group done, the groups of the later pieces requested so far may
            // be pending (session 28, 4096 x 14336: 15.21-15.32 us, against 15.32-15.35 waiting for
            // all of them at the first). The scales' copies join the next group committed.
            if (v >= V) {
                const int last =
                    kFirst < kV ? min(v + kFirst, kV - 1) : kV - 1;  // the last piece requested
                detail::cp_async_wait_n(last - v, std::make_integer_sequence<int, S>{});
            }
            const typename Codec::X xq = Codec::prepare(xv);
#pragma unroll
            for (int r = 0; r < R; ++r)
                sum[r][v] = Codec::dot(
                    v < V ? wv[r][v < V ? v : 0] : staged[((v - V) * R + r) * kThreads + t], xq);
        }
        if constexpr (kChain) {
            // Round v's units in column order: unit i of the round is lane pair 2i, 2i + 1; each
            // lane forms its pair's term for its row (w_scale * float(sum), as the finisher does),
            // and lanes 0 and 1 add the round's L / 2 terms of their rows in order. Lanes past the
            // row's pieces give +0, which leaves every sum of terms as it is (it starts at +0,
            // never -0).
            if (y_out && v * L < a.pieces) {
#pragma unroll
                for (int P = 0; P < kChainRows; ++P) {
                    int s0 = sum[R > 1 ? 2 * P : 0][v];
                    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
                    int s = s0;
                    if constexpr (R > 1) {
                        int s1 = sum[2 * P + 1][v];
                        s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
                        s = (sub & 1) ? s1 : s0;
                    }
                    float w;
                    if (v < V) {
                        w = ws[P][v < V ? v : 0];
                        if (half_scales) w = half_bits_to_float(__float_as_uint(w));
                    } else {  // copied with the piece, waited for above (lanes past the row's
                              // pieces: none)
                        w = p < a.pieces ? staged_scales[((v - V) * kChainRows + P) * kThreads + t]
                                         : 0.0f;
                        if (half_staged)
                            w = half_bits_to_float(__float_as_uint(w) >> (p / kP & 1) * 16);
                    }
                    const float term = p < a.pieces ? __fmul_rn(w, __int2float_rn(s)) : 0.0f;
                    round_terms[((v & 1) * kChainRows + P) * kThreads + term_slot] = term;
                }
                // The round's terms through shared memory, added in the next round (add_round):
                // two rounds' buffers, as a buffer is written again two rounds on, after the
                // __syncwarp that ends the round whose products read it.
                __syncwarp();
            }
        }
    }
    if constexpr (kChain) {  // the last round's adds
        if (y_out) add_round(min(kV - 1, (a.pieces - 1) / L));
    }

    if (a.late) detail::pdl_launch_dependents();  // late_launch()
    if constexpr (kChain) {
        if (y_out) {
#pragma unroll
            for (int P = 0; P < kChainRows; ++P) {
                const int64_t j = block_row + local0 + chain_row(P);
                if (sub < (R > 1 ? 2 : 1) && j < a.n)
                    a.out.y[j] = __fadd_rn(__fmul_rn(chain_y[P], sx), bias[P]);
            }
            return;
        }
    }
    if constexpr (!kGroups) {
        // Integer sums are exact in any order: the lane group's L lanes (aligned runs of the warp) add up.
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int s = 0;
#pragma unroll
            for (int v = 0; v < kV; ++v) s += sum[r][v];
#pragma unroll
            for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
            const int64_t j = block_row + local0 + r;
            if (sub != 0 || j >= a.n) continue;
            if (a.out.acc != nullptr) a.out.acc[j] = s;
            // store_output's arithmetic for one group and one token, the scale and bias from registers.
            else a.out.y[j] = __fadd_rn(__fmul_rn(detail::epilogue_add(0.0f, ws[r][0], s), sx), bias[r]);
        }
    } else {
        // A unit's sum is its kP pieces' (adjacent lanes: L is a multiple of kP); the lane of its first
        // piece writes it out.
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int v = 0; v < kV; ++v)
#pragma unroll
                for (int o = 1; o < kP; o *= 2) sum[r][v] += __shfl_xor_sync(0xffffffffu, sum[r][v], o);
#pragma unroll
        for (int v = 0; v < kV; ++v) {
            const int p = sub + v * L, u = p / kP;
            if (p >= a.pieces || p % kP != 0) continue;
            const int g = kG == Groups::kUnits && !kCopy && y_out ? scale_group(v) : -1;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t j = block_row + local0 + r;
                uint32_t* row_entries = entries + (local0 + r) * a.stride;
                if (kG == Groups::kUnit && !y_out) {
                    if (j < a.n) a.out.acc[j * a.groups + u] = sum[r][v];  // a unit is a group: no finisher
                } else if (kG == Groups::kUnit && !kCopy) {
                    // The unit's term w_scale[u] * float(sum) (ws[r][v]: kCopy is false, so v < V).
                    const float w = ws[r][v < V ? v : 0];
                    row_entries[u] = __float_as_uint(
                        __fmul_rn(half_scales ? half_bits_to_float(__float_as_uint(w)) : w,
                                  __int2float_rn(sum[r][v])));
                } else {
                    row_entries[u] = static_cast<uint32_t>(sum[r][v]);
                    if (g >= 0) row_entries[a.scale_at + g] = __float_as_uint(ws[r][v < V ? v : 0]);
                }
            }
        }
        if (kG == Groups::kUnit && !y_out) return;  // the same for the whole block: no barrier needed
        if (kCopy && y_out) detail::cp_async_wait_all();  // the scales this thread copied
        __syncthreads();
        if constexpr (kG == Groups::kUnits) {
            // The groups' int32 sums, by the whole block: thread t takes row t % kRows and its
            // groups t / kRows, t / kRows + kThreads / kRows, ...; with y, group g's term
            // w_scale[g] * float(sum) (epilogue_add's product) replaces its scale in the row's
            // entries, which no other thread reads; without, the sums go out. The finishers then
            // add terms only: a chain of additions from 16-byte loads, as for groups of one unit.
            // One thread a row summing every group's units took 1.95-2.02x as long with groups of
            // 128 and 1.15-1.32x with groups of 512 on the default shapes (H200, session 39).
            constexpr int kGroupStep = kThreads / kRows;
            const int r = t % kRows;
            const int64_t j = block_row + r;
            if (j < a.n) {
                uint32_t* const row_entries = entries + r * a.stride;
                for (int g = t / kRows; g < a.groups; g += kGroupStep) {
                    const int u0 = g * a.unit_groups, u1 = min(u0 + a.unit_groups, a.units);
                    int group_sum = 0;
#pragma unroll 4
                    for (int u = u0; u < u1; ++u)
                        group_sum += static_cast<int>(row_entries[u]);
                    if (y_out) {
                        const float w = __uint_as_float(row_entries[a.scale_at + g]);
                        row_entries[a.scale_at + g] =
                            __float_as_uint(__fmul_rn(w, __int2float_rn(group_sum)));
                    } else {
                        a.out.acc[j * a.groups + g] = group_sum;
                    }
                }
            }
            if (!y_out) return;  // the same for the whole block
            __syncthreads();
        }
        if (!finisher) return;
        const uint32_t* e = entries + t * a.stride;
        const float* scale = reinterpret_cast<const float*>(e + a.scale_at);
        if constexpr (kG == Groups::kUnit) {
            // Unit u's term w_scale[u] * float(sum): written by its lane (scales in registers), or
            // formed here from the unit's sum and its copied scale (epilogue_add's arithmetic); four
            // units a load (rows and scales start 16-byte aligned), four loads in flight.
            auto term = [&](uint32_t entry, float w) {
                return kCopy ? __fmul_rn(w, __int2float_rn(static_cast<int>(entry))) : __uint_as_float(entry);
            };
            const uint4* e4 = reinterpret_cast<const uint4*>(e);
            const float4* s4 = reinterpret_cast<const float4*>(scale);
            float y = 0.0f;
            int u = 0;
#pragma unroll 4
            for (; u + 4 <= a.units; u += 4) {
                const uint4 q = e4[u / 4];
                const float4 w = kCopy ? s4[u / 4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                y = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(y, term(q.x, w.x)), term(q.y, w.y)), term(q.z, w.z)),
                              term(q.w, w.w));
            }
            for (; u < a.units; ++u) y = __fadd_rn(y, term(e[u], kCopy ? scale[u] : 0.0f));
            a.out.y[fin_j] = __fadd_rn(__fmul_rn(y, sx), bias[0]);
        } else {
            // The groups' terms in increasing g: epilogue_add's sum, four terms a load.
            const float4* s4 = reinterpret_cast<const float4*>(scale);
            float y = 0.0f;
            int g = 0;
#pragma unroll 4
            for (; g + 4 <= a.groups; g += 4) {
                const float4 q = s4[g / 4];
                y = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(y, q.x), q.y), q.z), q.w);
            }
            for (; g < a.groups; ++g)
                y = __fadd_rn(y, scale[g]);
            a.out.y[fin_j] = __fadd_rn(__fmul_rn(y, sx), bias[0]);
        }
    }
}

using Kernel = void (*)(Args);

// kWideWarps kernels exist for float x with at most kWideMaxK columns a row.
// `ahead` is the kernel's D: 0, or (nibble int8-x kernels of more than that many pieces a lane and
// row) kAheadFew or kAheadMore; nullptr for any other.
template <class Codec, int L, int V, int R, int S, bool kFloatX, Groups kG>
Kernel pick_w(int warps, int ahead) {
    if constexpr (V * R > kMaxPiecesPerLane) {
        return nullptr;
    } else {
        if constexpr (kFloatX && (V + S - 1) * L < kWideMaxK / kUnitCols * Codec::kPieces) {
            if (warps == kWideWarps) return ahead == 0 ? kernel<Codec, L, V, R, S, 0, kFloatX, kG, kWideWarps> : nullptr;
        }
        if (warps != kWarps) return nullptr;
        if constexpr (!kFloatX && Codec::kPieces == 2) {
            if constexpr (V + S > kAheadFew) {
                if (ahead == kAheadFew) return kernel<Codec, L, V, R, S, kAheadFew, kFloatX, kG, kWarps>;
            }
            if constexpr (V + S > kAheadMore) {
                if (ahead == kAheadMore) return kernel<Codec, L, V, R, S, kAheadMore, kFloatX, kG, kWarps>;
            }
        }
        return ahead == 0 ? kernel<Codec, L, V, R, S, 0, kFloatX, kG, kWarps> : nullptr;
    }
}

// The kernel whose V is the smallest of Codec::Vs at least v (pieces a lane per row); none where
// that V times R exceeds kMaxPiecesPerLane (pick_w).
template <class Codec, int L, int R, bool kFloatX, Groups kG, int... Vs>
Kernel pick_v(int v, int warps, int ahead, std::integer_sequence<int, Vs...>) {
    Kernel k = nullptr;
    bool done = false;
    ((!done && Vs >= v ? (k = pick_w<Codec, L, Vs, R, 0, kFloatX, kG>(warps, ahead), done = true) : false), ...);
    return k;
}

// Nibbles, two rows a lane group: 8 pieces a lane and row in registers, and up to kStaged more
// staged in shared memory.
template <class Codec, int L, bool kFloatX, Groups kG>
Kernel pick_two_rows(int v, int warps, int ahead) {
    constexpr int kV = kMaxPiecesPerLane / 2;
    if (v <= kV) return pick_v<Codec, L, 2, kFloatX, kG>(v, warps, ahead, typename Codec::Vs{});
    return v <= kV + kStaged ? pick_w<Codec, L, kV, 2, kStaged, kFloatX, kG>(warps, ahead) : nullptr;
}

template <class Codec, bool kFloatX, Groups kG>
Kernel pick(int lanes, int rows, int v, int warps, int ahead) {
    using Vs = typename Codec::Vs;
    if constexpr (Codec::kPieces == 1) {  // tern2: one row a lane group, 4-32 lanes
        if (rows != 1) return nullptr;
        switch (lanes) {
            case 4: return pick_v<Codec, 4, 1, kFloatX, kG>(v, warps, ahead, Vs{});
            case 8: return pick_v<Codec, 8, 1, kFloatX, kG>(v, warps, ahead, Vs{});
            case 16: return pick_v<Codec, 16, 1, kFloatX, kG>(v, warps, ahead, Vs{});
            case 32: return pick_v<Codec, 32, 1, kFloatX, kG>(v, warps, ahead, Vs{});
            default: return nullptr;
        }
    } else {  // nibbles: 16 or 32 lanes and one, two or four rows; 64 lanes and one or two
        if (lanes == 16 && rows == 1) return pick_v<Codec, 16, 1, kFloatX, kG>(v, warps, ahead, Vs{});
        if (lanes == 16 && rows == 2) return pick_two_rows<Codec, 16, kFloatX, kG>(v, warps, ahead);
        if (lanes == 16 && rows == 4) return pick_v<Codec, 16, 4, kFloatX, kG>(v, warps, ahead, Vs{});
        if (lanes == 32 && rows == 1) return pick_v<Codec, 32, 1, kFloatX, kG>(v, warps, ahead, Vs{});
        if (lanes == 32 && rows == 2) return pick_two_rows<Codec, 32, kFloatX, kG>(v, warps, ahead);
        if (lanes == 32 && rows == 4) return pick_v<Codec, 32, 4, kFloatX, kG>(v, warps, ahead, Vs{});
        // Two warps a row (nib4_two_warps()): int8 x, several groups, up to 8 pieces a lane and
        // row.
        if constexpr (!kFloatX && kG != Groups::kOne) {
            using Vs64 = std::integer_sequence<int, 1, 2, 4, 8>;
            if (lanes == 64 && rows == 1)
                return pick_v<Codec, 64, 1, kFloatX, kG>(v, warps, ahead, Vs64{});
            if (lanes == 64 && rows == 2)
                return pick_v<Codec, 64, 2, kFloatX, kG>(v, warps, ahead, Vs64{});
        }
        return nullptr;
    }
}

// The D a launch runs with (0: every piece requested before the products): where the blocks an SM
// holds at once request more than kAheadBytes of weights a lane's pieces are requested
// kAheadMore pieces ahead of its products (more than kAheadMore pieces a lane and row), else
// kAheadFew ahead (more than kAheadFew), else 0; int8-x nibble kernels only. The SM's memory
// system holds only so many requests: a warp whose loads wait to issue cannot start on the
// pieces that have arrived, so with every piece requested first the products all ran after the
// last bytes came. On the H100 (session 28, bt2, groups of 64, us, D = 0 / 2 / 4; KB requested an
// SM, 1024 bytes): 4096 x 14336 (14 pieces a row, 217 KB) 15.45-15.47 / 13.58-13.60 / 13.51-13.55;
// 4096 x 11008 (11, 171 KB) 11.55-11.56 / 10.74-10.80 / 10.58-10.59; 14336 x 4096 (4, 112 KB)
// 12.48 / 11.89-11.92 / -; 11008 x 4096 (4, 112 KB) 10.05-10.06 / 9.85-9.88 / -; below: 6912 x
// 2560 (3, 79 KB) 4.51-4.52 / 4.65-4.66 / 4.51-4.53, 2560 x 6912 (7, 68 KB) 5.13-5.20 / 7.21-7.22
// / 6.60-6.61, 4096 x 4096 (4, 62 KB) 4.51-4.52 / 5.28-5.29 / 4.52-4.53.
inline int ahead(int64_t requested_per_sm, int pieces_per_lane) {
    if (requested_per_sm <= kAheadBytes) return 0;
    return pieces_per_lane > kAheadMore ? kAheadMore : pieces_per_lane > kAheadFew ? kAheadFew : 0;
}

inline bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

inline int units_per_lane(int64_t units, int lanes) {
    return static_cast<int>(formats::ceil_div(units, int64_t{lanes}));
}

// The most lanes per row (32, 16, 8, 4) that keep the grid at <= 16384 threads with at most 8
// units a lane; when even 4 lanes give more threads, the fewest lanes that hold the row.
inline int lanes(int64_t n, int64_t k) {
    const int64_t units = k / kUnitCols > 0 ? k / kUnitCols : 1;
    int fewest = 0;
    for (int l : {32, 16, 8, 4}) {
        if (units_per_lane(units, l) > kMaxUnitsPerLane) continue;
        if (n * l <= kGridThreads) return l;
        fewest = l;
    }
    return fewest;
}

// The float-x launchers' checks, before launch(): y only, the shared contract (kernels/product.h)
// with a stand-in x scale (the kernel computes its own, out.x_scale is not read) and the kernel's
// rules (`rejects`, as for int8 x at x's address). Throws trit::Error naming `who` and the shape.
template <typename Rejects>
void check_from_float(const char* who, const PackedWeights& w, const float* x, int64_t group, const ProductOut& out,
                      Rejects rejects) {
    TRIT_CHECK(out.acc == nullptr, who, " (m=1, n=", w.n, ", k=", w.k, ", group=", group,
               "): y only (out.acc must be null): the x scale is the kernel's own");
    static const float kNotRead = 0.0f;
    ProductOut checked = out;
    checked.x_scale = &kNotRead;
    checked.x_scale_rows = 1;
    const auto* x_bytes = reinterpret_cast<const int8_t*>(x);
    check_product(who, w, x_bytes, 1, group, checked);
    const std::string no = rejects(w, x_bytes, 1, group);
    TRIT_CHECK(no.empty(), who, " (m=1, n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
}

// Nibbles: 32 lanes a row, or 16 when the row has at most 16 pieces (k <= 512). On the H100
// (session 27, bench/lab/gemv_bounds.cu nib, groups of 64, us, 16 lanes / 32 lanes / 32 lanes and
// two rows): 768 x 768 1.69 / 1.53 / 1.50, 3072 x 768 2.07 / 2.05 / 1.86, 2560 x 2560 3.26 / 3.02 /
// 2.98, 4096 x 4096 5.63 / 4.68 / 4.62, 14336 x 4096 13.79 / 12.38 / 11.77.
inline int nib4_lanes(int64_t k) {
    return k / (kUnitCols / 2) > 16 ? 32 : 16;
}

// Four rows a lane group where the nibbles are at most this many bytes an SM: int8 x, and float x
// (an SM's register file: past it the blocks run in waves, and the four-row kernels hold fewer
// blocks an SM).
constexpr int64_t kFourRowsBytes = 32 * 1024;
constexpr int64_t kFourRowsFloatBytes = 256 * 1024;
// Int8 x: four rows also up to this many bytes an SM where the four-row grid is at most
// kFourRowsMaxBlocksPerSm blocks an SM.
constexpr int64_t kFourRowsFewBlocksBytes = 48 * 1024;
constexpr int64_t kFourRowsMaxBlocksPerSm = 2;

// Rows a lane group for n x k over `lanes` lanes on `sms` SMs, x int8 or (float_x) float: four
// where a lane then holds at most 4 pieces a row and
//   - int8 x: the nibbles are at most kFourRowsBytes an SM: x read once for four rows, and half
//     the blocks' barriers and chains, while the SMs' memory systems are not yet crowded; or at
//     most kFourRowsFewBlocksBytes an SM in a four-row grid of at most kFourRowsMaxBlocksPerSm
//     blocks an SM; or the two-row grid is more blocks than the device holds at once
//     (two_row_resident, blocks of the two-row kernel; 0: not known) and the four-row grid is not
//     (four_row_resident): one wave instead of two;
//   - float x: blocks of two rows would outnumber the SMs, and the nibbles are at most
//     kFourRowsFloatBytes an SM: every block quantizes x itself, and four rows halve those passes;
// else two (a lane then holds at most 8 pieces a row in registers and 8 more in shared memory:
// every k up to 16384 at 32 lanes), or one past that. On the H100 (session 29, bt2, groups of
// 64, us, two rows / four rows; KB of nibbles an SM, 1024 bytes). Int8 x: 768 x 3072 (8.7 KB)
// 2.48 / 2.09, 2560 x 2560 (24.2 KB) 3.02-3.06 / 2.61-2.63, 1024 x 1024 (3.9 KB) 1.62-1.66 /
// 1.57-1.59, 3072 x 768 (8.7 KB) 2.03-2.04 / 2.01-2.03, 768 x 768 (2.2 KB) 1.60-1.63 / 1.60-1.62;
// past the limit 4096 x 4096 (62.1 KB) 4.29-4.32 / 4.72-4.73, 6912 x 2560 (65.5 KB) 4.47-4.49 /
// 4.64, 14336 x 4096 (217 KB) 11.14-11.21 / 12.94-12.97. From float x: 2560 x 2560 5.04-5.05 /
// 4.57-4.58, 3072 x 768 (8 warps) 2.79-2.81 / 2.66, 4096 x 4096 7.13-7.15 / 6.56-6.57, 6912 x 2560
// 6.32-6.34 / 6.06, 14336 x 4096 14.39-14.45 / 14.27-14.35; with fewer two-row blocks than SMs,
// 768 x 3072 4.36-4.38 / 4.44-4.45, 1024 x 1024 2.71-2.73 / 2.75, 768 x 768 2.42-2.44 /
// 2.42-2.43; past the register file, 128256 x 4096 (1943 KB) 104.70 / 111.84. On the H200
// (session 39, int8 x, two rows / four rows, two calls; four-row blocks an SM, of 132): up to 48 KB
// in at most 2 blocks an SM, 3072 x 3072 (34.9 KB, 1.5) 3.16 / 2.63-2.64, 3072 x 4096 (46.5 KB,
// 1.5) 3.72 / 2.98-3.00, 4096 x 3072 (46.5 KB, 1.9) 3.10-3.11 / 2.81-2.83, 4096 x 2560 (38.8 KB,
// 1.9) 2.93-2.95 / 2.77-2.78; past them 4096 x 4096 (62.1 KB, 1.9) 3.62-3.66 / 3.71-3.73 (3.54-3.57
// / 3.10-3.12 on another machine), 6144 x 2048 (46.5 KB, 2.9) 2.86-2.87 / 3.08-3.09, 5120 x 4096
// (77.6 KB, 2.4) 3.98-4.00 / 5.65-5.66, 6144 x 4096 4.99-5.01 / 5.76-5.80, 6144 x 3072 3.84 / 4.14,
// 6912 x 2560 3.94 / 4.12; two-row grids past one wave (7 blocks an SM of 72 registers, 8 of 64 for
// 2 pieces) where the four-row grid fits one (4 blocks of 128 registers, 7 of 72): 8192 x 4096
// 7.47-7.48 / 5.90, 8192 x 3072 6.62-6.65 / 5.11, 12288 x 2048 5.39-5.40 / 4.41-4.42; neither,
// 14336 x 4096 9.47-9.48 / 11.11-11.12; the two-row grid in one wave, 8192 x 2048 3.58 / 3.16-3.30.
inline int nib4_rows(int64_t n, int64_t k, int lanes, bool float_x, int sms,
                     int64_t two_row_resident = 0, int64_t four_row_resident = 0) {
    const int64_t v = formats::ceil_div(k / (kUnitCols / 2), int64_t{lanes});
    if (v <= kMaxPiecesPerLane / 4) {
        const int64_t two_row_blocks = formats::ceil_div(n, block_rows(float_x, k, lanes, 2));
        const int64_t four_row_blocks = formats::ceil_div(n, block_rows(float_x, k, lanes, 4));
        const int64_t bytes = n * (k / 2);
        if (float_x) {
            if (two_row_blocks > sms && bytes <= kFourRowsFloatBytes * sms) return 4;
        } else {
            if (bytes <= kFourRowsBytes * sms) return 4;
            if (bytes <= kFourRowsFewBlocksBytes * sms &&
                four_row_blocks <= kFourRowsMaxBlocksPerSm * sms)
                return 4;
            if (two_row_resident > 0 && two_row_blocks > two_row_resident &&
                four_row_blocks <= four_row_resident)
                return 4;
        }
    }
    return v <= kMaxPiecesPerLane / 2 + kStaged ? 2 : 1;
}

// Two warps (64 lanes) a row and two rows a lane group, in place of the 32-lane rule's lanes and
// rows (nib4_lanes(), nib4_rows()), from int8 x with several scale groups and k > 512 where either
//   - 32 lanes would hold more than 4 pieces a row (k > 4096: two rows a lane group) and the
//     64-lane grid fits the device at once (pair_resident: blocks of the 64-lane two-row kernel),
//     or 64 lanes hold at most 4 pieces a row (k <= 8192: registers only) unless the 32-lane grid
//     fits the device at once (resident: blocks of the 32-lane two-row kernel) and the 64-lane grid
//     does not (a second wave of a few blocks: the tail costs more than the 64-lane blocks gain);
//     0 for either count: not known, not compared;
//   - or 32 lanes hold at most 4 pieces a row and their grid (nib4_rows()'s rows, residency not
//     counted) is at most half as many blocks as SMs: blocks of 4 rows instead of 8 or 16 spread
//     the rows over more SMs.
// Why: the 32-lane kernels of these shapes ran at low occupancy (session 39, ncu, 2560 x 6912: 320
// blocks of 8 rows, 14 % achieved occupancy, 0.22 issued warps a scheduler, stalls on the loads),
// where 6912 x 2560, the same bytes, ran 37 % and 0.44. On the H200 (session 41, bt2, groups of 64,
// fp16 scales, us, the 32-lane rule's kernel / 64 lanes and two rows; blocks of both, two calls).
// Past 4 pieces a lane at 32 lanes, 64-lane grid in one wave: 2560 x 6912 (320 / 640) 5.09-5.12 /
// 3.85, 2560 x 5120 3.99-4.03 / 3.28, 1024 x 8192 4.33 / 3.56-3.58, 2048 x 8192 5.32-5.35
// / 3.87-3.88, 1024 x 4160 3.46 / 2.82-2.83, 2048 x 14336 (256 / 512 of 528) 8.90-8.92 / 7.08, 1024
// x 16384 6.90-6.93 / 5.72, 1024 x 11008 5.72-5.74 / 4.66-4.67; past one wave, at most 4 pieces a
// lane: 5120 x 5120 (640 of 528 / 1280 of 924) 7.71-7.73 / 7.03, 6912 x 6912 10.93-10.95
// / 9.46-9.47, 13824 x 5120 15.09 / 12.93-12.94, 28672 x 8192 39.50-39.54 / 36.47-36.59, 8192 x
// 8192 13.01-13.05 / 13.22-13.23 (the one loss); the 32-lane grid in one wave and the 64-lane one
// not: 4096 x 8192 (512 of 528 / 1024 of 924) 7.03-7.06 / 8.59-8.61, 4096 x 5120 5.24-5.26
// / 6.81-6.83, 4096 x 14336 (1024 of 528) 11.01-11.03 / 13.20, 4096 x 11008 9.03-9.07
// / 10.72-10.74. At most 4 pieces a lane at 32 lanes (four rows, 16 a block, of 132 SMs): 512 x
// 4096 (32 blocks) 2.19-2.20 / 1.68-1.69, 768 x 3072 (48) 2.04 / 1.72, 768 x 2304 2.03-2.04 / 1.63,
// 768 x 1536 1.72-1.73 / 1.47, 768 x 768 1.56 / 1.49-1.50, 1024 x 4096 (64) 2.26 / 2.04, 1024 x
// 3072 2.07 / 1.86-1.87, 1024 x 2560 2.06 / 1.76, 1024 x 2048 1.77-1.78 / 1.55, 1024 x
// 1024 1.54-1.55 / 1.45-1.46; past half the SMs: 1536 x 4096 (96) 2.31 / 2.38, 2048 x 4096
// (128) 2.54-2.55 / 2.69-2.70, 2048 x 3072 2.28 / 2.47-2.48, 2560 x 3072 (160) 2.50 / 2.44-2.45,
// 2560 x 2560 2.34-2.35 / 2.42.
constexpr int kPairLanes = 64;
inline bool nib4_two_warps(int64_t n, int64_t k, bool float_x, bool groups, int sms,
                           int64_t resident = 0, int64_t pair_resident = 0) {
    if (float_x || !groups || nib4_lanes(k) != kWarp) return false;
    const int64_t pieces = k / (kUnitCols / 2);
    const int64_t v = formats::ceil_div(pieces, int64_t{kWarp});
    const int64_t blocks = formats::ceil_div(n, block_rows(false, k, kWarp, 2));
    const int64_t pair_blocks = formats::ceil_div(n, block_rows(false, k, kPairLanes, 2));
    if (v > kMaxPiecesPerLane / 4) {
        const bool pair_fits = pair_resident > 0 && pair_blocks <= pair_resident;
        const bool fits = resident > 0 && blocks <= resident;
        return pair_fits ||
               (formats::ceil_div(pieces, int64_t{kPairLanes}) <= kMaxPiecesPerLane / 4 &&
                !(fits && pair_resident > 0));
    }
    const int rows = nib4_rows(n, k, kWarp, false, sms);
    return 2 * formats::ceil_div(n, block_rows(false, k, kWarp, rows)) <= sms;
}

// Where a block lets the next PDL-launched kernel start (pdl_launch_dependents()): after its
// products (late), else before its pdl_wait() (early). Early, the next call's blocks take the
// SMs' free slots at once and request their weights while this call runs, and those requests
// compete with this call's reads after its wait: its x, and its pieces still in flight. Late, they
// start as this call's blocks finish their sums, and have its last steps (the chains, the stores,
// the grid's end) to request their weights in. Late where the grid is at most kLateBlocksPerSm
// blocks an SM and either x is float (every block then quantizes x itself first, time for its
// weights to arrive) or a lane holds at most kLatePieces pieces over its rows: 1, 3 or 4 for
// tern2, whose two-piece lanes measured faster early. On the H100 (session 30, m = 1, us, early /
// late; blocks an SM of 132). bt2, groups of 64, int8 x: 768 x 768 (4 pieces, 0.4 blocks) 1.57 /
// 1.45, 3072 x 768 (4, 1.5) 1.96 / 1.75, 4096 x 768 (4, 1.9) 2.05-2.06 / 1.90, 6144 x 768 (4, 2.9)
// 2.21-2.22 / 2.19; 8192 x 1024 (4, 3.9) 2.57 / 2.77; 768 x 3072 (12) 2.04 / 2.49-2.50, 2560 x 2560
// (12) 2.60 / 3.17-3.18, 4096 x 4096 (8, 3.9) 4.28-4.29 / 5.03-5.04, 1536 x 1536 (8) 1.94-1.95 /
// 2.00; against the rule, 1024 x 8192 (16, 1.0) 4.25-4.27 / 3.99. From float x: 768 x 3072 4.43-4.44
// / 3.65-3.66, 2560 x 2560 (1.2) 4.57-4.59 / 4.38, 4096 x 4096 (1.9) 6.63-6.66 / 6.49-6.50;
// 6912 x 2560 (3.3) 6.07-6.10 / 6.66-6.67, 14336 x 4096 (6.8) 14.32-14.33 / 16.32-16.37. tern2,
// int8 x: 3072 x 768 (3 pieces) 2.21-2.22 / 1.91-1.92, 768 x 3072 (3) 2.41-2.42 / 1.98-1.99, 768 x
// 768 (1) 1.52 / 1.45-1.46; 1536 x 768 (2) 1.68 / 1.81, 768 x 1536 (2) 1.69-1.70 / 1.76; from
// float x late wherever measured (768 x 3072 4.22-4.25 / 3.45-3.48).
//
// For n x k over `lanes` lanes a row and `rows` rows a lane group; false where no lanes hold a
// row (k past the kernel's).
constexpr int64_t kLateBlocksPerSm = 3;
constexpr int64_t kLatePieces = 4;
inline bool late_launch(bool tern2, bool float_x, int64_t n, int64_t k, int lanes, int rows, int sms) {
    if (lanes <= 0 || rows <= 0) return false;
    if (formats::ceil_div(n, block_rows(float_x, k, lanes, rows)) > kLateBlocksPerSm * sms) return false;
    const int64_t pieces_per_lane = formats::ceil_div(k / kUnitCols * (tern2 ? 1 : 2), int64_t{lanes}) * rows;
    return float_x || (pieces_per_lane <= kLatePieces && !(tern2 && pieces_per_lane == 2));
}

// Launches the kernel for weights `codes` (n, k) after the caller's contract checks: x int8 codes,
// or (kFloatX) float xf quantized in the kernel; `group` >= k for one scale group, else a multiple
// of 64 (kG: Groups::kOne for one group, kUnit for group = 64, kUnits for larger groups);
// lanes_per_row and rows both 0 pick 64 lanes and two rows where nib4_two_warps() holds (nibbles,
// int8 x, several groups); else lanes_per_row 0 picks lanes(n, k) (tern2) or nib4_lanes(k), rows 0
// picks 1 (tern2) or nib4_rows(n, k, lanes, kFloatX, SMs); ahead_pieces (nibbles, int8 x: -1 the
// rule, ahead(); 0 every piece first; kAheadFew or kAheadMore; any at least a lane's pieces a row
// is 0). Throws trit::Error naming `who`, the shape and Codec::kLaneRule for lanes and rows that
// cannot hold the row, and the values ahead_pieces may take.
template <class Codec, Groups kG, bool kFloatX>
void launch(const char* who, const uint8_t* codes, int64_t n, int64_t k, const int8_t* x, const float* xf,
            int64_t group, bool prefetch, const ProductOut& out, cudaStream_t stream, int lanes_per_row,
            int rows, int ahead_pieces = -1) {
    constexpr bool kTern2 = Codec::kPieces == 1;
    constexpr bool kAheads = !kFloatX && !kTern2;  // kernels with a D
    TRIT_CHECK(ahead_pieces == -1 || ahead_pieces == 0 ||
                   (kAheads && (ahead_pieces == kAheadFew || ahead_pieces == kAheadMore)),
               who, " (m=1, n=", n, ", k=", k, ", group=", group, "): pieces requested ahead must be -1 (the rule), 0",
               kAheads ? ", 2 or 4" : "", ", got ", ahead_pieces);
    const int64_t units = k / kUnitCols, pieces = units * Codec::kPieces;
    const int warps = block_warps(kFloatX, k);
    // The epilogue's entries a row (int32 words): the units' sums, then (y) the groups' scales from
    // a 16-byte boundary.
    const bool scales = kG != Groups::kOne && out.y != nullptr;
    const int64_t unit_groups = kG == Groups::kOne ? units : group / kUnitCols;
    const int64_t scale_at = formats::ceil_div(units, int64_t{4}) * 4;
    const int stride = static_cast<int>(
        formats::ceil_div(scales ? scale_at + formats::ceil_div(units, unit_groups) : units,
                          int64_t{8}) *
            8 +
        4);
    const auto pieces_per_lane = [&](int l) {
        return static_cast<int>(formats::ceil_div(pieces, int64_t{l}));
    };
    // The pieces a thread stages in shared memory for l lanes and r rows (S of the kernel).
    const auto staged_for = [&](int l, int r) {
        return r == 2 && l != kPairLanes && pieces_per_lane(l) > kMaxPiecesPerLane / 2 ? kStaged
                                                                                       : 0;
    };
    // x's int8 codes, the rows' epilogue entries, the staged pieces (two rows over 8 pieces a
    // lane), for l lanes and r rows.
    const auto smem_for = [&](int l, int r) {
        const int staged = staged_for(l, r);
        return (kFloatX ? k : 0) +
               (kG != Groups::kOne ? block_rows(kFloatX, k, l, r) * stride * 4 : 0) +
               int64_t{staged} * r * warps * kWarp * 16;
    };
    int sms = 0;  // queried after the checks unless the rules need it
    if constexpr (!kTern2 && !kFloatX && kG != Groups::kOne) {
        if (lanes_per_row == 0 && rows == 0) {
            // Two warps a row or the 32-lane rule; past 4 pieces a lane at 32 lanes, with the
            // blocks the device holds of both two-row kernels.
            sms = gemv::sm_count();
            const int l = nib4_lanes(k);
            int64_t resident = 0, pair_resident = 0;
            if (pieces_per_lane(l) > kMaxPiecesPerLane / 4) {
                Kernel two = pick<Codec, kFloatX, kG>(l, 2, pieces_per_lane(l), warps, 0);
                Kernel pair =
                    pick<Codec, kFloatX, kG>(kPairLanes, 2, pieces_per_lane(kPairLanes), warps, 0);
                if (two != nullptr && pair != nullptr) {
                    resident = gemv::resident_blocks(who, two, warps, smem_for(l, 2));
                    pair_resident =
                        gemv::resident_blocks(who, pair, warps, smem_for(kPairLanes, 2));
                }
            }
            if (nib4_two_warps(n, k, kFloatX, true, sms, resident, pair_resident)) {
                lanes_per_row = kPairLanes;
                rows = 2;
            }
        }
    }
    if (lanes_per_row == 0) lanes_per_row = kTern2 ? lanes(n, k) : nib4_lanes(k);
    if (rows == 0 && kTern2) rows = 1;
    const int v = lanes_per_row > 0 ? pieces_per_lane(lanes_per_row) : 0;
    const auto smem_of = [&](int r) { return smem_for(lanes_per_row, r); };
    if (rows == 0) {
        sms = gemv::sm_count();
        rows = nib4_rows(n, k, lanes_per_row, kFloatX, sms);
        if (!kFloatX && rows == 2 && v <= kMaxPiecesPerLane / 4) {
            // The residency branch: the blocks the device holds of the two- and four-row kernels.
            Kernel two = pick<Codec, kFloatX, kG>(lanes_per_row, 2, v, warps, 0);
            Kernel four = pick<Codec, kFloatX, kG>(lanes_per_row, 4, v, warps, 0);
            if (two != nullptr && four != nullptr)
                rows = nib4_rows(n, k, lanes_per_row, kFloatX, sms,
                                 gemv::resident_blocks(who, two, warps, smem_of(2)),
                                 gemv::resident_blocks(who, four, warps, smem_of(4)));
        }
    }
    // pick() has no kernel for other lane counts or rows, nor for more than kMaxPiecesPerLane
    // pieces a lane (tern2: kMaxUnitsPerLane).
    Kernel kern = pick<Codec, kFloatX, kG>(lanes_per_row, rows, v, warps, 0);
    TRIT_CHECK(kern != nullptr, who, " (m=1, n=", n, ", k=", k, ", group=", group, "): ", Codec::kLaneRule, ", got ",
               lanes_per_row, " lanes and ", rows, " rows for ", units, " units");
    if (sms == 0) sms = gemv::sm_count();
    Args a{};
    a.codes = codes;
    a.x = x;
    a.xf = xf;
    a.n = n;
    a.units = static_cast<int>(units);
    a.pieces = static_cast<int>(pieces);
    a.unit_groups = static_cast<int>(unit_groups);
    // unit_groups >= 2 for kUnits (groups of one unit are kUnit); units <= 256 (k <= 16384).
    a.unit_groups_magic =
        kG == Groups::kUnits
            ? static_cast<uint32_t>(((uint64_t{1} << 32) + unit_groups - 1) / unit_groups)
            : 0;
    a.groups = static_cast<int>(formats::ceil_div(units, unit_groups));
    a.scale_at = static_cast<int>(scale_at);
    a.stride = stride;
    a.prefetch = prefetch;
    a.out = out;
    // The chain (kernel's kChain: groups of one unit, nibbles, staged pieces) reads the fp16 scales
    // of its staged pieces as 4-byte words of two halves, which with one row of scales of an odd
    // number of groups would reach past the array: there it reads the floats.
    if (kG == Groups::kUnit && !kTern2 && staged_for(lanes_per_row, rows) > 0 &&
        out.w_scale_rows == 1 && a.groups % 2 != 0)
        a.out.w_scale_half = nullptr;
    const int64_t rows_per_block = block_rows(kFloatX, k, lanes_per_row, rows);
    const dim3 grid(static_cast<unsigned>(formats::ceil_div(n, rows_per_block)));
    a.late = late_launch(kTern2, kFloatX, n, k, lanes_per_row, rows, sms);
    const int64_t smem = smem_of(rows);
    int d = ahead_pieces;
    bool allowed = false;  // gemv::allow_smem done for kern
    if (d < 0 && kAheads) {
        // The weights the blocks an SM holds at once request (ahead()); resident_blocks allows kern's
        // shared memory.
        const int64_t held = std::min<int64_t>(grid.x, gemv::resident_blocks(who, kern, warps, smem));
        allowed = true;
        d = ahead(held * warps * kWarp * rows * v * 16 / sms, v);
    }
    if (d > 0 && d < v) {
        kern = pick<Codec, kFloatX, kG>(lanes_per_row, rows, v, warps, d);
        allowed = false;
    }
    if (!allowed) gemv::allow_smem(who, kern, smem);
    detail::launch_kernel(kern, grid, dim3(warps * kWarp), static_cast<size_t>(smem), stream, true, a);
}

}  // namespace trit::kernels::oneshot
