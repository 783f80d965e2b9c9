// The b1 tensor-core GEMMs of kernels/bin1_gemm.h. One CTA per BM x BN output tile; k advances in
// 256-bit blocks (one m16n8k256 per fragment pair), STAGES-deep cp.async pipeline into shared
// memory, ldmatrix.x4 to fragments, several m16 x n8 mma tiles per warp, popcount algebra and
// the optional float epilogue in registers. kSmall CTAs on long k can run k groups of warps over
// alternate k-blocks (TileCfg's KS, bin1_gemm_k_groups), starting at a k-stage set by their column
// tile. No LibTorch here.
//
// Shared memory per stage, for each of its KS k-blocks: the A planes (pa, BM rows, 32 bytes) then
// the B planes (pb, BN, 32 B).
// A row's two 16-byte halves swap places on rows 4..7 of every 8 (chunk ^= (row >> 2) & 1), so
// the 8 row addresses of one ldmatrix 8x8 matrix hit 8 distinct 16-byte bank groups.
#include "kernels/bin1_gemm.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "exporters/formats/tbits.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"

namespace trit::kernels {
namespace {

namespace f = trit::formats;

constexpr int kWarp = 32;
constexpr int kRowBytes = f::kTbitsBlockBits / 8;  // one 256-bit block of one row: 32 bytes

template <Bin1GemmCase C>
struct CaseTraits {
    static constexpr bool kBoolA = C == Bin1GemmCase::kBoolTern || C == Bin1GemmCase::kBoolBin;
    static constexpr bool kBinaryB = C == Bin1GemmCase::kBinTern || C == Bin1GemmCase::kBoolBin;
    static constexpr int kPlanesA = kBoolA ? 1 : 2;
    static constexpr int kPlanesB = kBinaryB ? 1 : 2;
    static constexpr int kAccSets = C == Bin1GemmCase::kTernTern ? 2 : 1;
};

// KS > 1: KS groups of warps each cover the whole tile over every KS-th k-block (a stage holds KS
// consecutive k-blocks, group j multiplies the j-th), and add up through shared memory at the end.
template <int BM_, int BN_, int WM_, int WN_, int STAGES_, int KS_ = 1>
struct TileCfg {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, STAGES = STAGES_, KS = KS_;
    static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kGroupWarps = kWarpsM * kWarpsN;
    static constexpr int kThreads = kGroupWarps * KS * kWarp;
    static constexpr int MT = WM / 16, NT = WN / 8;  // mma tiles per warp
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0,
                  "warp tiles are whole m16 tiles and pairs of n8 tiles (one ldmatrix.x4)");
    static_assert(STAGES >= 2);
};

using TinyCfg = TileCfg<16, 64, 16, 16, 4>;
using SmallCfg = TileCfg<32, 32, 16, 16, 4>;
using MediumCfg = TileCfg<64, 64, 32, 32, 4>;
using WideCfg = TileCfg<64, 128, 32, 32, 4>;  // 8 warps: each b row feeds twice the a rows
using LargeCfg = TileCfg<128, 128, 64, 32, 4>;
using LargeTernCfg = TileCfg<128, 64, 32, 32, 4>;  // two accumulator sets: a smaller warp tile
using SmallKCfg = TileCfg<32, 32, 16, 16, 3, kBin1GemmKGroups>;  // 16 warps: one CTA per SM
// Row stride of a group's partial tile in shared memory, in int32 (+ 8: a quad's rows in distinct banks).
template <class T>
constexpr int kPartStride = T::BN + 8;

template <Bin1GemmCase C, class T>
constexpr int smem_bytes() {
    const int pipeline = T::STAGES * T::KS *
                         (CaseTraits<C>::kPlanesA * T::BM + CaseTraits<C>::kPlanesB * T::BN) * kRowBytes;
    const int partials = (T::KS > 1 ? T::KS : 0) * T::BM * kPartStride<T> * 4;
    return pipeline > partials ? pipeline : partials;
}

// ---- PTX wrappers ------------------------------------------------------------------------------

// 16-byte async copy; src_bytes 0 zero-fills the destination without reading src.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += popc(a & b) over k = 256 for a 16 x 8 tile. Fragments (lane = 4 g + t): a0 row g words t,
// a1 row g + 8 word t, a2 row g word t + 4, a3 row g + 8 word t + 4; b0 column g word t, b1
// column g word t + 4; d0, d1 row g columns 2t, 2t + 1; d2, d3 row g + 8.
// Not volatile: no side effects, so nvcc may interleave independent tiles' mmas.
__device__ __forceinline__ void mma_and_popc(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm(
        "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();  // the host refuses devices below sm_80 before launching
#endif
}

// Byte offset of (row, 16-byte chunk) inside one plane of one stage (the swizzle above).
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
    return static_cast<uint32_t>(row * kRowBytes + ((chunk ^ ((row >> 2) & 1)) << 4));
}

// ---- the kernel --------------------------------------------------------------------------------

// A thread's 16-byte copies of one operand in every pipeline stage, worked out once (tiles of 64
// rows and more; TileCfg's shapes need at most kMaxChunks per thread and operand).
constexpr int kMaxChunks = 2;
struct Chunks {
    const uint32_t* src[kMaxChunks];  // k-block j of stage 0; nullptr: a row past the end
    uint32_t dst[kMaxChunks];         // byte offset in the stage
    int j[kMaxChunks];                // the k-block of the stage; KS: no chunk
};

// One CTA's tile: the body of the two kernels below.
template <Bin1GemmCase C, class T>
__device__ __forceinline__ void gemm_tile(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b,
                                          int64_t m, int64_t n, int64_t kblocks, int64_t tiles_m,
                                          const ProductOut& out, bool b_early) {
    using Tr = CaseTraits<C>;
    constexpr int PA = Tr::kPlanesA, PB = Tr::kPlanesB, MT = T::MT, NT = T::NT;
    constexpr int kSubBytes = (PA * T::BM + PB * T::BN) * kRowBytes;  // one k-block
    constexpr int kStageBytes = T::KS * kSubBytes;
    constexpr int kBOffset = PA * T::BM * kRowBytes;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

    const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
    const int wk = warp / T::kGroupWarps;  // the warp's k group
    const int wm = warp % T::kGroupWarps % T::kWarpsM, wn = warp % T::kGroupWarps / T::kWarpsM;
    const int64_t tile = blockIdx.x;
    const int64_t m0 = (tile % tiles_m) * T::BM, n0 = (tile / tiles_m) * T::BN;
    const int64_t rw = kblocks * f::kTbitsBlockWords;

    // Issue the copies of stage sb (k-blocks sb KS .. sb KS + KS - 1) into slot s; rows past m / n
    // and k-blocks past the end are zero-filled (they add nothing to any case's sums). A thread's
    // chunks (k-block j of the stage, plane p, row r, 16-byte half c) are the same in every stage.
    // Tiles of 64 rows and more work out each chunk's source, destination and row check once,
    // before the k-loop, and a stage adds its k offset; smaller tiles work them out per stage,
    // which starts their first loads sooner (docs/BENCHMARKS.md, session 17).
    const int64_t stages = (kblocks + T::KS - 1) / T::KS;
    // k-group tiles walk their stages rotated by the tile's column index: stage sb loads k-stage
    // (sb + rot) mod stages (a sum over k-blocks in any order is exact). Without it the 24 CTAs of
    // 768 x 3072 at m = 128 that share rows of a all copy the same k-blocks of a at once; with it,
    // 3-5 % less time at k = 2560-4096 and up to 1 % more at 8192 (H100, docs/BENCHMARKS.md,
    // session 22; the same with a 32-bit modulo measured up to 2 % slower than this).
    const int64_t rot = T::KS > 1 ? (tile / tiles_m) % stages : 0;
    const auto kstage = [&](int64_t sb) {
        const int64_t x = sb + rot;
        return x >= stages ? x - stages : x;
    };
    constexpr bool kPlanned = T::BM >= 64;
    constexpr int kAllA = T::KS * PA * T::BM * 2, kAllB = T::KS * PB * T::BN * 2;
    static_assert(!kPlanned ||
                      (kAllA <= kMaxChunks * T::kThreads && kAllB <= kMaxChunks * T::kThreads),
                  "at most kMaxChunks chunks of each operand per thread");
    // rows / row0 / rows_total: the operand's tile rows, first row and row count; off: its offset
    // in a k-block's shared memory.
    const auto plan = [&](Chunks& ch, const uint32_t* base, int planes, int rows, int64_t row0,
                          int64_t rows_total, int off) {
        const int chunks = planes * rows * 2, all = T::KS * chunks;
#pragma unroll
        for (int it = 0; it < kMaxChunks; ++it) {
            const int idx = tid + it * T::kThreads;
            const int j = idx / chunks, x = idx % chunks;
            const int p = x / (rows * 2), r = (x / 2) % rows, c = x % 2;
            const bool in = idx < all && row0 + r < rows_total;
            ch.src[it] =
                in ? base + p * rows_total * rw + (row0 + r) * rw + j * 8 + c * 4 : nullptr;
            ch.dst[it] = j * kSubBytes + off + p * rows * kRowBytes + swizzled(r, c);
            ch.j[it] = idx < all ? j : T::KS;  // never a k-block of the stage
        }
    };
    Chunks ca{}, cb{};
    if constexpr (kPlanned) {
        plan(ca, a, PA, T::BM, m0, m, 0);
        plan(cb, b, PB, T::BN, n0, n, kBOffset);
    }
    const auto load_planned = [&](const Chunks& ch, const uint32_t* any, int all, int s,
                                  int64_t sb) {
        const uint32_t stage = smem_base + s * kStageBytes;
        const int64_t left = kblocks - sb * T::KS;  // k-blocks j < left exist
#pragma unroll
        for (int it = 0; it < kMaxChunks; ++it) {
            if (it * T::kThreads >= all) break;  // no thread has chunk it
            if (ch.j[it] >= T::KS) continue;     // this thread has not
            const bool ok = ch.src[it] != nullptr && ch.j[it] < left;
            cp_async_16(stage + ch.dst[it], ok ? ch.src[it] + sb * T::KS * 8 : any, ok ? 16 : 0);
        }
    };
    auto load_a = [&](int s, int64_t sb) {
        if constexpr (kPlanned) {
            load_planned(ca, a, kAllA, s, sb);
        } else {
            const uint32_t stage = smem_base + s * kStageBytes;
            constexpr int kChunksA = PA * T::BM * 2;
#pragma unroll
            for (int it = 0; it < (kAllA + T::kThreads - 1) / T::kThreads; ++it) {
                const int idx = tid + it * T::kThreads;
                if (kAllA % T::kThreads != 0 && idx >= kAllA) break;
                const int j = idx / kChunksA, x = idx % kChunksA;
                const int p = x / (T::BM * 2), r = (x / 2) % T::BM, c = x % 2;
                const int64_t kb = kstage(sb) * T::KS + j;
                const bool ok = m0 + r < m && kb < kblocks;
                const uint32_t* src = a + p * m * rw + (ok ? (m0 + r) * rw + kb * 8 + c * 4 : 0);
                cp_async_16(stage + j * kSubBytes + p * T::BM * kRowBytes + swizzled(r, c), src,
                            ok ? 16 : 0);
            }
        }
    };
    auto load_b = [&](int s, int64_t sb) {
        if constexpr (kPlanned) {
            load_planned(cb, b, kAllB, s, sb);
        } else {
            const uint32_t stage = smem_base + s * kStageBytes;
            constexpr int kChunksB = PB * T::BN * 2;
#pragma unroll
            for (int it = 0; it < (kAllB + T::kThreads - 1) / T::kThreads; ++it) {
                const int idx = tid + it * T::kThreads;
                if (kAllB % T::kThreads != 0 && idx >= kAllB) break;
                const int j = idx / kChunksB, x = idx % kChunksB;
                const int p = x / (T::BN * 2), r = (x / 2) % T::BN, c = x % 2;
                const int64_t kb = kstage(sb) * T::KS + j;
                const bool ok = n0 + r < n && kb < kblocks;
                const uint32_t* src = b + p * n * rw + (ok ? (n0 + r) * rw + kb * 8 + c * 4 : 0);
                cp_async_16(
                    stage + j * kSubBytes + kBOffset + p * T::BN * kRowBytes + swizzled(r, c), src,
                    ok ? 16 : 0);
            }
        }
    };

    int acc[Tr::kAccSets][MT][NT][4];
#pragma unroll
    for (int s = 0; s < Tr::kAccSets; ++s)
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[s][i][j][e] = 0;
    int row_pop[MT][2] = {};  // this lane's share of popc(Z) (or popc(A)) of rows g, g + 8

    // ldmatrix lane roles: A matrices (rows 0-7 | 8-15) x (chunk 0 | 1) -> a0..a3; B matrices
    // (chunk 0 | 1) x (n rows 0-7 | 8-15) -> b0, b1 of tile j, then of tile j + 1.
    const int q = lane / 8, lr = lane % 8;
    const int a_row = wm * T::WM + lr + (q & 1) * 8, a_chunk = q >> 1;
    const int b_row = wn * T::WN + lr + (q >> 1) * 8, b_chunk = q & 1;

    // The epilogue's per-column weight scales and bias (this lane's columns 2t, 2t + 1 of each n8
    // tile) and per-row x scales, in registers before the main loop: loading them after it put a
    // memory round trip at the end of every tile.
    const bool fused = out.y != nullptr;
    const int g = lane / 4, t = lane % 4;
    float ws[NT][2] = {}, bs[NT][2] = {}, xs[MT][2] = {};
    auto load_columns = [&] {
        if (!fused) return;
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int64_t col = n0 + wn * T::WN + j * 8 + 2 * t + e;
                if (col >= n) continue;
                ws[j][e] = __ldg(out.w_scale + (out.w_scale_rows == 1 ? 0 : col));
                if (out.bias != nullptr) bs[j][e] = __ldg(out.bias + col);
            }
    };
    // With b_early (b, w_scale and bias are not written by the kernel before this one), the
    // first stages of b and the column scales are requested before pdl_wait(); a and the x
    // scales, which it may write, after. They join the first stage's cp.async group. A warp's
    // instructions before its first mma are its critical path: tiles of 32 rows and more issue
    // their copies first and load the epilogue's scales after them; tiny and k-group tiles, for
    // which that order measured slower (H100, docs/BENCHMARKS.md, session 17), load the column
    // scales first and the x scales before the copies of a.
    constexpr bool kCopiesFirst = T::KS == 1 && T::BM >= 32;
    const auto load_x_scales = [&] {
        if (!fused) return;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int64_t row = m0 + wm * T::WM + i * 16 + g + h * 8;
                if (row < m) xs[i][h] = out.x_scale[out.x_scale_rows == 1 ? 0 : row];
            }
    };
    const auto load_b_stages = [&] {
#pragma unroll
        for (int s = 0; s < T::STAGES - 1; ++s)
            if (s < stages) load_b(s, s);
    };
    if (b_early) {
        if (!kCopiesFirst) load_columns();
        load_b_stages();
        if (kCopiesFirst) load_columns();
    }
    detail::pdl_wait();
    // k groups run one wave (bin1_gemm_k_groups): the next call's CTAs may start now, beside
    // these, and request their first weights during this call's k-loop. Not earlier: triggered
    // before the wait, each call let the next one start before its own wait, and so on down the
    // chain (H100, docs/BENCHMARKS.md, session 20: 768 x 3072 at m = 128 3.85-3.87 -> 3.77-3.80 us
    // after the wait; before it, 3 % slower than after the k-loop).
    if constexpr (T::KS > 1) detail::pdl_launch_dependents();
    if (!b_early) {
        if (!kCopiesFirst) load_columns();
        load_b_stages();
    }
    if (!kCopiesFirst) load_x_scales();
#pragma unroll
    for (int s = 0; s < T::STAGES - 1; ++s) {
        if (s < stages) load_a(s, s);
        cp_async_commit();
    }
    if (kCopiesFirst) {
        if (!b_early) load_columns();
        load_x_scales();
    }

    for (int64_t sb = 0; sb < stages; ++sb) {
        cp_async_wait<T::STAGES - 2>();
        __syncthreads();  // stage sb landed for every thread; stage sb - 1 is free to refill
        const int64_t next = sb + T::STAGES - 1;
        if (next < stages) {
            load_a(static_cast<int>(next % T::STAGES), next);
            load_b(static_cast<int>(next % T::STAGES), next);
        }
        cp_async_commit();

        const uint32_t stage = smem_base + static_cast<int>(sb % T::STAGES) * kStageBytes + wk * kSubBytes;
        uint32_t fa[PA][MT][4];
        uint32_t fb[PB][NT][2];
#pragma unroll
        for (int p = 0; p < PA; ++p)
#pragma unroll
            for (int i = 0; i < MT; ++i)
                ldmatrix_x4(fa[p][i],
                            stage + p * T::BM * kRowBytes + swizzled(a_row + i * 16, a_chunk));
#pragma unroll
        for (int p = 0; p < PB; ++p) {
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                uint32_t r[4];
                ldmatrix_x4(
                    r, stage + kBOffset + p * T::BN * kRowBytes + swizzled(b_row + j * 8, b_chunk));
                fb[p][j][0] = r[0], fb[p][j][1] = r[1], fb[p][j + 1][0] = r[2],
                fb[p][j + 1][1] = r[3];
            }
        }

        if constexpr (C == Bin1GemmCase::kBinTern) {
            // acc += and(P, W) + and(N, ~W); rows: popc(P | N).
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                row_pop[i][0] +=
                    __popc(fa[0][i][0] | fa[1][i][0]) + __popc(fa[0][i][2] | fa[1][i][2]);
                row_pop[i][1] +=
                    __popc(fa[0][i][1] | fa[1][i][1]) + __popc(fa[0][i][3] | fa[1][i][3]);
            }
            // Every tile's first mma, then every tile's second: no back-to-back dependent pair.
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[0][i][j], fa[0][i], fb[0][j][0], fb[0][j][1]);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint32_t nw0 = ~fb[0][j][0], nw1 = ~fb[0][j][1];
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[0][i][j], fa[1][i], nw0, nw1);
            }
        } else if constexpr (C == Bin1GemmCase::kBoolTern) {
            // acc += and(A, Pv) + and(A, ~Nv); rows: popc(A).
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                row_pop[i][0] += __popc(fa[0][i][0]) + __popc(fa[0][i][2]);
                row_pop[i][1] += __popc(fa[0][i][1]) + __popc(fa[0][i][3]);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[0][i][j], fa[0][i], fb[0][j][0], fb[0][j][1]);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint32_t nn0 = ~fb[1][j][0], nn1 = ~fb[1][j][1];
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[0][i][j], fa[0][i], nn0, nn1);
            }
        } else if constexpr (C == Bin1GemmCase::kBoolBin) {
            // acc += and(A, W); rows: popc(A).
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                row_pop[i][0] += __popc(fa[0][i][0]) + __popc(fa[0][i][2]);
                row_pop[i][1] += __popc(fa[0][i][1]) + __popc(fa[0][i][3]);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[0][i][j], fa[0][i], fb[0][j][0], fb[0][j][1]);
        } else {
            // acc0 += and(Zq, Zk); acc1 += and(Pq, Nk) + and(Nq, Pk).
            uint32_t za[MT][4];
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    za[i][e] = fa[0][i][e] | fa[1][i][e];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint32_t zb0 = fb[0][j][0] | fb[1][j][0], zb1 = fb[0][j][1] | fb[1][j][1];
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    mma_and_popc(acc[0][i][j], za[i], zb0, zb1);
                    mma_and_popc(acc[1][i][j], fa[0][i], fb[1][j][0], fb[1][j][1]);
                }
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int i = 0; i < MT; ++i)
                    mma_and_popc(acc[1][i][j], fa[1][i], fb[0][j][0], fb[0][j][1]);
        }
    }
    cp_async_wait<0>();  // nothing useful is in flight, but leave no copy behind the exit
    // Without k groups the next kernel may start now: this one only writes its outputs from here
    // on. Triggering earlier let the next call's blocks take SM slots from this call's later
    // waves, and slowed one-wave grids of short k (768 x 768 at m = 16 and 128, 4-5 %).
    if constexpr (T::KS == 1) detail::pdl_launch_dependents();

    // The 4 lanes of a quad hold words t and t + 4 of the same rows: sum them.
    if constexpr (C != Bin1GemmCase::kTernTern) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                row_pop[i][h] += __shfl_xor_sync(0xffffffffu, row_pop[i][h], 1);
                row_pop[i][h] += __shfl_xor_sync(0xffffffffu, row_pop[i][h], 2);
            }
    }

    // This warp's value of output (row g + 8h of m16 tile i, column 2t + e of n8 tile j), over its
    // k-blocks: linear in them, so the k groups' values add up to the output's.
    auto value = [&](int i, int h, int j, int e) {
        if constexpr (C == Bin1GemmCase::kBinTern || C == Bin1GemmCase::kBoolBin) {
            return 2 * acc[0][i][j][2 * h + e] - row_pop[i][h];
        } else if constexpr (C == Bin1GemmCase::kBoolTern) {
            return acc[0][i][j][2 * h + e] - row_pop[i][h];
        } else {
            return acc[0][i][j][2 * h + e] - 2 * acc[Tr::kAccSets - 1][i][j][2 * h + e];
        }
    };
    // KS > 1: every group writes its values into shared memory (the pipeline's, now idle), then
    // group wk adds the KS groups' values of the blocks (i, h, j) numbered wk, wk + KS, ... (int32:
    // exact in any order) and stores them: the epilogue spread over all the warps rather than run
    // by group 0 alone, 1-3 % less time at m = 128 (H100, docs/BENCHMARKS.md, session 22).
    const int* part = reinterpret_cast<const int*>(smem);
    if constexpr (T::KS > 1) {
        __syncthreads();  // every warp is done with the pipeline's shared memory
        int* mine = reinterpret_cast<int*>(smem) + wk * T::BM * kPartStride<T>;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    *reinterpret_cast<int2*>(mine + (wm * T::WM + i * 16 + g + h * 8) * kPartStride<T> +
                                             wn * T::WN + j * 8 + 2 * t) =
                        make_int2(value(i, h, j, 0), value(i, h, j, 1));
        __syncthreads();
    }

    // Columns 2t and 2t + 1 of a tile are adjacent: one 8-byte store when both exist and the
    // row's address allows it (n even and an 8-byte aligned output), else one store each.
    const bool pairs = n % 2 == 0 && reinterpret_cast<uintptr_t>(fused ? static_cast<void*>(out.y)
                                                                       : static_cast<void*>(out.acc)) % 8 == 0;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t row = m0 + wm * T::WM + i * 16 + g + h * 8;
            if (row >= m) continue;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int64_t col = n0 + wn * T::WN + j * 8 + 2 * t;
                if (col >= n) continue;
                int v[2];
                if constexpr (T::KS > 1) {
                    // group wk finishes the blocks (i, h, j) numbered wk, wk + KS, ...
                    if (((i * 2 + h) * NT + j) % T::KS != wk) continue;
                    v[0] = v[1] = 0;
#pragma unroll
                    for (int q = 0; q < T::KS; ++q) {
                        const int2 o = *reinterpret_cast<const int2*>(
                            part + (q * T::BM + wm * T::WM + i * 16 + g + h * 8) * kPartStride<T> +
                            wn * T::WN + j * 8 + 2 * t);
                        v[0] += o.x, v[1] += o.y;
                    }
                } else {
                    v[0] = value(i, h, j, 0), v[1] = value(i, h, j, 1);
                }
                const bool both = col + 1 < n;
                if (!fused) {
                    int32_t* dst = out.acc + row * n + col;
                    if (both && pairs) {
                        *reinterpret_cast<int2*>(dst) = make_int2(v[0], v[1]);
                    } else {
                        dst[0] = v[0];
                        if (both) dst[1] = v[1];
                    }
                    continue;
                }
                // store_output's arithmetic with one group: (+0.0f + w * acc) * x + bias.
                float y[2];
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    y[e] = __fadd_rn(__fmul_rn(detail::epilogue_add(0.0f, ws[j][e], v[e]), xs[i][h]), bs[j][e]);
                float* dst = out.y + row * n + col;
                if (both && pairs) {
                    *reinterpret_cast<float2*>(dst) = make_float2(y[0], y[1]);
                } else {
                    dst[0] = y[0];
                    if (both) dst[1] = y[1];
                }
            }
        }
    }
}

template <Bin1GemmCase C, class T>
__global__ void __launch_bounds__(T::kThreads)
    bin1_gemm_kernel(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, int64_t m,
                     int64_t n, int64_t kblocks, int64_t tiles_m, ProductOut out, bool b_early) {
    gemm_tile<C, T>(a, b, m, n, kblocks, tiles_m, out, b_early);
}

// Tiles with k groups: at most 64 registers a thread, so that two 512-thread CTAs fit on an SM and
// the next call's CTAs, triggered after this call's wait, start beside this call's instead of on
// the SMs this one leaves idle only (H100, docs/BENCHMARKS.md, session 21: 768 x 3072 at m = 128
// 3.78-3.80 -> 3.67-3.68 us; 75 registers before).
template <Bin1GemmCase C, class T>
__global__ void __launch_bounds__(T::kThreads, 2)
    bin1_gemm_kgroups_kernel(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b, int64_t m,
                             int64_t n, int64_t kblocks, int64_t tiles_m, ProductOut out, bool b_early) {
    gemm_tile<C, T>(a, b, m, n, kblocks, tiles_m, out, b_early);
}

template <Bin1GemmCase C, class T>
constexpr auto kernel_of() {
    if constexpr (T::KS > 1) {
        return bin1_gemm_kgroups_kernel<C, T>;
    } else {
        return bin1_gemm_kernel<C, T>;
    }
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

bool mul_fits(int64_t x, int64_t y) {
    int64_t r = 0;
    return !__builtin_mul_overflow(x, y, &r);
}

template <class T>
struct Tag {
    using type = T;
};

// f(std::integral_constant<Bin1GemmCase, c>{}): case c as a compile-time constant.
template <class F>
decltype(auto) with_case(Bin1GemmCase c, F&& f) {
    switch (c) {
        case Bin1GemmCase::kBinTern:
            return f(std::integral_constant<Bin1GemmCase, Bin1GemmCase::kBinTern>{});
        case Bin1GemmCase::kBoolTern:
            return f(std::integral_constant<Bin1GemmCase, Bin1GemmCase::kBoolTern>{});
        case Bin1GemmCase::kTernTern:
            return f(std::integral_constant<Bin1GemmCase, Bin1GemmCase::kTernTern>{});
        default:
            return f(std::integral_constant<Bin1GemmCase, Bin1GemmCase::kBoolBin>{});
    }
}

// f(Tag<TileCfg>) for tile t (not kAuto) of case C, with k_groups (1, or kBin1GemmKGroups on kSmall).
template <Bin1GemmCase C, class F>
decltype(auto) with_tile(Bin1GemmTile t, int k_groups, F&& f) {
    switch (t) {
        case Bin1GemmTile::kTiny:
            return f(Tag<TinyCfg>{});
        case Bin1GemmTile::kSmall:
            return k_groups > 1 ? f(Tag<SmallKCfg>{}) : f(Tag<SmallCfg>{});
        case Bin1GemmTile::kMedium:
            return f(Tag<MediumCfg>{});
        case Bin1GemmTile::kWide:
            return f(Tag<WideCfg>{});
        default:
            using Large = std::conditional_t<C == Bin1GemmCase::kTernTern, LargeTernCfg, LargeCfg>;
            return f(Tag<Large>{});
    }
}

int64_t tiles_for(Bin1GemmCase c, Bin1GemmTile t, int64_t m, int64_t n, int64_t* tiles_m) {
    return with_case(c, [&](auto cs) {
        return with_tile<decltype(cs)::value>(t, 1, [&](auto tag) {
            using T = typename decltype(tag)::type;
            const int64_t tm = f::ceil_div(m, int64_t{T::BM}), tn = f::ceil_div(n, int64_t{T::BN});
            if (tiles_m != nullptr) *tiles_m = tm;
            return mul_fits(tm, tn) ? tm * tn : std::numeric_limits<int64_t>::max();
        });
    });
}

// Launched with PDL (kernels/pdl.cuh): the kernel waits before it reads a and the x scales, and
// before b, w_scale and bias too unless b_early.
template <Bin1GemmCase C, class T>
void launch(const uint32_t* a, int64_t m, const uint32_t* b, int64_t n, int64_t kblocks,
            int64_t tiles_m, int64_t tiles, const ProductOut& out, bool b_early, cudaStream_t stream) {
    constexpr int kSmem = smem_bytes<C, T>();
    constexpr auto kernel = kernel_of<C, T>();
    if constexpr (kSmem > 48 * 1024) {
        TRIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    }
    detail::launch_kernel(kernel, dim3(static_cast<unsigned>(tiles)), dim3(T::kThreads), kSmem,
                          stream, true, a, b, m, n, kblocks, tiles_m, out, b_early);
}

template <Bin1GemmCase C, class T>
int resident_ctas() {
    int ctas = 0;
    TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel_of<C, T>(), T::kThreads,
                                                                  smem_bytes<C, T>()));
    return ctas;
}

}  // namespace

const char* bin1_gemm_case_name(Bin1GemmCase c) {
    switch (c) {
        case Bin1GemmCase::kBinTern:
            return "bin_tern";
        case Bin1GemmCase::kBoolTern:
            return "bool_tern";
        case Bin1GemmCase::kTernTern:
            return "tern_tern";
        case Bin1GemmCase::kBoolBin:
            return "bool_bin";
    }
    return "?";
}

const char* bin1_gemm_tile_name(Bin1GemmTile t) {
    switch (t) {
        case Bin1GemmTile::kAuto:
            return "auto";
        case Bin1GemmTile::kTiny:
            return "tiny";
        case Bin1GemmTile::kSmall:
            return "small";
        case Bin1GemmTile::kMedium:
            return "medium";
        case Bin1GemmTile::kWide:
            return "wide";
        case Bin1GemmTile::kLarge:
            return "large";
    }
    return "?";
}

int bin1_gemm_planes_a(Bin1GemmCase c) {
    return c == Bin1GemmCase::kBoolTern || c == Bin1GemmCase::kBoolBin ? 1 : 2;
}

int bin1_gemm_planes_b(Bin1GemmCase c) {
    return c == Bin1GemmCase::kBinTern || c == Bin1GemmCase::kBoolBin ? 1 : 2;
}

Bin1GemmTile bin1_gemm_choose_tile(Bin1GemmCase c, int64_t m, int64_t n, int64_t k, int sm_count) {
    if (m <= TinyCfg::BM) return Bin1GemmTile::kTiny;
    const bool wide = bin1_gemm_planes_b(c) == 1 && k >= kBin1GemmWideMinK;
    if (tiles_for(c, Bin1GemmTile::kLarge, m, n, nullptr) >= sm_count) return Bin1GemmTile::kLarge;
    // From 3/5 of sm_count tiles (tiles_for saturates at INT64_MAX: compare against a quotient).
    if (wide && tiles_for(c, Bin1GemmTile::kWide, m, n, nullptr) >= (3 * int64_t{sm_count} + 4) / 5)
        return Bin1GemmTile::kWide;
    if (tiles_for(c, Bin1GemmTile::kMedium, m, n, nullptr) >= sm_count) return Bin1GemmTile::kMedium;
    return Bin1GemmTile::kSmall;
}

int bin1_gemm_k_groups(Bin1GemmCase c, Bin1GemmTile tile, int64_t m, int64_t n, int64_t k, int sm_count) {
    if (tile == Bin1GemmTile::kAuto) tile = bin1_gemm_choose_tile(c, m, n, k, sm_count);
    if (tile != Bin1GemmTile::kSmall || k < 1) return 1;
    const int64_t kblocks = f::ceil_div(k, int64_t{f::kTbitsBlockBits});
    return kblocks >= 2 * kBin1GemmKGroups && tiles_for(c, tile, m, n, nullptr) <= sm_count ? kBin1GemmKGroups
                                                                                             : 1;
}

int bin1_gemm_resident_ctas(Bin1GemmCase c, Bin1GemmTile tile, int k_groups) {
    TRIT_CHECK(tile != Bin1GemmTile::kAuto, "bin1_gemm_resident_ctas(", bin1_gemm_case_name(c),
               "): name a tile, not auto (auto depends on m, n, k and the device)");
    TRIT_CHECK(k_groups == 1 || (k_groups == kBin1GemmKGroups && tile == Bin1GemmTile::kSmall),
               "bin1_gemm_resident_ctas(", bin1_gemm_case_name(c), "): k_groups=", k_groups,
               " must be 1, or ", kBin1GemmKGroups, " with the small tile (got tile ",
               bin1_gemm_tile_name(tile), ")");
    return with_case(c, [&](auto cs) {
        constexpr Bin1GemmCase C = decltype(cs)::value;
        return with_tile<C>(tile, k_groups, [](auto tag) { return resident_ctas<C, typename decltype(tag)::type>(); });
    });
}

void bin1_gemm(Bin1GemmCase c, const uint32_t* a, int64_t m, const uint32_t* b, int64_t n,
               int64_t k, const ProductOut& out, cudaStream_t stream, Bin1GemmTile tile, bool b_early) {
    const char* cn = bin1_gemm_case_name(c);
    TRIT_CHECK(m >= 1 && n >= 1 && k >= 1, "bin1_gemm(", cn,
               "): m, n and k must be >= 1 (got m=", m, ", n=", n, ", k=", k, ")");
    TRIT_CHECK(k <= f::kTbitsMaxK, "bin1_gemm(", cn, "): k=", k, " exceeds 2^30 (m=", m, ", n=", n,
               "; 2 * popcount must fit int32)");
    const int64_t rw = f::tbits_row_words(k);
    TRIT_CHECK(mul_fits(m, rw * 2) && mul_fits(n, rw * 2) && mul_fits(m, n), "bin1_gemm(", cn,
               "): m=", m, ", n=", n, ", k=", k, ": plane or output sizes overflow int64");
    TRIT_CHECK(a != nullptr && b != nullptr, "bin1_gemm(", cn, "): a and b must be non-null (m=", m,
               ", n=", n, ", k=", k, ")");
    TRIT_CHECK(aligned(a, 16) && aligned(b, 16), "bin1_gemm(", cn,
               "): a and b must be 16-byte aligned for cp.async (m=", m, ", n=", n, ", k=", k,
               "; a=", static_cast<const void*>(a), ", b=", static_cast<const void*>(b), ")");
    TRIT_CHECK((out.acc != nullptr) != (out.y != nullptr), "bin1_gemm(", cn,
               "): exactly one of out.acc and out.y must be set (m=", m, ", n=", n, ", k=", k, ")");
    TRIT_CHECK(aligned(out.acc, 4) && aligned(out.y, 4), "bin1_gemm(", cn,
               "): outputs must be 4-byte aligned (m=", m, ", n=", n, ", k=", k, ")");
    if (out.y != nullptr) {
        TRIT_CHECK(out.w_scale != nullptr && out.x_scale != nullptr, "bin1_gemm(", cn,
                   "): y needs w_scale and x_scale (m=", m, ", n=", n, ", k=", k, ")");
        TRIT_CHECK(out.w_scale_rows == 1 || out.w_scale_rows == n, "bin1_gemm(", cn,
                   "): w_scale_rows=", out.w_scale_rows, " must be 1 or n (m=", m, ", n=", n,
                   ", k=", k, ")");
        TRIT_CHECK(out.x_scale_rows == 1 || out.x_scale_rows == m, "bin1_gemm(", cn,
                   "): x_scale_rows=", out.x_scale_rows, " must be 1 or m (m=", m, ", n=", n,
                   ", k=", k, ")");
    }

    int device = 0, major = 0, sm_count = 1;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    TRIT_CHECK(major >= 8, "bin1_gemm(", cn, "): the b1 .and.popc mma needs compute capability ",
               ">= 8.0 (device ", device, " is ", major, ".x; m=", m, ", n=", n, ", k=", k, ")");
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    if (tile == Bin1GemmTile::kAuto) tile = bin1_gemm_choose_tile(c, m, n, k, sm_count);
    const int k_groups = bin1_gemm_k_groups(c, tile, m, n, k, sm_count);
    int64_t tiles_m = 0;
    const int64_t tiles = tiles_for(c, tile, m, n, &tiles_m);
    TRIT_CHECK(tiles <= std::numeric_limits<int32_t>::max(), "bin1_gemm(", cn, "): m=", m,
               ", n=", n, ", k=", k, " needs ", tiles, " ", bin1_gemm_tile_name(tile),
               " tiles, more than a grid holds (2^31 - 1)");
    const int64_t kblocks = rw / f::kTbitsBlockWords;
    with_case(c, [&](auto cs) {
        constexpr Bin1GemmCase C = decltype(cs)::value;
        with_tile<C>(tile, k_groups, [&](auto tag) {
            launch<C, typename decltype(tag)::type>(a, m, b, n, kblocks, tiles_m, tiles, out, b_early, stream);
        });
    });
}

}  // namespace trit::kernels
