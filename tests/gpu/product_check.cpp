// See product_check.h.
#include "tests/gpu/product_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/act_int8.h"
#include "core/error.h"
#include "exporters/format_table.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "exporters/half.h"
#include "kernels/bt_gemm.h"
#include "kernels/bt_nib4.h"
#include "tests/gpu/gpu_test_util.h"

namespace trit::gputest {
namespace {

exporters::FormatId format_id(const ProductCase& c) {
    switch (c.format) {
        case kernels::Format::kTern2: return {exporters::WeightFormat::kTern2, 0};
        case kernels::Format::kTern24: return {exporters::WeightFormat::kTern24, 0};
        case kernels::Format::kBin1: return {exporters::WeightFormat::kBin1, 0};
        case kernels::Format::kBt: return {exporters::WeightFormat::kBt, c.depth};
    }
    return {};
}

// Random codes valid for the format: tern24 keeps at most 2 non-zeros per group of 4 columns,
// bin1 has no zero, bt spans [-L, L].
std::vector<int8_t> random_weight_codes(const ProductCase& c) {
    const auto n = static_cast<size_t>(c.n * c.k);
    switch (c.format) {
        case kernels::Format::kTern2: return random_codes(n, -1, 1, c.seed * 7 + 1);
        case kernels::Format::kBin1: {
            std::vector<int8_t> v = random_codes(n, 0, 1, c.seed * 7 + 2);
            for (auto& x : v) x = x != 0 ? 1 : -1;
            return v;
        }
        case kernels::Format::kBt: {
            const int L = formats::bt_levels(c.depth);
            return random_codes(n, -L, L, c.seed * 7 + 3);
        }
        case kernels::Format::kTern24: {
            std::vector<int8_t> v = random_codes(n, -1, 1, c.seed * 7 + 4);
            for (int64_t r = 0; r < c.n; ++r)
                for (int64_t g = 0; g < c.k; g += 4) {
                    int nz = 0;
                    for (int64_t col = g; col < std::min(c.k, g + 4); ++col) {
                        int8_t& x = v[static_cast<size_t>(r * c.k + col)];
                        if (x != 0 && ++nz > 2) x = 0;
                    }
                }
            return v;
        }
    }
    return {};
}

template <typename T>
std::string first_mismatches(const std::vector<T>& got, const std::vector<T>& want,
                             int64_t n, int64_t inner, int64_t* count) {
    std::ostringstream msg;
    *count = 0;
    for (size_t t = 0; t < got.size(); ++t) {
        const bool same = std::is_floating_point<T>::value
                              ? std::memcmp(&got[t], &want[t], sizeof(T)) == 0
                              : got[t] == want[t];
        if (same) continue;
        if ((*count)++ < 8) {
            const int64_t i = static_cast<int64_t>(t) / (n * inner), j = static_cast<int64_t>(t) / inner % n,
                          g = static_cast<int64_t>(t) % inner;
            msg << "  [i=" << i << ", j=" << j << ", g=" << g << "]: got " << got[t] << ", want " << want[t] << "\n";
        }
    }
    return msg.str();
}

// The elements after the first `off` of a downloaded output buffer; the first `off` must still
// hold DeviceBuffer::poison()'s bytes (nothing was written before the output).
template <typename T>
std::vector<T> strip_front(std::vector<T> got, size_t off) {
    T poison;
    std::memset(&poison, 0x5A, sizeof(T));
    for (size_t t = 0; t < off; ++t)
        EXPECT_EQ(std::memcmp(&got[t], &poison, sizeof(T)), 0)
            << "written before the output, at -" << off - t;
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(off));
    return got;
}

}  // namespace

std::string describe(const ProductCase& c) {
    std::ostringstream s;
    s << kernels::format_name(c.format);
    if (c.format == kernels::Format::kBt) s << c.depth;
    s << " m=" << c.m << " n=" << c.n << " k=" << c.k << " group=" << c.group << " seed=" << c.seed;
    if (c.dense) s << " dense";
    if (c.planes) s << " planes";
    if (c.out_offset != 0) s << " out_offset=" << c.out_offset;
    return s.str();
}

namespace {

// Checks the case through `run(w, x, out, stream)`.
template <typename Run>
void check_case(const ProductCase& c, Run run) {
    const exporters::FormatId fid = format_id(c);
    const std::vector<int8_t> codes = random_weight_codes(c);
    const exporters::Arrays packed = exporters::pack_codes(fid, codes.data(), c.n, c.k);
    const std::vector<int8_t> x = random_codes(static_cast<size_t>(c.m * c.k), c.x_lo, c.x_hi, c.seed * 7 + 5);
    const int64_t G = formats::acc_num_groups(c.k, c.group);

    std::vector<int32_t> want(static_cast<size_t>(c.m * c.n * G));
    exporters::gemm_int8(fid, packed, c.n, c.k, x.data(), c.m, c.group, want.data());

    const int64_t ws_rows = c.per_tensor_scale ? 1 : c.n;
    std::vector<float> ws =
        random_floats(static_cast<size_t>(ws_rows * G), 1e-3f, 2e-2f, c.seed * 7 + 6);
    const std::vector<uint16_t> ws_half =
        c.half_scales ? round_to_f16(ws) : std::vector<uint16_t>{};
    const std::vector<float> xs = random_floats(static_cast<size_t>(c.m), 1e-3f, 5e-2f, c.seed * 7 + 7);
    const std::vector<float> bias = random_floats(static_cast<size_t>(c.n), -1.0f, 1.0f, c.seed * 7 + 8);
    // The CPU runtime's epilogue (exporters/runtime_cpu.cpp), compiled without FP contraction.
    std::vector<float> want_y(static_cast<size_t>(c.m * c.n));
    for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
            const float* w = ws.data() + (ws_rows == 1 ? 0 : j * G);
            float s = 0.0f;
            for (int64_t g = 0; g < G; ++g) s += w[g] * static_cast<float>(want[static_cast<size_t>((i * c.n + j) * G + g)]);
            want_y[static_cast<size_t>(i * c.n + j)] = s * xs[static_cast<size_t>(i)] + (c.bias ? bias[static_cast<size_t>(j)] : 0.0f);
        }

    DeviceBuffer<uint8_t> d_a(packed[0]);
    std::unique_ptr<DeviceBuffer<uint8_t>> d_b, d_dense, d_planes;
    if (packed.size() > 1) d_b = std::make_unique<DeviceBuffer<uint8_t>>(packed[1]);
    if (c.dense && c.format == kernels::Format::kBt) {  // the nibbles, from the bt bytes on the GPU
        d_dense = std::make_unique<DeviceBuffer<uint8_t>>(static_cast<size_t>(c.n * kernels::bt_nib4_row_bytes(c.k)));
        kernels::bt_to_nib4(d_a.get(), c.depth, c.n, c.k, d_dense->get(), nullptr);
    } else if (c.dense) {
        d_dense = std::make_unique<DeviceBuffer<uint8_t>>(
            exporters::pack_codes({exporters::WeightFormat::kTern2, 0}, codes.data(), c.n, c.k)[0]);
    }
    if (c.planes) {
        d_planes = std::make_unique<DeviceBuffer<uint8_t>>(
            static_cast<size_t>(kernels::bt_planes_bytes(c.depth, c.n, c.k)));
        kernels::bt_to_planes(d_a.get(), c.depth, c.n, c.k, d_planes->get(), nullptr);
    }
    DeviceBuffer<int8_t> d_x(x);
    const size_t off = static_cast<size_t>(c.out_offset);
    DeviceBuffer<int32_t> d_acc(want.size() + off);
    // The w scales and biases sit `off` elements into their buffers too.
    auto shifted = [off](const std::vector<float>& v) {
        std::vector<float> out(off, 0.0f);
        out.insert(out.end(), v.begin(), v.end());
        return out;
    };
    DeviceBuffer<float> d_ws(shifted(ws)), d_xs(xs), d_bias(shifted(bias)), d_y(want_y.size() + off);
    std::vector<uint16_t> half_front(off, 0);
    half_front.insert(half_front.end(), ws_half.begin(), ws_half.end());
    DeviceBuffer<uint16_t> d_ws_half(half_front);
    d_acc.poison();
    d_y.poison();

    kernels::PackedWeights w;
    w.format = c.format;
    w.depth = c.depth;
    w.a = d_a.get();
    w.b = d_b ? d_b->get() : nullptr;
    w.dense = d_dense ? d_dense->get() : nullptr;
    w.planes = d_planes ? d_planes->get() : nullptr;
    w.n = c.n;
    w.k = c.k;

    int64_t bad = 0;
    std::string msg;
    if (!c.y_only) {
        kernels::ProductOut acc_out;
        acc_out.acc = d_acc.get() + off;
        w.pdl = false;
        run(w, d_x.get(), acc_out);
        TRIT_CUDA_CHECK(cudaDeviceSynchronize());
        msg = first_mismatches(strip_front(d_acc.download(), off), want, c.n, G, &bad);
        EXPECT_EQ(bad, 0) << "int32 accumulators differ from the reference, first mismatches:\n"
                          << msg;
    }

    kernels::ProductOut y_out;
    y_out.y = d_y.get() + off;
    y_out.w_scale = d_ws.get() + off;
    y_out.w_scale_rows = ws_rows;
    y_out.w_scale_half = c.half_scales ? d_ws_half.get() + off : nullptr;
    y_out.x_scale = d_xs.get();
    y_out.x_scale_rows = c.m;
    y_out.bias = c.bias ? d_bias.get() + off : nullptr;
    w.pdl = true;
    run(w, d_x.get(), y_out);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    msg = first_mismatches(strip_front(d_y.download(), off), want_y, c.n, 1, &bad);
    EXPECT_EQ(bad, 0) << "fused-epilogue y differs from the CPU runtime's bits, first mismatches:\n" << msg;
}

}  // namespace

void check_product_case(const ProductCase& c, kernels::ProductPath path) {
    SCOPED_TRACE(describe(c) + " path=" + kernels::path_name(path));
    check_case(c, [&](const kernels::PackedWeights& w, const int8_t* x, const kernels::ProductOut& out) {
        kernels::product(w, x, c.m, c.group, out, nullptr, path);
    });
}

void check_product_case(const ProductCase& c, ProductLauncher launch) {
    SCOPED_TRACE(describe(c));
    check_case(c, [&](const kernels::PackedWeights& w, const int8_t* x, const kernels::ProductOut& out) {
        launch(w, x, c.m, c.group, out, nullptr);
    });
}

void expect_rejected(const char* who, ProductRejects rejects, ProductLauncher launch, const kernels::PackedWeights& w,
                     const int8_t* x, int64_t m, int64_t group, const std::string& rule) {
    EXPECT_NE(rejects(w, x, m, group).find(rule), std::string::npos)
        << who << " rejects: '" << rejects(w, x, m, group) << "', expected '" << rule << "'";
    int32_t acc[1];
    kernels::ProductOut out;
    out.acc = acc;
    try {
        launch(w, x, m, group, out, nullptr);
        ADD_FAILURE() << "expected trit::Error with '" << rule << "'";
    } catch (const Error& e) {
        const std::string what = e.what();
        const std::string shape = "m=" + std::to_string(m) + ", n=" + std::to_string(w.n) + ", k=" + std::to_string(w.k) +
                                  ", group=" + std::to_string(group) + "): ";
        EXPECT_NE(what.find(std::string(who) + " ("), std::string::npos) << what;
        EXPECT_NE(what.find(shape), std::string::npos) << what;
        EXPECT_NE(what.find(rule), std::string::npos) << what;
    }
}

namespace {

exporters::FormatId format_id(const FromFloatCase& c) {
    return c.format == kernels::Format::kBt ? exporters::FormatId{exporters::WeightFormat::kBt, c.depth}
                                            : exporters::FormatId{exporters::WeightFormat::kTern2, 0};
}

}  // namespace

std::vector<float> reference_y_from_float(const FromFloatCase& c) {
    std::vector<int8_t> q(static_cast<size_t>(c.k));
    float sx = 0.0f;
    act_int8_quantize_ref(c.x.data(), 1, c.k, q.data(), &sx);
    const exporters::FormatId fid = format_id(c);
    const exporters::Arrays packed = exporters::pack_codes(fid, c.codes.data(), c.n, c.k);
    const int64_t groups = formats::ceil_div(c.k, c.group);
    std::vector<int32_t> acc(static_cast<size_t>(c.n * groups));
    exporters::gemm_int8(fid, packed, c.n, c.k, q.data(), 1, c.group, acc.data());
    std::vector<float> y(static_cast<size_t>(c.n));
    for (int64_t j = 0; j < c.n; ++j) {
        float s = 0.0f;
        for (int64_t g = 0; g < groups; ++g) {
            const size_t e = static_cast<size_t>(j * groups + g);
            s = s + c.ws[e] * static_cast<float>(acc[e]);
        }
        y[static_cast<size_t>(j)] = s * sx + c.bias[static_cast<size_t>(j)];
    }
    return y;
}

void use_half_scales(FromFloatCase& c) {
    c.ws_half = round_to_f16(c.ws);
}

std::vector<float> gpu_y_from_float(const FromFloatCase& c, bool* fused) {
    const exporters::Arrays packed = exporters::pack_codes(format_id(c), c.codes.data(), c.n, c.k);
    DeviceBuffer<uint8_t> d_a(packed[0]);
    std::unique_ptr<DeviceBuffer<uint8_t>> d_nib;
    kernels::PackedWeights w = tern2_weights(c.n, c.k, d_a.get());
    if (c.format == kernels::Format::kBt) {
        std::vector<uint8_t> nib(static_cast<size_t>(c.n * kernels::bt_nib4_row_bytes(c.k)));
        kernels::bt_nib4_pack(c.codes.data(), c.n, c.k, nib.data());
        d_nib = std::make_unique<DeviceBuffer<uint8_t>>(nib);
        w = bt_weights(c.depth, c.n, c.k, d_a.get(), d_nib->get());
    }
    w.pdl = true;
    DeviceBuffer<float> d_x(c.x), d_ws(c.ws), d_bias(c.bias), d_y(static_cast<size_t>(c.n)), d_sx(1);
    DeviceBuffer<int8_t> d_q(static_cast<size_t>(c.k));
    DeviceBuffer<uint16_t> d_ws_half(c.ws_half);
    d_y.poison();
    kernels::ProductOut out;
    out.y = d_y.get();
    out.w_scale = d_ws.get();
    out.w_scale_half = c.ws_half.empty() ? nullptr : d_ws_half.get();
    out.w_scale_rows = c.n;
    out.bias = d_bias.get();
    *fused = kernels::product_from_float(w, d_x.get(), 1, c.group, out, d_q.get(), d_sx.get(), nullptr);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    return d_y.download();
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t j = 0; j < got.size(); ++j) {
        if (std::memcmp(&got[j], &want[j], sizeof(float)) == 0) continue;
        if (++bad <= 5) ADD_FAILURE() << "y[" << j << "]: got " << got[j] << ", want " << want[j];
    }
}

}  // namespace trit::gputest
