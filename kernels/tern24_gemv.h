// GEMV for tern24 (2:4-sparse ternary, exporters/formats/tern24.h) weights times int8 activations,
// m = 1..8 tokens: one warp per output row reads the row's mask and signs once (16 + 8 bytes per
// lane per 128 columns) and accumulates every token, under the products' contract
// (kernels/product.h). Its own rules, which tern24_gemv_rejects names (the generic kernel then
// runs): m <= 8; k % 128 == 0; group >= k, 32, 64 or a multiple of 128; the mask and x 16-byte
// aligned, the signs 8-byte aligned; x and the per-warp group accumulators fit shared memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// "" when tern24_gemv takes the call, else the first rule it breaks. Host only, launches nothing.
std::string tern24_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Throws trit::Error (naming m, n, k, group and the rule) when check_product or the rules above
// reject the call.
void tern24_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
