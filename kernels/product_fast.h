// The fast product kernels, as the dispatcher's table (kernels/product.cu): for each, its format,
// path, the m range product() sends it, a `rejects` that names the first contract rule a call
// breaks ("" when it takes the call), and its launcher (which throws with that rule).
// choose_path walks the table in order and takes the first kernel that accepts; otherwise the
// generic kernel runs. Adding a kernel: its header, its .cu, one row in fast_kernels().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/product.h"

namespace trit::kernels {

using ProductRejects = std::string (*)(const PackedWeights& w, const int8_t* x, int64_t m,
                                       int64_t group);
using ProductLaunch = void (*)(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                               const ProductOut& out, cudaStream_t stream);

struct FastKernel {
    Format format;
    ProductPath path;
    int64_t min_m, max_m;  // the m range auto dispatch sends here (the launcher may take more)
    ProductRejects rejects;
    ProductLaunch launch;
};

const std::vector<FastKernel>& fast_kernels();

}  // namespace trit::kernels
