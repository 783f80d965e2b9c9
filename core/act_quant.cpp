// Activation fake-quantizers: see act_quant.h.
#include "core/act_quant.h"

#include <torch/autograd.h>

#include "core/act_int8.h"
#include "core/error.h"

namespace trit {
namespace {

struct Int8Ste : torch::autograd::Function<Int8Ste> {
    static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) {
        Int8Activations a = act_int8_quantize(x);
        return a.q * a.scale;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list grad) {
        return {grad[0]};
    }
};

}  // namespace

ActQuantMethod parse_act_quant_method(const std::string& name) {
    if (name == "none") return ActQuantMethod::kNone;
    if (name == "int8_per_token") return ActQuantMethod::kInt8PerToken;
    TRIT_FAIL("unknown activation quantizer '", name, "'; known: none, int8_per_token");
}

Int8Activations act_int8_quantize(const torch::Tensor& input) {
    TRIT_CHECK(input.dim() >= 1 && input.size(-1) >= 1,
               "act_int8_quantize: expected a tensor whose last dimension is not empty, got ",
               input.sizes());
    torch::NoGradGuard no_grad;
    torch::Tensor x = input.detach().to(torch::kFloat32);
    torch::Tensor amax = std::get<0>(x.abs().max(/*dim=*/-1, /*keepdim=*/true)).clamp_min(kAct8Eps);
    // Exact IEEE divisions, as in the reference: 127 / amax, then amax / 127. Both operands are
    // tensors because ATen may turn division by a scalar into multiplication by its reciprocal.
    torch::Tensor k127 = torch::full_like(amax, 127.0f);
    torch::Tensor q = (x * (k127 / amax)).round_().clamp_(-128, 127);
    return {q, amax / k127};
}

torch::Tensor act_fake_quant(const torch::Tensor& x, ActQuantMethod method) {
    if (method == ActQuantMethod::kNone) return x;
    return Int8Ste::apply(x).to(x.scalar_type());
}

}  // namespace trit
