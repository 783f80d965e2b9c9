// tern24 products for many tokens by the dense path: a tern24 weight's codes written once as tern2
// (2 bits per weight, kernels/product.h PackedWeights::dense; the GPU runtime builds it when it
// uploads a tern24 layer) and multiplied by the tern2 kernels (tern2_skinny up to m = 16, the
// tern2 GEMM above). The product dispatcher's kGemm path for tern24 (kernels/product_table.cu).
// The results are those of the tern24 kernels: the same codes, exact int32 sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// Writes the tern2 codes (n, ceil(k / 4) bytes, exporters/formats/tern2.h) of the tern24 arrays
// mask (n, ceil(ceil(k / 4) / 2)) and signs (n, ceil(ceil(k / 4) / 4)): one byte per 4-column
// group. The arrays are assumed valid (the import path validates them). Async on `stream`;
// throws trit::Error naming n and k for n, k < 1 or null pointers.
void tern24_to_tern2(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k, uint8_t* codes,
                     cudaStream_t stream);

// "" when the dense path takes the call: tern24 weights with PackedWeights::dense set and a tern2
// fast kernel that takes the call on it; else the first rule it breaks.
std::string tern24_dense_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Runs the tern2 product (its auto dispatch) on w.dense; throws trit::Error naming m, n, k, group
// and the rule when tern24_dense_rejects does.
void tern24_dense_product(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                          const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
