// The bt -> nibble rewrite of kernels/bt_nib4.h, on the CPU (from codes) and on the GPU (from the
// bt bytes). The GEMV itself is in gemv_stream.cu.
#include "kernels/bt_nib4.h"

#include <algorithm>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "kernels/cuda_check.h"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;

constexpr int kWordCols = 8;  // columns per 32-bit word: 4 low nibbles, then 4 high nibbles

// Code of column c of a bt row (depth d): its quintet's d plane bytes, or the tail.
__device__ int bt_code(const uint8_t* row, int64_t k, int d, int64_t c) {
    const int64_t quintets = fmt::bt_full_quintets(k);
    const int64_t q = c / fmt::kBtQuintet;
    if (q >= quintets) return fmt::bt_tail_code(row, k, d, static_cast<int>(c - quintets * fmt::kBtQuintet));
    const int j = static_cast<int>(c - q * fmt::kBtQuintet);
    int code = 0;
    for (int i = d - 1; i >= 0; --i)
        code = code * 3 + fmt::bt_trit(row[q * d + i], j);
    return code;
}

// One thread per output word (8 columns of one row).
__global__ void bt_to_nib4_kernel(const uint8_t* __restrict__ bt, int d, int64_t n, int64_t k,
                                  uint32_t* __restrict__ nib) {
    const int64_t words = fmt::ceil_div(k, int64_t{kWordCols});
    const int64_t bt_row = fmt::bt_row_bytes(k, d);
    for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n * words;
         e += int64_t{gridDim.x} * blockDim.x) {
        const int64_t j = e / words, q = e % words;
        const uint8_t* row = bt + j * bt_row;
        uint32_t v = 0;
        for (int b = 0; b < 4; ++b) {
            const int64_t lo = q * kWordCols + b, hi = lo + 4;
            const int cl = lo < k ? bt_code(row, k, d, lo) : 0, ch = hi < k ? bt_code(row, k, d, hi) : 0;
            v |= static_cast<uint32_t>((cl + kBtNib4Excess) | ((ch + kBtNib4Excess) << 4)) << (8 * b);
        }
        nib[e] = v;
    }
}

}  // namespace

int64_t bt_nib4_row_bytes(int64_t k) {
    return 4 * fmt::ceil_div(k, int64_t{kWordCols});
}

void bt_nib4_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* out) {
    TRIT_CHECK(n >= 1 && k >= 1 && codes != nullptr && out != nullptr, "bt_nib4_pack (n=", n, ", k=", k,
               "): n and k must be >= 1 and the arrays non-null");
    const int64_t row_bytes = bt_nib4_row_bytes(k);
    for (int64_t j = 0; j < n; ++j) {
        uint8_t* dst = out + j * row_bytes;
        std::fill(dst, dst + row_bytes, static_cast<uint8_t>(kBtNib4Excess | (kBtNib4Excess << 4)));
        for (int64_t c = 0; c < k; ++c) {
            const int code = codes[j * k + c];
            TRIT_CHECK(code >= -kBtNib4Excess && code < kBtNib4Excess, "bt_nib4_pack: code ", code, " at row ", j,
                       ", column ", c, " is outside [-8, 7]");
            const int64_t q = c / kWordCols, b = c % 4;
            const int shift = c % kWordCols < 4 ? 0 : 4;
            uint8_t& byte = dst[4 * q + b];
            byte = static_cast<uint8_t>((byte & (0xF0 >> shift)) | ((code + kBtNib4Excess) << shift));
        }
    }
}

void bt_to_nib4(const uint8_t* bt, int depth, int64_t n, int64_t k, uint8_t* nib, cudaStream_t stream) {
    TRIT_CHECK(n >= 1 && k >= 1, "bt_to_nib4 (n=", n, ", k=", k, ", depth=", depth, "): n and k must be >= 1");
    TRIT_CHECK(depth >= 1 && depth <= kBtNib4MaxDepth, "bt_to_nib4 (n=", n, ", k=", k, ", depth=", depth,
               "): depth must be 1 or 2 (codes in [-4, 4])");
    TRIT_CHECK(bt != nullptr && nib != nullptr, "bt_to_nib4 (n=", n, ", k=", k, ", depth=", depth,
               "): bt and nib must be non-null");
    TRIT_CHECK(reinterpret_cast<uintptr_t>(nib) % 4 == 0, "bt_to_nib4 (n=", n, ", k=", k, ", depth=", depth,
               "): nib must be 4-byte aligned");
    const int64_t words = n * fmt::ceil_div(k, int64_t{kWordCols});
    constexpr int kThreads = 256;
    const int64_t blocks = std::min<int64_t>(fmt::ceil_div(words, int64_t{kThreads}), 65535 * 16);
    bt_to_nib4_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(bt, depth, n, k,
                                                                               reinterpret_cast<uint32_t*>(nib));
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace trit::kernels
