// tern2 x int8 GEMV for one token with every weight load in flight at once: the decode-step GEMV
// of small matrices (tern2_gemv runs it for m = 1 up to 3072 x 768 weights, where it measured
// 8-27 % faster than the persistent kernels on the H100; above that they win). Shared contract in
// kernels/product.h; its own rules:
//   - m == 1;
//   - one scale group (group >= k): the sum is one int32 per row;
//   - k % 64 == 0 and k <= 16384 (a lane owns whole 64-column, 16-byte units of its row, at most
//     8 of them, and a row has at most 32 lanes);
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are).
// n is free (up to 4 * (2^31 - 1)).
//
// Layout (kernels/gemv_oneshot.cuh, the kernel bt's nibbles share): L lanes of a warp per row
// (L = 4, 8, 16 or 32; 32 / L rows per warp), each lane holding U = ceil((k / 64) / L) <= 8
// units of 64 columns (16 bytes of codes each) in registers; one warp per 32 / L rows, no loop
// over tiles. Every lane requests its units (and the row's scale and bias) before pdl_wait()
// when PackedWeights::pdl allows it, so the whole matrix is in flight while the previous kernel
// ends; after the wait it reads the x of its units (from L1 / L2), decodes and multiplies (dp4a),
// and the row's lanes add up with shuffles.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvOneshotMaxK = 16384;

// The first rule the call breaks, "" when the kernel takes it.
std::string tern2_gemv_oneshot_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group);

// Lanes per row the launcher picks for (n, k): 4, 8, 16 or 32, the most that keep the grid at
// <= 16384 threads (measured fastest, tern2_gemv_oneshot.cu), else the fewest that hold a row.
int tern2_gemv_oneshot_lanes(int64_t n, int64_t k);
// Whether the launcher's blocks (tern2_gemv_oneshot_lanes) let the next PDL-launched kernel start
// after their products rather than before their wait, on `sms` SMs (kernels/gemv_oneshot.cuh,
// late_launch(): grids of at most 3 blocks an SM, from float x or with 1, 3 or 4 units a lane).
bool tern2_gemv_oneshot_launches_late(int64_t n, int64_t k, bool float_x, int sms);

// Runs it with `lanes` lanes per row (0: tern2_gemv_oneshot_lanes(n, k); otherwise 4, 8, 16 or 32
// with ceil(k / 64 / lanes) <= 8 units a lane). Throws trit::Error naming m, n, k, group and the
// rule when the contract rejects the call.
void tern2_gemv_oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream, int lanes = 0);

// The same product from float x (1, k): every block quantizes x to int8 exactly as
// act_int8_quantize does (kernels/act_int8.h: per-token absmax, round half to even; a row holding
// NaN or +-Inf gives codes 0 and scale NaN) into shared memory and uses that scale as the
// epilogue's x scale, so y is bit for bit act_int8_quantize followed by tern2_gemv_oneshot, in one
// launch instead of two. y only (out.acc must be null); out.x_scale is not read; x 16-byte
// aligned; otherwise the rules above.
void tern2_gemv_oneshot_from_float(const PackedWeights& w, const float* x, int64_t group,
                                   const ProductOut& out, cudaStream_t stream, int lanes = 0);

}  // namespace trit::kernels
