// Checks a packed-weight product on the GPU against the CPU references: random codes of the
// format (2:4-pruned for tern24), packed with the reference packer, random int8 x; the kernel's
// int32 accumulators must equal the reference product bit for bit, and its fused-epilogue y must
// equal the CPU runtime's float arithmetic bit for bit. Reports the first mismatches.
#pragma once

#include <cstdint>
#include <string>

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
};

std::string describe(const ProductCase& c);

// Runs `path` on the case and checks acc and y (with EXPECT_*).
void check_product_case(const ProductCase& c, kernels::ProductPath path);

}  // namespace trit::gputest
