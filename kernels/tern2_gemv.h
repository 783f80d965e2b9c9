// tern2 x int8 GEMV for 1..48 tokens: the "gemv" path of the dispatch table. For m = 1 on matrices
// of >= 16 MiB of codes it runs the tern24-layout streaming kernel (kernels/tern2_gemv_stream.h:
// k % 128 == 0, k <= 16384) when it takes the call; for m = 1 on matrices of at most 3072 x 768
// weights, the one-shot GEMV (kernels/tern2_gemv_oneshot.h: one scale group, k % 64 == 0,
// k <= 16384) when it takes the call. Otherwise it runs the streaming
// tensor-core kernel (kernels/tern2_skinny.h: one scale group, k <= 32768; for m = 1 only when
// k <= 4096, for m > 32 only with k <= 3072, n <= 8192, and k <= 1024 or n >= 5 k / 4)
// when it takes the call, else for
// m = 1 the streaming dp4a GEMV
// (kernels/tern2_gemv_dp4a.h: k <= 16384, scale groups of 64 * 2^e columns), and otherwise the
// GEMV on the int8 tensor cores (mma.sync m16n8k32), whose rules are the products' shared contract
// (kernels/product.h) and:
//   - m <= 8 (the tokens are the mma's n = 8 columns; unused ones are zero);
//   - k % 64 == 0, so every row is a whole number of 16-byte chunks of 64 weights;
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), or group % 256 == 0 with at most 64 groups (256 columns is
//     the k-block one warp multiplies at a time, and the per-group sums live in shared memory);
//   - m * k <= 114688 (each block stages x in shared memory; larger calls go to tern2_gemm).
// n is free (rows past n are predicated off). tern2_gemv_rejects is "" when one of the kernels
// takes the call, else the mma kernel's first broken rule; tern2_gemv throws trit::Error with that
// rule, m, n, k and group. On a device older than 9.0, a call the streaming kernel would run as
// thread block clusters (k > 4096) goes to the mma GEMV (m <= 8) or to tern2_gemm.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvMaxM = 48;      // the path's m range
constexpr int64_t kTern2GemvMmaMaxM = 8;    // the mma.sync kernel's

std::string tern2_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);
// The mma.sync kernel's own rules (the list above).
std::string tern2_gemv_mma_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                   int64_t group);
// Which kernel tern2_gemv runs for the call on a 9.0 device: "stream", "oneshot", "dp4a", "skinny",
// "mma", or
// "" (it throws).
const char* tern2_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

void tern2_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream);
// Whether product_from_float (kernels/product.h) runs this call with x given as float (1, k)
// (alignment is x's) as one launch of tern2_gemv_oneshot_from_float, the quantizer and the GEMV
// together: where the one-shot kernel's contract takes it, up to 2560 x 2560 weights (measured
// faster than the quantizer's launch and then tern2_gemv, even where tern2_gemv itself runs
// another kernel).
bool tern2_gemv_takes_float_x(const PackedWeights& w, const float* x, int64_t m, int64_t group);
// The mma.sync kernel alone (tests, benchmarks): throws when its own rules reject the call.
void tern2_gemv_mma(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
