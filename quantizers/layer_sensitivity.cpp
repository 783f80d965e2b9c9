// Layer sensitivities for layer selection: see layer_sensitivity.h.
#include "quantizers/layer_sensitivity.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/bwta_quant.h"
#include "core/error.h"

namespace trit::quantizers {
namespace {

struct Sums {
    double err = 0, ref = 0;
    int64_t count = 0;
    double scale = 0;  // activation scale from the first batch
    torch::Tensor wq;  // the quantized weight, computed on the first batch
};

}  // namespace

std::vector<LayerSensitivity> layer_sensitivities(Model& model, const std::vector<std::string>& candidates,
                                                  const LinearQuantSpec& spec,
                                                  const std::function<torch::Tensor(int64_t)>& batch_x,
                                                  int64_t batches) {
    TRIT_CHECK(batches >= 1, "layer selection: expected at least one calibration batch, got ", batches);
    TRIT_CHECK(spec.weight.method != WeightQuantMethod::kNone || spec.activation != ActQuantMethod::kNone,
               "layer selection: the quantization to measure is none");
    std::map<std::string, QuantLinear> layers;
    for (auto& [name, layer] : quant_linears(model)) layers.emplace(name, layer);
    std::map<std::string, Sums> sums;
    std::vector<QuantLinear> hooked;
    for (const auto& name : candidates) {
        auto it = layers.find(name);
        TRIT_CHECK(it != layers.end(), "layer selection: the model has no linear layer '", name, "'");
        TRIT_CHECK(!it->second->has_forward_override(), "layer selection: layer '", name,
                   "' already has a forward override");
        QuantLinear layer = it->second;
        const ActLevelMode mode = model.input_nonnegative(name) ? ActLevelMode::kBool : ActLevelMode::kSigned;
        Sums* s = &sums[name];
        layer->set_forward_override([layer, s, spec, mode](const torch::Tensor& x) {
            torch::Tensor y = torch::linear(x, layer->weight, layer->bias);
            torch::Tensor xq = x;
            if (spec.activation == ActQuantMethod::kTernary) {
                if (s->scale == 0) s->scale = x.abs().to(torch::kDouble).mean().item<double>();
                TRIT_CHECK(std::isfinite(s->scale) && s->scale > 0, "layer selection: layer input has mean |x| = ",
                           s->scale, "; expected a positive finite value");
                xq = act_grid_quantize(x, s->scale, act_grid(spec.act_levels, mode));
            } else {
                xq = act_fake_quant(x, spec.activation);
            }
            if (!s->wq.defined())
                s->wq = spec.weight.method == WeightQuantMethod::kNone
                            ? layer->weight
                            : quantize_weight_eff(layer->weight, spec.weight).w_eff;
            torch::Tensor yq = torch::linear(xq, s->wq, layer->bias);
            s->err += (y - yq).to(torch::kDouble).square().sum().item<double>();
            s->ref += y.to(torch::kDouble).square().sum().item<double>();
            s->count += y.numel();
            return y;
        });
        hooked.push_back(layer);
    }
    const bool was_training = model.is_training();
    try {
        torch::NoGradGuard no_grad;
        model.eval();
        for (int64_t i = 0; i < batches; ++i) model.forward(batch_x(i));
    } catch (...) {
        for (auto& l : hooked) l->set_forward_override(nullptr);
        model.train(was_training);
        throw;
    }
    for (auto& l : hooked) l->set_forward_override(nullptr);
    model.train(was_training);

    std::vector<LayerSensitivity> out;
    for (const auto& name : candidates) {
        const Sums& s = sums[name];
        TRIT_CHECK(s.count > 0, "layer selection: layer '", name, "' saw no input on the calibration batches");
        LayerSensitivity r;
        r.name = name;
        r.mse = s.err / static_cast<double>(s.count);
        r.relative_mse = s.ref > 0 ? s.err / s.ref : 0.0;
        out.push_back(r);
    }
    return out;
}

std::vector<std::string> least_sensitive(const std::vector<LayerSensitivity>& sens, double fraction,
                                         const std::string& metric) {
    TRIT_CHECK(metric == "mse" || metric == "relative_mse",
               "quantization.select.metric: expected mse or relative_mse, got '", metric, "'");
    TRIT_CHECK(fraction > 0 && fraction <= 1, "quantization.select.fraction: expected (0, 1], got ", fraction);
    TRIT_CHECK(!sens.empty(), "layer selection: no candidate layers");
    const auto n = static_cast<int64_t>(sens.size());
    const int64_t keep = std::max<int64_t>(1, std::llround(fraction * static_cast<double>(n)));
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    auto value = [&](int64_t i) { return metric == "mse" ? sens[i].mse : sens[i].relative_mse; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return value(a) < value(b); });
    order.resize(static_cast<size_t>(keep));
    std::sort(order.begin(), order.end());
    std::vector<std::string> out;
    for (int64_t i : order) out.push_back(sens[i].name);
    return out;
}

}  // namespace trit::quantizers
