// tern2 x int8 streaming GEMV for one token: tern24's streaming kernel (kernels/
// tern24_gemv.h, gemv_stream.cu) run with tern2's decode. A thread owns one 128-column
// chunk (32 bytes of codes) of every row, keeps its x slice in registers and two row tiles in
// flight. The products' shared contract (kernels/product.h) and these rules:
//   - m = 1 (two tokens' x slices and tiles would spill registers);
//   - k % 128 == 0 and k <= 16384;
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), group = 128 * 2^e <= 4096, or group % 4096 == 0.
// n is free.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2GemvStreamMaxK = 16384;

// The first rule the call breaks, "" when the kernel takes it.
std::string tern2_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                      int64_t group);

// Runs it; throws trit::Error naming m, n, k, group and the rule when the contract rejects the call.
void tern2_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                       const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
