// Binary/ternary GEMMs on the b1 tensor cores (mma.sync m16n8k256 .and.popc, sm_80+) over tbits
// planes (exporters/formats/tbits.h), for the BWTA cases. Exact int32 accumulators, bit for bit
// the tbits_gemm_*_ref products, or the products' fused float epilogue with one group.
//
// Operands: a (m, k) is the activation side (mma rows), b (n, k) the other (mma columns):
//     kBinTern   a ternary (2 planes), b binary (1 plane: bin1 weights)   acc = W · Aᵀ, as (m, n)
//     kBoolTern  a bool (1 plane),     b ternary (2 planes: V as Vᵀ rows)  acc = Att · V
//     kTernTern  a ternary (2 planes), b ternary (2 planes: K rows)        acc = Q · Kᵀ
//     kBoolBin   a bool (1 plane),     b binary (1 plane: bin1 weights)   acc = W · Aᵀ, as (m, n)
//                (a linear layer on a non-negative input: ReLU outputs on a bool grid)
// Output through ProductOut (kernels/product.h) with G = 1: either acc (m, n) int32, or
//     y[i][j] = (+0.0f + w_scale[j or 0] * float(acc)) * x_scale[i or 0] + (bias ? bias[j] : +0.0f)
// in IEEE float, round to nearest, no FMA (product.h's epilogue, one group).
//
// AND-only algebra (.xor.popc is not native on sm_90: ptxas expands it; .and.popc is one BMMA).
// With P, N the pos/neg planes, Z = P | N, ~ bitwise not, and(x, y) = popc(x & y) over a row:
//     kBinTern   acc = 2 (and(P, W) + and(N, ~W)) - popc(Z)      2 mma, one accumulator
//     kBoolTern  acc = and(A, Pv) + and(A, ~Nv) - popc(A)         2 mma, one accumulator
//     kTernTern  acc = and(Zq, Zk) - 2 (and(Pq, Nk) + and(Nq, Pk))  3 mma, two accumulators
//     kBoolBin   acc = 2 and(A, W) - popc(A)                        1 mma
// (and(N, ~W) = popc(N) - and(N, W), so the first is 2 and(P, W) - 2 and(N, W) - popc(P) +
// popc(N); and a {0, 1} times a +-1 is +1 where both bits are set and -1 where only A's is).
// popc(Z) / popc(A) are per-row constants taken from the A fragments in registers. The
// planes' padding bits are 0, so the complements' padding 1s meet only zeros of the other operand.
//
// Contract, checked on the host before any launch (else trit::Error naming the case, m, n, k and
// the rule): m, n, k >= 1; k <= 2^30; a, b non-null and 16-byte aligned (cp.async), planes laid
// out exactly as tbits.h (row stride tbits_row_words(k), plane stride rows * row words); exactly
// one of out.acc / out.y; for y: w_scale and x_scale non-null, w_scale_rows 1 or n, x_scale_rows
// 1 or m; outputs 4-byte aligned; sizes within int64 and the grid; a device of compute
// capability >= 8.0. Any m, n, k: partial tiles are zero-filled on load and masked on store. The
// operands are assumed valid (tbits_*_validate): a set padding bit or a column in both planes
// gives wrong sums. Device pointers; async on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/product.h"

namespace trit::kernels {

enum class Bin1GemmCase { kBinTern, kBoolTern, kTernTern, kBoolBin };

// CTA tiles (BM x BN = rows of a x rows of b, warps): kTiny 16 x 64 (4), kSmall 32 x 32 (4, or 16
// with k groups below), kMedium 64 x 64 (4), kWide 64 x 128 (8), kLarge 128 x 128 (8; kTernTern
// 128 x 64). kAuto: bin1_gemm_choose_tile.
enum class Bin1GemmTile { kAuto, kTiny, kSmall, kMedium, kWide, kLarge };

const char* bin1_gemm_case_name(Bin1GemmCase c);  // "bin_tern", "bool_tern", "tern_tern", "bool_bin"
const char* bin1_gemm_tile_name(Bin1GemmTile t);  // "auto", "tiny", ...

// Planes of each operand of a case (1 or 2).
int bin1_gemm_planes_a(Bin1GemmCase c);
int bin1_gemm_planes_b(Bin1GemmCase c);

// kTiny for m <= 16; else the largest tile whose grid still covers `sm_count` CTAs, kSmall when
// none does (these shapes are latency-bound: more CTAs beat fewer, fuller ones). kWide is a
// candidate only with a one-plane b (bin_tern, bool_bin: the weight GEMMs) and k >=
// kBin1GemmWideMinK, and is taken from 3/5 of `sm_count` tiles: its CTAs (two per SM) read 1 byte
// of operands per output and k-block against kMedium's 1.5 (bin_tern), which pays where the
// k-loop's copies from L2 set the pace (H100, docs/BENCHMARKS.md, session 21: 768 x 3072 at m =
// 2048 11.1 -> 10.0 us, 1024 x 4096 17.8 -> 13.3, at m = 1024 10.8 -> 9.2 on 128 tiles; 2-7 %
// from 80 tiles) and lost 1-3 % at k = 768 and 2560, 2-6 % on 72 tiles.
constexpr int64_t kBin1GemmWideMinK = 3072;
Bin1GemmTile bin1_gemm_choose_tile(Bin1GemmCase c, int64_t m, int64_t n, int64_t k, int sm_count);

// k groups: a kSmall CTA runs kBin1GemmKGroups groups of 4 warps (512 threads at <= 64 registers:
// two CTAs per SM, so that the next call's CTAs start beside this call's), group j multiplying
// every kBin1GemmKGroups-th 256-bit k-block, and adds the groups' sums through shared memory
// (exact). It shortens each warp's serial chain of k-blocks: at m = 128 the tile's 4 warps alone
// are one warp per scheduler, each waiting ~5.6 cycles per instruction (ncu). Taken
// when the tile is kSmall (tile kAuto: bin1_gemm_choose_tile's), k has >= 2 kBin1GemmKGroups
// k-blocks and the tiles fit one wave (<= sm_count); returns kBin1GemmKGroups or 1.
constexpr int kBin1GemmKGroups = 4;
int bin1_gemm_k_groups(Bin1GemmCase c, Bin1GemmTile tile, int64_t m, int64_t n, int64_t k, int sm_count);

// CTAs of a case's tile (with 1 or kBin1GemmKGroups k groups) that fit on one SM of the current
// device at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor, with the tile's shared memory).
// Errors on tile kAuto and on k groups other than 1, or kBin1GemmKGroups with kSmall.
int bin1_gemm_resident_ctas(Bin1GemmCase c, Bin1GemmTile tile, int k_groups);

// a: (planes_a, m, tbits_row_words(k)) uint32; b: (planes_b, n, tbits_row_words(k)) uint32.
// Launched with programmatic dependent launch (kernels/pdl.cuh): it may start while the kernel
// before it runs, and waits for it before reading a and the x scales. b_early: b, out.w_scale and
// out.bias are not written by the kernel right before (weights uploaded once, as the GPU runtime's
// bin1 planes), so their first reads go out before that wait; the results are the same either way.
void bin1_gemm(Bin1GemmCase c, const uint32_t* a, int64_t m, const uint32_t* b, int64_t n,
               int64_t k, const ProductOut& out, cudaStream_t stream,
               Bin1GemmTile tile = Bin1GemmTile::kAuto, bool b_early = false);

}  // namespace trit::kernels
