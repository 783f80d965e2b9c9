// Launchers that pack activations into the tbits bit planes (exporters/formats/tbits.h) read by
// kernels/bin1_gemm.h: int8 codes -> planes, and, fused, float x -> ternary or bool planes with
// act_levels' rounding. Every plane word is written, padding included (0). No LibTorch.
//
// Contract (every launcher, checked on the host before any launch, else trit::Error naming rows
// and k): rows, k >= 1; rows * tbits_row_words(k) fits int64; non-null pointers; planes 4-byte
// aligned; quantize: scale finite and > 0. Device pointers, no overlap; async on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace trit::kernels {

// codes (rows, k) int8 -> ternary planes (2, rows, tbits_row_words(k)). A code outside
// {-1, 0, +1} is saturated to its sign (clamp(code, -1, 1), as act_levels clamps), never dropped:
// when `clamped` is non-null, the number of such codes is added to *clamped (device memory, the
// caller zeroes it and reads it after the stream), so a caller that must reject can.
void tbits_pack_ternary(const int8_t* codes, int64_t rows, int64_t k, uint32_t* planes,
                        unsigned int* clamped, cudaStream_t stream);
// codes (rows, k) -> bool plane (1, rows, words): clamp(code, 0, 1), i.e. bit = code >= 1;
// `clamped` counts codes outside {0, 1} as above.
void tbits_pack_bool(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane,
                     unsigned int* clamped, cudaStream_t stream);

// Fused quantize + pack, bit for bit act_levels_quantize_ref(levels = 3) then tbits_ternary_pack:
// q = clamp(nearbyintf(x / scale), -1, 1) with IEEE division, NaN -> 0. Since nearbyintf rounds
// ties to even, q = +1 exactly when x / scale > 0.5 and -1 when x / scale < -0.5 (NaN: neither).
void tbits_quantize_ternary(const float* x, int64_t rows, int64_t k, float scale, uint32_t* planes,
                            cudaStream_t stream);
// act_bool_quantize_ref then tbits_bool_pack: bit = x / scale > 0.5.
void tbits_quantize_bool(const float* x, int64_t rows, int64_t k, float scale, uint32_t* plane,
                         cudaStream_t stream);

// bin1 packed weights (n, bin1_row_bytes(k)) -> binary plane (n, tbits_row_words(k)), as
// tbits_from_bin1 (padding bits of the bin1 bytes are copied, so pass validated arrays). Not
// needed when k % 256 == 0: the bin1 array then is the plane.
void tbits_from_bin1(const uint8_t* packed, int64_t n, int64_t k, uint32_t* plane,
                     cudaStream_t stream);

}  // namespace trit::kernels
