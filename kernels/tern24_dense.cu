// The tern24 dense path (kernels/tern24_dense.h): the tern24 -> tern2 rewrite of the codes, and the
// product on the tern2 kernels.
#include "kernels/tern24_dense.h"

#include <algorithm>

#include "core/error.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "exporters/formats/tern24.h"
#include "kernels/cuda_check.h"
#include "kernels/tern24_gemv.h"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;

// One thread per tern2 byte = one tern24 group of 4 columns: its 4 codes through tern24_decode,
// fields 00 / 01 / 10 for 0 / +1 / -1 (padding columns past k have clear bitmap bits: 00).
__global__ void tern24_to_tern2_kernel(const uint8_t* __restrict__ mask, const uint8_t* __restrict__ signs,
                                       int64_t n, int64_t k, uint8_t* __restrict__ codes) {
    const int64_t groups = fmt::tern24_groups(k);
    const int64_t mask_row = fmt::tern24_mask_row_bytes(k), signs_row = fmt::tern24_signs_row_bytes(k);
    for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n * groups;
         e += int64_t{gridDim.x} * blockDim.x) {
        const int64_t j = e / groups, g = e % groups;
        const int bitmap = fmt::tern24_bitmap(mask + j * mask_row, g);
        const int pair = fmt::tern24_sign_pair(signs + j * signs_row, g);
        uint32_t byte = 0;
        for (int p = 0; p < fmt::kTern24GroupSize; ++p) {
            const int code = fmt::tern24_decode(bitmap, pair, p);
            byte |= static_cast<uint32_t>(code == 0 ? 0 : (code > 0 ? 1 : 2)) << (2 * p);
        }
        codes[j * fmt::tern2_row_bytes(k) + g] = static_cast<uint8_t>(byte);
    }
}

PackedWeights dense_weights(const PackedWeights& w) {
    PackedWeights d;
    d.format = Format::kTern2;
    d.a = w.dense;
    d.n = w.n;
    d.k = w.k;
    d.pdl = w.pdl;
    return d;
}

}  // namespace

void tern24_to_tern2(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k, uint8_t* codes,
                     cudaStream_t stream) {
    TRIT_CHECK(n >= 1 && k >= 1, "tern24_to_tern2 (n=", n, ", k=", k, "): n and k must be >= 1");
    TRIT_CHECK(mask != nullptr && signs != nullptr && codes != nullptr, "tern24_to_tern2 (n=", n, ", k=", k,
               "): mask, signs and codes must be non-null");
    static_assert(fmt::kTern2CodesPerByte == fmt::kTern24GroupSize, "a tern24 group is one tern2 byte");
    const int64_t bytes = n * fmt::tern24_groups(k);
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>(fmt::ceil_div(bytes, int64_t{kThreads}), 65535 * 16);
    tern24_to_tern2_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(mask, signs, n, k, codes);
    TRIT_CUDA_CHECK_LAST();
}

namespace {

// The tern2 fast path that multiplies the dense copy, or kGeneric with `no` set to the rule the call
// breaks.
ProductPath dense_path(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group, std::string& no) {
    if (w.format != Format::kTern24) {
        no = "the weights must be tern24";
        return ProductPath::kGeneric;
    }
    if (w.dense == nullptr) {
        no = "needs the weights' dense tern2 copy (PackedWeights::dense)";
        return ProductPath::kGeneric;
    }
    std::string why;
    const ProductPath path = choose_path(dense_weights(w), x, m, group, &why);
    if (path == ProductPath::kGeneric) no = "no tern2 kernel takes the dense copy (" + why + ")";
    return path;
}

}  // namespace

std::string tern24_dense_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    std::string no;
    dense_path(w, x, m, group, no);
    return no;
}

// The tern2 kernels on the dense copy (2 bits a weight) against the tern24 GEMVs (1.5), one group,
// on the H100 (docs/BENCHMARKS.md, sessions 31 and 32, us, GEMV / dense). The tern24 kernels decode
// through a table, and the warp-per-row one (m = 3..8) walks the rows a warp at a time: at m >= 2
// the dense path won on all nine default shapes, m = 2 (one call) 2560 x 2560 5.41 / 2.99, 14336 x
// 4096 10.79 / 8.38; m = 4 and 8 (one call, session 32) 1.6-3.3x, 3072 x 768 at m = 8 7.43 / 2.81,
// 4096 x 14336 32.84 / 10.11. At m = 1 (one call, session 32) it won on every shape up to 8192 x
// 2560 weights (768 x 768 2.15 / 1.44, 4096 x 4096 5.11 / 4.34, 8192 x 2560 5.15 / 4.85, 2560 x 8192
// 5.51 / 5.01) and, with k <= 4096 (the tern2 streaming kernel in one CTA a row block), up to 8192 x
// 4096 (6912 x 4096 5.84 / 5.70, 8192 x 4096 6.48 / 6.11); it lost above, where the fewer bytes pay
// (11008 x 4096 7.04 / 7.16, 14336 x 4096 7.80 / 8.34), and with longer k (the dp4a GEMV, 4096 x
// 6912 6.00 / 6.53, 4096 x 14336 8.00 / 9.49).
std::string tern24_dense_first_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (group < w.k) return "one scale group only (group >= k)";
    if (m == 1 && w.n * w.k > (w.k <= 4096 ? kTern24DenseFirstMaxWeightsShortK : kTern24DenseFirstMaxWeights))
        return "m = 1 above 8192 x 2560 weights (8192 x 4096 with k <= 4096) runs the tern24 GEMV (fewer bytes)";
    // On the H200 (docs/BENCHMARKS.md, session 38, us, tern24 GEMV / dense): at m = 2 the
    // streaming kernel won from 2^27 weights, 32768 x 4096 14.1 / 14.3, 65536 x 4096 22.0 / 26.5,
    // 128256 x 4096 37.6 / 50.7, 151936 x 3584 42.7 / 60.0, and lost below, 24576 x 4096 12.1 /
    // 11.6, 14336 x 4096 10.0 / 7.6; at m = 3..8, the tensor-core kernel where its tiles fill the
    // GPU (tern24_gemv_mma_first).
    if (m == 2 && w.n * w.k >= kTern24StreamFirstMinWeights &&
        tern24_gemv_stream_rejects(w, x, m, group).empty())
        return "m = 2 on at least 2^27 weights runs the tern24 streaming GEMV (fewer bytes)";
    // tern24_gemv_mma_first's cheap conditions first: the resident-warp count is a device query.
    if (m >= 3 && m <= kTern24GemvMaxM && w.n * w.k >= kTern24MmaFirstMinWeights &&
        tern24_gemv_mma_rejects(w, x, m, group).empty() &&
        tern24_gemv_mma_first(m, w.n, w.k, tern24_gemv_mma_resident_warps(m, w.k)))
        return "m = 3..8 where the tiles fill the GPU runs the tern24 tensor-core GEMV (fewer "
               "bytes)";
    return tern24_dense_rejects(w, x, m, group);
}

void tern24_dense_product(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                          const ProductOut& out, cudaStream_t stream) {
    check_product("tern24_dense_product", w, x, m, group, out);
    std::string no;
    const ProductPath path = dense_path(w, x, m, group, no);
    TRIT_CHECK(no.empty(), "tern24_dense_product (m=", m, ", n=", w.n, ", k=", w.k, ", group=", group, "): ", no);
    product(dense_weights(w), x, m, group, out, stream, path);  // the path chosen once, not again
}

}  // namespace trit::kernels
