// QuantLinear: see quant_linear.h.
#include "core/quant_linear.h"

#include <torch/nn/init.h>

#include <cmath>

#include "core/error.h"
#include "core/bwta_linear.h"
#include "core/int8_linear.h"

namespace trit {

QuantLinearImpl::QuantLinearImpl(int64_t in_features, int64_t out_features, bool bias)
    : QuantLinearImpl(torch::nn::LinearOptions(in_features, out_features).bias(bias)) {}

QuantLinearImpl::QuantLinearImpl(const torch::nn::LinearOptions& options_) : options(options_) {
    reset();
}

void QuantLinearImpl::reset() {
    TRIT_CHECK(options.in_features() >= 1 && options.out_features() >= 1,
               "QuantLinear: in_features and out_features must be >= 1, got ",
               options.in_features(), " and ", options.out_features());
    weight = register_parameter("weight",
                                torch::empty({options.out_features(), options.in_features()}));
    if (options.bias()) {
        bias = register_parameter("bias", torch::empty(options.out_features()));
    } else {
        bias = register_parameter("bias", {}, /*requires_grad=*/false);
    }
    reset_parameters();
    // A clone (Cloneable::clone resets a copy, then copies the buffers by name) needs the
    // same buffers: a 2:4 layer's copy registers its own mask24.
    if (mask24.defined()) {
        mask24 = register_buffer(
            "mask24", torch::ones({options.out_features(), options.in_features()}, torch::kBool));
        attach_mask();
    }
}

void QuantLinearImpl::reset_parameters() {
    // torch::nn::Linear's initialisation, so swapping the module changes nothing at step 0.
    torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
    if (bias.defined()) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
        torch::nn::init::uniform_(bias, -bound, bound);
    }
}

void QuantLinearImpl::set_quant(const LinearQuantSpec& spec) {
    if (spec.activation == ActQuantMethod::kTernary) {
        ActLevelQuantizer q{ActLevelQuantizerOptions(spec.act_mode)};
        q->set_grid(act_grid(spec.act_levels, spec.act_mode));
        q->to(weight.device());
        act = act ? replace_module("act", q) : register_module("act", q);
    } else if (act) {
        TRIT_FAIL("QuantLinear::set_quant: the layer has a ternary activation quantizer; it cannot "
                  "be switched to another activation method");
    }
    spec_ = spec;
    attach_mask();
}

void QuantLinearImpl::attach_mask() {
    const WeightQuantMethod m = spec_.weight.method;
    const bool ternary =
        m == WeightQuantMethod::kAbsmean || m == WeightQuantMethod::kAbsmaxThreshold;
    spec_.weight.mask = mask24.defined() && ternary ? mask24 : torch::Tensor();
}

void QuantLinearImpl::enable_mask24() {
    const WeightQuantMethod m = spec_.weight.method;
    TRIT_CHECK(m == WeightQuantMethod::kAbsmean || m == WeightQuantMethod::kAbsmaxThreshold,
               "QuantLinear::enable_mask24: a 2:4 mask needs a ternary weight quantizer (absmean, "
               "absmax_threshold), the layer has ",
               weight_quant_method_name(m));
    torch::Tensor m24 = sparse24_mask(weight, spec_.weight);
    if (mask24.defined()) {
        torch::NoGradGuard no_grad;
        mask24.copy_(m24);
    } else {
        mask24 = register_buffer("mask24", m24);
    }
    spec_.weight.sparse24 = true;
    attach_mask();
}

torch::Tensor QuantLinearImpl::recompute_mask24() {
    TRIT_CHECK(mask24.defined(),
               "QuantLinear::recompute_mask24: the layer has no 2:4 mask (enable_mask24 first)");
    torch::NoGradGuard no_grad;
    torch::Tensor m24 = sparse24_mask(weight, spec_.weight);
    torch::Tensor changed = m24.ne(mask24).sum();
    mask24.copy_(m24);
    return changed;
}

void QuantLinearImpl::freeze_weights(const QuantizedWeights& w) {
    if (!w.q.defined()) {
        frozen_ = {};
        return;
    }
    TRIT_CHECK(spec_.weight.method != WeightQuantMethod::kNone,
               "QuantLinear::freeze_weights: the layer has no weight quantizer (set_quant first)");
    TRIT_CHECK(w.q.dim() == 2 && w.q.size(0) == options.out_features() && w.q.size(1) == options.in_features(),
               "QuantLinear::freeze_weights: codes ", w.q.sizes(), " do not match the layer (",
               options.out_features(), ", ", options.in_features(), ")");
    frozen_ = {w.q.to(torch::kFloat32), w.scale.to(torch::kFloat32)};
}

torch::Tensor QuantLinearImpl::effective_weight() {
    if (weights_frozen()) {
        const QuantizedWeights f{frozen_.q.to(weight.device()), frozen_.scale.to(weight.device())};
        // The latent weight's straight-through gradient, the frozen values forward.
        return dequantize(f, spec_.weight) + (weight - weight.detach());
    }
    return weight_fake_quant(weight, spec_.weight);
}

torch::Tensor QuantLinearImpl::forward(const torch::Tensor& x) {
    TRIT_CHECK(x.dim() >= 1 && x.size(-1) == options.in_features(), "QuantLinear: expected input (..., ",
               options.in_features(), "), got ", x.sizes());
    if (override_) return override_(x);
    // int8 activations with quantized weights: the integer-exact forward packed inference matches.
    if (spec_.activation == ActQuantMethod::kInt8PerToken && spec_.weight.method != WeightQuantMethod::kNone)
        return int8_quant_linear(x, weight, bias, spec_.weight, weights_frozen() ? &frozen_ : nullptr);
    if (spec_.activation == ActQuantMethod::kTernary) {
        if (spec_.weight.method == WeightQuantMethod::kNone)
            return torch::linear(act->forward(x), weight, bias);
        act->observe(x);
        return bwta_linear(x, act->scale, act->grid(), act->grad_scale(x.numel()), weight, bias,
                           spec_.weight, weights_frozen() ? &frozen_ : nullptr);
    }
    return torch::linear(act_fake_quant(x, spec_.activation), effective_weight(), bias);
}

std::vector<std::pair<std::string, QuantLinear>> quant_linears(torch::nn::Module& module) {
    std::vector<std::pair<std::string, QuantLinear>> out;
    for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
        if (auto ql = std::dynamic_pointer_cast<QuantLinearImpl>(item.value()))
            out.emplace_back(item.key(), QuantLinear(ql));
    }
    return out;
}

}  // namespace trit
