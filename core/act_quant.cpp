// Activation fake-quantizers: see act_quant.h.
#include "core/act_quant.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>

#include "core/act_int8.h"
#include "core/error.h"

namespace trit {
namespace {

struct Int8Ste : torch::autograd::Function<Int8Ste> {
    static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) {
        return act_int8_fake_quantize(x).x_hat;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list grad) {
        return {grad[0]};
    }
};

// act_int8_quantize for a contiguous float32 CPU tensor in one pass per row for the absmax and one
// for the codes, rows in parallel (the tensor-op version makes ~6 passes over the activations and
// cost as much as the layer's matmul in QAT). Same arithmetic as act_int8_quantize_ref
// (core/act_int8.h): float 127 / amax, x * that rounded half to even, clamped; a row with a NaN or
// an infinity gets codes 0 and a NaN scale.
// With `with_hat`, x_hat = q * scale is written in the same pass.
Int8FakeQuant quantize_rows_cpu(const torch::Tensor& x, bool with_hat) {
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    std::vector<int64_t> scale_shape = x.sizes().vec();
    scale_shape.back() = 1;
    torch::Tensor q = torch::empty_like(x);
    torch::Tensor scale = torch::empty(scale_shape, x.options());
    torch::Tensor x_hat = with_hat ? torch::empty_like(x) : torch::Tensor();
    const float* xp = x.data_ptr<float>();
    float* qp = q.data_ptr<float>();
    float* hp = with_hat ? x_hat.data_ptr<float>() : nullptr;
    float* sp = scale.data_ptr<float>();
    constexpr int64_t kLanes = 16;  // independent maxima, so the compiler can vectorize the scan
    const int64_t grain = std::max<int64_t>(1, 32768 / cols);
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = xp + r * cols;
            float* qr = qp + r * cols;
            float lane[kLanes] = {};
            bool finite = true;
            int64_t j = 0;
            for (; j + kLanes <= cols; j += kLanes)
                for (int64_t l = 0; l < kLanes; ++l) {
                    const float a = std::fabs(xr[j + l]);
                    finite &= a <= std::numeric_limits<float>::max();  // false for NaN and inf
                    lane[l] = a > lane[l] ? a : lane[l];
                }
            float amax = 0.0f;
            for (; j < cols; ++j) {
                const float a = std::fabs(xr[j]);
                finite &= a <= std::numeric_limits<float>::max();
                amax = a > amax ? a : amax;
            }
            for (float m : lane) amax = m > amax ? m : amax;
            if (!finite) {
                std::fill(qr, qr + cols, 0.0f);
                sp[r] = std::numeric_limits<float>::quiet_NaN();
                if (hp) std::fill(hp + r * cols, hp + (r + 1) * cols, sp[r]);
                continue;
            }
            amax = std::max(amax, kAct8Eps);
            const float qs = 127.0f / amax;
            // |x * qs| <= 127 here, where adding and subtracting 1.5 * 2^23 rounds to the nearest
            // integer, ties to even, exactly as nearbyint does (and vectorizes, unlike the call).
            constexpr float kRound = 12582912.0f;
            for (int64_t c = 0; c < cols; ++c) {
                const float v = (xr[c] * qs + kRound) - kRound;
                qr[c] = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
            }
            sp[r] = amax / 127.0f;
            if (hp) {
                float* hr = hp + r * cols;
                for (int64_t c = 0; c < cols; ++c) hr[c] = qr[c] * sp[r];
            }
        }
    });
    return {q, x_hat, scale};
}

ActInt8CudaImpl g_act_int8_cuda = nullptr;

}  // namespace

void set_act_int8_cuda_impl(ActInt8CudaImpl impl) { g_act_int8_cuda = impl; }

Int8FakeQuant act_int8_fake_quantize(const torch::Tensor& input) {
    TRIT_CHECK(input.dim() >= 1 && input.size(-1) >= 1,
               "act_int8_fake_quantize: expected a tensor whose last dimension is not empty, got ",
               input.sizes());
    if (g_act_int8_cuda && input.is_cuda() && input.scalar_type() == torch::kFloat32 &&
        input.dim() >= 1 && input.size(-1) >= 1 && input.numel() > 0) {
        torch::NoGradGuard no_grad;
        return g_act_int8_cuda(input.detach().contiguous());
    }
    if (input.is_cpu()) {
        torch::NoGradGuard no_grad;
        return quantize_rows_cpu(input.detach().to(torch::kFloat32).contiguous(), /*with_hat=*/true);
    }
    Int8Activations a = act_int8_quantize(input);
    torch::Tensor x_hat = a.q * a.scale;
    return {a.q, x_hat, a.scale};
}

ActQuantMethod parse_act_quant_method(const std::string& name) {
    if (name == "none") return ActQuantMethod::kNone;
    if (name == "int8_per_token") return ActQuantMethod::kInt8PerToken;
    if (name == "ternary") return ActQuantMethod::kTernary;
    TRIT_FAIL("unknown activation quantizer '", name, "'; known: none, int8_per_token, ternary");
}

const char* act_quant_method_name(ActQuantMethod method) {
    switch (method) {
        case ActQuantMethod::kNone: return "none";
        case ActQuantMethod::kInt8PerToken: return "int8_per_token";
        case ActQuantMethod::kTernary: return "ternary";
    }
    return "?";
}

Int8Activations act_int8_quantize(const torch::Tensor& input) {
    TRIT_CHECK(input.dim() >= 1 && input.size(-1) >= 1,
               "act_int8_quantize: expected a tensor whose last dimension is not empty, got ",
               input.sizes());
    torch::NoGradGuard no_grad;
    torch::Tensor x = input.detach().to(torch::kFloat32);
    if (x.is_cpu()) {
        Int8FakeQuant f = quantize_rows_cpu(x.contiguous(), /*with_hat=*/false);
        return {f.q, f.scale};
    }
    torch::Tensor amax = std::get<0>(x.abs().max(/*dim=*/-1, /*keepdim=*/true)).clamp_min(kAct8Eps);
    // Exact IEEE divisions, as in the reference: 127 / amax, then amax / 127. Both operands are
    // tensors because ATen may turn division by a scalar into multiplication by its reciprocal.
    torch::Tensor k127 = torch::full_like(amax, 127.0f);
    torch::Tensor q = (x * (k127 / amax)).round_().clamp_(-128, 127);
    return {q, amax / k127};
}

torch::Tensor act_fake_quant(const torch::Tensor& x, ActQuantMethod method) {
    if (method == ActQuantMethod::kNone) return x;
    TRIT_CHECK(method == ActQuantMethod::kInt8PerToken,
               "act_fake_quant: ternary activations have a learnable scale; they are quantized by "
               "an ActLevelQuantizer module (core/bwta_quant.h)");
    return Int8Ste::apply(x).to(x.scalar_type());
}

}  // namespace trit
