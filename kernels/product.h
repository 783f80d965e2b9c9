// The launch contract every packed-weight product kernel shares (tern2, tern24, bin1, bt), and
// the one dispatcher that picks a kernel by format and shape.
//
// A product multiplies int8 activation codes x (m, k), row-major, by the packed weight codes of an
// (n, k) matrix (the layouts of exporters/formats/*.h, byte for byte as the container stores them)
// and accumulates exactly in int32 per scale group of `group` columns along k:
//     G = ceil(k / group)                (group >= k: one group)
//     acc[i][j][g] = sum over c in [g * group, min(k, (g + 1) * group)) of x[i][c] * code[j][c]
// It writes exactly one of:
//   - ProductOut::acc, (m, n, G) int32: the CPU references' accumulators, bit for bit;
//   - ProductOut::y, (m, n) float32, through the fused epilogue, bit for bit the CPU runtime's
//     (exporters/runtime_cpu.h), in IEEE float with round-to-nearest and no FMA:
//         s = +0.0f;  for g = 0 .. G-1:  s = s + w_scale[r][g] * float(acc[i][j][g])
//         y[i][j] = s * x_scale[i'] + (bias ? bias[j] : +0.0f)
//     where r = (w_scale_rows == 1 ? 0 : j) and i' = (x_scale_rows == 1 ? 0 : i).
//
// Host-side checks (every launcher, before any launch): m, n, k, group >= 1; non-null pointers;
// m * k, n * G, m * n * G fit the kernels' int64 index range; the int32 range of a group
// (min(group, k) * 128 * max|code| <= 2^31 - 1); scale rows 1 or n (1 or m for x); a kernel's own
// shape and alignment rules. A violation throws trit::Error naming the kernel, m, n, k, group and
// the rule. Device pointers only; launches are asynchronous on `stream`; the packed arrays are
// assumed valid (the import path runs the formats' validate).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace trit::kernels {

enum class Format { kTern2, kTern24, kBin1, kBt };

// A packed (n, k) weight matrix in device memory: `a` is the codes array (tern24: the mask), `b`
// the tern24 signs array (null otherwise); depth is bt's d (1..4), ignored by the other formats.
struct PackedWeights {
    Format format = Format::kTern2;
    int depth = 0;
    const uint8_t* a = nullptr;
    const uint8_t* b = nullptr;
    int64_t n = 0, k = 0;
    // Whether a kernel may start reading these arrays, and the product's w_scale and bias
    // (ProductOut), before the kernel launched just before it on the stream has finished
    // (programmatic dependent launch, kernels/pdl.cuh): true only when no kernel writes them right
    // before the product, e.g. weights uploaded once and reused (the GPU runtime, the benchmarks).
    // The results are the same either way; true hides part of a launch behind the previous kernel.
    bool pdl = false;
    // Optional: the same codes in a layout that faster kernels read. tern24: written as tern2
    // (n, ceil(k / 4) bytes; kernels/tern24_dense.h builds it); with it, calls above the tern24
    // GEMV's m run the tern2 kernels on it (the dispatcher's kGemm path for tern24), without it
    // the generic kernel. bt of depth 1 or 2: as 4-bit nibbles (n, 4 * ceil(k / 8) bytes;
    // kernels/bt_nib4.h builds it); with it, one-token calls run the nibble GEMV. Ignored by the
    // other formats.
    const uint8_t* dense = nullptr;
    // Optional, bt: the codes as `depth` tern2 planes of their balanced trits, plane i the (n,
    // ceil(k / 4)) bytes from planes + i * n * ceil(k / 4) (kernels/bt_gemm.h builds them); with
    // them, calls of 9 tokens or more run the bt GEMM (the dispatcher's kGemm path for bt), without
    // them the GEMV over chunks of 8 or the generic kernel. Ignored by the other formats.
    const uint8_t* planes = nullptr;
};

struct ProductOut {
    int32_t* acc = nullptr;          // (m, n, G), or null when y is used
    float* y = nullptr;              // (m, n), or null when acc is used
    const float* w_scale = nullptr;  // (w_scale_rows, G), y only
    int64_t w_scale_rows = 1;        // 1 (per tensor) or n (per channel / group)
    const float* x_scale = nullptr;  // (x_scale_rows), y only
    int64_t x_scale_rows = 1;        // 1 or m
    const float* bias = nullptr;     // (n) or null, y only
    // Optional, y only: w_scale's values as IEEE fp16 bit patterns, the same layout, each equal to
    // its w_scale entry exactly and finite (scales stored as fp16, as the container keeps bt's by
    // default). A kernel that reads scales as halves (the one-shot GEMVs' kernels that hold groups
    // of 64's scales in registers, kernels/gemv_oneshot.cuh) takes them from here, half the bytes;
    // the sm_90a GEMM's folds of several groups, given it, add each term in one FFMA (their
    // 11-bit significands make it exact). The others read w_scale. The results are the same
    // either way.
    const uint16_t* w_scale_half = nullptr;
};

// Which kernel runs a product. kAuto follows the dispatch table of product() (kernels/product.cu);
// the others force one path (tests and benchmarks), and throw when its contract rejects the shape.
enum class ProductPath { kAuto, kGeneric, kGemv, kGemm };

const char* format_name(Format f);     // "tern2", "tern24", "bin1", "bt"
const char* path_name(ProductPath p);  // "auto", "generic", "gemv", "gemm"

// Bytes per row of the packed array(s) a and b for (format, depth, k); b is 0 when unused.
int64_t packed_row_bytes_a(Format f, int depth, int64_t k);
int64_t packed_row_bytes_b(Format f, int depth, int64_t k);
// Largest |code| of the format: 1, or (3^d - 1) / 2 for bt.
int64_t max_abs_code(Format f, int depth);

// The common checks above (not a kernel's own rules); throws trit::Error naming `who`.
void check_product(const char* who, const PackedWeights& w, const int8_t* x, int64_t m,
                   int64_t group, const ProductOut& out);

// The kernel product() would run for this shape, and why ("gemv: m <= 8 and ..."). Pointers matter:
// the fast kernels need aligned rows.
ProductPath choose_path(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        std::string* why = nullptr);

// Runs the product on `path` (kAuto: choose_path). Throws trit::Error on a contract violation.
void product(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream, ProductPath path = ProductPath::kAuto);

// The product from float activations x (m, k), row-major, 16-byte aligned for the fused kernel:
// x quantized per token to int8 exactly as act_int8_quantize does (kernels/act_int8.h), its
// scales the epilogue's x scales, then the product, into out.y (y only: out.acc must be null;
// out.x_scale is not read). Where one kernel takes both steps (m = 1, the gemv path's one-shot
// GEMVs: tern2, tern2_gemv_takes_float_x; bt with its nibbles, bt_gemv_takes_float_x) it runs
// alone and q and x_scale are not touched; otherwise act_int8_quantize writes q (m, k) and
// x_scale (m), and product() runs on them with `path`. Either way y is bit for bit the same. Returns whether it fused.
bool product_from_float(const PackedWeights& w, const float* x, int64_t m, int64_t group,
                        const ProductOut& out, int8_t* q, float* x_scale, cudaStream_t stream,
                        ProductPath path = ProductPath::kAuto);
// Whether product_from_float runs the call as one fused launch.
bool product_from_float_fuses(const PackedWeights& w, const float* x, int64_t m, int64_t group,
                              ProductPath path = ProductPath::kAuto);

// The generic kernels: any shape and group, every format, one thread per (i, j) output decoding
// with the spec headers' helpers. The correctness baseline of the fast kernels and the fallback
// for shapes they do not take; not fast.
void product_generic(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream);

}  // namespace trit::kernels
