// The bt -> trit planes rewrite of kernels/bt_gemm.h, on the CPU (from codes) and on the GPU (from
// the bt bytes). The GEMM itself is in tern2_gemm.cu.
#include <algorithm>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/bt_gemm.h"
#include "kernels/cuda_check.h"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;

// One thread per plane byte: e = (plane * n + row) * row_bytes + byte, the byte holding columns
// 4 byte .. 4 byte + 3.
__global__ void bt_to_planes_kernel(const uint8_t* __restrict__ bt, int d, int64_t n, int64_t k,
                                    uint8_t* __restrict__ planes) {
    const int64_t row_bytes = fmt::tern2_row_bytes(k), bt_row = fmt::bt_row_bytes(k, d);
    const int64_t total = d * n * row_bytes;
    for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
         e += int64_t{gridDim.x} * blockDim.x) {
        const int64_t b = e % row_bytes, j = e / row_bytes % n;
        const int i = static_cast<int>(e / (row_bytes * n));
        const uint8_t* row = bt + j * bt_row;
        uint32_t v = 0;
        for (int s = 0; s < fmt::kTern2CodesPerByte; ++s) {
            const int64_t c = b * fmt::kTern2CodesPerByte + s;
            if (c < k)
                v |= uint32_t{fmt::tern2_encode(fmt::bt_plane_trit(row, k, d, i, c))}
                     << (fmt::kTern2BitsPerCode * s);
        }
        planes[e] = static_cast<uint8_t>(v);
    }
}

}  // namespace

int64_t bt_planes_bytes(int depth, int64_t n, int64_t k) {
    return depth * n * fmt::tern2_row_bytes(k);
}

void bt_planes_pack(const int8_t* codes, int depth, int64_t n, int64_t k, uint8_t* out) {
    TRIT_CHECK(n >= 1 && k >= 1 && codes != nullptr && out != nullptr, "bt_planes_pack (n=", n,
               ", k=", k, ", depth=", depth, "): n and k must be >= 1 and the arrays non-null");
    TRIT_CHECK(depth >= fmt::kBtMinDepth && depth <= fmt::kBtMaxDepth, "bt_planes_pack (n=", n,
               ", k=", k, ", depth=", depth, "): depth must be in 1..", fmt::kBtMaxDepth);
    const int levels = fmt::bt_levels(depth);
    const int64_t row_bytes = fmt::tern2_row_bytes(k);
    std::fill(out, out + bt_planes_bytes(depth, n, k), uint8_t{0});
    for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < k; ++c) {
            const int code = codes[j * k + c];
            TRIT_CHECK(code >= -levels && code <= levels, "bt_planes_pack: code ", code, " at row ",
                       j, ", column ", c, " is outside [-", levels, ", ", levels, "] (depth ",
                       depth, ")");
            const int shift =
                fmt::kTern2BitsPerCode * static_cast<int>(c % fmt::kTern2CodesPerByte);
            for (int i = 0; i < depth; ++i)
                out[(i * n + j) * row_bytes + c / fmt::kTern2CodesPerByte] |=
                    static_cast<uint8_t>(fmt::tern2_encode(fmt::bt_code_trit(code, i)) << shift);
        }
}

void bt_to_planes(const uint8_t* bt, int depth, int64_t n, int64_t k, uint8_t* planes,
                  cudaStream_t stream) {
    TRIT_CHECK(n >= 1 && k >= 1, "bt_to_planes (n=", n, ", k=", k, ", depth=", depth,
               "): n and k must be >= 1");
    TRIT_CHECK(depth >= fmt::kBtMinDepth && depth <= fmt::kBtMaxDepth, "bt_to_planes (n=", n,
               ", k=", k, ", depth=", depth, "): depth must be in 1..", fmt::kBtMaxDepth);
    TRIT_CHECK(bt != nullptr && planes != nullptr, "bt_to_planes (n=", n, ", k=", k,
               ", depth=", depth, "): bt and planes must be non-null");
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>(
        fmt::ceil_div(bt_planes_bytes(depth, n, k), int64_t{kThreads}), 65535 * 16);
    bt_to_planes_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(bt, depth, n, k,
                                                                                planes);
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace trit::kernels
