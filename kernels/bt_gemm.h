// bt<d> x int8 GEMM on the int8 tensor cores: the product dispatcher's kGemm kernel for bt
// (kernels/product.h), from 2 tokens where the planes are given (bt_gemm_dispatch_rejects). A bt
// code is the sum of its balanced trits times 3^i, code = t_0 + 3 t_1 + .. + 3^(d-1) t_(d-1), so
// the codes are kept on the GPU as d tern2 planes of trits (PackedWeights::planes, 2 d bits a
// weight, built once at load by bt_to_planes), and the GEMM is tern2_gemm's mma.sync kernel
// (kernels/tern2_gemm.cu) reading d planes per k-tile, or, on an sm_90a build and a 9.0 device
// where bt_gemm_wgmma_pays, its wgmma kernel (kernels/tern2_gemm_sm90.h: (128, 128) tiles, the
// planes by TMA, several scale groups folded into float sums in group order as each ends): each
// fragment word of 16 codes is rebuilt from the d plane words as int8 codes in registers (digits t
// + 1 by one __byte_perm per plane, Horner's rule in 32-bit multiply-adds, plane 0's table adding
// 128 - (3^d - 1) / 2 so that a byte ends as code + 128 and one xor makes it the code), so the
// int32 accumulators and the fused epilogue are those of the bt codes, bit for bit. bt1 is its one
// plane run by the tern2 kernel itself.
//
// Planes layout (GPU memory only, never in a container): plane i (i = 0 .. d - 1) is the (n,
// ceil(k / 4)) tern2 array (exporters/formats/tern2.h) of trit i of every code, at planes + i * n *
// ceil(k / 4) bytes; columns past k hold the zero field.
//
// Contract (besides check_product's), each rule named in the error when broken:
//   - bt weights with their planes (PackedWeights::planes);
//   - k % 64 == 0 (the mma kernel's chunk; the GPU runtime pads rows to it at load);
//   - x and the planes 16-byte aligned (cp.async);
//   - group >= k (one scale group), or group % 64 == 0 (a group is whole chunks);
//   - m <= 2^31 - 1 and n <= 4194240 (65535 column tiles of 64);
//   - a device of compute capability 8.0 or newer (int8 mma.sync), checked by the launcher.
// Tiles as tern2_gemm's mma.sync kernel: (16, 128) to 16 tokens, (64, 64) to 256, (128, 128)
// above; with several scale groups (16, 32) to 16 tokens ((16, 64) past 2097120 weight rows), and
// above 16 tokens (16, 32) or (64, 64) by a cost of the busiest SM's work (small grids take the
// 16-row tiles); k split over a cluster (sm_90) where one scale group leaves SMs idle, and with
// several groups on the 16-row tiles where a cost of waves and k-tiles a CTA says so
// (bt_gemm_plan).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// Bytes of the planes of an (n, k) bt matrix of depth d: d * n * ceil(k / 4).
int64_t bt_planes_bytes(int depth, int64_t n, int64_t k);

// The planes from codes (n, k) in [-(3^d - 1) / 2, (3^d - 1) / 2] on the CPU (tests, benchmarks):
// out holds bt_planes_bytes(depth, n, k) bytes. Throws trit::Error naming the row and column of a
// code out of range, or for depth outside 1..4.
void bt_planes_pack(const int8_t* codes, int depth, int64_t n, int64_t k, uint8_t* out);

// The planes from the bt arrays (n, bt_row_bytes(k, depth)) on the GPU, into planes
// (bt_planes_bytes(depth, n, k) bytes). The bt bytes are assumed valid (the import path validates
// them). Async on `stream`; throws trit::Error naming n, k and depth for n, k < 1, depth outside
// 1..4 or null pointers.
void bt_to_planes(const uint8_t* bt, int depth, int64_t n, int64_t k, uint8_t* planes,
                  cudaStream_t stream);

// "" when bt_gemm takes the call, else the first contract rule it breaks. Host only, no device
// query (choose_path runs it without a GPU).
std::string bt_gemm_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// The dispatch table's rule for the GEMM (kernels/product_table.cu): bt_gemm_rejects's, and at
// m = 2 with several scale groups the GEMV for k > 8192, where the grouped GEMM's CTAs each walk
// all of a long k unsplit while the GEMV reads the weights once for both tokens. From 2 tokens the
// GEMM beats bt's GEMV elsewhere: H200, docs/BENCHMARKS.md session 51, bt2 and bt4 with groups of
// 64 on the nine default shapes at m = 2..8, the GEMM in 0.26-0.83 of the GEMV's time (14336 x
// 4096 bt2 at m = 8 124.56 -> 32.33 us) but on 4096 x 14336, the one shape of k > 8192, at m = 2
// and 3: the GEMV 47.52 and 61.10 us, the GEMM 60.32 and 60.41 with bt2; with bt4 77.00 and
// 101.10 against 72.89 and 72.94 (there the rule costs 5 % at m = 2). One group splits k (bt2 on
// 4096 x 14336 at m = 4 and 8: GEMM 26.38 and 26.49 us, GEMV 53.07 and 104.56; at m = 2 the GEMV
// 40.14, the GEMM not measured there). Host only, like bt_gemm_rejects.
std::string bt_gemm_dispatch_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                     int64_t group);

// Whether auto dispatch runs a bt call on the sm_90a wgmma kernel (where that kernel takes it:
// an sm_90a build, a 9.0 device, one group or groups whose sums stay below 2^22, y for several
// groups), from the shape and the SM count alone: at 128 tokens where its (128, 128) tiles fill
// half the SMs or more, above 128 where they number 30 % of them (measured, see the .cu).
// set_tern2_gemm_variant (kernels/tern2_gemm.h) forces either kernel for bt too. Host only.
bool bt_gemm_wgmma_pays(int64_t m, int64_t n, int64_t k, int64_t group, int sms);

// Runs the product (acc or y, see ProductOut) asynchronously on `stream`. Throws trit::Error
// naming m, n, k, group and the rule when check_product or the contract above rejects the call.
void bt_gemm(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream);

// How bt_gemm runs a call on the current device: its output tile (tile_m tokens by tile_n weight
// rows) and the CTAs (a thread block cluster) it splits each tile's k over, 1 where it does not
// split. One scale group: split where the tiles alone leave SMs idle (sm_90). Several groups: on
// the 16-row tiles only, 2, 4 or 8 CTAs by a cost of waves and k-tiles a CTA (kernels/
// tern2_gemm.cu, choose_grouped_split), each CTA sending its groups' terms to the CTA that adds
// them in group order, so that y is the unsplit kernel's bit for bit. Throws as bt_gemm does on a
// call it rejects.
// wgmma: the call runs the sm_90a wgmma kernel (tern2_gemm_sm90's (128 tokens, 128 weight rows)
// tiles reading the planes, persistent CTAs), not the mma.sync kernel.
struct BtGemmPlan {
    int tile_m = 0, tile_n = 0, splits = 1;
    bool wgmma = false;
};
BtGemmPlan bt_gemm_plan(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out);

}  // namespace trit::kernels
