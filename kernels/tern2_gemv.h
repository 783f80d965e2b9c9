// tern2 x int8 GEMV for 1..8 tokens on the int8 tensor cores (mma.sync m16n8k32), with the
// products' shared contract (kernels/product.h) and these rules of its own:
//   - m <= 8 (the tokens are the mma's n = 8 columns; unused ones are zero);
//   - k % 64 == 0, so every row is a whole number of 16-byte chunks of 64 weights;
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), or group % 256 == 0 with at most 64 groups (256 columns is
//     the k-block one warp multiplies at a time, and the per-group sums live in shared memory);
//   - m * k <= 114688 (each block stages x in shared memory; larger calls go to tern2_gemm).
// n is free (rows past n are predicated off). tern2_gemv_rejects names the first rule a call
// breaks ("" when it takes it); tern2_gemv throws trit::Error with that rule, m, n, k and group.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvMaxM = 8;

std::string tern2_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

void tern2_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
