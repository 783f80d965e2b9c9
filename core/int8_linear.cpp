// Integer-exact forward of an int8-activation quantized linear: see int8_linear.h.
#include "core/int8_linear.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>

#include "core/act_quant.h"
#include "core/error.h"

namespace trit {

QuantizedWeightsEff forward_weights(const torch::Tensor& weight, const WeightQuantSpec& spec,
                                    const QuantizedWeights* frozen) {
    if (!frozen) return quantize_weight_eff(weight, spec);
    QuantizedWeightsEff w;
    w.w = {frozen->q.to(weight.device()), frozen->scale.to(weight.device())};
    w.w_eff = dequantize(w.w, spec);
    return w;
}

torch::Tensor integer_linear_forward(const torch::Tensor& xq, const torch::Tensor& sx,
                                     const QuantizedWeights& w, const WeightQuantSpec& spec,
                                     int64_t x_max) {
    const int64_t m = xq.size(0), k = xq.size(1), n = w.q.size(0);
    const int64_t levels = weight_quant_levels(spec);
    const int64_t group = spec.granularity == ScaleGranularity::kGroup ? spec.group_size : k;
    TRIT_CHECK(static_cast<double>(x_max) * static_cast<double>(levels) * static_cast<double>(std::min(group, k)) < kExactFloatSum,
               "quantized linear: a group of ", std::min(group, k), " inputs with codes up to ", x_max,
               " and weight codes up to ", levels, " can exceed 2^24, where float sums stop being exact");
    torch::Tensor s;
    if (spec.granularity != ScaleGranularity::kGroup) {
        s = torch::matmul(xq, w.q.t());     // (m, n), exact
        s.mul_(w.scale.reshape({1, -1}));  // tensor (1, 1) or channel (n, 1) -> (1, n|1)
    } else {
        const int64_t g = spec.group_size, groups = (k + g - 1) / g, pad = groups * g - k;
        torch::Tensor xg = (pad ? torch::constant_pad_nd(xq, {0, pad}) : xq).reshape({m, groups, g});
        torch::Tensor wg = (pad ? torch::constant_pad_nd(w.q, {0, pad}) : w.q).reshape({n, groups, g});
        torch::Tensor acc = torch::bmm(xg.transpose(0, 1), wg.permute({1, 2, 0}));  // (groups, m, n)
        s = torch::zeros({m, n}, xq.options());
        for (int64_t i = 0; i < groups; ++i) s.add_(acc[i] * w.scale.select(1, i).reshape({1, n}));
    }
    return s.mul_(sx);  // sx (m, 1)
}

namespace {

struct Int8QuantLinearFn : torch::autograd::Function<Int8QuantLinearFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias,
                                 const WeightQuantSpec* spec, const QuantizedWeights* frozen) {
        // Under autocast (trainer --precision bf16) the integer matmuls stay in float32: in
        // bfloat16 their sums would round and the forward would no longer be exact.
        c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
        const int64_t k = x.size(-1);
        torch::Tensor x2 = x.reshape({-1, k}).to(torch::kFloat32);
        const Int8FakeQuant a = act_int8_fake_quantize(x2);
        const QuantizedWeightsEff w = forward_weights(weight, *spec, frozen);
        torch::Tensor y = integer_linear_forward(a.q, a.scale, w.w, *spec, 128);
        const bool has_bias = bias.numel() > 0;  // see int8_quant_linear
        if (has_bias) y.add_(bias);
        ctx->save_for_backward({a.x_hat, w.w_eff});
        ctx->saved_data["has_bias"] = has_bias;
        ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
        std::vector<int64_t> out_shape = x.sizes().vec();
        out_shape.back() = weight.size(0);
        return y.reshape(out_shape).to(x.scalar_type());
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& x_hat = saved[0];  // (m, k)
        const torch::Tensor& w_eff = saved[1];  // (n, k)
        // The incoming gradient is in the output's dtype (bfloat16 after a bf16 input): float32
        // like the saved operands, and the input's gradient back in the input's dtype.
        torch::Tensor g = grads[0].reshape({-1, w_eff.size(0)}).to(torch::kFloat32);
        const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
        std::vector<int64_t> x_shape = grads[0].sizes().vec();
        x_shape.back() = w_eff.size(1);
        // Like linear's backward, skip what no one asked for (the first layer's input is data).
        torch::Tensor grad_x, grad_w, grad_b;
        if (ctx->needs_input_grad(0)) grad_x = torch::matmul(g, w_eff).reshape(x_shape).to(x_dtype);
        if (ctx->needs_input_grad(1)) grad_w = torch::matmul(g.t(), x_hat);
        if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) grad_b = g.sum(0);
        // (grad_w and grad_b are float32 like the parameters.)
        return {grad_x, grad_w, grad_b, torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor int8_quant_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, const WeightQuantSpec& spec,
                                const QuantizedWeights* frozen) {
    TRIT_CHECK(spec.method != WeightQuantMethod::kNone,
               "int8_quant_linear: needs a weight quantizer (method none is a float linear)");
    // LibTorch 1.13's Function::apply fails on an undefined tensor argument ("tensor does not have
    // a device"): a layer without bias passes an empty one (a real bias has >= 1 element).
    const torch::Tensor b = bias.defined() ? bias : torch::empty({0}, weight.options());
    return Int8QuantLinearFn::apply(x, weight, b, &spec, frozen);
}

}  // namespace trit
