// tern2 x int8 GEMM on the int8 tensor cores (mma.sync m16n8k32, sm_80+; split-k through thread
// block clusters on sm_90): the product dispatcher's kGemm kernel for tern2 (kernels/product.h),
// for many tokens (auto dispatch sends m >= 9). Bit-exact acc and fused-epilogue y. Both kernels
// launch with PDL (kernels/pdl.cuh): the next kernel on the stream starts as this one's CTAs
// finish their main loops (mma.sync) or start (the persistent wgmma kernel), and both kernels'
// first k-tiles of codes load before the previous kernel ends when PackedWeights::pdl.
//
// Contract (besides check_product's), each rule named in the error when broken:
//   - k % 64 == 0: packed rows of k / 4 bytes stay 16-byte aligned for cp.async, and one 64-column
//     chunk (one 32-bit word of codes per thread) is the unit of an mma pair;
//   - x and the packed codes 16-byte aligned;
//   - group >= k (one scale group, the main case), or group % 64 == 0 (a group is whole chunks);
//   - m <= 2^31 - 1 and n <= 4194240 (65535 column tiles of 64: the grid's y limit).
// m and n need not be multiples of the tiles (rows past m or n are zero-filled and not stored);
// k need not be a multiple of the k-tile (columns past k are zero-filled).
//
// Kernels: the mma.sync kernel below takes every call of the contract. The sm_90a wgmma kernel
// (kernels/tern2_gemm_sm90.h; persistent, TMA-fed, weights as wgmma's M, tokens as N, stream-K
// where a few tiles meet a long k, a k-split 64-row tile where that fills one wave) takes
// one-scale-group calls on a compute capability 9.0 device where it measured faster: m > 256;
// for m = 49..256 wherever its k-split tile pays (kernels/tern2_gemm_sm90_tile.h: its tiles fit
// one wave and k <= 2n, or m > 64, 32 tiles or more and m > 128 or k <= 8192); for m = 17..256,
// where k <= 1024 and n m > 147456, k <= 4096 and n ceil(m / 64) > 5120, or longer k and
// n ceil(m / 64) > 4096 (the mma.sync kernel's 64-token tiles against the wgmma kernel's one wave;
// measured crossover, see the .cu);
// set_tern2_gemm_variant forces either. Forced, the wgmma kernel also takes several scale groups
// of a multiple of 64 into y (it folds each group's sums into float sums in group order, exact
// while group * 128 * max |code| < 2^22), as it does bt's planes (kernels/bt_gemm.h); auto sends
// tern2 with several groups to the mma.sync kernel.
//
// The mma.sync kernel: (64, 64) tiles of tokens x weights for m = 17..256 ((16, 128) below,
// (128, 128) above; with several scale groups (16, 32) to 16 tokens, (64, 64) above), k split
// over a thread block cluster of up to 8 CTAs where the tiles leave SMs idle (with several scale
// groups, whose y adds the groups' terms in order, only at m <= 16 and only where a cost of waves
// and k-tiles a CTA says so: each CTA sends its groups' terms to the CTA owning their outputs,
// which adds them in order; the (64, 64) tile copies each k-tile's scales into its shared-memory
// ring, the m <= 16 tiles load a thread's columns' scales of the next group as it adds this
// group's terms); the same
// kernel runs bt's trit planes (kernels/bt_gemm.h); its first stages' codes load before the
// previous kernel ends when PackedWeights::pdl; the split tiles are added four outputs a thread,
// the peers' words read with ld.shared::cluster, issued together.
//
// Layout trick (mma.sync kernel): any permutation of k applied to both mma operands leaves the dot
// product alone. A word W of 16 codes decodes with 4 __byte_perm into the columns [0,2,4,6],
// [8..14], [1..7], [9..15] of the word; x is permuted the same way when its fragments are built
// (see .cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// "" when tern2_gemm takes the call, else the first contract rule it breaks. Looks only at the
// shape, group and pointer alignment (no device query: choose_path runs it without a GPU).
std::string tern2_gemm_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Runs the product (acc or y, see ProductOut) asynchronously on `stream`. Throws trit::Error
// naming m, n, k, group and the rule when check_product or the contract above rejects the call,
// or when the device is older than sm_80.
void tern2_gemm(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream);

// Which kernel tern2_gemm runs: kAuto as described above; kMmaSync and kWgmma force one (tests and
// benchmarks cover each on the shapes auto would not send it); kWgmmaStreamK forces the wgmma
// kernel with every tile split stream-K (tests: the most partial tiles); kWgmmaKSplit forces it
// with its k-split tile (64 weight rows, each consumer warp group every other k-tile; 96 or 128
// tokens by set_tern2_gemm_tokens, else the launcher's choice of the two). A forced wgmma variant
// throws, naming the shape, where it cannot run: a build without sm_90a, a device other than 9.0,
// several groups into acc or of sums that could reach 2^22 (the stream-K and k-split variants:
// more than one group). bt_gemm (kernels/bt_gemm.h) follows the same switch.
enum class Tern2GemmVariant { kAuto, kMmaSync, kWgmma, kWgmmaStreamK, kWgmmaKSplit };
// The kernel kAuto runs a call on, from the shape and the device's properties alone (no device
// query; tests pin the rule, benchmarks can name the kernel): kWgmma for one scale group on an
// sm_90a build and a compute capability 9.0 device with `sms` SMs where the rule above sends it
// (measured on 132 SMs; the k-split tile's part counts its tiles against the SMs), else kMmaSync.
Tern2GemmVariant tern2_gemm_auto_kernel(int64_t m, int64_t n, int64_t k, int64_t group,
                                        int cc_major, int cc_minor, int sms);
// Process-wide (atomic); kAuto by default.
void set_tern2_gemm_variant(Tern2GemmVariant v);
Tern2GemmVariant tern2_gemm_variant();

// The wgmma kernel's tokens per tile (detail::Tern2GemmSm90Args::tokens): 0, its launcher's choice
// (the default); one of detail::kTern2GemmSm90Tokens forced (tests and benchmarks; 128 is the
// kernel's 128-token tiles alone, as before the others existed). Process-wide (atomic). Throws
// trit::Error, naming the value, for anything else.
void set_tern2_gemm_tokens(int tokens);
int tern2_gemm_tokens();

// Forces the wgmma kernel's tokens per tile while it lives, then restores 0.
class ScopedTern2GemmTokens {
  public:
    explicit ScopedTern2GemmTokens(int tokens) { set_tern2_gemm_tokens(tokens); }
    ~ScopedTern2GemmTokens() { set_tern2_gemm_tokens(0); }
    ScopedTern2GemmTokens(const ScopedTern2GemmTokens&) = delete;
    ScopedTern2GemmTokens& operator=(const ScopedTern2GemmTokens&) = delete;
};

// Forces a variant while it lives, then restores kAuto (tests and benchmarks).
class ScopedTern2GemmVariant {
  public:
    explicit ScopedTern2GemmVariant(Tern2GemmVariant v) { set_tern2_gemm_variant(v); }
    ~ScopedTern2GemmVariant() { set_tern2_gemm_variant(Tern2GemmVariant::kAuto); }
    ScopedTern2GemmVariant(const ScopedTern2GemmVariant&) = delete;
    ScopedTern2GemmVariant& operator=(const ScopedTern2GemmVariant&) = delete;
};

}  // namespace trit::kernels
