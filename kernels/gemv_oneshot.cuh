// The one-shot GEMV for one token, over the weights' codec: tern2's 2-bit codes
// (tern2_gemv_oneshot.cu) and bt's 4-bit nibbles (bt_nib4_oneshot.cu). Device code and its host
// launch helper; no LibTorch. The public contracts are in kernels/tern2_gemv_oneshot.h and
// kernels/bt_nib4.h.
//
// Layout. A row is k / 64 units of 64 columns (tern2: 16 bytes a unit, nibbles: 32). L lanes of a
// warp share a row (L = 4, 8, 16 or 32; 32 / L rows a warp), lane l of the row owning units
// l, l + L, ... (at most 8: U = ceil(units / L)), held in registers. Every lane requests its
// units, and the scales and bias its row's epilogue needs, before pdl_wait() when
// PackedWeights::pdl allows it: the whole matrix is in flight while the previous kernel ends, with
// no tile loop, no shared memory (but x's codes from float x) and no barrier. After the wait a lane
// reads the x of its units (from L1 / L2), decodes and multiplies with dp4a, and then:
//   - one scale group: the row's lanes add their int32 sums with shuffles (exact in any order);
//   - groups of one unit (64 columns): each lane forms its units' terms w_scale[g] * float(sum),
//     and the row's first lane adds them with shuffles in increasing g, the loop unrolled so that
//     the shuffles run ahead of the chain of additions: kernels/product.h's epilogue, bit for bit;
//   - groups of several units: each lane keeps one int32 sum per unit, and the row's first lane
//     gathers them with shuffles in column order, adding the units of a group in int32 and the
//     groups' terms in increasing g.
//   The scale of group g is requested early by the lane owning the group's last unit.
// From float x (kFloatX), every block first reduces x's absmax and writes its int8 codes to shared
// memory with act_int8_quantize's arithmetic (act_int8.cuh), and uses that scale in the epilogue.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "kernels/act_int8.cuh"
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
constexpr int kMaxUnitsPerLane = 8;
constexpr int64_t kMaxK = int64_t{kWarp} * kMaxUnitsPerLane * kUnitCols;  // 16384
constexpr int64_t kGridThreads = 16384;  // the grid size lanes() aims under

// How a row's int32 sums become its scale groups' sums: one group (the row's lanes add up), groups
// of one unit (group = 64: every unit's term w_scale[g] * float(sum) formed by its lane, the row's
// first lane adding the terms in order), or groups of several units (the row's first lane adds the
// units' int32 sums in order, then each group's term).
enum class Groups { kOne, kUnit, kUnits };

struct Args {
    const uint8_t* codes;
    const int8_t* x;   // int8 x, or null when xf is given
    const float* xf;   // float x, quantized by every block (kFloatX)
    int64_t n;
    int units;        // k / 64
    int unit_groups;  // units per scale group
    int groups;       // ceil(units / unit_groups)
    bool prefetch;    // request the weights, scales and bias before pdl_wait()
    ProductOut out;
};

// tern2: a unit is one 16-byte piece; tern2_mma.cuh's decode (9 integer instructions per 16
// codes) against the permuted x.
struct Tern2Codec {
    static constexpr int kPieces = 1;
    __device__ static int dot(const uint4 (&w)[kPieces], const uint4 (&x)[4], int s) {
        uint32_t xq[16];
#pragma unroll
        for (int q = 0; q < 4; ++q) tern2dev::permute_x(x[q], xq + 4 * q);
        s = tern2dev::dot16(w[0].x, xq + 0, s);
        s = tern2dev::dot16(w[0].y, xq + 4, s);
        s = tern2dev::dot16(w[0].z, xq + 8, s);
        return tern2dev::dot16(w[0].w, xq + 12, s);
    }
};

// bt nibbles (kernels/bt_nib4.h): a unit is two 16-byte pieces, word q = columns 8q .. 8q + 7 as
// code + 8, low nibbles first, against x in natural order. Per word two masks and two dp4a (the
// high nibbles stay in place, 16 (code + 8), in a sum of their own shifted right by 4: exact);
// one dp4a per 4 x codes subtracts 8 * their sum, so the result is the codes' sum.
struct Nib4Codec {
    static constexpr int kPieces = 2;
    __device__ static int dot(const uint4 (&w)[kPieces], const uint4 (&x)[4], int s) {
        const uint32_t wq[8] = {w[0].x, w[0].y, w[0].z, w[0].w, w[1].x, w[1].y, w[1].z, w[1].w};
        const uint32_t xw[16] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w,
                                 x[2].x, x[2].y, x[2].z, x[2].w, x[3].x, x[3].y, x[3].z, x[3].w};
        constexpr uint32_t kMinus8 = 0xF8F8F8F8u;  // -8 in every byte
        int hi = 0;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            s = gemv::dp4a_us(wq[q] & 0x0F0F0F0Fu, xw[2 * q], s);
            hi = gemv::dp4a_us(wq[q] & 0xF0F0F0F0u, xw[2 * q + 1], hi);
        }
#pragma unroll
        for (int e = 0; e < 16; ++e) s = __dp4a(static_cast<int>(xw[e]), static_cast<int>(kMinus8), s);
        return s + (hi >> 4);
    }
};

template <class Codec, int L, int U, bool kFloatX, Groups kG, int W>
__global__ void __launch_bounds__(W* kWarp) kernel(const Args a) {
    extern __shared__ uint4 x_codes[];  // kFloatX: the k int8 codes of x
    __shared__ float partial[W];
    constexpr int kP = Codec::kPieces;
    constexpr int kRowsPerWarp = kWarp / L;
    const int lane = threadIdx.x % kWarp, sub = lane % L;
    const int64_t warp = int64_t{blockIdx.x} * W + threadIdx.x / kWarp;
    const int64_t j = warp * kRowsPerWarp + lane / L;
    const bool row_ok = j < a.n;
    const bool writer = row_ok && sub == 0;
    const uint8_t* row = a.codes + (row_ok ? j : 0) * (int64_t{a.units} * 16 * kP);

    uint4 wv[U][kP];
    constexpr bool kGroups = kG != Groups::kOne;
    float ws[kGroups ? U : 1] = {};  // the scale of the group unit sub + u L ends, else 0
    float bias = 0.0f;
    auto load = [&] {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int p = sub + u * L;
#pragma unroll
            for (int c = 0; c < kP; ++c)
                wv[u][c] = row_ok && p < a.units ? tern2dev::load_weights(row + (int64_t{p} * kP + c) * 16)
                                                 : make_uint4(0, 0, 0, 0);
        }
        if (!row_ok || a.out.y == nullptr) return;
        if constexpr (kGroups) {
            const float* wsr = detail::epilogue_w_scale(a.out, j, a.groups);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int p = sub + u * L;
                const bool ends = p < a.units && ((p + 1) % a.unit_groups == 0 || p + 1 == a.units);
                ws[u] = ends ? __ldg(wsr + p / a.unit_groups) : 0.0f;
            }
        } else if (writer) {
            ws[0] = __ldg(detail::epilogue_w_scale(a.out, j, 1));
        }
        if (writer && a.out.bias != nullptr) bias = __ldg(a.out.bias + j);
    };
    if (a.prefetch) load();
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    if (!a.prefetch) load();

    float sx = 0.0f;
    if constexpr (kFloatX) {
        const float4* xv = reinterpret_cast<const float4*>(a.xf);
        const int quads = a.units * (kUnitCols / 4);
        float amax = 0.0f;
#pragma unroll 4
        for (int i = threadIdx.x; i < quads; i += W * kWarp) amax = fmaxf(amax, act8dev::abs_or_inf(__ldg(xv + i)));
        const act8dev::RowQuant rq = act8dev::row_quant(act8dev::block_max(amax, partial));
        sx = rq.scale;
        auto* codes = reinterpret_cast<char4*>(x_codes);
#pragma unroll 4
        for (int i = threadIdx.x; i < quads; i += W * kWarp) {
            const float4 v = __ldg(xv + i);
            codes[i] = rq.finite ? make_char4(act8dev::quantize_one(v.x, rq.qs), act8dev::quantize_one(v.y, rq.qs),
                                              act8dev::quantize_one(v.z, rq.qs), act8dev::quantize_one(v.w, rq.qs))
                                 : make_char4(0, 0, 0, 0);
        }
        __syncthreads();
    } else {
        if (a.out.y != nullptr) sx = a.out.x_scale[0];
    }

    int s = 0;
    int sums[kGroups ? U : 1] = {};  // the int32 sum of each unit
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int p = sub + u * L;
        if (p >= a.units) break;  // lanes past the row's last unit hold zeros from here on
        uint4 xv[4];
        const uint4* xp = kFloatX ? x_codes + p * 4 : reinterpret_cast<const uint4*>(a.x) + int64_t{p} * 4;
#pragma unroll
        for (int q = 0; q < 4; ++q) xv[q] = kFloatX ? xp[q] : __ldg(xp + q);
        if constexpr (kGroups) sums[u] = Codec::dot(wv[u], xv, 0);
        else s = Codec::dot(wv[u], xv, s);
    }

    if constexpr (!kGroups) {
        // Integer sums are exact in any order: the row's L lanes (aligned runs of the warp) add up.
#pragma unroll
        for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (!writer) return;
        if (a.out.acc != nullptr) {
            a.out.acc[j] = s;
            return;
        }
        // store_output's arithmetic for one group and one token, the scale and bias from registers.
        a.out.y[j] = __fadd_rn(__fmul_rn(detail::epilogue_add(0.0f, ws[0], s), sx), bias);
    } else if constexpr (kG == Groups::kUnit) {
        // Each lane forms its units' terms; the row's first lane adds them in column order (unit
        // u L + i from lane i). The loop is unrolled and its bounds are the warp's, so every
        // shuffle can be issued ahead of the chain of additions.
        const int first = lane - sub;
        if (a.out.acc != nullptr) {
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int i = 0; i < L; ++i) {
                    const int v = __shfl_sync(0xffffffffu, sums[u], first + i);
                    if (writer && u * L + i < a.units) a.out.acc[j * a.groups + u * L + i] = v;
                }
            return;
        }
        float term[U];
#pragma unroll
        for (int u = 0; u < U; ++u) term[u] = __fmul_rn(ws[u], __int2float_rn(sums[u]));
        float y = 0.0f;
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int i = 0; i < L; ++i) {
                const float t = __shfl_sync(0xffffffffu, term[u], first + i);
                if (u * L + i < a.units) y = __fadd_rn(y, t);
            }
        if (writer) a.out.y[j] = __fadd_rn(__fmul_rn(y, sx), bias);
    } else {
        // The row's first lane takes the units in column order (unit u L + i from lane i); every
        // lane runs the loop, whose bounds are the same for the whole warp, for the shuffles.
        const int first = lane - sub;
        int32_t* acc = writer && a.out.acc != nullptr ? a.out.acc + j * a.groups : nullptr;
        int group_sum = 0, in_group = 0, g = 0;
        float y = 0.0f;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            for (int i = 0; i < L; ++i) {
                const int p = u * L + i;
                if (p >= a.units) break;
                group_sum += __shfl_sync(0xffffffffu, sums[u], first + i);
                const float w = __shfl_sync(0xffffffffu, ws[u], first + i);
                if (++in_group == a.unit_groups || p + 1 == a.units) {
                    if (acc != nullptr) acc[g] = group_sum;
                    y = detail::epilogue_add(y, w, group_sum);
                    group_sum = 0, in_group = 0, ++g;
                }
            }
        }
        if (writer && a.out.y != nullptr) a.out.y[j] = __fadd_rn(__fmul_rn(y, sx), bias);
    }
}

using Kernel = void (*)(Args);

// kWideWarps kernels exist for float x with at most kWideMaxK / 64 units a row (U <= 4 at L >= 4).
template <class Codec, int L, int U, bool kFloatX, Groups kG>
Kernel pick_w(int warps) {
    if constexpr (kFloatX && U * 4 <= kWideMaxK / kUnitCols) {
        if (warps == kWideWarps) return kernel<Codec, L, U, kFloatX, kG, kWideWarps>;
    }
    return warps == kWarps ? kernel<Codec, L, U, kFloatX, kG, kWarps> : nullptr;
}

template <class Codec, int L, bool kFloatX, Groups kG, int... Us>
Kernel pick_u(int u, int warps, std::integer_sequence<int, Us...>) {
    Kernel k = nullptr;
    ((k = (u == Us + 1 ? pick_w<Codec, L, Us + 1, kFloatX, kG>(warps) : k)), ...);
    return k;
}

template <class Codec, bool kFloatX, Groups kG>
Kernel pick(int lanes, int u, int warps) {
    const auto us = std::make_integer_sequence<int, kMaxUnitsPerLane>{};
    switch (lanes) {
        case 4: return pick_u<Codec, 4, kFloatX, kG>(u, warps, us);
        case 8: return pick_u<Codec, 8, kFloatX, kG>(u, warps, us);
        case 16: return pick_u<Codec, 16, kFloatX, kG>(u, warps, us);
        case 32: return pick_u<Codec, 32, kFloatX, kG>(u, warps, us);
        default: return nullptr;
    }
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

// Launches the kernel for weights `codes` (n, k) after the caller's contract checks: x int8 codes,
// or (kFloatX) float xf quantized in the kernel; `group` >= k for one scale group, else a multiple
// of 64 (kG: Groups::kOne for one group, kUnit for group = 64, kUnits for larger groups); lanes 0
// picks lanes(n, k). Throws trit::Error naming `who`, the shape and the lane rule for a lane count
// that cannot hold the row.
template <class Codec, Groups kG, bool kFloatX>
void launch(const char* who, const uint8_t* codes, int64_t n, int64_t k, const int8_t* x, const float* xf,
            int64_t group, bool prefetch, const ProductOut& out, cudaStream_t stream, int lanes_per_row) {
    const int64_t units = k / kUnitCols;
    if (lanes_per_row == 0) lanes_per_row = lanes(n, k);
    const int u = lanes_per_row > 0 ? units_per_lane(units, lanes_per_row) : 0;
    const int warps = kFloatX && k <= kWideMaxK ? kWideWarps : kWarps;
    const Kernel kern = lanes_per_row <= 0 ? nullptr : pick<Codec, kFloatX, kG>(lanes_per_row, u, warps);
    TRIT_CHECK(kern != nullptr, who, " (m=1, n=", n, ", k=", k, ", group=", group,
               "): lanes per row must be 4, 8, 16 or 32 with at most 8 units of 64 columns each, got ",
               lanes_per_row, " lanes for ", units, " units");
    Args a{};
    a.codes = codes;
    a.x = x;
    a.xf = xf;
    a.n = n;
    a.units = static_cast<int>(units);
    a.unit_groups = kG == Groups::kOne ? static_cast<int>(units) : static_cast<int>(group / kUnitCols);
    a.groups = static_cast<int>(formats::ceil_div(units, int64_t{a.unit_groups}));
    a.prefetch = prefetch;
    a.out = out;
    const int64_t rows_per_block = int64_t{warps} * (kWarp / lanes_per_row);
    const dim3 grid(static_cast<unsigned>(formats::ceil_div(n, rows_per_block)));
    const size_t smem = kFloatX ? static_cast<size_t>(k) : 0;  // x's int8 codes
    detail::launch_kernel(kern, grid, dim3(warps * kWarp), smem, stream, true, a);
}

}  // namespace trit::kernels::oneshot
