// Weight quantizers and their straight-through fake-quant: see weight_quant.h.
#include "core/weight_quant.h"

#include <torch/autograd.h>

#include <cmath>

#include "core/error.h"

namespace trit {
namespace {

// The weight as granules: v is (R, G, g) with R x G scales (tensor: 1 x 1, channel: out x 1,
// group: out x ceil(in / g)); a partial last group is padded with zeros, `valid` masks the padding
// (undefined when there is none) and `count` holds each granule's true size.
struct Granules {
    torch::Tensor v, valid, count;
    int64_t out = 0, in = 0;
};

Granules split(const torch::Tensor& w, const WeightQuantSpec& spec) {
    Granules s;
    s.out = w.size(0);
    s.in = w.size(1);
    switch (spec.granularity) {
        case ScaleGranularity::kTensor:
            s.v = w.reshape({1, 1, s.out * s.in});
            s.count = torch::full({1, 1, 1}, static_cast<double>(s.out * s.in), w.options());
            return s;
        case ScaleGranularity::kChannel:
            s.v = w.reshape({s.out, 1, s.in});
            s.count = torch::full({1, 1, 1}, static_cast<double>(s.in), w.options());
            return s;
        case ScaleGranularity::kGroup: break;
    }
    const int64_t g = spec.group_size, groups = (s.in + g - 1) / g, pad = groups * g - s.in;
    s.v = (pad ? torch::constant_pad_nd(w, {0, pad}) : w).reshape({s.out, groups, g});
    s.count = torch::full({1, groups, 1}, static_cast<double>(g), w.options());
    if (pad) {
        s.count.index_put_({0, groups - 1, 0}, static_cast<double>(g - pad));
        s.valid = torch::ones({1, groups * g}, w.options());
        s.valid.narrow(1, s.in, pad).zero_();
        s.valid = s.valid.reshape({1, groups, g});
    }
    return s;
}

// Back from (R, G, g) to (out, in).
torch::Tensor merge(const Granules& s, const torch::Tensor& x) {
    return x.reshape({s.out, -1}).narrow(1, 0, s.in);
}

torch::Tensor masked(const Granules& s, const torch::Tensor& x) {
    return s.valid.defined() ? x * s.valid : x;
}

// The 2:4 keep mask of codes q (out, in) of weight w, bool: in every 4 consecutive inputs the two
// largest-|w| non-zero codes (ties: lower index), then zero codes by index.
torch::Tensor mask_2_of_4(const torch::Tensor& q, const torch::Tensor& w) {
    const int64_t out = q.size(0), in = q.size(1), pad = (4 - in % 4) % 4;
    torch::Tensor score = torch::where(q != 0, w.abs(), torch::full_like(w, -1.0));
    if (pad) score = torch::constant_pad_nd(score, {0, pad}, -1.0);
    score = score.reshape({out, -1, 4});
    // A stable descending sort keeps equal scores in index order.
    torch::Tensor order = std::get<1>(torch::sort(score, /*stable=*/true, /*dim=*/2, /*descending=*/true));
    torch::Tensor keep = torch::zeros_like(score).scatter_(2, order.narrow(2, 0, 2), 1.0);
    return keep.reshape({out, -1}).narrow(1, 0, in).gt(0);
}

// STE: forward returns the dequantized weight, backward the incoming gradient unchanged.
struct WeightSte : torch::autograd::Function<WeightSte> {
    static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& w,
                                 const WeightQuantSpec* spec) {
        return quantize_weight_eff(w, *spec).w_eff;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                   torch::autograd::variable_list grad) {
        return {grad[0], torch::Tensor()};
    }
};

}  // namespace

WeightQuantMethod parse_weight_quant_method(const std::string& name) {
    for (auto m : {WeightQuantMethod::kNone, WeightQuantMethod::kAbsmean,
                   WeightQuantMethod::kAbsmaxThreshold, WeightQuantMethod::kBinary,
                   WeightQuantMethod::kBalanced})
        if (name == weight_quant_method_name(m)) return m;
    TRIT_FAIL("unknown weight quantizer '", name,
              "'; known: none, absmean, absmax_threshold, binary, balanced");
}

const char* weight_quant_method_name(WeightQuantMethod m) {
    switch (m) {
        case WeightQuantMethod::kNone: return "none";
        case WeightQuantMethod::kAbsmean: return "absmean";
        case WeightQuantMethod::kAbsmaxThreshold: return "absmax_threshold";
        case WeightQuantMethod::kBinary: return "binary";
        case WeightQuantMethod::kBalanced: return "balanced";
    }
    return "?";
}

ScaleGranularity parse_scale_granularity(const std::string& name) {
    for (auto g : {ScaleGranularity::kTensor, ScaleGranularity::kChannel, ScaleGranularity::kGroup})
        if (name == scale_granularity_name(g)) return g;
    TRIT_FAIL("unknown scale granularity '", name, "'; known: tensor, channel, group");
}

const char* scale_granularity_name(ScaleGranularity g) {
    switch (g) {
        case ScaleGranularity::kTensor: return "tensor";
        case ScaleGranularity::kChannel: return "channel";
        case ScaleGranularity::kGroup: return "group";
    }
    return "?";
}

int64_t weight_quant_levels(const WeightQuantSpec& spec) {
    if (spec.method != WeightQuantMethod::kBalanced) return 1;
    int64_t p = 1;
    for (int64_t i = 0; i < spec.depth; ++i) p *= 3;
    return (p - 1) / 2;
}

torch::Tensor expand_scale(const torch::Tensor& scale, const WeightQuantSpec& spec, int64_t in) {
    if (spec.granularity != ScaleGranularity::kGroup) return scale;  // broadcasts as is
    return scale.repeat_interleave(spec.group_size, /*dim=*/1).narrow(1, 0, in);
}

QuantizedWeights quantize_weight(const torch::Tensor& weight, const WeightQuantSpec& spec) {
    TRIT_CHECK(weight.dim() == 2, "quantize_weight: expected a 2-D (out, in) weight, got ",
               weight.sizes());
    TRIT_CHECK(spec.group_size >= 1, "quantize_weight: group_size must be >= 1, got ",
               spec.group_size);
    TRIT_CHECK(spec.method != WeightQuantMethod::kNone,
               "quantize_weight: method none has no quantized form");
    TRIT_CHECK(spec.method != WeightQuantMethod::kBalanced || (spec.depth >= 1 && spec.depth <= 4),
               "quantize_weight: balanced depth must be 1..4, got ", spec.depth);
    TRIT_CHECK((!spec.sparse24 && !spec.mask.defined()) ||
                   spec.method == WeightQuantMethod::kAbsmean ||
                   spec.method == WeightQuantMethod::kAbsmaxThreshold,
               "quantize_weight: a 2:4 mask needs a ternary method (absmean, absmax_threshold)");
    torch::NoGradGuard no_grad;
    torch::Tensor w = weight.detach();
    const Granules g = split(w, spec);
    auto finish_scale = [&](torch::Tensor s) {  // (R, G)
        return spec.fp16_scales ? s.to(torch::kHalf).to(w.scalar_type()) : s;
    };
    torch::Tensor scale, q;  // scale (R, G); q (R, G, g)
    switch (spec.method) {
        case WeightQuantMethod::kAbsmean: {
            scale = finish_scale((g.v.abs().sum(2, true) / g.count).squeeze(2));
            q = (g.v / (scale.unsqueeze(2) + kAbsmeanEps)).round_().clamp_(-1, 1);
            break;
        }
        case WeightQuantMethod::kAbsmaxThreshold: {
            scale = finish_scale(std::get<0>(g.v.abs().max(/*dim=*/2)));
            torch::Tensor keep = g.v.abs() > scale.unsqueeze(2) * spec.threshold;
            q = torch::where(keep, g.v.sign(), torch::zeros_like(g.v));
            break;
        }
        case WeightQuantMethod::kBinary: {
            torch::Tensor mu = g.v.sum(2, true) / g.count;
            torch::Tensor centred = g.v - mu;
            scale = finish_scale((masked(g, centred.abs()).sum(2, true) / g.count).squeeze(2));
            q = torch::where(centred >= 0, torch::ones_like(g.v), -torch::ones_like(g.v));
            break;
        }
        case WeightQuantMethod::kBalanced: {
            const double levels = static_cast<double>(weight_quant_levels(spec));
            scale = finish_scale(std::get<0>(g.v.abs().max(/*dim=*/2)) / levels);
            torch::Tensor s = scale.unsqueeze(2);
            q = torch::where(s > 0, g.v / s, torch::zeros_like(g.v)).round_().clamp_(-levels, levels);
            break;
        }
        case WeightQuantMethod::kNone: break;
    }
    q = merge(g, q).add(0.0);  // + 0 turns round()'s -0 into +0: codes compare bit for bit
    if (spec.mask.defined()) {
        TRIT_CHECK(spec.mask.sizes() == w.sizes(), "quantize_weight: a mask ", spec.mask.sizes(),
                   " for a weight ", w.sizes());
        q = torch::where(spec.mask.to(q.device(), torch::kBool), q, torch::zeros_like(q));
    } else if (spec.sparse24) {
        q = torch::where(mask_2_of_4(q, w), q, torch::zeros_like(q));  // +0, not -0
    }
    return {q.contiguous(), scale.contiguous()};
}

torch::Tensor sparse24_mask(const torch::Tensor& weight, const WeightQuantSpec& spec) {
    TRIT_CHECK(spec.method == WeightQuantMethod::kAbsmean ||
                   spec.method == WeightQuantMethod::kAbsmaxThreshold,
               "sparse24_mask: a 2:4 mask needs a ternary method (absmean, absmax_threshold), got ",
               weight_quant_method_name(spec.method));
    WeightQuantSpec dense = spec;
    dense.sparse24 = false;
    dense.mask = torch::Tensor();
    torch::NoGradGuard no_grad;
    return mask_2_of_4(quantize_weight(weight, dense).q, weight.detach());
}

namespace {
AbsmeanChannelCudaImpl g_absmean_channel_cuda = nullptr;
}  // namespace

void set_absmean_channel_cuda_impl(AbsmeanChannelCudaImpl impl) { g_absmean_channel_cuda = impl; }

QuantizedWeightsEff quantize_weight_eff(const torch::Tensor& weight, const WeightQuantSpec& spec) {
    // The fused kernel has no 2:4 selection; a given mask is applied to its result.
    if (g_absmean_channel_cuda && weight.is_cuda() && weight.dim() == 2 && weight.numel() > 0 &&
        weight.scalar_type() == torch::kFloat32 && spec.method == WeightQuantMethod::kAbsmean &&
        spec.granularity == ScaleGranularity::kChannel && (!spec.sparse24 || spec.mask.defined())) {
        torch::NoGradGuard no_grad;
        QuantizedWeightsEff r =
            g_absmean_channel_cuda(weight.detach().contiguous(), spec.fp16_scales);
        if (spec.mask.defined()) {
            TRIT_CHECK(spec.mask.sizes() == weight.sizes(), "quantize_weight: a mask ",
                       spec.mask.sizes(), " for a weight ", weight.sizes());
            const torch::Tensor keep = spec.mask.to(weight.device(), torch::kBool);
            r.w.q = torch::where(keep, r.w.q, torch::zeros_like(r.w.q));
            r.w_eff =
                torch::where(keep, r.w_eff, torch::zeros_like(r.w_eff));  // = masked q * scale
        }
        return r;
    }
    QuantizedWeights w = quantize_weight(weight, spec);
    torch::Tensor w_eff = dequantize(w, spec);
    return {w, w_eff};
}

torch::Tensor dequantize(const QuantizedWeights& t, const WeightQuantSpec& spec) {
    return t.q * expand_scale(t.scale, spec, t.q.size(1));
}

torch::Tensor weight_fake_quant(const torch::Tensor& w, const WeightQuantSpec& spec) {
    if (spec.method == WeightQuantMethod::kNone) return w;
    return WeightSte::apply(w, &spec);
}

}  // namespace trit
