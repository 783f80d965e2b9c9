// The integer-exact BWTA linear: see bwta_linear.h.
#include "core/bwta_linear.h"

#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>

#include "core/error.h"
#include "core/int8_linear.h"

namespace trit {
namespace {

struct BwtaLinearFn : torch::autograd::Function<BwtaLinearFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 const torch::Tensor& scale, const torch::Tensor& weight,
                                 const torch::Tensor& bias, const ActGrid* grid, double grad_scale,
                                 const WeightQuantSpec* spec, const QuantizedWeights* frozen) {
        // As in int8_quant_linear: the integer products stay float32 under autocast.
        c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
        const int64_t k = x.size(-1);
        const torch::Tensor x2 = x.reshape({-1, k}).to(torch::kFloat32);
        const torch::Tensor s = scale.detach().to(x2.device(), torch::kFloat32);
        const torch::Tensor codes = act_grid_codes(x2, s, *grid);
        const QuantizedWeightsEff w = forward_weights(weight, *spec, frozen);
        torch::Tensor y = integer_linear_forward(codes, s, w.w, *spec, grid->q_max());
        const bool has_bias = bias.numel() > 0;  // see int8_quant_linear
        if (has_bias) y.add_(bias);
        ctx->save_for_backward({x2, s, codes, w.w_eff});
        ctx->saved_data["has_bias"] = has_bias;
        ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
        ctx->saved_data["lo"] = grid->lo;
        ctx->saved_data["hi"] = grid->hi;
        ctx->saved_data["binary"] = grid->binary;
        ctx->saved_data["grad_scale"] = grad_scale;
        std::vector<int64_t> out_shape = x.sizes().vec();
        out_shape.back() = weight.size(0);
        return y.reshape(out_shape).to(x.scalar_type());
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& x2 = saved[0];     // (m, k)
        const torch::Tensor& s = saved[1];      // 0-dim
        const torch::Tensor& codes = saved[2];  // (m, k)
        const torch::Tensor& w_eff = saved[3];  // (n, k)
        const ActGrid grid{ctx->saved_data["lo"].toInt(), ctx->saved_data["hi"].toInt(),
                           ctx->saved_data["binary"].toBool()};
        torch::Tensor g = grads[0].reshape({-1, w_eff.size(0)}).to(torch::kFloat32);
        const auto x_dtype = static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt());
        std::vector<int64_t> x_shape = grads[0].sizes().vec();
        x_shape.back() = w_eff.size(1);
        torch::Tensor grad_x, grad_s, grad_w, grad_b;
        if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1)) {
            const torch::Tensor grad_a_hat = torch::matmul(g, w_eff);  // dL/dA_hat (m, k)
            act_grid_backward(grad_a_hat, x2, s, grid, ctx->saved_data["grad_scale"].toDouble(),
                              ctx->needs_input_grad(0) ? &grad_x : nullptr,
                              ctx->needs_input_grad(1) ? &grad_s : nullptr);
            if (grad_x.defined()) grad_x = grad_x.reshape(x_shape).to(x_dtype);
        }
        if (ctx->needs_input_grad(2)) grad_w = torch::matmul(g.t(), codes * s);
        if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(3)) grad_b = g.sum(0);
        return {grad_x,          grad_s,          grad_w,          grad_b,
                torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor bwta_linear(const torch::Tensor& x, const torch::Tensor& scale, const ActGrid& grid,
                          double grad_scale, const torch::Tensor& weight, const torch::Tensor& bias,
                          const WeightQuantSpec& spec, const QuantizedWeights* frozen) {
    TRIT_CHECK(spec.method != WeightQuantMethod::kNone,
               "bwta_linear: needs a weight quantizer (method none is a float linear)");
    TRIT_CHECK(scale.defined() && scale.dim() == 0, "bwta_linear: expected a 0-dim activation scale");
    const torch::Tensor b = bias.defined() ? bias : torch::empty({0}, weight.options());
    return BwtaLinearFn::apply(x, scale, weight, b, &grid, grad_scale, &spec, frozen);
}

}  // namespace trit
