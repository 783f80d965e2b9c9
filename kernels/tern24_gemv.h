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
//     same alignment; at launch, x (m * k * 9 / 8 bytes) must fit a block's opt-in shared memory
//     (auto dispatch checks it before choosing the kernel). Its time is
//     nearly the same for 1 to 8 tokens, and a warp takes whole 16-row tiles over all of k, so it
//     pays where the tiles fill the resident warps' rounds.
// tern24_gemv (auto) runs, in order, the first that takes the call: the streaming kernel for
// m <= 2; the tensor-core kernel for m >= 3 when m >= 5 or n >= 8192 (on the H200, docs/
// BENCHMARKS.md session 38: at m = 4 it was 1.5-1.6x faster than the warp kernel on 14336 x 4096
// and 1.15-1.2x slower on 4096 x 4096 and 4096 x 14336; at m = 8 faster on every shape measured);
// the warp kernel. tern24_gemv_rejects is "" when one of them takes the call, else the warp
// kernel's first broken rule (the generic kernel then runs), and tern24_gemv throws trit::Error
// with that rule.
// Tests and benchmarks force one kernel with Tern24GemvVariant.
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

// The kernel tern24_gemv runs: kAuto (the order above), or one forced (tests, benchmarks): then
// tern24_gemv runs that kernel or throws its broken rule. Process-wide (atomic); kAuto by default.
enum class Tern24GemvVariant { kAuto, kStream, kWarp, kMma };
void set_tern24_gemv_variant(Tern24GemvVariant v);
Tern24GemvVariant tern24_gemv_variant_forced();

// Forces a variant while it lives, then restores kAuto.
class ScopedTern24GemvVariant {
  public:
    explicit ScopedTern24GemvVariant(Tern24GemvVariant v) { set_tern24_gemv_variant(v); }
    ~ScopedTern24GemvVariant() { set_tern24_gemv_variant(Tern24GemvVariant::kAuto); }
    ScopedTern24GemvVariant(const ScopedTern24GemvVariant&) = delete;
    ScopedTern24GemvVariant& operator=(const ScopedTern24GemvVariant&) = delete;
};

// Warps of the tensor-core kernel the current device holds at once for m tokens of k columns
// (its launch grid's most; the x staged in shared memory bounds it at large m * k), 0 where x does
// not fit a block's shared memory. Queries the device once per (device, m, k); launches nothing.
int64_t tern24_gemv_mma_resident_warps(int64_t m, int64_t k);

// The auto dispatch's rule (kernels/tern24_dense.h) for running the tensor-core kernel ahead of
// the tern24 dense copy: 3 <= m <= 8, at least kTern24MmaFirstMinWeights weights (n * k), and its
// ceil(n / 16) tiles fill at least kTern24MmaFirstMinFill of the rounds that `warps` resident
// warps take them in. On the H200 (docs/BENCHMARKS.md session 38, one scale group, m = 3..8) the
// dense copy took 1.01-1.10x its time from 65536 x 4096 up to 128256 x 4096, 1.17-1.21x on
// 128256 x 8192, 1.23-1.27x on 151936 x 3584 (fill 0.90), and 0.80-0.84x on 49152 x 4096 (3072
// tiles: 2 rounds of 2112 warps, fill 0.73).
constexpr int64_t kTern24MmaFirstMinWeights = int64_t{1} << 28;
constexpr double kTern24MmaFirstMinFill = 0.85;
bool tern24_gemv_mma_first(int64_t m, int64_t n, int64_t k, int64_t warps);

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
