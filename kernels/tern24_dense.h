// tern24 products by the dense path: a tern24 weight's codes written once as tern2 (2 bits per
// weight, kernels/product.h PackedWeights::dense; the GPU runtime builds it when it uploads a
// tern24 layer) and multiplied by the tern2 kernels (their auto dispatch: the one-shot GEMV or
// tern2_skinny for few tokens, the tern2 GEMM for many). The product dispatcher's kGemm path for
// tern24 (kernels/product_table.cu): ahead of the tern24 GEMVs with one scale group from m = 2 but
// on the largest weights, and at m = 1 up to 8192 x 2560 weights, 8192 x 4096 with k <= 4096
// (tern24_dense_first_rejects), else where the GEMVs decline (m > 8).
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

// "" when auto dispatch runs the dense path ahead of the tern24 GEMVs: tern24_dense_rejects holds,
// one scale group (group >= k), and m = 1 on at most kTern24DenseFirstMaxWeights weights (n * k),
// or at most kTern24DenseFirstMaxWeightsShortK with k <= 4096 (where the tern2 streaming kernel
// takes m = 1), where it measured faster on the H100; m = 2 below kTern24StreamFirstMinWeights
// weights or where the tern24 streaming GEMV declines; m = 3..8 unless tern24_gemv_mma_first
// (kernels/tern24_gemv.h) sends the call to the tensor-core GEMV; m > 8. Else the first rule it
// breaks. The m >= 2 rules were measured on the H200.
constexpr int64_t kTern24DenseFirstMaxWeights = int64_t{8192} * 2560;
constexpr int64_t kTern24DenseFirstMaxWeightsShortK = int64_t{8192} * 4096;
constexpr int64_t kTern24StreamFirstMinWeights = int64_t{1} << 27;
std::string tern24_dense_first_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

}  // namespace trit::kernels
