// The tern24 GEMV on int8 tensor cores, m = 1..8 (tern24_gemv_mma, kernels/tern24_gemv.h): the
// gemv path's kernel from m = 3 (its auto order), and ahead of the tern24 dense copy where its
// tiles fill the GPU (tern24_gemv_mma_first). `trit bench kernels --formats tern24 --paths
// gemv.mma` times it alone.
//
// Why. The streaming dp4a GEMV is bound by issue, not by DRAM (ncu, docs/BENCHMARKS.md session 37:
// 0.63 instructions a scheduler cycle at 3.7 warps a scheduler): per 32 weights and token it
// issues 8 table lookups, 8 index PRMTs and 8 dp4a, then a REDUX per row. Here one mma.sync
// m16n8k32 takes 16 rows x 32 columns: a lane decodes 4 code words (the same lookups), reads 8
// bytes of x from shared memory and issues one mma, about 0.85 instructions a weight by count, the
// k sum in the accumulators, and the same instructions for 1 to 8 tokens (B's 8 columns).
//
// Layout. Warp w of the grid owns tiles of 16 rows (tile = w, + warps, ...), each over all of k.
// Lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 of the tile: per sub-tile of 512
// columns, chunk 4 s + t of each row (128 columns: 16 mask bytes, 8 sign bytes; a chunk past k is
// zero), in a ring of kDepth sub-tiles requested ahead. mma step 4w + j of a sub-tile takes groups
// 8w + 2j and 8w + 2j + 1 of the lane's chunk as its k slots 4t..4t+3 and 16+4t..16+4t+3: A = the
// code words of those groups in rows g and g + 8 (bytes j of the E and O index words of mask word
// w, looked up in a per-lane shared-memory table as in gemv_stream.cu), B = x of the same columns
// (x of token g in lanes g < m, token 0 elsewhere), one 16-byte shared load for two steps. The
// accumulators c0 / c2 (c1 / c3) end with rows g / g + 8 for token 2t (2t + 1), two sets (even and
// odd steps) so that two chains of dependent mmas run. x lives in shared memory, token i's chunk c
// at i * x_token + 144 c: in each 8-lane phase of a 16-byte load the 4 lanes t of a token read
// distinct banks (144 = 128 + 16), and x_token = 64 (mod 128) puts the phase's other token in the
// other 16 banks. A tile's scales and bias are requested when it starts.
#include "kernels/tern24_gemv.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"
#include "exporters/formats/tern24.h"
#include "kernels/epilogue.cuh"
#include "kernels/gemv_common.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern24_decode.cuh"
#include "kernels/tern24_table.cuh"
#include "kernels/tern2_mma.cuh"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;
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

__constant__ CodeTable kCodes = make_code_table();

constexpr int kWarps = 8;  // per block
constexpr int kThreads = kWarps * kWarp;
constexpr int kTileRows = 16;     // mma m
constexpr int kSubChunks = 4;     // chunks a sub-tile: one a lane t
constexpr int kXChunk = 144;      // shared bytes a chunk of x
constexpr int kTableStride = 64;  // words a table row (the index is address byte 1)
constexpr int kDepth = 4;         // sub-tiles in the ring
constexpr int kMaxK = 16384;

int64_t sub_tiles(int64_t k) {
    return fmt::ceil_div(k / kChunkCols, int64_t{kSubChunks});
}
// Shared bytes of x a token (see the top).
__host__ __device__ constexpr int x_token(int subs) {
    return subs * kSubChunks * kXChunk + (subs % 2 == 0 ? 64 : 0);
}
static_assert(x_token(1) % 128 == 64 && x_token(2) % 128 == 64,
              "tokens g, g + 1 in distinct banks");

// A lane's chunk of rows g and g + 8 in one sub-tile.
struct Sub {
    uint4 m0, m1;  // mask bytes
    uint2 s0, s1;  // sign bytes
};

// mma steps 4w + J and 4w + J + 1 (J = 0, 2) into the even and odd accumulators: A from bytes J
// and J + 1 of the index words of rows g (e0, o0) and g + 8 (e1, o1), B the steps' 16 bytes of x
// at xw + 8 J.
template <int J>
__device__ __forceinline__ void mma_steps(int (&even)[4], int (&odd)[4], const uint32_t* table,
                                          uint32_t lane4, uint32_t e0, uint32_t o0, uint32_t e1,
                                          uint32_t o1, const uint8_t* xw) {
    const uint4 b = *reinterpret_cast<const uint4*>(xw + 8 * J);
    tern2dev::mma_s8(even, lookup<J>(table, e0, lane4), lookup<J>(table, e1, lane4),
                     lookup<J>(table, o0, lane4), lookup<J>(table, o1, lane4), b.x, b.y);
    tern2dev::mma_s8(odd, lookup<J + 1>(table, e0, lane4), lookup<J + 1>(table, e1, lane4),
                     lookup<J + 1>(table, o0, lane4), lookup<J + 1>(table, o1, lane4), b.z, b.w);
}

struct Args {
    const uint8_t* mask;
    const uint8_t* signs;
    const int8_t* x;
    int64_t n;
    int k, m;
    int chunks, subs;  // k / 128, ceil(chunks / 4)
    bool prefetch;     // request the first sub-tiles before pdl_wait() (PackedWeights::pdl)
    ProductOut out;
};

__global__ void __launch_bounds__(kThreads, 2) tern24_mma_kernel(const Args a) {
    __shared__ __align__(16) uint32_t table[kTableEntries * kTableStride];
    extern __shared__ __align__(16) uint8_t xs[];  // a.m * x_token(a.subs) bytes
    const int lane = static_cast<int>(threadIdx.x) % kWarp,
              warp = static_cast<int>(threadIdx.x) / kWarp;
    const int g = lane / 4, t = lane % 4;
    const int64_t warps = int64_t{gridDim.x} * kWarps;
    const int64_t warp_id = int64_t{blockIdx.x} * kWarps + warp;
    const int64_t tiles = fmt::ceil_div(a.n, int64_t{kTileRows});
    const int64_t my_tiles = warp_id < tiles ? (tiles - 1 - warp_id) / warps + 1 : 0;
    const int64_t subs = my_tiles * a.subs;  // this warp's sub-tiles, in order
    const int64_t mrow = a.k / 8, srow = a.k / 16;

    // The next sub-tile to request: its tile and sub-tile index.
    int64_t ld_tile = warp_id, ld_u = 0;
    int ld_s = 0;
    auto load = [&](Sub& d) {
        const int64_t r0 = ld_tile * kTileRows + g, r1 = r0 + 8;
        const int c = ld_s * kSubChunks + t;
        const bool live = ld_u < subs && c < a.chunks;
        d.m0 = live && r0 < a.n ? tern2dev::load_weights(a.mask + r0 * mrow + c * 16)
                                : make_uint4(0, 0, 0, 0);
        d.s0 = live && r0 < a.n ? load_signs(a.signs + r0 * srow + c * 8) : make_uint2(0, 0);
        d.m1 = live && r1 < a.n ? tern2dev::load_weights(a.mask + r1 * mrow + c * 16)
                                : make_uint4(0, 0, 0, 0);
        d.s1 = live && r1 < a.n ? load_signs(a.signs + r1 * srow + c * 8) : make_uint2(0, 0);
        ++ld_u;
        if (++ld_s == a.subs) ld_s = 0, ld_tile += warps;
    };
    Sub ring[kDepth];
    auto load_first = [&] {
#pragma unroll
        for (int d = 0; d < kDepth; ++d)
            load(ring[d]);
    };
    if (a.prefetch) load_first();  // the weights: not written by the previous kernel
    detail::pdl_launch_dependents();
    for (int q = static_cast<int>(threadIdx.x); q < kTableEntries * kWarp; q += kThreads)
        table[(q / kWarp) * kTableStride + q % kWarp] = kCodes.w[q / kWarp];
    detail::pdl_wait();
    if (!a.prefetch) load_first();
    // x, written by the previous kernel; chunks past k zero.
    const int xtok = x_token(a.subs), xchunks = a.subs * kSubChunks;
    for (int q = static_cast<int>(threadIdx.x); q < a.m * xchunks * 8; q += kThreads) {
        const int i = q / (xchunks * 8), c = (q / 8) % xchunks, p = q % 8;
        *reinterpret_cast<uint4*>(xs + i * xtok + c * kXChunk + p * 16) =
            c < a.chunks
                ? __ldg(reinterpret_cast<const uint4*>(a.x + int64_t{i} * a.k + c * kChunkCols) + p)
                : make_uint4(0, 0, 0, 0);
    }
    const bool fused = a.out.y != nullptr;
    // The x scales of tokens 2t and 2t + 1 (this lane's outputs).
    float sx[2] = {0.0f, 0.0f};
    for (int h = 0; h < 2; ++h)
        if (fused && 2 * t + h < a.m)
            sx[h] = a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : 2 * t + h];
    __syncthreads();

    // A tile's weight scales and biases of rows g, g + 8, requested when the tile starts.
    float ws[2] = {0.0f, 0.0f}, bias[2] = {0.0f, 0.0f};
    auto load_epilogue = [&](int64_t tile) {
        for (int e = 0; e < 2; ++e) {
            const int64_t r = tile * kTileRows + g + 8 * e;
            if (!fused || r >= a.n) continue;
            ws[e] = __ldg(detail::epilogue_w_scale(a.out, r, 1));
            bias[e] = a.out.bias != nullptr ? __ldg(a.out.bias + r) : 0.0f;
        }
    };
    const uint32_t lane4 = static_cast<uint32_t>(lane) * 4;
    const uint8_t* x_lane = xs + (g < a.m ? g : 0) * xtok + t * kXChunk;
    // Two accumulator sets (even and odd steps).
    int c_even[4] = {0, 0, 0, 0}, c_odd[4] = {0, 0, 0, 0};
    int64_t tile = warp_id;
    int s = 0;
    if (subs > 0) load_epilogue(tile);
    for (int64_t u0 = 0; u0 < subs; u0 += kDepth) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
            if (u0 + d >= subs) break;  // the same for the whole warp
            Sub& cur = ring[d];
            const uint8_t* xb = x_lane + s * kSubChunks * kXChunk;
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {  // a sign word covers two mask words
                const SignWords sw0 = sign_words(h2 == 0 ? cur.s0.x : cur.s0.y);
                const SignWords sw1 = sign_words(h2 == 0 ? cur.s1.x : cur.s1.y);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int w = 2 * h2 + h;
                    uint32_t e0, o0, e1, o1;
                    index_words(tern2dev::word(cur.m0, w), sw0, h, e0, o0);
                    index_words(tern2dev::word(cur.m1, w), sw1, h, e1, o1);
                    const uint8_t* xw = xb + 32 * w;
                    mma_steps<0>(c_even, c_odd, table, lane4, e0, o0, e1, o1, xw);
                    mma_steps<2>(c_even, c_odd, table, lane4, e0, o0, e1, o1, xw);
                }
            }
            load(cur);  // its registers receive the sub-tile kDepth on
            if (++s < a.subs) continue;
            // The tile is done: tokens 2t, 2t + 1 of rows g, g + 8.
            for (int h = 0; h < 2; ++h) {
                const int tok = 2 * t + h;
                for (int e = 0; e < 2; ++e) {
                    const int64_t r = tile * kTileRows + g + 8 * e;
                    const int32_t sum = c_even[2 * e + h] + c_odd[2 * e + h];
                    if (tok >= a.m || r >= a.n) continue;
                    if (!fused) {
                        a.out.acc[tok * a.n + r] = sum;
                        continue;
                    }
                    // store_output's arithmetic: from +0.0f, then the x scale and the bias.
                    const float v = detail::epilogue_add(0.0f, ws[e], sum);
                    a.out.y[tok * a.n + r] = __fadd_rn(__fmul_rn(v, sx[h]), bias[e]);
                }
            }
            for (int q = 0; q < 4; ++q)
                c_even[q] = c_odd[q] = 0;
            s = 0;
            tile += warps;
            if (tile < tiles) load_epilogue(tile);
        }
    }
}

// Blocks of the kernel the current device holds at once with `smem` bytes of x (cached per
// device and size), 0 where x and the table do not fit a block's opt-in shared memory (`optin`
// and `table` say how much there is and what the table takes). Above the 48 KB a launch gets by
// default (x of 8 tokens at k = 16384 takes 144.5 KiB) the kernel is allowed that much.
struct Residency {
    int blocks = 0;
    size_t optin = 0, table = 0;
};
Residency residency(size_t smem) {
    static std::mutex mutex;
    static std::map<std::pair<int, size_t>, Residency> cache;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find({device, smem});
    if (it != cache.end()) return it->second;
    int optin = 0, sms = 0, per_sm = 0;
    TRIT_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attributes{};
    TRIT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, tern24_mma_kernel));
    Residency r;
    r.optin = static_cast<size_t>(optin);
    r.table = attributes.sharedSizeBytes;
    if (smem + r.table <= r.optin) {
        if (smem > static_cast<size_t>(attributes.maxDynamicSharedSizeBytes))
            TRIT_CUDA_CHECK(cudaFuncSetAttribute(tern24_mma_kernel,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
        TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tern24_mma_kernel,
                                                                      kThreads, smem));
        r.blocks = sms * std::max(per_sm, 1);
    }
    cache.emplace(std::make_pair(device, smem), r);
    return r;
}

size_t x_bytes(int64_t m, int64_t k) {
    return size_t(m) * size_t(x_token(static_cast<int>(sub_tiles(k))));
}

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

std::string tern24_gemv_mma_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                    int64_t group) {
    if (w.format != Format::kTern24) return "tern24_gemv_mma takes tern24 weights only";
    if (m < 1 || m > kTern24GemvMaxM) return "m must be in 1..8";
    if (w.k < kChunkCols || w.k % kChunkCols != 0) return "k must be a positive multiple of 128";
    if (w.k > kMaxK) return "k must be <= 16384";
    if (group < w.k) return "group must be >= k (one scale group)";
    if (!aligned(w.a, 16) || !aligned(x, 16)) return "the mask and x must be 16-byte aligned";
    if (!aligned(w.b, 8)) return "the signs must be 8-byte aligned";
    return "";
}

int64_t tern24_gemv_mma_resident_warps(int64_t m, int64_t k) {
    if (m < 1 || m > kTern24GemvMaxM || k < kChunkCols || k > kMaxK) return 0;
    return int64_t{residency(x_bytes(m, k)).blocks} * kWarps;
}

void tern24_gemv_mma(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream) {
    gemv::check_call("tern24_gemv_mma", w, x, m, group, out,
                     tern24_gemv_mma_rejects(w, x, m, group));
    if (w.n == 0) return;
    Args a{};
    a.mask = w.a;
    a.signs = w.b;
    a.x = x;
    a.n = w.n;
    a.k = static_cast<int>(w.k);
    a.m = static_cast<int>(m);
    a.chunks = static_cast<int>(w.k / kChunkCols);
    a.subs = static_cast<int>(sub_tiles(w.k));
    a.prefetch = w.pdl;
    a.out = out;
    const size_t smem = x_bytes(m, w.k);
    const Residency r = residency(smem);
    TRIT_CHECK(r.blocks > 0, "tern24_gemv_mma (m=", m, ", n=", w.n, ", k=", w.k, "): x takes ",
               smem, " bytes of shared memory and the table ", r.table, ", more than the ", r.optin,
               " a block gets on this GPU");
    const int64_t tiles = fmt::ceil_div(w.n, int64_t{kTileRows});
    const int64_t blocks = std::min<int64_t>(r.blocks, fmt::ceil_div(tiles, int64_t{kWarps}));
    detail::launch_kernel(tern24_mma_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                          smem, stream, true, a);
}

}  // namespace trit::kernels
