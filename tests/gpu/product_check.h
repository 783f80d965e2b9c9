// Checks a packed-weight product on the GPU against the CPU references: random codes of the
// format (2:4-pruned for tern24), packed with the reference packer, random int8 x; the kernel's
// int32 accumulators must equal the reference product bit for bit, and its fused-epilogue y must
// equal the CPU runtime's float arithmetic bit for bit. Reports the first mismatches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/product.h"

namespace trit::gputest {

struct ProductCase {
    kernels::Format format = kernels::Format::kTern2;
    int depth = 0;  // bt
    int64_t m = 1, n = 1, k = 1, group = 1;
    uint64_t seed = 1;
    int x_lo = -128, x_hi = 127;    // x codes drawn from [x_lo, x_hi]
    bool per_tensor_scale = false;  // w_scale (1, G) instead of (n, G)
    bool bias = true;
    // PackedWeights::dense: tern24, the codes as tern2; bt (d <= 2), the nibbles (bt_to_nib4).
    bool dense = false;
    // PackedWeights::planes (bt): the trit planes, from the bt bytes on the GPU (bt_to_planes).
    bool planes = false;
    // acc, y, the w scales and the biases `out_offset` elements into their buffers (off 16-byte
    // alignment for 1..3); the elements of acc and y before them must stay untouched.
    int64_t out_offset = 0;
    // The w scales fp16 values, given to the y call as floats and as their fp16 copy
    // (ProductOut::w_scale_half, `out_offset` elements into its buffer too).
    bool half_scales = false;
    // Only the y call (kernels that write y alone, e.g. the forced wgmma kernel with several
    // scale groups, which folds their sums into floats).
    bool y_only = false;
};

std::string describe(const ProductCase& c);

// Runs `path` on the case and checks acc and y (with EXPECT_*). The acc call runs with
// PackedWeights::pdl false, the y call with it true, so both launch modes are checked.
void check_product_case(const ProductCase& c, kernels::ProductPath path);

// The same through one kernel's launcher (e.g. tern2_gemv_dp4a) instead of the dispatcher.
using ProductLauncher = void (*)(const kernels::PackedWeights& w, const int8_t* x, int64_t m,
                                 int64_t group, const kernels::ProductOut& out, cudaStream_t stream);
void check_product_case(const ProductCase& c, ProductLauncher launch);

// A kernel's contract rule, host side: `rejects` names it, and `launch` throws trit::Error naming
// the kernel `who`, the shape ("m=.., n=.., k=.., group=..") and the rule, before any launch.
using ProductRejects = std::string (*)(const kernels::PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group);
void expect_rejected(const char* who, ProductRejects rejects, ProductLauncher launch, const kernels::PackedWeights& w,
                     const int8_t* x, int64_t m, int64_t group, const std::string& rule);

// product_from_float at m = 1 (tern2, or bt<d> of depth <= 2 with its nibbles): float x (1, k),
// codes (n, k), per-row scales of `group` columns ws (n, G), bias (n).
struct FromFloatCase {
    kernels::Format format = kernels::Format::kTern2;
    int depth = 0;  // bt
    int64_t n = 1, k = 1, group = 1;
    std::vector<int8_t> codes;
    std::vector<float> x, ws, bias;
    std::vector<uint16_t> ws_half;  // empty, or ws as fp16 bits (ProductOut::w_scale_half)
};

// Rounds c.ws to fp16 values and sets c.ws_half to their bits.
void use_half_scales(FromFloatCase& c);

// y of the CPU references: act_int8_quantize_ref, the exact int32 product of the packed codes,
// the CPU runtime's epilogue in group order.
std::vector<float> reference_y_from_float(const FromFloatCase& c);

// y of product_from_float on the GPU (weights uploaded, PackedWeights::pdl set); *fused says
// whether it ran as one launch.
std::vector<float> gpu_y_from_float(const FromFloatCase& c, bool* fused);

// EXPECT that got and want hold the same float bits, naming the first mismatches.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace trit::gputest
