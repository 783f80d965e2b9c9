// GEMV for bt<d> (balanced ternary, d = 1..4, exporters/formats/bt.h) weights times int8
// activations, m = 1..8 tokens: one warp per output row reads the row once (8 quintets = 8 d bytes
// per lane per step, realigned in registers since bt rows start at any byte) and accumulates every
// token, under the products' contract (kernels/product.h). Scale groups may end inside a quintet
// (group 64 = 12.8 quintets): handled exactly. Its own rules, which bt_gemv_rejects names (the
// generic kernel then runs): m <= 8; group >= k or group >= 40; x and the per-warp group
// accumulators fit shared memory. No alignment rule.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// "" when bt_gemv takes the call, else the first rule it breaks. Host only, launches nothing.
std::string bt_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Throws trit::Error (naming m, n, k, group and the rule) when check_product or the rules above
// reject the call.
void bt_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
