// CUDA packing of activations into tbits planes (layout: exporters/formats/tbits.h). One warp per
// 256-column block of a row: lane l reads column 32 w + l of each of the block's 8 words
// (coalesced), and __ballot_sync turns the 32 per-lane predicates into the word, LSB = lane 0 =
// lowest column. Lanes 0..7 then store the block's pos words, lanes 8..15 its neg words.
#include "kernels/act_pack.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/tbits.h"
#include "kernels/cuda_check.h"

namespace trit::kernels {
namespace {

namespace f = trit::formats;

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;

// Predicates of one element: (bit of plane 0, bit of plane 1, out of range).
struct Bits {
    bool p0, p1, bad;
};

enum class Src { kTernaryCodes, kBoolCodes, kTernaryFloat, kBoolFloat };

// The element at idx, as loaded (codes widened to float: exact), before any arithmetic.
template <Src S>
__device__ __forceinline__ float load_element(const void* src, int64_t idx) {
    if constexpr (S == Src::kTernaryCodes || S == Src::kBoolCodes) {
        return static_cast<float>(static_cast<const int8_t*>(src)[idx]);
    } else {
        return static_cast<const float*>(src)[idx];
    }
}

// Its predicates.
template <Src S>
__device__ __forceinline__ Bits element_bits(float v, float scale) {
    if constexpr (S == Src::kTernaryCodes) {
        return {v >= 1.0f, v <= -1.0f, v < -1.0f || v > 1.0f};
    } else if constexpr (S == Src::kBoolCodes) {
        return {v >= 1.0f, false, v < 0.0f || v > 1.0f};
    } else {
        // IEEE division (never x * (1 / scale)); a NaN quotient fails both compares -> 0.
        const float q = __fdiv_rn(v, scale);
        return {q > 0.5f, S == Src::kTernaryFloat && q < -0.5f, false};
    }
}

// One warp per (row, 256-column block); a grid-stride loop over the rows * blocks pairs.
template <Src S>
__global__ void __launch_bounds__(kThreads)
    pack_kernel(const void* __restrict__ src, int64_t rows, int64_t k, float scale,
                uint32_t* __restrict__ planes, unsigned int* __restrict__ clamped) {
    constexpr bool kTwoPlanes = S == Src::kTernaryCodes || S == Src::kTernaryFloat;
    const int lane = threadIdx.x % kWarp;
    const int64_t blocks = f::ceil_div(k, f::kTbitsBlockBits);
    const int64_t rw = blocks * f::kTbitsBlockWords, plane = rows * rw;
    const int64_t total = rows * blocks;
    const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
    unsigned int bad_count = 0;
    for (int64_t t = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp; t < total;
         t += warps) {
        const int64_t r = t / blocks, b = t % blocks;
        uint32_t mine = 0;  // lane w < 8: plane 0 word w; lane 8 + w: plane 1 word w
        // The block's 8 elements of this lane are loaded first, then divided, then balloted: with
        // a division or a ballot between them, the loads went out one at a time, a memory round
        // trip each.
        float v[f::kTbitsBlockWords];
#pragma unroll
        for (int w = 0; w < f::kTbitsBlockWords; ++w) {
            const int64_t c = (b * f::kTbitsBlockWords + w) * f::kTbitsWordBits + lane;
            v[w] = c < k ? load_element<S>(src, r * k + c) : 0.0f;  // 0: no bit, in range
        }
        Bits e[f::kTbitsBlockWords];
#pragma unroll
        for (int w = 0; w < f::kTbitsBlockWords; ++w)
            e[w] = element_bits<S>(v[w], scale);
#pragma unroll
        for (int w = 0; w < f::kTbitsBlockWords; ++w) {
            const uint32_t w0 = __ballot_sync(0xffffffffu, e[w].p0);
            const uint32_t w1 = __ballot_sync(0xffffffffu, e[w].p1);
            if constexpr (S == Src::kTernaryCodes || S == Src::kBoolCodes)
                bad_count += __popc(__ballot_sync(0xffffffffu, e[w].bad));
            if (lane == w) mine = w0;
            if (lane == f::kTbitsBlockWords + w) mine = w1;
        }
        uint32_t* row0 = planes + r * rw + b * f::kTbitsBlockWords;
        if (lane < f::kTbitsBlockWords) row0[lane] = mine;
        if (kTwoPlanes && lane >= f::kTbitsBlockWords && lane < 2 * f::kTbitsBlockWords)
            row0[plane + lane - f::kTbitsBlockWords] = mine;
    }
    if (clamped != nullptr && lane == 0 && bad_count != 0) atomicAdd(clamped, bad_count);
}

__global__ void __launch_bounds__(kThreads)
    from_bin1_kernel(const uint8_t* __restrict__ packed, int64_t n, int64_t k,
                     uint32_t* __restrict__ plane) {
    const int64_t rb = f::bin1_row_bytes(k), rw = f::tbits_row_words(k);
    const int64_t total = n * rw;
    for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total;
         t += int64_t{gridDim.x} * blockDim.x) {
        const int64_t r = t / rw, w = t % rw;
        uint32_t word = 0;
        for (int j = 0; j < 4; ++j) {
            const int64_t byte = w * 4 + j;
            if (byte < rb) word |= uint32_t{packed[r * rb + byte]} << (8 * j);
        }
        plane[t] = word;
    }
}

bool aligned(const void* p, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

void check_common(const char* who, const void* src, int64_t rows, int64_t k,
                  const uint32_t* planes) {
    TRIT_CHECK(rows >= 1 && k >= 1, who, ": rows and k must be >= 1 (got rows=", rows, ", k=", k,
               ")");
    TRIT_CHECK(k <= std::numeric_limits<int64_t>::max() / rows &&
                   f::tbits_row_words(k) <= std::numeric_limits<int64_t>::max() / 2 / rows,
               who, ": rows=", rows, " x k=", k, " overflows int64");
    TRIT_CHECK(src != nullptr && planes != nullptr, who,
               ": input and planes must be non-null (rows=", rows, ", k=", k, ")");
    TRIT_CHECK(aligned(planes, alignof(uint32_t)), who,
               ": planes must be 4-byte aligned (rows=", rows, ", k=", k, ")");
}

void check_scale(const char* who, int64_t rows, int64_t k, float scale) {
    TRIT_CHECK(std::isfinite(scale) && scale > 0.0f, who, ": scale must be finite and > 0 (got ",
               scale, "; rows=", rows, ", k=", k, ")");
}

// Enough warps to cover every (row, block) once, capped: the kernel strides over the rest.
dim3 pack_grid(int64_t rows, int64_t k) {
    const int64_t warps = rows * f::ceil_div(k, f::kTbitsBlockBits);
    return dim3(static_cast<unsigned>(
        std::min<int64_t>(f::ceil_div(warps, kWarpsPerBlock), int64_t{1} << 20)));
}

template <Src S>
void launch(const void* src, int64_t rows, int64_t k, float scale, uint32_t* planes,
            unsigned int* clamped, cudaStream_t stream) {
    pack_kernel<S>
        <<<pack_grid(rows, k), kThreads, 0, stream>>>(src, rows, k, scale, planes, clamped);
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace

void tbits_pack_ternary(const int8_t* codes, int64_t rows, int64_t k, uint32_t* planes,
                        unsigned int* clamped, cudaStream_t stream) {
    check_common("tbits_pack_ternary", codes, rows, k, planes);
    launch<Src::kTernaryCodes>(codes, rows, k, 1.0f, planes, clamped, stream);
}

void tbits_pack_bool(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane,
                     unsigned int* clamped, cudaStream_t stream) {
    check_common("tbits_pack_bool", codes, rows, k, plane);
    launch<Src::kBoolCodes>(codes, rows, k, 1.0f, plane, clamped, stream);
}

void tbits_quantize_ternary(const float* x, int64_t rows, int64_t k, float scale, uint32_t* planes,
                            cudaStream_t stream) {
    check_common("tbits_quantize_ternary", x, rows, k, planes);
    check_scale("tbits_quantize_ternary", rows, k, scale);
    TRIT_CHECK(aligned(x, alignof(float)),
               "tbits_quantize_ternary: x must be 4-byte aligned (rows=", rows, ", k=", k, ")");
    launch<Src::kTernaryFloat>(x, rows, k, scale, planes, nullptr, stream);
}

void tbits_quantize_bool(const float* x, int64_t rows, int64_t k, float scale, uint32_t* plane,
                         cudaStream_t stream) {
    check_common("tbits_quantize_bool", x, rows, k, plane);
    check_scale("tbits_quantize_bool", rows, k, scale);
    TRIT_CHECK(aligned(x, alignof(float)),
               "tbits_quantize_bool: x must be 4-byte aligned (rows=", rows, ", k=", k, ")");
    launch<Src::kBoolFloat>(x, rows, k, scale, plane, nullptr, stream);
}

void tbits_from_bin1(const uint8_t* packed, int64_t n, int64_t k, uint32_t* plane,
                     cudaStream_t stream) {
    check_common("tbits_from_bin1", packed, n, k, plane);
    const int64_t words = n * f::tbits_row_words(k);
    const dim3 grid(
        static_cast<unsigned>(std::min<int64_t>(f::ceil_div(words, kThreads), int64_t{1} << 20)));
    from_bin1_kernel<<<grid, kThreads, 0, stream>>>(packed, n, k, plane);
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace trit::kernels
