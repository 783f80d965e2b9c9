// bt weights of depth 1 or 2 (codes in [-4, 4]) for the GPU's one-token GEMV: the same codes
// rewritten once as 4-bit nibbles (PackedWeights::dense; the GPU runtime builds it when it uploads
// a bt layer of depth <= 2), and the streaming GEMV that reads them (tern2's and tern24's
// streaming kernel, kernels/gemv_stream.cu, with a nibble decode). The bt bytes cost about 2
// decode instructions per weight on the GPU (base-3 digits, quintets that start at any byte); the
// nibbles cost 0.5 and are 4 bits a weight instead of 3.2.
//
// Nibble layout (GPU memory only, never in a container): row j is bt_nib4_row_bytes(k) =
// 4 * ceil(k / 8) bytes; word q (bytes 4q .. 4q + 3) holds columns 8q .. 8q + 7: byte 4q + b has
// column 8q + b in its low nibble and column 8q + 4 + b in its high nibble, each as code + 8
// ("excess 8": 4 .. 12 for bt2). Columns past k hold 8 (code 0).
//
// The GEMV multiplies (code + 8) by x with one dp4a per 4 columns (low nibbles masked, high
// nibbles masked in place: 16 (code + 8), the sum shifted right by 4, exact) and subtracts 8 * the
// sum of x of the thread's columns, per scale group: the int32 sums are those of the bt codes,
// bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/product.h"

namespace trit::kernels {

constexpr int kBtNib4MaxDepth = 2;   // |code| <= 4 fits a nibble with its excess
constexpr int kBtNib4Excess = 8;
constexpr int64_t kBtNib4MaxK = 16384;  // the streaming kernel's limit

// 4 * ceil(k / 8).
int64_t bt_nib4_row_bytes(int64_t k);

// The layout from codes (n, k) on the CPU (tests, benchmarks): out holds n * bt_nib4_row_bytes(k)
// bytes. Throws trit::Error for a code outside [-8, 7].
void bt_nib4_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* out);

// The layout from the bt arrays (n, bt_row_bytes(k, depth)) on the GPU, into nib (n,
// bt_nib4_row_bytes(k)). The bt bytes are assumed valid (the import path validates them). Async
// on `stream`; throws trit::Error naming n, k and depth for n, k < 1, depth outside 1..2 or null
// pointers.
void bt_to_nib4(const uint8_t* bt, int depth, int64_t n, int64_t k, uint8_t* nib, cudaStream_t stream);

// The nibble GEMV: bt weights (format kBt, depth 1..2) with PackedWeights::dense set to their
// nibbles, under the products' contract (kernels/product.h) and these rules:
//   - m = 1;
//   - k % 128 == 0 and k <= 16384;
//   - the nibbles and x 16-byte aligned (cudaMalloc'ed arrays are);
//   - one scale group (group >= k), group = 64 * 2^e <= 4096, or group % 4096 == 0.
// The first rule the call breaks, "" when the kernel takes it.
std::string bt_nib4_gemv_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Runs it; throws trit::Error naming m, n, k, group and the rule when the contract rejects the call.
void bt_nib4_gemv(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                  const ProductOut& out, cudaStream_t stream);

// The one-shot nibble GEMV (kernels/gemv_oneshot.cuh, the kernel of the one-shot tern2 GEMV,
// kernels/tern2_gemv_oneshot.h, with the nibble decode): a lane group of 16 or 32 lanes takes one,
// two or four rows, each lane holding at most 16 pieces of 32 columns (16 bytes) a row: all of them
// in registers for one row, up to 8 a row for two and the rest copied to shared memory (cp.async),
// at most 4 a row for four; or, from int8 x with several scale groups, a lane group of 64 lanes
// (two warps) takes one or two rows, at most 8 pieces a lane and row in registers; the group's
// loads reading its rows' pieces in a row; every load issued before the PDL wait, no tile loop; x
// read once per piece for the group's rows; for several scale groups, the group terms formed in
// shared memory (by the lanes for groups of 64, by the block's threads for larger ones), and one
// thread per row adds them in column order. Its rules:
//   - bt weights of depth 1 or 2 with their nibbles (PackedWeights::dense);
//   - m = 1;
//   - k % 64 == 0 and k <= 16384;
//   - one scale group (group >= k) or group % 64 == 0;
//   - the nibbles and x 16-byte aligned.
constexpr int64_t kBtNib4OneshotMaxK = 16384;
std::string bt_nib4_oneshot_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group);

// Lanes per row and rows per lane group the launcher picks for n x k on a GPU of `sms` SMs, x int8
// or (float_x) float, where it does not run two warps a row (bt_nib4_oneshot_two_warps, below): 32
// lanes (16 for k <= 512); four rows where a lane then holds at most 4
// pieces a row and
//   - int8 x: the nibbles are at most 32 KB an SM, or at most 48 KB an SM in a four-row grid of at
//     most 2 blocks an SM (16 rows a block), or the two-row grid (8 rows a block) is more blocks
//     than the device holds at once of the two-row kernel (two_row_resident; 0: not known) and the
//     four-row grid at most four_row_resident (the launcher queries both);
//   - float x: blocks of two rows would outnumber the SMs and the nibbles are at most 256 KB an SM
// (KB: 1024 bytes); else two (every k the contract takes: a lane then holds at most 16 pieces a
// row). The measurements behind them: kernels/gemv_oneshot.cuh, nib4_rows().
int bt_nib4_oneshot_lanes(int64_t k);
int bt_nib4_oneshot_rows(int64_t n, int64_t k, bool float_x, int sms, int64_t two_row_resident = 0,
                         int64_t four_row_resident = 0);
// Whether the launcher, left to pick both lanes and rows, runs two warps (64 lanes) a row and two
// rows a lane group instead, for n x k at `group` on `sms` SMs: from int8 x with several scale
// groups (group < k) and k > 512, where
//   - k > 4096 (32 lanes would hold more than 4 pieces a row), and either the 64-lane grid (4 rows
//     a block) is at most pair_resident blocks, or k <= 8192 (at most 4 pieces a lane at 64 lanes)
//     unless the 32-lane grid (8 rows a block) is at most `resident` blocks and the 64-lane grid
//     more than pair_resident (the blocks the device holds at once of the two two-row kernels,
//     which the launcher queries; 0: not known, not compared);
//   - or k <= 4096 and the grid of 32 lanes and bt_nib4_oneshot_rows' rows (residency not counted)
//     is at most sms / 2 blocks.
// kernels/gemv_oneshot.cuh, nib4_two_warps(), has the measurements.
bool bt_nib4_oneshot_two_warps(int64_t n, int64_t k, int64_t group, bool float_x, int sms,
                               int64_t resident = 0, int64_t pair_resident = 0);
// Whether the launcher's blocks (its lanes and rows for `group`; the default: one group) let the
// next PDL-launched kernel start after their products rather than before their wait, on `sms` SMs
// (kernels/gemv_oneshot.cuh, late_launch(): grids of at most 3 blocks an SM, from float x or with
// at most 4 pieces a lane over its rows).
bool bt_nib4_oneshot_launches_late(int64_t n, int64_t k, bool float_x, int sms,
                                   int64_t group = kBtNib4OneshotMaxK);

// Runs it with `lanes` lanes per row (16, 32, or with several scale groups 64, two warps; 0:
// bt_nib4_oneshot_lanes(k)) and `rows` rows per lane group (0: bt_nib4_oneshot_rows(n, k, false,
// the GPU's SMs); both 0: 64 and 2 where bt_nib4_oneshot_two_warps holds), a lane requesting its
// first `ahead` pieces a row before its products and each later one `ahead` pieces ahead of them: 0
// all of them first, 2 or 4 (at least a lane's pieces: all first), -1 the launcher's rule (2 or 4
// where the blocks an SM holds at once request more than 96 KB of weights, else 0;
// kernels/gemv_oneshot.cuh, ahead()). Throws
// trit::Error naming m, n, k, group and the rule when the contract rejects the call, the lanes and
// rows cannot hold a row, or `ahead` is none of these.
void bt_nib4_oneshot(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, const ProductOut& out,
                     cudaStream_t stream, int lanes = 0, int rows = 0, int ahead = -1);

// The same product from float x (1, k): every block quantizes x to int8 exactly as
// act_int8_quantize does (kernels/act_int8.h) into shared memory and uses that scale as the
// epilogue's x scale, so y is bit for bit act_int8_quantize followed by bt_nib4_oneshot, in one
// launch. y only (out.acc must be null); out.x_scale is not read; x 16-byte aligned; otherwise
// the rules above. `rows` 0: bt_nib4_oneshot_rows(n, k, true, the GPU's SMs).
void bt_nib4_oneshot_from_float(const PackedWeights& w, const float* x, int64_t group, const ProductOut& out,
                                cudaStream_t stream, int lanes = 0, int rows = 0);

}  // namespace trit::kernels
