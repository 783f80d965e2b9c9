// The products' shared checks, the dispatcher and the generic kernels (see kernels/product.h).
#include "kernels/product.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "exporters/formats/tern24.h"
#include "kernels/act_int8.h"
#include "kernels/bt_gemv.h"
#include "kernels/bt_nib4.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/product_fast.h"
#include "kernels/tern2_gemv.h"
#include "kernels/tern2_gemv_oneshot.h"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;

bool mul_fits(int64_t a, int64_t b) {
    int64_t r = 0;
    return !__builtin_mul_overflow(a, b, &r);
}

// ---- generic kernels -------------------------------------------------------------------------

template <Format F>
__device__ __forceinline__ int code_at(const uint8_t* ra, const uint8_t* rb, int64_t k, int d,
                                       int64_t c) {
    if constexpr (F == Format::kTern2) {
        (void)rb, (void)k, (void)d;
        return fmt::tern2_decode(fmt::tern2_field(ra[c / fmt::kTern2CodesPerByte],
                                                  static_cast<int>(c % fmt::kTern2CodesPerByte)));
    } else if constexpr (F == Format::kTern24) {
        (void)k, (void)d;
        const int64_t g = c / fmt::kTern24GroupSize;
        return fmt::tern24_decode(fmt::tern24_bitmap(ra, g), fmt::tern24_sign_pair(rb, g),
                                  static_cast<int>(c % fmt::kTern24GroupSize));
    } else if constexpr (F == Format::kBin1) {
        (void)rb, (void)k, (void)d;
        return fmt::bin1_decode(fmt::bin1_bit(ra[c / 8], static_cast<int>(c % 8)));
    } else {
        (void)rb;
        const int64_t q = c / fmt::kBtQuintet;
        if (q >= fmt::bt_full_quintets(k))
            return fmt::bt_tail_code(ra, k, d, static_cast<int>(c - q * fmt::kBtQuintet));
        const int j = static_cast<int>(c % fmt::kBtQuintet);
        int code = 0;
        for (int i = d - 1; i >= 0; --i) code = code * 3 + fmt::bt_trit(ra[q * d + i], j);
        return code;
    }
}

// One thread per output (i, j), grid-stride. Groups are summed in column order.
template <Format F>
__global__ void product_generic_kernel(PackedWeights w, int64_t row_a, int64_t row_b,
                                       const int8_t* __restrict__ x, int64_t m, int64_t group,
                                       int64_t groups, ProductOut out) {
    const int64_t total = m * w.n;
    for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
         t += int64_t{gridDim.x} * blockDim.x) {
        const int64_t i = t / w.n, j = t % w.n;
        const uint8_t* ra = w.a + j * row_a;
        const uint8_t* rb = w.b != nullptr ? w.b + j * row_b : nullptr;
        const int8_t* xi = x + i * w.k;
        const float* ws = out.acc == nullptr ? detail::epilogue_w_scale(out, j, groups) : nullptr;
        float s = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t c0 = g * group, c1 = min(w.k, c0 + group);
            int32_t acc = 0;
            for (int64_t c = c0; c < c1; ++c) acc += int32_t{xi[c]} * code_at<F>(ra, rb, w.k, w.depth, c);
            if (out.acc != nullptr) {
                out.acc[t * groups + g] = acc;
            } else {
                s = detail::epilogue_add(s, ws[g], acc);
            }
        }
        if (out.acc == nullptr) out.y[t] = detail::epilogue_finish(out, s, i, j);
    }
}

template <Format F>
void launch_generic(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                    const ProductOut& out, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int64_t total = m * w.n;
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{1} << 20);
    product_generic_kernel<F><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        w, packed_row_bytes_a(w.format, w.depth, w.k), packed_row_bytes_b(w.format, w.depth, w.k),
        x, m, group, fmt::acc_num_groups(w.k, group), out);
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace

const char* format_name(Format f) {
    switch (f) {
        case Format::kTern2: return "tern2";
        case Format::kTern24: return "tern24";
        case Format::kBin1: return "bin1";
        case Format::kBt: return "bt";
    }
    return "?";
}

const char* path_name(ProductPath p) {
    switch (p) {
        case ProductPath::kAuto: return "auto";
        case ProductPath::kGeneric: return "generic";
        case ProductPath::kGemv: return "gemv";
        case ProductPath::kGemm: return "gemm";
    }
    return "?";
}

int64_t packed_row_bytes_a(Format f, int depth, int64_t k) {
    switch (f) {
        case Format::kTern2: return fmt::tern2_row_bytes(k);
        case Format::kTern24: return fmt::tern24_mask_row_bytes(k);
        case Format::kBin1: return fmt::bin1_row_bytes(k);
        case Format::kBt: return fmt::bt_row_bytes(k, depth);
    }
    return 0;
}

int64_t packed_row_bytes_b(Format f, int /*depth*/, int64_t k) {
    return f == Format::kTern24 ? fmt::tern24_signs_row_bytes(k) : 0;
}

int64_t max_abs_code(Format f, int depth) {
    return f == Format::kBt ? fmt::bt_levels(depth) : 1;
}

void check_product(const char* who, const PackedWeights& w, const int8_t* x, int64_t m,
                   int64_t group, const ProductOut& out) {
    const int64_t n = w.n, k = w.k;
#define TRIT_PRODUCT_CHECK(cond, ...)                                                         \
    TRIT_CHECK(cond, who, " (", format_name(w.format), ", m=", m, ", n=", n, ", k=", k, \
               ", group=", group, "): ", __VA_ARGS__)
    TRIT_PRODUCT_CHECK(m >= 1 && n >= 1 && k >= 1 && group >= 1,
                       "m, n, k and group must all be >= 1");
    if (w.format == Format::kBt) {
        TRIT_PRODUCT_CHECK(w.depth >= 1 && w.depth <= fmt::kBtMaxDepth,
                           "bt depth must be in 1..", fmt::kBtMaxDepth, ", got ", w.depth);
    }
    TRIT_PRODUCT_CHECK(w.a != nullptr && x != nullptr, "the packed weights and x must be non-null");
    TRIT_PRODUCT_CHECK((w.format == Format::kTern24) == (w.b != nullptr),
                       w.format == Format::kTern24 ? "tern24 needs its signs array (b)"
                                                   : "only tern24 has a second array (b)");
    const int64_t groups = fmt::acc_num_groups(k, group);
    TRIT_PRODUCT_CHECK(mul_fits(m, k) && mul_fits(n, packed_row_bytes_a(w.format, w.depth, k)) &&
                           mul_fits(m, n) && mul_fits(m * n, groups),
                       "sizes overflow int64");
    const int64_t len = std::min(group, k), limit = fmt::acc_max_group_len(max_abs_code(w.format, w.depth));
    TRIT_PRODUCT_CHECK(len <= limit, "a group of ", len, " columns could overflow the int32 accumulator; use group <= ",
                       limit);
    TRIT_PRODUCT_CHECK((out.acc != nullptr) != (out.y != nullptr),
                       "exactly one output: acc (int32 accumulators) or y (fused epilogue)");
    TRIT_PRODUCT_CHECK(out.w_scale_half == nullptr || out.y != nullptr,
                       "w_scale_half (fp16 weight scales) is read by the fused epilogue only: set "
                       "y or leave it null");
    if (out.y != nullptr) {
        TRIT_PRODUCT_CHECK(out.w_scale != nullptr && out.x_scale != nullptr,
                           "the fused epilogue needs w_scale and x_scale");
        TRIT_PRODUCT_CHECK(out.w_scale_rows == 1 || out.w_scale_rows == n,
                           "w_scale must have 1 or n rows, got ", out.w_scale_rows);
        TRIT_PRODUCT_CHECK(out.x_scale_rows == 1 || out.x_scale_rows == m,
                           "x_scale must have 1 or m rows, got ", out.x_scale_rows);
    }
#undef TRIT_PRODUCT_CHECK
}

ProductPath choose_path(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        std::string* why) {
    std::string rule;
    auto pick = [&](ProductPath p, std::string reason) {
        if (why != nullptr) *why = std::move(reason);
        return p;
    };
    for (const FastKernel& fk : fast_kernels()) {
        if (fk.format != w.format || m > fk.max_m || m < fk.min_m) continue;
        const std::string no = fk.rejects(w, x, m, group);
        if (no.empty()) {
            return pick(fk.path, std::string(path_name(fk.path)) + ": m in [" + std::to_string(fk.min_m) + ", " +
                                     (fk.max_m == std::numeric_limits<int64_t>::max() ? std::string("inf")
                                                                                       : std::to_string(fk.max_m)) +
                                     "] and its contract holds");
        }
        rule += std::string(rule.empty() ? "" : "; ") + path_name(fk.path) + " declined: " + no;
    }
    return pick(ProductPath::kGeneric, rule.empty() ? "generic: no fast kernel for this format and m"
                                                    : "generic: " + rule);
}

void product_generic(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                     const ProductOut& out, cudaStream_t stream) {
    check_product("product_generic", w, x, m, group, out);
    switch (w.format) {
        case Format::kTern2: return launch_generic<Format::kTern2>(w, x, m, group, out, stream);
        case Format::kTern24: return launch_generic<Format::kTern24>(w, x, m, group, out, stream);
        case Format::kBin1: return launch_generic<Format::kBin1>(w, x, m, group, out, stream);
        case Format::kBt: return launch_generic<Format::kBt>(w, x, m, group, out, stream);
    }
}

void product(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream, ProductPath path) {
    check_product("product", w, x, m, group, out);
    if (path == ProductPath::kAuto) path = choose_path(w, x, m, group);
    if (path == ProductPath::kGeneric) return product_generic(w, x, m, group, out, stream);
    // The path's row whose m range holds m (bt's gemv has three: m = 1, 2..8, and chunks above),
    // else its first row, whose launcher names the rule the call breaks.
    const FastKernel* first = nullptr;
    for (const FastKernel& fk : fast_kernels()) {
        if (fk.format != w.format || fk.path != path) continue;
        if (m >= fk.min_m && m <= fk.max_m) return fk.launch(w, x, m, group, out, stream);
        if (first == nullptr) first = &fk;
    }
    if (first != nullptr) return first->launch(w, x, m, group, out, stream);
    TRIT_FAIL("product (", format_name(w.format), ", m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
              "): there is no ", path_name(path), " kernel for ", format_name(w.format));
}

bool product_from_float_fuses(const PackedWeights& w, const float* x, int64_t m, int64_t group,
                              ProductPath path) {
    if (path != ProductPath::kAuto && path != ProductPath::kGemv) return false;
    // The gemv path's choice for the call (choose_path takes the gemv path for m = 1 wherever these
    // kernels take the call).
    if (w.format == Format::kTern2) return tern2_gemv_takes_float_x(w, x, m, group);
    if (w.format == Format::kBt) return bt_gemv_takes_float_x(w, x, m, group);
    return false;
}

bool product_from_float(const PackedWeights& w, const float* x, int64_t m, int64_t group,
                        const ProductOut& out, int8_t* q, float* x_scale, cudaStream_t stream,
                        ProductPath path) {
    TRIT_CHECK(x != nullptr && q != nullptr && x_scale != nullptr, "product_from_float (",
               format_name(w.format), ", m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
               "): x, q and x_scale must be non-null");
    TRIT_CHECK(out.acc == nullptr, "product_from_float (", format_name(w.format), ", m=", m, ", n=", w.n,
               ", k=", w.k, ", group=", group, "): y only (out.acc must be null): x's scales are the quantizer's");
    if (product_from_float_fuses(w, x, m, group, path)) {
        if (w.format == Format::kTern2) tern2_gemv_oneshot_from_float(w, x, group, out, stream);
        else bt_nib4_oneshot_from_float(w, x, group, out, stream);
        return true;
    }
    act_int8_quantize(x, m, w.k, q, x_scale, stream);
    ProductOut o = out;
    o.x_scale = x_scale;
    o.x_scale_rows = m;
    product(w, q, m, group, o, stream, path);
    return false;
}

}  // namespace trit::kernels
