// Ternary weight quantizers and their straight-through fake-quant: see weight_quant.h.
#include "core/weight_quant.h"

#include <torch/autograd.h>

#include "core/error.h"

namespace trit {
namespace {

// Per-granule reduction of |w| (out, in): kind 0 = mean, 1 = max. A partial last group is padded
// with zeros, which leaves sums and maxima of |w| unchanged; means divide by the true count.
torch::Tensor reduce_abs(const torch::Tensor& w, const WeightQuantSpec& spec, bool max) {
    torch::Tensor a = w.abs();
    switch (spec.granularity) {
        case ScaleGranularity::kTensor:
            return (max ? a.max() : a.mean()).reshape({1, 1});
        case ScaleGranularity::kChannel:
            return max ? std::get<0>(a.max(/*dim=*/1, /*keepdim=*/true)) : a.mean(1, true);
        case ScaleGranularity::kGroup: {
            const int64_t out = w.size(0), in = w.size(1), g = spec.group_size;
            const int64_t groups = (in + g - 1) / g, pad = groups * g - in;
            torch::Tensor p = pad ? torch::constant_pad_nd(a, {0, pad}) : a;
            p = p.view({out, groups, g});
            if (max) return std::get<0>(p.max(/*dim=*/2));
            torch::Tensor s = p.sum(2);  // (out, groups)
            if (pad == 0) return s / static_cast<double>(g);
            torch::Tensor count = torch::full({1, groups}, static_cast<double>(g), s.options());
            count.index_put_({0, groups - 1}, static_cast<double>(g - pad));
            return s / count;
        }
    }
    TRIT_FAIL("unknown scale granularity");
}

// STE: forward returns the dequantized ternary weight, backward the incoming gradient unchanged.
struct TernarySte : torch::autograd::Function<TernarySte> {
    static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& w,
                                 int64_t method, int64_t granularity, int64_t group_size,
                                 double threshold) {
        WeightQuantSpec spec{static_cast<WeightQuantMethod>(method),
                             static_cast<ScaleGranularity>(granularity), group_size, threshold};
        return dequantize(ternary_quantize(w, spec), spec);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list grad) {
        return {grad[0], torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

WeightQuantMethod parse_weight_quant_method(const std::string& name) {
    if (name == "none") return WeightQuantMethod::kNone;
    if (name == "absmean") return WeightQuantMethod::kAbsmean;
    if (name == "absmax_threshold") return WeightQuantMethod::kAbsmaxThreshold;
    TRIT_FAIL("unknown weight quantizer '", name, "'; known: none, absmean, absmax_threshold");
}

ScaleGranularity parse_scale_granularity(const std::string& name) {
    if (name == "tensor") return ScaleGranularity::kTensor;
    if (name == "channel") return ScaleGranularity::kChannel;
    if (name == "group") return ScaleGranularity::kGroup;
    TRIT_FAIL("unknown scale granularity '", name, "'; known: tensor, channel, group");
}

torch::Tensor expand_scale(const torch::Tensor& scale, const WeightQuantSpec& spec, int64_t in) {
    if (spec.granularity != ScaleGranularity::kGroup) return scale;  // broadcasts as is
    return scale.repeat_interleave(spec.group_size, /*dim=*/1).narrow(1, 0, in);
}

TernaryWeights ternary_quantize(const torch::Tensor& weight, const WeightQuantSpec& spec) {
    TRIT_CHECK(weight.dim() == 2, "ternary_quantize: expected a 2-D (out, in) weight, got ",
               weight.sizes());
    TRIT_CHECK(spec.group_size >= 1, "ternary_quantize: group_size must be >= 1, got ",
               spec.group_size);
    torch::NoGradGuard no_grad;
    torch::Tensor w = weight.detach();
    const int64_t in = w.size(1);
    switch (spec.method) {
        case WeightQuantMethod::kAbsmean: {
            torch::Tensor gamma = reduce_abs(w, spec, /*max=*/false);
            torch::Tensor q = (w / (expand_scale(gamma, spec, in) + kAbsmeanEps)).round_().clamp_(-1, 1);
            return {q, gamma};
        }
        case WeightQuantMethod::kAbsmaxThreshold: {
            torch::Tensor alpha = reduce_abs(w, spec, /*max=*/true);
            torch::Tensor keep = w.abs() > expand_scale(alpha, spec, in) * spec.threshold;
            // where() rather than sign * mask: a masked negative weight must be +0, not -0.
            return {torch::where(keep, w.sign(), torch::zeros_like(w)), alpha};
        }
        case WeightQuantMethod::kNone:
            break;
    }
    TRIT_FAIL("ternary_quantize: method none has no ternary form");
}

torch::Tensor dequantize(const TernaryWeights& t, const WeightQuantSpec& spec) {
    return t.q * expand_scale(t.scale, spec, t.q.size(1));
}

torch::Tensor weight_fake_quant(const torch::Tensor& w, const WeightQuantSpec& spec) {
    if (spec.method == WeightQuantMethod::kNone) return w;
    return TernarySte::apply(w, static_cast<int64_t>(spec.method),
                             static_cast<int64_t>(spec.granularity), spec.group_size,
                             spec.threshold);
}

}  // namespace trit
