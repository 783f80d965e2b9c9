// GEMV for bt<d> (balanced ternary, d = 1..4, exporters/formats/bt.h) weights times int8
// activations, m = 1..8 tokens, under the products' contract (kernels/product.h): the "gemv" path
// of the dispatch table. bt_gemv runs one of two kernels (bt_gemv_stream.cu, bt_gemv.cu):
//   - stream (m <= 2, d <= 2): threads own a 16-byte chunk of every row, the weights stream in
//     16-byte loads a tile of rows ahead, x stays in registers. Its rules, which
//     bt_gemv_stream_rejects names: d in 1..2; m in 1..2; bt_row_bytes(k, d) <= 8177, and <= 7665
//     when group < k (one chunk per thread, at most 512 threads, one warp of them for the
//     epilogue when split); group >= k, or group >= 45 (d = 2) / 80 (d = 1), the columns a
//     thread's chunk touches (so they meet at most two groups); d = 1 with m = 2 takes one group
//     only (registers); its shared memory (a 64 KB decode table, a tile's partial sums and
//     scales) fits the kernels' budget, which every shape the other rules accept does.
//   - warp (m <= 8, any d): one warp per output row, x staged in shared memory. Its rules, which
//     bt_gemv_warp_rejects names: m <= 8; group >= k or group >= 40; x and the per-warp group
//     accumulators fit shared memory.
// With PackedWeights::dense set (the nibbles of kernels/bt_nib4.h, depth <= 2), bt_gemv runs the
// nibble GEMVs first, for m = 1 where their rules take the call: the one-shot kernel
// (bt_nib4_oneshot, "oneshot") up to 6912 x 2560 weights, else bt_nib4_gemv ("nib4": tern2's
// streaming kernel with a nibble decode, ~0.5 instructions a weight). Otherwise
// bt_gemv runs stream for m = 1 when it takes the call (at m = 2 the warp kernel, which decodes
// once for both tokens, is the one dispatched; bt_gemv_stream runs m = 2 when called alone), else
// warp; bt_gemv_rejects is "" when either takes it, else warp's first broken rule. Scale groups may end inside a quintet (group 64 = 12.8
// quintets): both kernels split them exactly. Neither has an alignment rule: rows, the weights
// array and x may start at any byte.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

// "" when bt_gemv takes the call (either kernel), else the warp kernel's first broken rule. Host
// only, launches nothing.
std::string bt_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Which kernel bt_gemv runs for the call: "oneshot", "nib4", "stream", "warp", or "" (it throws).
// Host only.
const char* bt_gemv_variant(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Whether product_from_float fuses the quantizer into the one-shot nibble GEMV for the call
// (bt_nib4_oneshot_from_float): where bt_gemv would run that kernel and k <= 4096 (at larger k
// every block's pass over x costs more than the quantizer's own launch). Host only.
bool bt_gemv_takes_float_x(const PackedWeights& w, const float* x, int64_t m, int64_t group);

// Throws trit::Error (naming m, n, k, group and the rule) when check_product or both kernels'
// rules reject the call.
void bt_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream);

// Any m >= 1: bt_gemv over consecutive chunks of 8 tokens (the last one shorter), one call each on
// `stream`; the dispatcher's gemv path for bt above m = 8, where no GEMM kernel takes bt (the
// generic kernel, one thread per output, took 52 ms on 128256 x 4096 at m = 16 on the H200;
// docs/BENCHMARKS.md, session 35). Its rules, named by bt_gemv_chunks_rejects: above 64 tokens
// n * k >= 262144 (below it the generic kernel's one launch costs less than a launch per 8
// tokens), and bt_gemv's for an 8-token chunk (min(m, 8) tokens); the launcher throws trit::Error
// naming the call's m, n, k, group and the rule.
std::string bt_gemv_chunks_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                   int64_t group);
void bt_gemv_chunks(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream);

// One kernel alone (tests, benchmarks): its first broken rule ("" when it takes the call), and its
// launcher, which throws trit::Error naming the kernel, m, n, k, group and the rule.
std::string bt_gemv_stream_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                   int64_t group);
void bt_gemv_stream(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream);
std::string bt_gemv_warp_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);
void bt_gemv_warp(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                  const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
