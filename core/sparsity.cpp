// 2:4 sparsity masks of quantized linears: see sparsity.h.
#include "core/sparsity.h"

#include "core/error.h"

namespace trit {

std::vector<std::string> apply_sparsity(torch::nn::Module& model, const SparsityConfig& config) {
    std::vector<std::string> names;
    if (!config.enabled()) return names;
    TRIT_CHECK(config.pattern == "2:4", "sparsity.pattern: expected none or 2:4, got '",
               config.pattern, "'");
    for (auto& [name, layer] : quant_linears(model)) {
        const WeightQuantMethod m = layer->quant().weight.method;
        if (m == WeightQuantMethod::kNone) continue;
        TRIT_CHECK(m == WeightQuantMethod::kAbsmean || m == WeightQuantMethod::kAbsmaxThreshold,
                   "sparsity.pattern: 2:4 masks ternary weight codes, but layer ", name,
                   " is quantized by ", weight_quant_method_name(m),
                   "; expected quantization.weight.method absmean or absmax_threshold");
        layer->enable_mask24();
        names.push_back(name);
    }
    return names;
}

std::vector<std::pair<std::string, QuantLinear>> sparse_linears(torch::nn::Module& model) {
    std::vector<std::pair<std::string, QuantLinear>> out;
    for (auto& item : quant_linears(model))
        if (item.second->has_mask24()) out.push_back(item);
    return out;
}

MaskFlips recompute_masks(torch::nn::Module& model) {
    MaskFlips f;
    torch::Tensor changed;
    for (auto& [name, layer] : sparse_linears(model)) {
        torch::Tensor c = layer->recompute_mask24();
        changed = changed.defined() ? changed + c : c;
        f.total += layer->mask24.numel();
    }
    if (changed.defined()) f.changed = changed.item<int64_t>();
    return f;
}

CodeZeros code_zeros(torch::nn::Module& model) {
    torch::NoGradGuard no_grad;
    CodeZeros z;
    torch::Tensor dense, masked;
    for (auto& [name, layer] : sparse_linears(model)) {
        WeightQuantSpec spec = layer->quant().weight;
        spec.sparse24 = false;
        spec.mask = torch::Tensor();
        const torch::Tensor q = quantize_weight(layer->weight, spec).q;
        const torch::Tensor zero = q.eq(0);
        const torch::Tensor d = zero.sum(), m = zero.logical_or(layer->mask24.logical_not()).sum();
        dense = dense.defined() ? dense + d : d;
        masked = masked.defined() ? masked + m : m;
        z.total += q.numel();
    }
    if (dense.defined()) {
        z.dense = dense.item<int64_t>();
        z.masked = masked.item<int64_t>();
    }
    return z;
}

bool mask_recompute_due(const SparsityConfig& c, int64_t step) {
    if (!c.enabled() || c.mask != "dynamic" || step < 1) return false;
    if (c.freeze_after > 0 && step > c.freeze_after) return false;
    return step % c.recompute_every == 0;
}

int64_t mask_frozen_step(const SparsityConfig& c, int64_t total_steps) {
    if (!c.enabled()) return -1;
    if (c.mask == "frozen") return 0;
    if (c.freeze_after <= 0 || c.freeze_after >= total_steps) return -1;
    return c.freeze_after / c.recompute_every * c.recompute_every;
}

}  // namespace trit
