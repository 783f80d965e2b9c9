// The sm_90a (Hopper) kernel behind tern2_gemm (kernels/tern2_gemm.h) for many tokens and one
// scale group: wgmma.mma_async with the decoded weights as the register A operand (weights are
// the M rows, tokens the N columns) and x as the shared-memory B operand, both loaded by TMA;
// persistent CTAs over tiles of 256 or 128 weights x 96 to 256 tokens, or of 64 weights x 96 or
// 128 tokens with k split between the two consumer warp groups (tern2_gemm_sm90_tile in
// kernels/tern2_gemm_sm90_tile.h); y (or acc) leaves through shared memory and TMA stores when
// n % 4 == 0 and the output is 16-byte aligned, else through direct stores. Where 128 x 128 tiles
// fill at most half the SMs and k is long (>= 48 k-tiles of 128 columns), the launch runs
// stream-K: the tiles' k-tiles are cut into one contiguous range per SM, and the CTA holding a
// tile's first k-tile adds the others' int32 partial tiles (exact: y is bit-identical to the
// one-CTA tile) before its epilogue. The same kernel, on whole (128, 128) tiles, reads bt's trit
// planes (depth > 1) and folds several scale groups into float sums in group order (group < k;
// Tern2GemmSm90Args). Internal to the kernels: tern2_gemm and bt_gemm check the contract and pick
// this path; tests force it through Tern2GemmVariant and set_tern2_gemm_tokens.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/product.h"
#include "kernels/tern2_gemm_sm90_tile.h"

namespace trit::kernels::detail {

// How the launch splits its output tiles among the persistent CTAs: kAuto by the measured rule
// (see the .cu); kStreamK: every tile stream-K (the most partial tiles and fix-ups: tests).
enum class Sm90Schedule { kAuto, kStreamK };

// The arguments the one-group tern2 kernels take (their parameter: with more fields nvcc 13.0
// compiled them differently, scripts/ptx-diff.sh); Tern2GemmSm90Args adds bt's planes and
// several scale groups.
struct Tern2GemmSm90Base {
    const uint8_t* codes = nullptr;  // (n, k / 4), 16-byte aligned rows (k % 64 == 0)
    const int8_t* x = nullptr;       // (m, k), 16-byte aligned
    int64_t m = 0, n = 0, k = 0;
    ProductOut out;
    Sm90Schedule schedule = Sm90Schedule::kAuto;
    // The kernel runs under PDL (kernels/pdl.cuh); true: it may read the codes before the
    // previous kernel on the stream ends (PackedWeights::pdl).
    bool codes_early = false;
    // Tokens per tile: 0, the launcher's choice (tern2_gemm_sm90_tile); 128, the 128-token tiles
    // alone (256 or 128 weight rows by tern2_gemm_sm90_tile_128, stream-K by its rule); another
    // of kTern2GemmSm90Tokens, the 128-row tile with that many tokens, whole tiles (tests,
    // benchmarks). Anything else throws, as do the others than 128 with kStreamK.
    int tokens = 0;
    // The k-split tile (64 weight rows, each consumer warp group every other k-tile; 96 or 128
    // tokens, by tokens or else the launcher's choice): whole tiles only (not with kStreamK).
    // False: the launcher's choice among the other tiles (tests and benchmarks force it).
    bool ksplit = false;
};

struct Tern2GemmSm90Args : Tern2GemmSm90Base {
    // Code planes a stage: 1, tern2 codes; 2..4, bt's trit planes (kernels/bt_gemm.h), plane i the
    // (n, k / 4) bytes at codes + i * n * k / 4, each weight the sum of its trits times 3^i.
    int depth = 1;
    // Columns a scale group: 0 or >= k, one group (acc or y); else a multiple of 64 with several
    // groups, y only: the consumers fold each group's int32 sums into float sums in group order,
    // y bit for bit the CPU's (product.h), where every group's sums stay below 2^22 in magnitude
    // (group * 128 * max |code| < 2^22; the launcher's caller checks it).
    int64_t group = 0;
};

// True when this build holds the sm_90a kernel (nvcc >= 12; see kernels/CMakeLists.txt).
bool tern2_gemm_sm90_built();

// The largest magnitude the folded kernels convert from int32 to float by adding 1.5 * 2^23 to
// the bits (exact below 2^22): a group's sums must stay under it.
constexpr int64_t kTern2GemmSm90FoldMaxSum = (int64_t{1} << 22) - 1;

// Whether the kernel takes a call of `depth` planes with scale groups of `group` columns on k (k
// % 64 == 0 assumed): one group, or groups of a multiple of 64 whose sums stay within
// kTern2GemmSm90FoldMaxSum (|x| <= 128, |code| <= max_code), writing y. "" when it does, else the
// rule it breaks (a literal: the dispatchers ask on every call).
inline const char* tern2_gemm_sm90_rejects(int depth, int64_t k, int64_t group, int64_t max_code,
                                           bool acc_out) {
    if (depth < 1 || depth > 4) return "1 to 4 code planes";
    if (group >= k) return "";
    if (group % 64 != 0) return "several scale groups need a group of a multiple of 64 columns";
    if (acc_out) return "several scale groups write y only (their sums fold into floats)";
    if (group * 128 * max_code > kTern2GemmSm90FoldMaxSum)
        return "several scale groups need group * 128 * max |code| < 2^22 (exact folds)";
    return "";
}

// Launches on `stream`; the caller has checked the contract, tern2_gemm_sm90_rejects and a
// compute capability 9.0 device with `sms` SMs. A stream-K launch uses a workspace owned by the
// launcher, one per (device, stream), allocated (cudaMalloc) on the first such call that needs more
// than it holds: up to `sms` partial tiles of 128 KiB. Calls on one stream run in order and share
// it; calls on different streams have their own.
void tern2_gemm_sm90(const Tern2GemmSm90Args& a, int sms, cudaStream_t stream);

}  // namespace trit::kernels::detail
