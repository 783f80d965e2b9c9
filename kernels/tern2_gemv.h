// tern2 x int8 GEMV for 1..8 tokens: the "gemv" path of the dispatch table. It runs the streaming
// dp4a GEMV (kernels/tern2_gemv_dp4a.h, k <= 16384) for m = 1 when that kernel takes the call, and
// otherwise the GEMV on the int8 tensor cores (mma.sync m16n8k32), whose rules are the products'
// shared contract (kernels/product.h) and:
//   - m <= 8 (the tokens are the mma's n = 8 columns; unused ones are zero);
//   - k % 64 == 0, so every row is a whole number of 16-byte chunks of 64 weights;
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), or group % 256 == 0 with at most 64 groups (256 columns is
//     the k-block one warp multiplies at a time, and the per-group sums live in shared memory);
//   - m * k <= 114688 (each block stages x in shared memory; larger calls go to tern2_gemm).
// n is free (rows past n are predicated off). tern2_gemv_rejects is "" when either kernel takes
// the call, else the mma kernel's first broken rule; tern2_gemv throws trit::Error with that rule,
// m, n, k and group.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvMaxM = 8;

std::string tern2_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);
// The mma.sync kernel's own rules (the list above).
std::string tern2_gemv_mma_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                   int64_t group);
// Which kernel tern2_gemv runs for the call: "dp4a", "mma", or "" (it throws).
const char* tern2_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

void tern2_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream);
// The mma.sync kernel alone (tests, benchmarks): throws when its own rules reject the call.
void tern2_gemv_mma(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
