// GEMV for tern24 (2:4-sparse ternary, exporters/formats/tern24.h) weights times int8 activations,
// m = 1..8 tokens: the "gemv" path of the dispatch table, under the products' contract
// (kernels/product.h). Two kernels, one path:
//   - the streaming kernel (tern24_gemv_stream), m <= 2: a thread owns one 128-column chunk of
//     every row (x in registers) and keeps the next two row tiles in flight while it multiplies
//     the current one, so that the weights stream at close to the memory's rate. Its rules: m <= 2;
//     k % 128 == 0 and k <= 16384; the mask and x 16-byte aligned, the signs 8-byte aligned; one
//     scale group (group >= k), group = 128 * 2^e <= 4096, or group % 4096 == 0 (a scale group is a
//     power-of-two run of a warp's lanes, or whole warps). With PackedWeights::pdl it reads the
//     first tiles' w_scale and bias, like the weights, before waiting for the previous kernel:
//     set pdl only when no kernel writes them right before either (the runtime uploads both once).
//   - the warp-per-row kernel (tern24_gemv_warp), m <= 8: one warp per output row, x staged in
//     shared memory. Its rules: m <= 8; k % 128 == 0 and k <= 2^30; group >= k, 32, 64 or a
//     multiple of 128; the same alignment; x (m * k * 9 / 8 bytes) and the per-warp group
//     accumulators (m * ceil(k / group) * 4 bytes a warp) fit 200 KB of shared memory.
//   - the tensor-core kernel (tern24_gemv_mma, kernels/tern24_gemv_mma.cu), m <= 8: a warp streams
//     16 rows over all of k, the code words the A operand of mma.sync m16n8k32, x from shared
//     memory. Its rules: m <= 8; k % 128 == 0 and k <= 16384; one scale group (group >= k); the
//     same alignment. Under evaluation: the gemv path runs it only with TRIT_TERN24_MMA=1 in the
//     environment (read once), where it takes the call, ahead of the two kernels above.
// tern24_gemv runs the streaming kernel when it takes the call and the warp kernel otherwise;
// tern24_gemv_rejects is "" when one of them takes the call, else the warp kernel's first broken
// rule (the generic kernel then runs), and tern24_gemv throws trit::Error with that rule.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern24GemvMaxM = 8;        // the path's m range (the warp kernel's)
constexpr int64_t kTern24GemvStreamMaxM = 2;  // the streaming kernel's
constexpr int64_t kTern24GemvStreamMaxK = 16384;

// "" when tern24_gemv takes the call, else the first rule it breaks. Host only, launches nothing.
std::string tern24_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);
// Each kernel's own rules (the lists above).
std::string tern24_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group);
std::string tern24_gemv_warp_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                     int64_t group);
std::string tern24_gemv_mma_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                    int64_t group);
// Which kernel tern24_gemv runs for the call: "mma", "stream", "warp", or "" (it throws).
const char* tern24_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Throws trit::Error (naming m, n, k, group and the rule) when check_product or the rules above
// reject the call.
void tern24_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                 const ProductOut& out, cudaStream_t stream);
// One kernel alone (tests, benchmarks): throws when its own rules reject the call.
void tern24_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out, cudaStream_t stream);
void tern24_gemv_warp(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                      const ProductOut& out, cudaStream_t stream);
void tern24_gemv_mma(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
