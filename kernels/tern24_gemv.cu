// tern24 GEMV (kernels/tern24_gemv.h): the warp-per-row kernel and the dispatch between it and the
// streaming kernel (m <= 2, gemv_stream.cu).
// The two kernels decode a 4-column group from a 6-bit index, bitmap | sign_pair << 4, through a
// table of its 4 int8 codes (kernels/tern24_table.cuh) replicated once per lane in shared memory
// (lane l's copy in bank l: lookups never conflict), then multiply with one dp4a per group and
// token.
//
// Warp kernel: a persistent grid of blocks of up to 8 warps; a warp takes one output row at a time;
// lane l reads the row's chunks l, l + 32, ... (two in flight). x (m, k) is staged once per block
// in shared memory, each chunk's 128 bytes padded to 144 so that the lanes' 16-byte reads (128 B
// apart) fall in different banks. Its decode builds E/O words with garbage above the index (5 ops
// a word) and masks each index with a shift and an AND-OR (two ops a lookup); groups of 32 or 64
// columns flush per word into per-warp shared accumulators.
#include "kernels/tern24_gemv.h"

#include <algorithm>
#include <atomic>
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
#include "kernels/tern24_table.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
using gemv::kWarp;
using tern24dev::CodeTable;
using tern24dev::kChunkCols;
using tern24dev::kTableEntries;
using tern24dev::make_code_table;

// Threads read it while filling the shared tables.
__constant__ CodeTable kCodes = make_code_table();

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

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
    // The next kernel launches once x is staged, not before the wait: on the H100
    // (docs/BENCHMARKS.md, session 31, one group, us) faster by more than 1 % on 21 of 27 calls at
    // m = 3, 4, 8 on the default shapes and within 1 % on 5, e.g. m = 8 768 x 768 4.67 vs 6.62,
    // m = 3 2560 x 6912 7.95 vs 10.18; 1.7 % slower on m = 8 4096 x 4096 (12.87 vs 12.66).
    detail::pdl_launch_dependents();

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

std::atomic<Tern24GemvVariant> g_variant{Tern24GemvVariant::kAuto};

// The auto order's tensor-core rule (kernels/tern24_gemv.h), with the shared-memory check the
// launcher makes (a device query, cached).
bool mma_auto(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    return m >= 3 && (m >= 5 || w.n >= 8192) && tern24_gemv_mma_rejects(w, x, m, group).empty() &&
           tern24_gemv_mma_resident_warps(m, w.k) > 0;
}

}  // namespace

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

void set_tern24_gemv_variant(Tern24GemvVariant v) {
    g_variant.store(v);
}

Tern24GemvVariant tern24_gemv_variant_forced() {
    return g_variant.load();
}

bool tern24_gemv_mma_first(int64_t m, int64_t n, int64_t k, int64_t warps) {
    if (m < 3 || m > kTern24GemvMaxM || warps < 1 || n < 1 || n * k < kTern24MmaFirstMinWeights)
        return false;
    const int64_t tiles = fmt::ceil_div(n, int64_t{16});
    const int64_t rounds = fmt::ceil_div(tiles, warps);
    return static_cast<double>(tiles) >=
           kTern24MmaFirstMinFill * static_cast<double>(rounds * warps);
}

namespace {

// One kernel's own rules ("" for kAuto).
std::string kernel_rejects(Tern24GemvVariant v, const PackedWeights& w, const int8_t* x, int64_t m,
                           int64_t group) {
    switch (v) {
        case Tern24GemvVariant::kStream:
            return tern24_gemv_stream_rejects(w, x, m, group);
        case Tern24GemvVariant::kWarp:
            return tern24_gemv_warp_rejects(w, x, m, group);
        case Tern24GemvVariant::kMma:
            return tern24_gemv_mma_rejects(w, x, m, group);
        case Tern24GemvVariant::kAuto:
            break;
    }
    return "";
}

// The kernel tern24_gemv runs: the forced one where it takes the call, else the first of the auto
// order that does; kAuto when none does.
Tern24GemvVariant pick(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    const Tern24GemvVariant forced = g_variant.load();
    if (forced != Tern24GemvVariant::kAuto)
        return kernel_rejects(forced, w, x, m, group).empty() ? forced : Tern24GemvVariant::kAuto;
    if (stream_takes(w, x, m, group)) return Tern24GemvVariant::kStream;
    if (mma_auto(w, x, m, group)) return Tern24GemvVariant::kMma;
    return tern24_gemv_warp_rejects(w, x, m, group).empty() ? Tern24GemvVariant::kWarp
                                                            : Tern24GemvVariant::kAuto;
}

}  // namespace

std::string tern24_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    const Tern24GemvVariant forced = g_variant.load();
    if (forced != Tern24GemvVariant::kAuto) return kernel_rejects(forced, w, x, m, group);
    // The tensor-core kernel's rules are within the warp kernel's (and need no device query here).
    if (stream_takes(w, x, m, group)) return "";
    return tern24_gemv_warp_rejects(w, x, m, group);
}

const char* tern24_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    switch (pick(w, x, m, group)) {
        case Tern24GemvVariant::kStream:
            return "stream";
        case Tern24GemvVariant::kMma:
            return "mma";
        case Tern24GemvVariant::kWarp:
            return "warp";
        case Tern24GemvVariant::kAuto:
            break;
    }
    return "";
}

void tern24_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const ProductOut& out, cudaStream_t stream) {
    switch (pick(w, x, m, group)) {
        case Tern24GemvVariant::kStream:
            check_product("tern24_gemv", w, x, m, group, out);
            return tern24_gemv_stream(w, x, m, group, out, stream);
        case Tern24GemvVariant::kMma:
            return tern24_gemv_mma(w, x, m, group, out, stream);
        case Tern24GemvVariant::kWarp:
            gemv::check_call("tern24_gemv", w, x, m, group, out, "");
            return warp::run(w, x, m, group, out, stream);
        case Tern24GemvVariant::kAuto:
            break;
    }
    // No kernel takes the call: check_product's rules, then the first broken rule, as an error.
    gemv::check_call("tern24_gemv", w, x, m, group, out, tern24_gemv_rejects(w, x, m, group));
}

void tern24_gemv_warp(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                      const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("tern24_gemv_warp", w, x, m, group, out, tern24_gemv_warp_rejects(w, x, m, group));
    warp::run(w, x, m, group, out, stream);
}

}  // namespace trit::kernels
