// `trit bench kernels` on the GPU (method and columns: kernels.h). Host code only: the CUDA
// runtime, cuBLAS and the kernels' launchers; built only where TRIT_HAVE_CUDA.
#include "bench/kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <set>

#include "bench/gpu_timing.h"
#include "core/error.h"
#include "exporters/format_table.h"
#include "exporters/formats/tbits.h"
#include "exporters/half.h"
#include "kernels/act_int8.h"
#include "kernels/act_pack.h"
#include "kernels/bin1_gemm.h"
#include "kernels/bt_gemm.h"
#include "kernels/bt_gemv.h"
#include "kernels/bt_nib4.h"
#include "kernels/cuda_check.h"
#include "kernels/product.h"
#include "kernels/tern24_gemv.h"
#include "kernels/tern2_gemm.h"
#include "kernels/tern2_gemm_sm90.h"
#include "kernels/tern2_gemv.h"

namespace trit::bench {
namespace {

namespace kn = trit::kernels;
namespace ex = trit::exporters;
namespace fm = trit::formats;
using namespace trit::bench::gpu;  // NOLINT: this file's own helpers, split out for size

// pack+b1_gemm's per-tensor activation scale: x in [-1, 1] / (2/3) rounds to -1, 0, +1 a third
// each (|x| > 1/3 is nonzero), the spread of random_planes' ternary codes.
constexpr float kTernActScale = 2.0f / 3.0f;

bool runs_at(const KernelFormat& f, int64_t m) {
    return m >= f.min_m && m <= f.max_m;
}

// splitmix64: fast enough to fill a few hundred MB of random weights per shape.
class Rng {
  public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
    float uniform(float lo, float hi) {
        return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f;
    }

  private:
    uint64_t s_;
};

// Random valid codes of a format: tern2 {-1, 0, 1}; tern24 two +-1 per group of 4 (2:4 pruned;
// a partial last group keeps those of its columns < k); bin1 +-1; bt<d> uniform in [-L, L].
std::vector<int8_t> random_codes(ex::FormatId f, int64_t n, int64_t k, Rng& rng) {
    std::vector<int8_t> codes(static_cast<size_t>(n * k), 0);
    const int64_t levels = ex::format_max_code(f);
    for (int64_t j = 0; j < n; ++j) {
        int8_t* row = codes.data() + j * k;
        if (f.kind == ex::WeightFormat::kTern24) {
            for (int64_t c0 = 0; c0 < k; c0 += 4) {
                const int64_t p = rng.below(4),
                              q = (p + 1 + rng.below(3)) % 4;  // two distinct slots
                for (int64_t s : {p, q})
                    if (c0 + s < k) row[c0 + s] = rng.below(2) ? 1 : -1;
            }
        } else if (f.kind == ex::WeightFormat::kBin1) {
            for (int64_t c = 0; c < k; ++c)
                row[c] = rng.below(2) ? 1 : -1;
        } else {
            for (int64_t c = 0; c < k; ++c)
                row[c] = static_cast<int8_t>(rng.below(2 * levels + 1) - levels);
        }
    }
    return codes;
}

// One format's packed weights for one shape, with per-channel (bt: per group of 64) scales, as the
// runtime stores them: [a | b | w_scale] in one ring element.
struct PackedSet {
    ex::FormatId id;
    kn::Format format = kn::Format::kTern2;
    int64_t n = 0, k = 0, group = 0, groups = 0;
    int64_t off_b = -1, off_scale = 0, off_dense = -1, off_planes = -1;
    int64_t off_scale_half = -1;  // the scales' fp16 copy (bt with fp16 scales), or -1
    double weight_bytes = 0, scale_bytes = 0;
    double dense_bytes = 0;  // tern24: the tern2 copy its dense path reads; bt: the nibbles
    double planes_bytes = 0;  // bt: the trit planes its GEMM reads
    Ring ring;
    kn::PackedWeights weights(int64_t copy) const {
        kn::PackedWeights w;
        w.format = format;
        w.depth = static_cast<int>(id.depth);
        w.a = ring.at(copy);
        w.b = off_b >= 0 ? ring.at(copy) + off_b : nullptr;
        w.n = n, w.k = k;
        w.pdl = true;  // uploaded once, as the GPU runtime's weights
        w.dense = off_dense >= 0 ? ring.at(copy) + off_dense : nullptr;
        w.planes = off_planes >= 0 ? ring.at(copy) + off_planes : nullptr;
        return w;
    }
    const float* w_scale(int64_t copy) const {
        return reinterpret_cast<const float*>(ring.at(copy) + off_scale);
    }
    const uint16_t* w_scale_half(int64_t copy) const {
        return off_scale_half >= 0
                   ? reinterpret_cast<const uint16_t*>(ring.at(copy) + off_scale_half)
                   : nullptr;
    }
};

// Random valid tbits planes of (rows, k): ternary {-1, 0, +1} (2 planes), bool {0, 1} or binary
// +-1 (1 plane), each value equally likely, packed by the CPU reference (padding bits 0).
enum class PlaneKind { kTernary, kBool, kBinary };

std::vector<uint32_t> random_planes(PlaneKind kind, int64_t rows, int64_t k, Rng& rng) {
    std::vector<int8_t> codes(static_cast<size_t>(rows * k));
    for (int8_t& v : codes)
        v = static_cast<int8_t>(kind == PlaneKind::kTernary ? rng.below(3) - 1
                                : kind == PlaneKind::kBool  ? rng.below(2)
                                                            : 2 * rng.below(2) - 1);
    const int planes = kind == PlaneKind::kTernary ? fm::kTbitsTernaryPlanes : 1;
    std::vector<uint32_t> out(static_cast<size_t>(planes * rows * fm::tbits_row_words(k)));
    if (kind == PlaneKind::kTernary) fm::tbits_ternary_pack(codes.data(), rows, k, out.data());
    if (kind == PlaneKind::kBool) fm::tbits_bool_pack(codes.data(), rows, k, out.data());
    if (kind == PlaneKind::kBinary) fm::tbits_binary_pack(codes.data(), rows, k, out.data());
    return out;
}

kn::Bin1GemmCase b1_case(const std::string& name) {
    if (name == "bool_tern") return kn::Bin1GemmCase::kBoolTern;
    if (name == "tern_tern") return kn::Bin1GemmCase::kTernTern;
    return kn::Bin1GemmCase::kBinTern;
}

// One b1 GEMM case's b operand for one shape, [planes | scale | bias] in one ring element, rotated
// like the weights: bin1_tern the bin1 weights' plane (n, k) (bit = code == +1: the bin1 array
// itself when k % 256 == 0) with per-channel scales and a bias, as a BWTA linear layer; bool_tern
// V and tern_tern K as ternary planes (n, k) with one per-tensor scale and no bias, as attention
// scales its scores and outputs (per-tensor activation scales, 1/sqrt(d) folded in).
struct B1Set {
    std::string name;
    kn::Bin1GemmCase c = kn::Bin1GemmCase::kBinTern;
    int64_t n = 0, k = 0, scale_rows = 1;
    int64_t off_scale = 0, off_bias = -1;
    double b_bytes = 0, scale_bytes = 0;  // scale_bytes: scales + bias
    Ring ring;
    const uint32_t* b(int64_t copy) const {
        return reinterpret_cast<const uint32_t*>(ring.at(copy));
    }
    const float* scale(int64_t copy) const {
        return reinterpret_cast<const float*>(ring.at(copy) + off_scale);
    }
    const float* bias(int64_t copy) const {
        return off_bias < 0 ? nullptr : reinterpret_cast<const float*>(ring.at(copy) + off_bias);
    }
};

B1Set make_b1_set(const std::string& name, int64_t n, int64_t k, int64_t l2, Rng& rng) {
    B1Set s;
    s.name = name, s.c = b1_case(name), s.n = n, s.k = k;
    const bool linear = s.c == kn::Bin1GemmCase::kBinTern;
    const std::vector<uint32_t> planes =
        random_planes(linear ? PlaneKind::kBinary : PlaneKind::kTernary, n, k, rng);
    s.scale_rows = linear ? n : 1;
    std::vector<float> scales(static_cast<size_t>(s.scale_rows)), bias;
    for (float& v : scales)
        v = rng.uniform(0.005f, 0.02f);
    std::vector<uint8_t> image;
    append(image, planes.data(), planes.size() * sizeof(uint32_t));
    s.off_scale = append(image, scales.data(), scales.size() * sizeof(float));
    if (linear) {
        bias.resize(static_cast<size_t>(n));
        for (float& v : bias)
            v = rng.uniform(-0.1f, 0.1f);
        s.off_bias = append(image, bias.data(), bias.size() * sizeof(float));
    }
    s.b_bytes = static_cast<double>(planes.size() * sizeof(uint32_t));
    s.scale_bytes = static_cast<double>((scales.size() + bias.size()) * sizeof(float));
    s.ring = make_ring(image, l2);
    return s;
}

kn::Format kernel_format(ex::WeightFormat f) {
    switch (f) {
        case ex::WeightFormat::kTern2:
            return kn::Format::kTern2;
        case ex::WeightFormat::kTern24:
            return kn::Format::kTern24;
        case ex::WeightFormat::kBin1:
            return kn::Format::kBin1;
        case ex::WeightFormat::kBt:
            return kn::Format::kBt;
        case ex::WeightFormat::kFloat:
            break;
    }
    TRIT_FAIL("bench kernels: float is not a packed format");
}

// bt_group, bt_half_scales: bt's scale group along k and scale type (KernelBenchOptions).
PackedSet make_packed_set(ex::FormatId id, int64_t n, int64_t k, int64_t bt_group,
                          bool bt_half_scales, int64_t l2, Rng& rng) {
    PackedSet s;
    s.id = id;
    s.format = kernel_format(id.kind);
    s.n = n, s.k = k;
    s.group = id.kind == ex::WeightFormat::kBt ? std::min(bt_group, k) : k;
    s.groups = ceil_div(k, s.group);
    const std::vector<int8_t> codes = random_codes(id, n, k, rng);
    const ex::Arrays arrays = ex::pack_codes(id, codes.data(), n, k);
    std::vector<float> scales(static_cast<size_t>(n * s.groups));
    const bool half_scales = id.kind == ex::WeightFormat::kBt && bt_half_scales;
    for (float& v : scales)
        v = rng.uniform(0.005f, 0.02f);
    const std::vector<uint16_t> halves =
        half_scales ? round_to_f16(scales) : std::vector<uint16_t>{};
    std::vector<uint8_t> image;
    for (size_t i = 0; i < arrays.size(); ++i) {
        const int64_t off = append(image, arrays[i].data(), arrays[i].size());
        if (i == 1) s.off_b = off;
        s.weight_bytes += static_cast<double>(arrays[i].size());
    }
    if (id.kind == ex::WeightFormat::kTern24) {  // the dense copy, as the GPU runtime keeps it
        const ex::Arrays dense = ex::pack_codes({ex::WeightFormat::kTern2, 0}, codes.data(), n, k);
        s.off_dense = append(image, dense[0].data(), dense[0].size());
        s.dense_bytes = static_cast<double>(dense[0].size());
    }
    if (id.kind == ex::WeightFormat::kBt && id.depth <= kn::kBtNib4MaxDepth) {  // the nibbles, likewise
        std::vector<uint8_t> nib(static_cast<size_t>(n * kn::bt_nib4_row_bytes(k)));
        kn::bt_nib4_pack(codes.data(), n, k, nib.data());
        s.off_dense = append(image, nib.data(), nib.size());
        s.dense_bytes = static_cast<double>(nib.size());
    }
    if (id.kind == ex::WeightFormat::kBt) {  // the trit planes, likewise
        std::vector<uint8_t> planes(
            static_cast<size_t>(kn::bt_planes_bytes(static_cast<int>(id.depth), n, k)));
        kn::bt_planes_pack(codes.data(), static_cast<int>(id.depth), n, k, planes.data());
        s.off_planes = append(image, planes.data(), planes.size());
        s.planes_bytes = static_cast<double>(planes.size());
    }
    s.off_scale = append(image, scales.data(), scales.size() * sizeof(float));
    s.scale_bytes = static_cast<double>(scales.size() * sizeof(float));
    if (half_scales)
        s.off_scale_half = append(image, halves.data(), halves.size() * sizeof(uint16_t));
    s.ring = make_ring(image, l2);
    return s;
}

// Times `call` into `row`; a trit::Error from its first call becomes the row's note. A sticky CUDA
// error (a faulting kernel) is not a row's business: the synchronize after the catch rethrows it.
void time_row(Gpu& gpu, KernelRow& row, int64_t copies, const std::function<void(int64_t)>& call) {
    row.copies = copies;
    try {
        const Timed t = gpu.time(call);
        row.samples = t.samples, row.batch = t.batch;
        row.median_us = t.median, row.min_us = t.min, row.p10_us = t.p10, row.p90_us = t.p90;
    } catch (const Error& e) {
        row.note = e.what();
        TRIT_CUDA_CHECK(cudaStreamSynchronize(gpu.stream()));
    }
}

// The tern2 GEMM kernel and tile auto dispatch runs for m x n x k with `group` on this device
// (kernels/tern2_gemm.h, kernels/tern2_gemm_sm90_tile.h): mma_sync, or wgmma with its tile as
// weight rows x tokens, sk where it splits stream-K (e.g. wg128x160, wg128x128sk).
std::string tern2_gemm_label(int64_t m, int64_t n, int64_t k, int64_t group, int sms) {
    int device = 0, major = 0, minor = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (kn::tern2_gemm_auto_kernel(m, n, k, group, major, minor, sms) !=
        kn::Tern2GemmVariant::kWgmma)
        return "mma_sync";
    const kn::detail::Tern2GemmSm90Tile t = kn::detail::tern2_gemm_sm90_tile(m, n, k, sms);
    const bool sk =
        !t.ksplit && t.tokens == 128 && kn::detail::tern2_gemm_sm90_stream_k(m, n, k, sms);
    return "wg" + std::to_string(t.rows()) + "x" + std::to_string(t.tokens) + (sk ? "sk" : "");
}

kn::ProductPath product_path(const std::string& name) {
    if (name == "gemv" || name.rfind("gemv.", 0) == 0) return kn::ProductPath::kGemv;
    if (name == "gemm" || name.rfind("gemm.", 0) == 0) return kn::ProductPath::kGemm;
    if (name == "generic") return kn::ProductPath::kGeneric;
    return kn::ProductPath::kAuto;
}

// The tern24 GEMV kernel a gemv.<kernel> path forces; kAuto for every other path.
kn::Tern24GemvVariant tern24_gemv_path(const std::string& name) {
    if (name == "gemv.stream") return kn::Tern24GemvVariant::kStream;
    if (name == "gemv.warp") return kn::Tern24GemvVariant::kWarp;
    if (name == "gemv.mma") return kn::Tern24GemvVariant::kMma;
    return kn::Tern24GemvVariant::kAuto;
}

// Per (shape, m): the inputs every case of that m shares. x is not rotated: the weights are the
// stream that matters at small m, and at large m x is read many times per call anyway. The b1
// rows' a operands: a_tern (2, m, words) ternary, a_bool (1, m, words), a_q the quantizer's output
// planes and act_scale its per-tensor scale (1 float).
struct MInputs {
    std::unique_ptr<DeviceMem> x_i8, x_f16, x_scale, y_f32, y_f16, y_i32, q, q_scale;
    std::unique_ptr<DeviceMem> a_tern, a_bool, a_q, act_scale;
};

// Runs every case of one shape; appends rows to `rep` and prints them.
class ShapeBench {
  public:
    ShapeBench(Gpu& gpu, const KernelBenchOptions& o, const KernelShape& s, KernelBenchReport& rep,
               std::set<std::pair<int64_t, int64_t>>& act_done, std::ostream& out)
        : gpu_(gpu),
          o_(o),
          s_(s),
          rep_(rep),
          act_done_(act_done),
          out_(out),
          rng_(0x7124 + s.n * 131 + s.k) {}

    void run() {
        const int64_t n = s_.n, k = s_.k;
        std::vector<uint16_t> w16(static_cast<size_t>(n * k));
        for (uint16_t& v : w16)
            v = f32_to_f16_bits(rng_.uniform(-1.0f, 1.0f));
        w_f16_ = make_ring(as_bytes(w16), gpu_.l2());
        std::vector<int8_t> w8(static_cast<size_t>(n * k));
        for (int8_t& v : w8)
            v = static_cast<int8_t>(rng_.below(255) - 127);
        w_i8_ = make_ring(as_bytes(w8), gpu_.l2());
        // Extension points. A packed format is one PackedSet and runs through product() with
        // every path of --paths (bin1 already does with --formats bin1; to bench it by default,
        // add it to the default list in resolve_kernel_bench_args). Another kind of kernel
        // (cuSPARSELt, a fused layer) is one more case in run_m, as the b1 GEMMs are: its setup,
        // a KernelRow with the bytes it moves, and time_row(gpu_, row, copies, call) with call(i)
        // enqueuing one call on gpu_.stream() using rotation copy i.
        for (const KernelFormat& f : o_.formats) {
            if (std::none_of(o_.ms.begin(), o_.ms.end(), [&](int64_t m) { return runs_at(f, m); }))
                continue;
            if (is_b1_format(f.name))
                b1_sets_.emplace_back(f, make_b1_set(f.name, n, k, gpu_.l2(), rng_));
            else
                sets_.emplace_back(f, make_packed_set(ex::parse_format(f.name), n, k, o_.bt_group,
                                                      o_.bt_half_scales, gpu_.l2(), rng_));
        }
        for (int64_t m : o_.ms)
            run_m(m);
    }

  private:
    KernelRow row(const char* kernel, const std::string& format, const std::string& path,
                  int64_t m) const {
        KernelRow r;
        r.model = s_.model, r.kernel = kernel, r.format = format, r.path = path;
        r.m = m, r.n = s_.n, r.k = s_.k;
        r.ops =
            2.0 * static_cast<double>(m) * static_cast<double>(s_.n) * static_cast<double>(s_.k);
        return r;
    }
    void emit(KernelRow r, double t_fp16, double t_int8) {
        if (r.samples > 0) {
            r.vs_fp16 = t_fp16 > 0 ? t_fp16 / r.median_us : 0;
            r.vs_int8 = t_int8 > 0 ? t_int8 / r.median_us : 0;
        }
        finish_row(r, rep_.copy_gbps);
        out_ << kernel_table_line(r) << std::flush;
        rep_.rows.push_back(std::move(r));
    }

    void run_m(int64_t m) {
        const int64_t n = s_.n, k = s_.k;
        const double dm = static_cast<double>(m), dn = static_cast<double>(n),
                     dk = static_cast<double>(k);
        MInputs in;
        std::vector<int8_t> x8(static_cast<size_t>(m * k));
        for (int8_t& v : x8)
            v = static_cast<int8_t>(rng_.below(255) - 127);
        std::vector<uint16_t> x16(static_cast<size_t>(m * k));
        for (uint16_t& v : x16)
            v = f32_to_f16_bits(rng_.uniform(-1.0f, 1.0f));
        std::vector<float> xs(static_cast<size_t>(m));
        for (float& v : xs)
            v = rng_.uniform(0.005f, 0.02f);
        in.x_i8 = upload(x8), in.x_f16 = upload(x16), in.x_scale = upload(xs);
        in.y_f32 = std::make_unique<DeviceMem>(static_cast<size_t>(m * n) * 4);
        in.y_f16 = std::make_unique<DeviceMem>(static_cast<size_t>(m * n) * 2);
        in.y_i32 = std::make_unique<DeviceMem>(static_cast<size_t>(m * n) * 4);
        const cudaStream_t stream = gpu_.stream();
        cublasHandle_t h = gpu_.cublas();

        // cuBLAS, row-major y (m, n) = x (m, k) W^T: column-major y^T = W^T x^T, the TN layout
        // (A = W with lda = k transposed, B = x with ldb = k), the one cuBLAS INT8 takes.
        KernelRow f16 = row("cublas_fp16", "fp16", "-", m);
        f16.bytes = 2 * (dn * dk + dm * dk + dm * dn);
        time_row(gpu_, f16, w_f16_.count, [&](int64_t i) {
            const float alpha = 1, beta = 0;
            cublas_check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha,
                                      w_f16_.at(i), CUDA_R_16F, int(k), in.x_f16->as<void>(),
                                      CUDA_R_16F, int(k), &beta, in.y_f16->as<void>(), CUDA_R_16F,
                                      int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "GemmEx FP16");
        });
        const double t16 = f16.median_us;
        emit(f16, t16, 0);

        KernelRow i8 = row("cublas_int8", "int8", "-", m);
        i8.bytes = dn * dk + dm * dk + 4 * dm * dn;
        if (k % 4 != 0) {
            i8.note = "skipped: cuBLAS INT8 needs k % 4 == 0";
        } else {
            time_row(gpu_, i8, w_i8_.count, [&](int64_t i) {
                const int32_t alpha = 1, beta = 0;
                cublas_check(
                    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha,
                                 w_i8_.at(i), CUDA_R_8I, int(k), in.x_i8->as<void>(), CUDA_R_8I,
                                 int(k), &beta, in.y_i32->as<void>(), CUDA_R_32I, int(n),
                                 CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
                    "GemmEx INT8");
            });
        }
        const double t8 = i8.median_us;
        emit(i8, t16, t8);

        for (const auto& [f, set] : sets_) {
            if (!runs_at(f, m)) continue;
            for (const std::string& p : o_.paths)
                emit(product_row(set, p, m, in, false), t16, t8);
        }

        // The int8 activation quantizer on float input in [-1, 1] (rotated like weights: in a layer
        // it follows other work), once per (m, k) over all shapes; the same float x feeds the
        // ternary planes quantizer of pack+b1_gemm.
        const bool act_row = act_done_.insert({m, k}).second;
        bool pack_rows = false;
        for (const auto& [f, set] : b1_sets_)
            pack_rows |= runs_at(f, m) && set.c == kn::Bin1GemmCase::kBinTern;
        if (m == 1 || act_row || pack_rows) {
            in.q = std::make_unique<DeviceMem>(static_cast<size_t>(m * k));
            in.q_scale = std::make_unique<DeviceMem>(static_cast<size_t>(m) * 4);
            std::vector<float> xf(static_cast<size_t>(m * k));
            for (float& v : xf)
                v = rng_.uniform(-1.0f, 1.0f);
            x_f32_ = make_ring(as_bytes(xf), gpu_.l2());
        }
        if (m == 1) {  // what a decode-step layer costs: quantize x, then the product
            for (const auto& [f, set] : sets_)
                for (const std::string& p : o_.paths)
                    emit(product_row(set, p, m, in, true), t16, t8);
        }
        run_b1(m, in, t16, t8);
        if (act_row) {
            KernelRow a = row("act_int8", "-", "-", m);
            a.model.clear();
            a.n = 0, a.ops = 0;
            a.bytes = 4 * dm * dk + dm * dk + 4 * dm;
            time_row(gpu_, a, x_f32_.count, [&](int64_t i) {
                kn::act_int8_quantize(reinterpret_cast<const float*>(x_f32_.at(i)), m, k,
                                      in.q->as<int8_t>(), in.q_scale->as<float>(), stream);
            });
            emit(a, 0, 0);
        }
    }

    // The product as the runtime calls it: int8 x, fused epilogue into float y with per-channel
    // (bt: per group) weight scales and per-row x scales; `with_act` quantizes float x first.
    KernelRow product_row(const PackedSet& w, const std::string& path_arg, int64_t m,
                          const MInputs& in, bool with_act) {
        const kn::ProductPath path = product_path(path_arg);
        const int8_t* x = with_act ? in.q->as<int8_t>() : in.x_i8->as<int8_t>();
        const float* x_scale = with_act ? in.q_scale->as<float>() : in.x_scale->as<float>();
        std::string why;
        const kn::ProductPath taken = path == kn::ProductPath::kAuto
                                          ? kn::choose_path(w.weights(0), x, m, w.group, &why)
                                          : path;
        KernelRow r =
            row(with_act ? "act_int8+product" : "product", w.id.name(), kn::path_name(taken), m);
        const double dm = static_cast<double>(m), dn = static_cast<double>(w.n),
                     dk = static_cast<double>(w.k);
        // The tern24 dense path reads the tern2 copy instead of the tern24 arrays, bt's nibble
        // GEMV the nibbles instead of the bt bytes.
        // Above 8 tokens the bt gemv path runs the GEMV over chunks of 8 ("chunks").
        const std::string bt_kernel =
            w.format == kn::Format::kBt && taken == kn::ProductPath::kGemv
                ? (m > 8 ? "chunks" : kn::bt_gemv_variant(w.weights(0), x, m, w.group))
                : "";
        // gemv.oneshot.l<L>r<R>[d<D>]: bt's one-shot nibble GEMV with that geometry.
        Nib4Geometry geometry;
        const bool nib4_forced = nib4_geometry_path(path_arg, &geometry);
        const bool dense = (w.format == kn::Format::kTern24 && taken == kn::ProductPath::kGemm) ||
                           bt_kernel == "nib4" || bt_kernel == "oneshot" || nib4_forced;
        // With fp16 scales given (ProductOut::w_scale_half) and groups of 64 the one-shot nibble
        // GEMV's register-scale kernels read the halves, its copied-scale ones the floats: counted
        // as halves, so that GB/s never overstates (by up to 1/18 under for the copied-scale ones).
        const bool halves =
            w.off_scale_half >= 0 && w.group == 64 && (bt_kernel == "oneshot" || nib4_forced);
        const bool planes = w.format == kn::Format::kBt && taken == kn::ProductPath::kGemm;
        r.bytes = (planes  ? w.planes_bytes
                   : dense ? w.dense_bytes
                           : w.weight_bytes) +
                  (halves ? w.scale_bytes / 2 : w.scale_bytes) + dm * dk + 4 * dm + 4 * dm * dn;
        // With the quantizer: float x read; q and its scales written and read again, unless one
        // kernel fuses both (then the int8 x and its scales never leave the SM).
        const bool fused = with_act && kn::product_from_float_fuses(
                                           w.weights(0), reinterpret_cast<const float*>(x_f32_.at(0)), m, w.group, path);
        if (fused) r.bytes += 4 * dm * dk - dm * dk - 4 * dm;
        else if (with_act) r.bytes += 4 * dm * dk + dm * dk + 4 * dm;
        if (path != kn::ProductPath::kAuto) r.path += "*";  // forced by --paths
        // gemm.mma_sync / gemm.wgmma: the gemm path with that tern2 GEMM kernel (which the tern24
        // dense path and bt's GEMM on its planes run too) forced for the row's calls.
        const size_t dot = path_arg.find('.');
        // gemv.stream / gemv.warp / gemv.mma: the gemv path with that tern24 GEMV kernel forced.
        const kn::Tern24GemvVariant gemv_variant = tern24_gemv_path(path_arg);
        const bool gemv_forced = gemv_variant != kn::Tern24GemvVariant::kAuto;
        if (gemv_forced) {
            r.path = path_arg + "*";
            if (w.format != kn::Format::kTern24) {
                r.note = "--paths " + path_arg + ": tern24 rows only";
                return r;
            }
        } else if (nib4_forced) {
            r.path = path_arg + "*";
            const char* no = w.format != kn::Format::kBt ? "bt rows only"
                             : m != 1                    ? "m = 1 only"
                             : with_act                  ? "product rows from int8 x only"
                                                         : nullptr;
            if (no != nullptr) {
                r.note = "--paths " + path_arg + ": " + no;
                return r;
            }
        } else if (dot != std::string::npos) {
            r.path = path_arg.substr(dot + 1) + "*";
            if (w.format != kn::Format::kTern2 && w.format != kn::Format::kTern24 &&
                w.format != kn::Format::kBt) {
                r.note = "--paths " + path_arg + ": tern2, tern24 and bt rows only";
                return r;
            }
        }
        // An auto tern2 row on the gemm path: the GEMM kernel and tile that dispatch runs.
        if (dot == std::string::npos && w.format == kn::Format::kTern2 &&
            taken == kn::ProductPath::kGemm)
            r.path = tern2_gemm_label(m, w.n, w.k, w.group, gpu_.sm_count());
        // An auto tern2 or bt row on the gemv path: the GEMV kernel it runs (gemv.oneshot, gemv.skinny,
        // gemv.nib4, ...); a fused row runs the one-shot kernel from float x (gemv.oneshot.fused),
        // whatever kernel the product alone runs.
        if (path == kn::ProductPath::kAuto && taken == kn::ProductPath::kGemv &&
            (w.format == kn::Format::kTern2 || w.format == kn::Format::kBt))
            r.path = fused ? std::string("gemv.oneshot.fused")
                           : "gemv." + (w.format == kn::Format::kBt
                                            ? bt_kernel
                                            : std::string(kn::tern2_gemv_variant(w.weights(0), x, m, w.group)));
        // A tern24 row on the gemv path, auto or "gemv" forced: the GEMV kernel it runs
        // (gemv.stream, gemv.mma, gemv.warp).
        if (taken == kn::ProductPath::kGemv && w.format == kn::Format::kTern24 &&
            dot == std::string::npos)
            r.path = "gemv." + std::string(kn::tern24_gemv_variant(w.weights(0), x, m, w.group)) +
                     (path != kn::ProductPath::kAuto ? "*" : "");
        const kn::ScopedTern24GemvVariant forced_gemv(gemv_variant);
        if (gemv_forced) {
            const std::string no = kn::tern24_gemv_rejects(w.weights(0), x, m, w.group);
            if (!no.empty()) {
                r.note = "--paths " + path_arg + ": " + no;
                return r;
            }
        }
        // gemm.wgmma.t<N>: the wgmma kernel with N tokens per tile; gemm.wgmma.sk: with every
        // tile split stream-K (128-token tiles); gemm.wgmma.ks<N>: its k-split tile, N tokens.
        const bool wgmma = path_arg.rfind("gemm.wgmma", 0) == 0;
        const kn::ScopedTern2GemmVariant variant(
            dot == std::string::npos || gemv_forced || nib4_forced ? kn::Tern2GemmVariant::kAuto
            : path_arg == "gemm.wgmma.sk"             ? kn::Tern2GemmVariant::kWgmmaStreamK
            : path_arg.rfind("gemm.wgmma.ks", 0) == 0 ? kn::Tern2GemmVariant::kWgmmaKSplit
            : wgmma                                   ? kn::Tern2GemmVariant::kWgmma
                                                      : kn::Tern2GemmVariant::kMmaSync);
        const kn::ScopedTern2GemmTokens tokens(wgmma_tokens_path(path_arg));
        const cudaStream_t stream = gpu_.stream();
        time_row(gpu_, r, std::max(w.ring.count, with_act ? x_f32_.count : 1), [&](int64_t i) {
            kn::ProductOut out;
            out.y = in.y_f32->as<float>();
            out.w_scale = w.w_scale(i);
            out.w_scale_half = w.w_scale_half(i);
            out.w_scale_rows = w.n;
            if (with_act) {  // as the GPU runtime runs a layer: fused where a kernel takes it
                kn::product_from_float(w.weights(i), reinterpret_cast<const float*>(x_f32_.at(i)), m, w.group,
                                       out, in.q->as<int8_t>(), in.q_scale->as<float>(), stream, path);
                return;
            }
            out.x_scale = x_scale;
            out.x_scale_rows = m;
            if (nib4_forced) {
                kn::bt_nib4_oneshot(w.weights(i), x, m, w.group, out, stream, geometry.lanes,
                                    geometry.rows, geometry.ahead);
                return;
            }
            kn::product(w.weights(i), x, m, w.group, out, stream, path);
        });
        // Auto falling back to generic is worth saying why (a fast kernel's contract declined).
        if (r.note.empty() && taken == kn::ProductPath::kGeneric &&
            why.find("declined") != std::string::npos)
            r.note = why;
        return r;
    }

    // The b1 GEMMs at this m: each case alone on pre-packed planes, and for bin1_tern also
    // pack+b1_gemm (float x -> ternary planes by the fused quantizer, then the GEMM).
    void run_b1(int64_t m, MInputs& in, double t16, double t8) {
        const int64_t k = s_.k;
        bool any = false, tern = false, boolean = false, linear = false;
        for (const auto& [f, set] : b1_sets_) {
            if (!runs_at(f, m)) continue;
            any = true;
            tern |= kn::bin1_gemm_planes_a(set.c) == 2;
            boolean |= set.c == kn::Bin1GemmCase::kBoolTern;
            linear |= set.c == kn::Bin1GemmCase::kBinTern;
        }
        if (!any) return;
        in.act_scale = upload(std::vector<float>{kTernActScale});
        if (tern) in.a_tern = upload(random_planes(PlaneKind::kTernary, m, k, rng_));
        if (boolean) in.a_bool = upload(random_planes(PlaneKind::kBool, m, k, rng_));
        if (linear)
            in.a_q = std::make_unique<DeviceMem>(
                static_cast<size_t>(fm::kTbitsTernaryPlanes * m * fm::tbits_row_words(k) * 4));
        for (const auto& [f, set] : b1_sets_) {
            if (!runs_at(f, m)) continue;
            emit(b1_row(set, m, in, false), t16, t8);
            if (set.c == kn::Bin1GemmCase::kBinTern) emit(b1_row(set, m, in, true), t16, t8);
        }
    }

    // One b1 GEMM into float y through the fused epilogue. b1_gemm: the planes are given (bin1_tern
    // with per-row x scales, as a layer fed by another kernel's planes; the attention cases with
    // per-tensor scales on both sides); pack+b1_gemm: float x (rotated) is quantized with the
    // per-tensor scale kTernActScale first, that scale then being the epilogue's x scale. The tile
    // is bin1_gemm_choose_tile's, passed explicitly so the path column is the tile that ran (the
    // same as kAuto's choice).
    KernelRow b1_row(const B1Set& s, int64_t m, const MInputs& in, bool with_pack) {
        const kn::Bin1GemmTile tile = kn::bin1_gemm_choose_tile(s.c, m, s.n, s.k, gpu_.sm_count());
        const int k_groups = kn::bin1_gemm_k_groups(s.c, tile, m, s.n, s.k, gpu_.sm_count());
        KernelRow r = row(with_pack ? "pack+b1_gemm" : "b1_gemm", s.name,
                          std::string(kn::bin1_gemm_tile_name(tile)) + (k_groups > 1 ? "+kg" + std::to_string(k_groups) : ""),
                          m);
        const int planes_a = kn::bin1_gemm_planes_a(s.c);
        const bool per_row = s.c == kn::Bin1GemmCase::kBinTern && !with_pack;
        const double dm = static_cast<double>(m), dn = static_cast<double>(s.n),
                     dk = static_cast<double>(s.k),
                     plane_row = 4.0 * static_cast<double>(fm::tbits_row_words(s.k));
        r.bytes = s.b_bytes + s.scale_bytes + planes_a * dm * plane_row + 4 * (per_row ? dm : 1) +
                  4 * dm * dn;
        if (with_pack)
            r.bytes += 4 * dm * dk + planes_a * dm * plane_row;  // float x in, planes out
        const uint32_t* a = with_pack       ? in.a_q->as<uint32_t>()
                            : planes_a == 2 ? in.a_tern->as<uint32_t>()
                                            : in.a_bool->as<uint32_t>();
        const cudaStream_t stream = gpu_.stream();
        time_row(gpu_, r, std::max(s.ring.count, with_pack ? x_f32_.count : 1), [&](int64_t i) {
            if (with_pack)
                kn::tbits_quantize_ternary(reinterpret_cast<const float*>(x_f32_.at(i)), m, s.k,
                                           kTernActScale, in.a_q->as<uint32_t>(), stream);
            kn::ProductOut out;
            out.y = in.y_f32->as<float>();
            out.w_scale = s.scale(i);
            out.w_scale_rows = s.scale_rows;
            out.x_scale = per_row ? in.x_scale->as<float>() : in.act_scale->as<float>();
            out.x_scale_rows = per_row ? m : 1;
            out.bias = s.bias(i);
            // bin1 weights are uploaded once (b early, as the GPU runtime runs them); V and K
            // come from the kernels before in a model, so their rows wait.
            kn::bin1_gemm(s.c, a, m, s.b(i), s.n, s.k, out, stream, tile, s.c == kn::Bin1GemmCase::kBinTern);
        });
        return r;
    }

    Gpu& gpu_;
    const KernelBenchOptions& o_;
    const KernelShape& s_;
    KernelBenchReport& rep_;
    std::set<std::pair<int64_t, int64_t>>& act_done_;
    std::ostream& out_;
    Rng rng_;
    Ring w_f16_, w_i8_, x_f32_;
    std::vector<std::pair<KernelFormat, PackedSet>> sets_;
    std::vector<std::pair<KernelFormat, B1Set>> b1_sets_;
};

}  // namespace

KernelBenchReport run_kernel_bench(const KernelBenchOptions& o, std::ostream& out) {
    require_gpu();
    Gpu gpu(o);
    KernelBenchReport rep;
    rep.device = device_line(gpu.cublas());
    rep.date = utc_now();
    out << "device: " << rep.device << "\ndate:   " << rep.date
        << "\nmethod: per case one checked call, up to " << o.warmup
        << " warm-up calls, then up to " << o.reps << " samples (" << o.budget_s
        << " s of GPU time per case, at least " << kMinSamples
        << "); a sample is gated CUDA events "
        << "around B back-to-back calls (B <= " << kMaxBatch << ", ~" << kSampleTargetUs
        << " us a sample); weights rotated over ceil(2 x L2 / bytes) + 1 copies; times are us per "
        << "call; path* = forced by --paths; b1 rows: path = the GEMM's tile (+kg4: k groups); "
        << "bt scale groups of min(" << o.bt_group << ", k) columns, "
        << (o.bt_half_scales ? "fp16" : "fp32") << " scales\n"
        << std::flush;

    // Device-to-device copy bandwidth: the ceiling the weight-streaming kernels are held against.
    const int64_t copy_bytes =
        std::max<int64_t>(int64_t{256} << 20, ceil_div(4 * gpu.l2(), 1 << 20) << 20);
    {
        DeviceMem src(static_cast<size_t>(copy_bytes)), dst(static_cast<size_t>(copy_bytes));
        TRIT_CUDA_CHECK(cudaMemset(src.as<void>(), 1, static_cast<size_t>(copy_bytes)));
        KernelRow c;
        c.kernel = "copy", c.format = "-", c.path = "-";
        c.bytes = 2.0 * static_cast<double>(copy_bytes);
        time_row(gpu, c, 1, [&](int64_t) {
            TRIT_CUDA_CHECK(cudaMemcpyAsync(dst.as<void>(), src.as<void>(),
                                            static_cast<size_t>(copy_bytes),
                                            cudaMemcpyDeviceToDevice, gpu.stream()));
        });
        TRIT_CHECK(c.samples > 0,
                   "bench kernels: the copy bandwidth could not be measured: ", c.note);
        finish_row(c, 0);
        rep.copy_gbps = c.gbps;
        c.pct_copy = 100;
        c.note = detail::concat("cudaMemcpyAsync D2D of ", copy_bytes >> 20,
                                " MiB, read + write counted");
        out << "copy:   " << c.gbps << " GB/s (median of " << c.samples << "; " << c.note << ")\n\n"
            << kernel_table_header() << std::flush;
        rep.rows.push_back(c);
    }

    std::set<std::pair<int64_t, int64_t>> act_done;
    for (const KernelShape& s : o.shapes)
        ShapeBench(gpu, o, s, rep, act_done, out).run();
    return rep;
}

}  // namespace trit::bench
