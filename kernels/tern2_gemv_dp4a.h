// tern2 x int8 GEMV for one or two tokens that streams the weights at close to the memory's rate
// (the GEMV of a decode step), with the products' shared contract (kernels/product.h) and these
// rules of its own:
//   - m <= 2 (each token's x slice lives in registers);
//   - k % 64 == 0 and k <= 16384 (a thread owns one 64-column, 16-byte piece of every row);
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), or group = 64 * 2^e <= 2048, or group % 2048 == 0 (a scale
//     group is a power-of-two run of lanes of a warp, or whole warps).
// n is free. tern2_gemv (kernels/tern2_gemv.h) runs this kernel for m = 1 when it accepts the call
// and the mma.sync GEMV otherwise (at m = 2 this kernel decodes the weights once per token and
// measured slower); the dispatch table sees the two as one "gemv" path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvDp4aMaxM = 2;
constexpr int64_t kTern2GemvDp4aMaxK = 16384;

// The first rule the call breaks, "" when the kernel takes it.
std::string tern2_gemv_dp4a_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                    int64_t group);

// Runs it; throws trit::Error naming m, n, k, group and the rule when the contract rejects the call.
void tern2_gemv_dp4a(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
