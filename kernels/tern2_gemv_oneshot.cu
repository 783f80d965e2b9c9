// tern2 x int8 one-token GEMV with every load in flight at once: see kernels/tern2_gemv_oneshot.h
// for the contract and the layout. The decode (9 integer instructions per 16 codes) and the
// permuted x are tern2_mma.cuh's.
#include "kernels/tern2_gemv_oneshot.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/act_int8.cuh"
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
constexpr int kWarps = 4;            // per block
constexpr int kPieceCols = 64;       // columns of one 16-byte piece
constexpr int kMaxPiecesPerLane = 8;
constexpr int64_t kOneshotThreads = 16384;  // the grid size tern2_gemv_oneshot_lanes aims under

struct OneshotArgs {
    const uint8_t* codes;
    const int8_t* x;   // int8 x, or null when xf is given
    const float* xf;   // float x, quantized by every block (kFloatX)
    int64_t n;
    int pieces;     // k / 64
    bool prefetch;  // request the weights, scale and bias before pdl_wait()
    ProductOut out;
};

// L lanes per row, U pieces per lane (lane l of a row owns pieces l, l + L, ...: neighbouring
// lanes read neighbouring 16 bytes). kFloatX: x is float; every block reduces its absmax and
// writes its int8 codes to shared memory (act_int8_quantize's arithmetic, act_int8.cuh), and the
// epilogue uses that scale.
template <int L, int U, bool kFloatX>
__global__ void __launch_bounds__(kWarps* kWarp) tern2_gemv_oneshot_kernel(const OneshotArgs a) {
    extern __shared__ uint4 x_codes[];  // kFloatX: the k int8 codes of x
    __shared__ float partial[kWarps];
    constexpr int kRowsPerWarp = kWarp / L;
    const int lane = threadIdx.x % kWarp, sub = lane % L;
    const int64_t warp = int64_t{blockIdx.x} * kWarps + threadIdx.x / kWarp;
    const int64_t j = warp * kRowsPerWarp + lane / L;
    const bool row_ok = j < a.n;
    const bool writer = row_ok && sub == 0;
    const uint8_t* row = a.codes + (row_ok ? j : 0) * (int64_t{a.pieces} * 16);

    uint4 wv[U];
    float ws = 0.0f, bias = 0.0f;
    auto load = [&] {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int p = sub + u * L;
            wv[u] = row_ok && p < a.pieces ? load_weights(row + int64_t{p} * 16) : make_uint4(0, 0, 0, 0);
        }
        if (writer && a.out.y != nullptr) {
            ws = __ldg(detail::epilogue_w_scale(a.out, j, 1));
            if (a.out.bias != nullptr) bias = __ldg(a.out.bias + j);
        }
    };
    if (a.prefetch) load();
    detail::pdl_launch_dependents();
    detail::pdl_wait();
    if (!a.prefetch) load();

    float sx = 0.0f;
    if constexpr (kFloatX) {
        const float4* xv = reinterpret_cast<const float4*>(a.xf);
        const int units = a.pieces * (kPieceCols / 4);
        float amax = 0.0f;
#pragma unroll 4
        for (int i = threadIdx.x; i < units; i += kWarps * kWarp) amax = fmaxf(amax, act8dev::abs_or_inf(__ldg(xv + i)));
        const act8dev::RowQuant rq = act8dev::row_quant(act8dev::block_max(amax, partial));
        sx = rq.scale;
        auto* codes = reinterpret_cast<char4*>(x_codes);
#pragma unroll 4
        for (int i = threadIdx.x; i < units; i += kWarps * kWarp) {
            const float4 v = __ldg(xv + i);
            codes[i] = rq.finite ? make_char4(act8dev::quantize_one(v.x, rq.qs), act8dev::quantize_one(v.y, rq.qs),
                                              act8dev::quantize_one(v.z, rq.qs), act8dev::quantize_one(v.w, rq.qs))
                                 : make_char4(0, 0, 0, 0);
        }
        __syncthreads();
    }

    int s = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int p = sub + u * L;
        if (p >= a.pieces) break;  // lanes past the row's last piece hold zeros from here on
        uint32_t xq[16];
        if constexpr (kFloatX) {
#pragma unroll
            for (int q = 0; q < 4; ++q) permute_x(x_codes[p * 4 + q], xq + 4 * q);
        } else {
            const uint4* xp = reinterpret_cast<const uint4*>(a.x) + int64_t{p} * 4;
#pragma unroll
            for (int q = 0; q < 4; ++q) permute_x(__ldg(xp + q), xq + 4 * q);
        }
        s = dot16(wv[u].x, xq + 0, s);
        s = dot16(wv[u].y, xq + 4, s);
        s = dot16(wv[u].z, xq + 8, s);
        s = dot16(wv[u].w, xq + 12, s);
    }
    // Integer sums are exact in any order: the row's L lanes (aligned runs of the warp) add up.
#pragma unroll
    for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (!writer) return;
    if (a.out.acc != nullptr) {
        a.out.acc[j] = s;
        return;
    }
    // store_output's arithmetic for one group and one token, the scale and bias from registers.
    if constexpr (!kFloatX) sx = a.out.x_scale[0];
    a.out.y[j] = __fadd_rn(__fmul_rn(detail::epilogue_add(0.0f, ws, s), sx), bias);
}

using Kernel = void (*)(OneshotArgs);

template <int L, bool kFloatX, int... Us>
Kernel pick_u(int u, std::integer_sequence<int, Us...>) {
    Kernel k = nullptr;
    ((k = (u == Us + 1 ? tern2_gemv_oneshot_kernel<L, Us + 1, kFloatX> : k)), ...);
    return k;
}

template <bool kFloatX>
Kernel pick(int lanes, int u) {
    const auto us = std::make_integer_sequence<int, kMaxPiecesPerLane>{};
    switch (lanes) {
        case 4: return pick_u<4, kFloatX>(u, us);
        case 8: return pick_u<8, kFloatX>(u, us);
        case 16: return pick_u<16, kFloatX>(u, us);
        case 32: return pick_u<32, kFloatX>(u, us);
        default: return nullptr;
    }
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int pieces_per_lane(int64_t pieces, int lanes) {
    return static_cast<int>(formats::ceil_div(pieces, int64_t{lanes}));
}

}  // namespace

std::string tern2_gemv_oneshot_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    if (m != 1) return "m must be 1";
    if (group < w.k) return "one scale group only (group >= k)";
    if (w.k % kPieceCols != 0) return "k must be a multiple of 64";
    if (w.k > kTern2GemvOneshotMaxK) return "k must be <= 16384";
    if (!aligned16(w.a) || !aligned16(x)) return "the codes and x must be 16-byte aligned";
    // A block covers at least kWarps rows (one per warp, at 32 lanes per row).
    if (formats::ceil_div(w.n, int64_t{kWarps}) > 2147483647) return "n must be <= 4 * (2^31 - 1)";
    return "";
}

// The most lanes per row (32, 16, 8, 4) that keep the grid at <= 16384 threads, U <= 8; when
// even 4 lanes give more threads, the fewest lanes with U <= 8. On the H100 (session 25, m = 1,
// us): 768 x 768 1.70 with 16 lanes (12288 threads) against 1.82 / 1.98 / 2.09 with 32 / 8 / 4;
// 1024 x 1024 1.91 with 16 against 1.95 / 2.10 / 2.50; 3072 x 768 2.27 with 4 (12288) against
// 2.22 / 2.56 / 2.60 with 8 / 16 / 32; 768 x 3072 2.40 with 16 against 2.31 / 3.22 with 32 / 8.
// A larger grid leaves no room on the SMs for the next PDL-launched call's blocks, whose early
// weight reads then no longer overlap this call.
int tern2_gemv_oneshot_lanes(int64_t n, int64_t k) {
    const int64_t pieces = std::max<int64_t>(1, k / kPieceCols);
    int fewest = 0;
    for (int lanes : {32, 16, 8, 4}) {
        if (pieces_per_lane(pieces, lanes) > kMaxPiecesPerLane) continue;
        if (n * lanes <= kOneshotThreads) return lanes;
        fewest = lanes;
    }
    return fewest;
}

namespace {

// Both launchers after their checks: x is int8 codes, or float (xf) quantized in the kernel.
void launch_oneshot(const char* who, const PackedWeights& w, const int8_t* x, const float* xf, int64_t group,
                    const ProductOut& out, cudaStream_t stream, int lanes) {
    const int64_t pieces = w.k / kPieceCols;
    if (lanes == 0) lanes = tern2_gemv_oneshot_lanes(w.n, w.k);
    const int u = lanes > 0 ? pieces_per_lane(pieces, lanes) : 0;
    const Kernel kernel = lanes <= 0 ? nullptr : xf != nullptr ? pick<true>(lanes, u) : pick<false>(lanes, u);
    TRIT_CHECK(kernel != nullptr, who, " (m=1, n=", w.n, ", k=", w.k, ", group=", group,
               "): lanes per row must be 4, 8, 16 or 32 with at most 8 pieces of 64 columns each, got ", lanes,
               " lanes for ", pieces, " pieces");
    OneshotArgs a{};
    a.codes = w.a;
    a.x = x;
    a.xf = xf;
    a.n = w.n;
    a.pieces = static_cast<int>(pieces);
    a.prefetch = w.pdl;
    a.out = out;
    const int64_t rows_per_block = int64_t{kWarps} * (kWarp / lanes);
    const dim3 grid(static_cast<unsigned>(formats::ceil_div(w.n, rows_per_block)));
    const size_t smem = xf != nullptr ? static_cast<size_t>(w.k) : 0;  // x's int8 codes
    detail::launch_kernel(kernel, grid, dim3(kWarps * kWarp), smem, stream, true, a);
}

}  // namespace

void tern2_gemv_oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream, int lanes) {
    check_product("tern2_gemv_oneshot", w, x, m, group, out);
    const std::string no = tern2_gemv_oneshot_rejects(w, x, m, group);
    TRIT_CHECK(no.empty(), "tern2_gemv_oneshot (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
               "): ", no);
    launch_oneshot("tern2_gemv_oneshot", w, x, nullptr, group, out, stream, lanes);
}

void tern2_gemv_oneshot_from_float(const PackedWeights& w, const float* x, int64_t group, const ProductOut& out,
                                   cudaStream_t stream, int lanes) {
    const char* who = "tern2_gemv_oneshot_from_float";
    TRIT_CHECK(out.acc == nullptr, who, " (m=1, n=", w.n, ", k=", w.k, ", group=", group,
               "): y only (out.acc must be null): the x scale is the kernel's own");
    // out.x_scale is not read (the kernel computes x's scale): the shared checks see a stand-in.
    static const float kNotRead = 0.0f;
    ProductOut checked = out;
    checked.x_scale = &kNotRead;
    checked.x_scale_rows = 1;
    const auto* x_bytes = reinterpret_cast<const int8_t*>(x);
    check_product(who, w, x_bytes, 1, group, checked);
    const std::string no = tern2_gemv_oneshot_rejects(w, x_bytes, 1, group);
    TRIT_CHECK(no.empty(), who, " (m=1, n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
    launch_oneshot(who, w, nullptr, x, group, out, stream, lanes);
}

}  // namespace trit::kernels
