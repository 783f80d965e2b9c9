// Lab: a tern24 streaming product for m = 1..8 tokens on int8 tensor cores (mma.sync m16n8k32),
// against the streaming dp4a GEMV of kernels/gemv_stream.cu (docs/BENCHMARKS.md, session 37).
//
// Why. The dp4a GEMV issues about 1.19 instructions a weight at m = 1 after d57d622 (8 lookups,
// 8 index PRMTs and 8 dp4a per 32 weights, plus a REDUX per row and the loop) and is bound by
// issue, not by DRAM (ncu: 0.63 instructions a scheduler cycle, 3.7 warps a scheduler; 78 % of the
// copy bandwidth on 128256 x 4096). With the weights as the A operand of one mma per 16 rows x 32
// columns, a thread decodes 4 code words (the same table lookups), reads its 2 words of x from
// shared memory and issues one mma: about 0.85 instructions a weight, the k reduction in the
// accumulators (no REDUX), and the same instructions for 1..8 tokens (B's 8 columns).
//
// Layout. Warp w of the grid owns tiles of 16 rows (tile = w, + warps, ...), each over all of k
// (k % 512 == 0 here). Lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 of the tile:
// per sub-tile of 512 columns, chunk 4 blk + t of each row (16 mask bytes, 8 sign bytes: 32
// groups of 4 columns), in a ring of kDepth sub-tiles loaded ahead. mma step s (16 a sub-tile)
// takes groups 2s and 2s + 1 of the lane's chunk as its k slots 4t..4t+3 and 16+4t..16+4t+3: A
// = the code words of those groups in rows g and g + 8 (per-lane shared-memory table, as the dp4a
// GEMV), B = x of the same columns (one 8-byte shared load; x of token g for lanes g < m). The
// accumulators c0 / c2 (c1 / c3) hold rows g / g + 8 for token 2t (2t + 1).
//
// On the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. bench/lab/tern24_mma.cu -o tern24_mma && ./tern24_mma
// checks every case against a CPU dot product of the decoded codes ("ok" / "MISMATCH") and times
// the calls as `trit bench kernels` does (PDL, weights rotated past 2 x L2, gated CUDA events,
// median of 30 samples), with the copy bandwidth measured in the same run.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/tern24_table.cuh"
#include "kernels/tern2_mma.cuh"

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

namespace {

namespace t24 = trit::kernels::tern24dev;

constexpr int kWarp = 32;
constexpr int kWarps = 8;         // per block
constexpr int kTileRows = 16;     // mma m
constexpr int kChunkCols = 128;   // 16 mask bytes + 8 sign bytes a row
constexpr int kSubCols = 512;     // a warp's columns per sub-tile: one chunk per t
constexpr int kXChunk = 136;      // shared bytes per chunk of x: t's 8-byte reads in distinct banks
constexpr int kTableStride = 64;  // words per table row (the index is address byte 1)

__constant__ t24::CodeTable kCodes = t24::make_code_table();

// Shared bytes of x per token: its chunks, then 32 bytes, so that 4 tokens' reads of one step
// (4 lanes t each, 8 bytes) fill the 32 banks.
__host__ __device__ constexpr int x_token(int k) {
    return k / kChunkCols * kXChunk + 32;
}

__device__ __forceinline__ void pdl_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ uint2 ld8(const uint8_t* p) {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ uint32_t merge_nibbles(uint32_t lo, uint32_t hi) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(d) : "r"(lo), "n"(0x0F0F0F0F), "r"(hi));
    return d;
}
template <uint32_t kMask>
__device__ __forceinline__ uint32_t and_mask(uint32_t v) {
    uint32_t d;
    asm("and.b32 %0, %1, %2;" : "=r"(d) : "r"(v), "n"(kMask));
    return d;
}
// The code word of the index in byte B of an E/O word (table row index * 256 + lane * 4).
template <int B>
__device__ __forceinline__ uint32_t lookup(const uint32_t* table, uint32_t eo, uint32_t lane4) {
    const uint32_t off = __byte_perm(eo, lane4, 0x7604u | (B << 4));
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(table) + off);
}

// mma step 4w + J of a sub-tile: A = the code words in byte J of the E/O words of rows g (e0, o0)
// and g + 8 (e1, o1), B = x of the step's two groups.
template <int J>
__device__ __forceinline__ void mma_step(int (&c)[4], const uint32_t* table, uint32_t lane4,
                                         uint32_t e0, uint32_t o0, uint32_t e1, uint32_t o1,
                                         const uint8_t* xw) {
    const uint2 b = *reinterpret_cast<const uint2*>(xw + 8 * J);
    trit::kernels::tern2dev::mma_s8(c, lookup<J>(table, e0, lane4), lookup<J>(table, e1, lane4),
                                    lookup<J>(table, o0, lane4), lookup<J>(table, o1, lane4), b.x,
                                    b.y);
}

// A lane's chunk of rows g and g + 8 in one sub-tile.
struct Sub {
    uint4 m0, m1;  // mask bytes, rows g, g + 8
    uint2 s0, s1;  // sign bytes
};

// Group indices of mask word w of a chunk: E byte j = group 8w + 2j, O byte j = group 8w + 2j + 1
// (bitmap | sign pair << 4), as kernels/gemv_stream.cu's dot_chunk builds them.
__device__ __forceinline__ void indices(const uint4& mk, const uint2& sg, int w, uint32_t& e,
                                        uint32_t& o) {
    const uint32_t mw = w == 0 ? mk.x : w == 1 ? mk.y : w == 2 ? mk.z : mk.w;
    const uint32_t sr = w < 2 ? sg.x : sg.y;
    const uint32_t em = and_mask<0x33333333u>(sr), em4 = em << 4;
    const uint32_t om = and_mask<0xCCCCCCCCu>(sr), oml = om << 2, omr = om >> 2;
    e = merge_nibbles(mw, __byte_perm(em, em4, (w & 1) == 0 ? 0x1504u : 0x3726u));
    o = merge_nibbles(mw >> 4, __byte_perm(oml, omr, (w & 1) == 0 ? 0x5140u : 0x7362u));
}

// M tokens, kDepth sub-tiles in the ring, at least kMinBlocks blocks an SM (registers capped).
template <int M, int kDepth, int kMinBlocks>
__global__ void __launch_bounds__(kWarps* kWarp, kMinBlocks)
    tern24_mma_kernel(const uint8_t* __restrict__ mask, const uint8_t* __restrict__ signs,
                      const int8_t* __restrict__ x, int n, int k, int32_t* __restrict__ acc) {
    __shared__ __align__(16) uint32_t table[t24::kTableEntries * kTableStride];
    extern __shared__ __align__(16) uint8_t xs[];  // M * x_token(k) bytes
    const int lane = static_cast<int>(threadIdx.x) % kWarp,
              warp = static_cast<int>(threadIdx.x) / kWarp;
    const int g = lane / 4, t = lane % 4;
    const int warps = static_cast<int>(gridDim.x) * kWarps;
    const int warp_id = static_cast<int>(blockIdx.x) * kWarps + warp;
    const int tiles = (n + kTileRows - 1) / kTileRows;
    const int nblk = k / kSubCols;
    const int my_tiles = warp_id < tiles ? (tiles - 1 - warp_id) / warps + 1 : 0;
    const int64_t subs = int64_t{my_tiles} * nblk;  // this warp's sub-tiles, in order
    const int64_t mrow = k / 8, srow = k / 16;

    // Load cursor: tile and block of the next sub-tile to request.
    int ld_tile = warp_id, ld_blk = 0;
    int64_t ld_u = 0;
    auto load = [&](Sub& s) {
        if (ld_u < subs) {
            const int r0 = ld_tile * kTileRows + g, r1 = r0 + 8;
            const int64_t c = int64_t{ld_blk} * 4 + t;
            s.m0 = r0 < n ? trit::kernels::tern2dev::load_weights(mask + r0 * mrow + c * 16)
                          : make_uint4(0, 0, 0, 0);
            s.s0 = r0 < n ? ld8(signs + r0 * srow + c * 8) : make_uint2(0, 0);
            s.m1 = r1 < n ? trit::kernels::tern2dev::load_weights(mask + r1 * mrow + c * 16)
                          : make_uint4(0, 0, 0, 0);
            s.s1 = r1 < n ? ld8(signs + r1 * srow + c * 8) : make_uint2(0, 0);
        }
        ++ld_u;
        if (++ld_blk == nblk) ld_blk = 0, ld_tile += warps;
    };

    Sub ring[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
        load(ring[d]);  // weights: not written by the previous kernel
    pdl_trigger();
    for (int q = static_cast<int>(threadIdx.x); q < t24::kTableEntries * kWarp; q += blockDim.x)
        table[(q / kWarp) * kTableStride + q % kWarp] = kCodes.w[q / kWarp];
    pdl_wait();
    // x (written by the previous kernel): token i, chunk c at xs + i * x_token(k) + c * kXChunk.
    const int chunks = k / kChunkCols;
    for (int q = static_cast<int>(threadIdx.x); q < M * chunks * 8; q += blockDim.x) {
        const int i = q / (chunks * 8), c = (q / 8) % chunks, p = q % 8;
        *reinterpret_cast<uint4*>(xs + i * x_token(k) + c * kXChunk + p * 16) =
            *reinterpret_cast<const uint4*>(x + int64_t{i} * k + c * kChunkCols + p * 16);
    }
    __syncthreads();

    const uint32_t lane4 = static_cast<uint32_t>(lane) * 4;
    const uint8_t* x_lane = xs + (g < M ? g : 0) * x_token(k) + t * kXChunk;
    // Two accumulator sets (even and odd steps): two chains of dependent mmas, not one.
    int c_acc[4] = {0, 0, 0, 0}, c_odd[4] = {0, 0, 0, 0};
    int tile = warp_id, blk = 0;
    for (int64_t u0 = 0; u0 < subs; u0 += kDepth) {
#pragma unroll
        for (int d = 0; d < kDepth; ++d) {
            if (u0 + d >= subs) break;  // the same for the whole warp
            Sub& cur = ring[d];
            const uint8_t* xb = x_lane + blk * 4 * kXChunk;
#pragma unroll
            for (int w = 0; w < 4; ++w) {
                uint32_t e0, o0, e1, o1;
                indices(cur.m0, cur.s0, w, e0, o0);
                indices(cur.m1, cur.s1, w, e1, o1);
                const uint8_t* xw = xb + 32 * w;
                mma_step<0>(c_acc, table, lane4, e0, o0, e1, o1, xw);
                mma_step<1>(c_odd, table, lane4, e0, o0, e1, o1, xw);
                mma_step<2>(c_acc, table, lane4, e0, o0, e1, o1, xw);
                mma_step<3>(c_odd, table, lane4, e0, o0, e1, o1, xw);
            }
            load(cur);            // its registers receive the sub-tile kDepth on
            if (++blk == nblk) {  // the tile's sums: tokens 2t, 2t + 1 of rows g, g + 8
                const int r0 = tile * kTileRows + g, r1 = r0 + 8;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int tok = 2 * t + h;
                    if (tok < M && r0 < n) acc[int64_t{tok} * n + r0] = c_acc[h] + c_odd[h];
                    if (tok < M && r1 < n) acc[int64_t{tok} * n + r1] = c_acc[2 + h] + c_odd[2 + h];
                }
                for (int q = 0; q < 4; ++q)
                    c_acc[q] = c_odd[q] = 0;
                blk = 0;
                tile += warps;
            }
        }
    }
}

template <typename K, typename... Args>
void launch_pdl(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t s, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

void CUDART_CB gate(void* p) {
    auto* f = static_cast<std::atomic<int>*>(p);
    while (f->load() == 0) {
    }
}

// Median us per call over `samples` samples of B back-to-back calls, behind a host gate so the
// calls queue before the first runs.
template <class F>
double time_calls(F call, int B, int samples, cudaStream_t s) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int i = 0;
    for (int w = 0; w < 5; ++w)
        call(i++);
    CK(cudaStreamSynchronize(s));
    std::vector<double> t;
    for (int sm = 0; sm < samples; ++sm) {
        std::atomic<int> flag{0};
        CK(cudaLaunchHostFunc(s, gate, &flag));
        CK(cudaEventRecord(e0, s));
        for (int b = 0; b < B; ++b)
            call(i++);
        CK(cudaEventRecord(e1, s));
        flag.store(1);
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0 / B);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Case {
    int m, n, k;
    bool timed;
};

// Random valid tern24 bytes: each group at most 2 non-zeros, sign bits only for them.
void random_tern24(std::mt19937& rng, int n, int k, std::vector<uint8_t>& mask,
                   std::vector<uint8_t>& sg) {
    static const int kBitmaps[] = {0x0, 0x1, 0x2, 0x4, 0x8, 0x3, 0x5, 0x6, 0x9, 0xA, 0xC};
    const int64_t groups = k / 4;
    mask.assign(size_t(n) * k / 8, 0);
    sg.assign(size_t(n) * k / 16, 0);
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t gi = 0; gi < groups; ++gi) {
            const int bm = kBitmaps[rng() % 11];
            const int nz = trit::formats::tern24_popcount4(bm);
            const int pair = static_cast<int>(rng() % 4) & ((1 << nz) - 1);
            mask[r * (k / 8) + gi / 2] |= static_cast<uint8_t>(bm << (4 * (gi % 2)));
            sg[r * (k / 16) + gi / 4] |= static_cast<uint8_t>(pair << (2 * (gi % 4)));
        }
    }
}

template <int M, int kDepth = 4, int kMinBlocks = 2>
void run_case(const Case& cs, cudaStream_t s, double copy_gbs, int sms) {
    const auto kernel = tern24_mma_kernel<M, kDepth, kMinBlocks>;
    std::mt19937 rng(1234 + cs.n + cs.k + M);
    std::vector<uint8_t> mask, sg;
    random_tern24(rng, cs.n, cs.k, mask, sg);
    std::vector<int8_t> x(size_t(M) * cs.k);
    for (auto& v : x)
        v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    // CPU reference: decoded codes . x.
    std::vector<int32_t> want(size_t(M) * cs.n);
    const int64_t mrow = cs.k / 8, srow = cs.k / 16;
    for (int64_t r = 0; r < cs.n; ++r) {
        int64_t sum[8] = {};
        for (int64_t gi = 0; gi < cs.k / 4; ++gi) {
            const int bm = trit::formats::tern24_bitmap(&mask[r * mrow], gi);
            const int pair = trit::formats::tern24_sign_pair(&sg[r * srow], gi);
            for (int p = 0; p < 4; ++p) {
                const int code = trit::formats::tern24_decode(bm, pair, p);
                for (int i = 0; i < M; ++i)
                    sum[i] += code * x[size_t(i) * cs.k + gi * 4 + p];
            }
        }
        for (int i = 0; i < M; ++i)
            want[size_t(i) * cs.n + r] = static_cast<int32_t>(sum[i]);
    }
    // Copies of the weights past 2 x L2 (timed cases), x and the output.
    const size_t wbytes = mask.size() + sg.size();
    int l2 = 0;
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    const int copies = cs.timed ? static_cast<int>(2.0 * l2 / double(wbytes)) + 2 : 1;
    std::vector<uint8_t*> dm(copies), ds(copies);
    for (int c = 0; c < copies; ++c) {
        CK(cudaMalloc(&dm[c], mask.size()));
        CK(cudaMalloc(&ds[c], sg.size()));
        CK(cudaMemcpy(dm[c], mask.data(), mask.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(ds[c], sg.data(), sg.size(), cudaMemcpyHostToDevice));
    }
    int8_t* dx = nullptr;
    int32_t* dacc = nullptr;
    CK(cudaMalloc(&dx, x.size()));
    CK(cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dacc, want.size() * 4));
    CK(cudaMemset(dacc, 0xFF, want.size() * 4));
    const int tiles = (cs.n + kTileRows - 1) / kTileRows;
    const size_t smem = size_t(M) * x_token(cs.k);
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * kWarp, smem));
    cudaFuncAttributes fa{};
    CK(cudaFuncGetAttributes(&fa, kernel));
    const int blocks =
        std::max(1, std::min(std::max(per_sm, 1) * sms, (tiles + kWarps - 1) / kWarps));
    auto call = [&](int i) {
        launch_pdl(kernel, dim3(blocks), dim3(kWarps * kWarp), smem, s,
                   (const uint8_t*)dm[i % copies], (const uint8_t*)ds[i % copies],
                   (const int8_t*)dx, cs.n, cs.k, dacc);
    };
    call(0);
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    std::vector<int32_t> got(want.size());
    CK(cudaMemcpy(got.data(), dacc, got.size() * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        bad += got[i] != want[i];
    std::printf("m %d n %6d k %5d depth %d, %3d registers, %4d blocks (%d an SM): %s", M, cs.n,
                cs.k, kDepth, fa.numRegs, blocks, per_sm, bad == 0 ? "ok" : "MISMATCH");
    if (bad != 0) std::printf(" (%lld of %zu)", (long long)bad, got.size());
    if (cs.timed) {
        const double us = time_calls(call, 20, 30, s);
        const double bytes = double(wbytes) + double(x.size()) + double(want.size()) * 4;
        std::printf("  %.2f us  %.1f GB/s  %.1f %% of copy", us, bytes / us * 1e-3,
                    100.0 * bytes / us * 1e-3 / copy_gbs);
    }
    std::printf("\n");
    for (int c = 0; c < copies; ++c) {
        CK(cudaFree(dm[c]));
        CK(cudaFree(ds[c]));
    }
    CK(cudaFree(dx));
    CK(cudaFree(dacc));
}

}  // namespace

int main() {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    // Copy bandwidth (read + write counted), as trit bench kernels measures it.
    const size_t cb = size_t(256) << 20;
    void *a = nullptr, *b = nullptr;
    CK(cudaMalloc(&a, cb));
    CK(cudaMalloc(&b, cb));
    const double copy_us = time_calls(
        [&](int) { CK(cudaMemcpyAsync(b, a, cb, cudaMemcpyDeviceToDevice, s)); }, 4, 30, s);
    const double copy_gbs = 2.0 * double(cb) / copy_us * 1e-3;
    CK(cudaFree(a));
    CK(cudaFree(b));
    std::printf("%s, %d SMs; copy %.1f GB/s\n", prop.name, prop.multiProcessorCount, copy_gbs);
    const int sms = prop.multiProcessorCount;
    const Case checks[] = {{1, 77, 512, false}, {1, 1000, 4096, false}, {1, 4099, 2048, false}};
    for (const Case& c : checks)
        run_case<1>(c, s, copy_gbs, sms);
    run_case<2>({2, 4099, 2048, false}, s, copy_gbs, sms);
    run_case<8>({8, 1001, 4096, false}, s, copy_gbs, sms);
    const int big[][2] = {{128256, 4096}, {65536, 4096}, {14336, 4096}, {4096, 4096}};
    for (const auto& sh : big)
        run_case<1>({1, sh[0], sh[1], true}, s, copy_gbs, sms);
    // Ring depth and blocks an SM, beyond L2.
    run_case<1, 6, 2>({1, 128256, 4096, true}, s, copy_gbs, sms);
    run_case<1, 3, 3>({1, 128256, 4096, true}, s, copy_gbs, sms);
    run_case<1, 2, 3>({1, 128256, 4096, true}, s, copy_gbs, sms);
    run_case<1, 2, 4>({1, 128256, 4096, true}, s, copy_gbs, sms);
    for (const auto& sh : big)
        run_case<2>({2, sh[0], sh[1], true}, s, copy_gbs, sms);
    run_case<8>({8, 128256, 4096, true}, s, copy_gbs, sms);
    run_case<8>({8, 14336, 4096, true}, s, copy_gbs, sms);
    return 0;
}
