// tern2 x int8 product for a few tokens (m = 1..48) that streams the weights once at close to the
// memory's rate: the small-batch decode step (several sequences, or speculative tokens), run by
// the dispatcher's "gemv" path for m = 2..48 (kernels/tern2_gemv.h). Bit-exact acc and
// fused-epilogue y under the products' contract (kernels/product.h), and these rules of its own:
//   - m <= 48 (the tokens are up to six n = 8 groups of mma.sync m16n8k32, each multiplying the
//     same decoded weights; unused tokens are zero), and k <= 3072 for m > 32 (x of tokens 8..
//     in one CTA's shared memory);
//   - k % 64 == 0 (a lane's piece of a row is 16 bytes = 64 codes) and k <= 32768 (at most 8
//     CTAs of 16 warps share a row, a warp owning 256 columns);
//   - one scale group (group >= k);
//   - n <= 2^35 - 16 (the 16-row tiles are counted in 31 bits; no memory holds more rows);
//   - the packed codes and x 16-byte aligned (cudaMalloc'ed arrays are).
// When k needs more than one CTA (k > 4096), the CTAs form a thread block cluster and
// add their partial sums through distributed shared memory: compute capability 9.0 or newer,
// which tern2_skinny_needs_cluster tells and the launcher checks (an error naming the shape).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int64_t kTern2SkinnyMaxM = 48;
constexpr int64_t kTern2SkinnyNarrowMaxM = 32;  // above it (five or six token groups):
constexpr int64_t kTern2SkinnyWideMaxK = 3072;  // k at most this
constexpr int64_t kTern2SkinnyMaxK = 32768;
constexpr int64_t kTern2SkinnyMaxN = (int64_t{1} << 35) - 16;  // 16-row tiles < 2^31

// "" when the kernel takes the call, else the first rule it breaks. Host only, no device query.
std::string tern2_skinny_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Whether a call with this k runs as clusters of CTAs (needs compute capability >= 9.0).
bool tern2_skinny_needs_cluster(int64_t k);

// The CTAs a call with this k and m runs: `cluster` CTAs share each row, `warps` warps each.
struct Tern2SkinnyGeometry {
    int cluster, warps;
};
Tern2SkinnyGeometry tern2_skinny_geometry(int64_t k, int64_t m);

// The clusters a call launches: `tiles` 16-row tiles, `resident` clusters of `cluster` CTAs the
// device holds at once, `sms` SMs, m tokens: the busiest walks as few tiles as the residency
// allows (at most one CTA of one cluster per SM above m = 2), and two rather than one where one
// would take at least 7/8 of the SMs. Host only; the launcher queries the device.
int64_t tern2_skinny_clusters(int64_t tiles, int64_t resident, int64_t sms, int cluster, int64_t m);

// Tiles per round: the smallest R <= max_round dividing 2 cluster warps (so that each cluster
// thread finishes four rows of a round's tile) with R >= most, the tiles the busiest cluster
// walks; where none covers them, the largest. Host only.
int tern2_skinny_round_tiles(int64_t most, int cluster, int warps, int max_round);

// Whether a call's CTAs let the next PDL-launched kernel start once each has requested all its
// weights (late), rather than before their pdl_wait() (early): `ctas` CTAs in clusters of
// `cluster`, `warps` warps each, on `sms` SMs. Early only where single CTAs of 8 or more warps
// outnumber the SMs. Host only; the launcher passes its grid.
bool tern2_skinny_launches_late(int64_t ctas, int cluster, int warps, int64_t sms);

// Runs it; throws trit::Error naming m, n, k, group and the rule when the contract rejects the
// call, or when it needs clusters and the device has none.
void tern2_skinny(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                  const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
