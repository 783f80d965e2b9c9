// Layer selection by targets / ignore: see layer_selection.h.
#include "quantizers/layer_selection.h"

#include <algorithm>
#include <regex>

#include "core/error.h"

namespace trit::quantizers {

bool pattern_matches(const std::string& pattern, const std::string& name) {
    if (pattern.rfind("re:", 0) == 0) return std::regex_match(name, std::regex(pattern.substr(3)));
    return pattern == name;
}

LinearQuantSpec linear_quant_spec(const QuantizationConfig& c) {
    LinearQuantSpec spec;
    spec.weight.method = parse_weight_quant_method(c.weight.method);
    spec.weight.granularity = parse_scale_granularity(c.weight.granularity);
    spec.weight.group_size = c.weight.group_size;
    spec.weight.threshold = c.weight.threshold;
    spec.weight.depth = c.weight.depth;
    spec.activation = parse_act_quant_method(c.activation.method);
    return spec;
}

std::vector<std::string> selected_layers(torch::nn::Module& model, const std::string& output_layer,
                                         const QuantizationConfig& config) {
    auto layers = quant_linears(model);
    std::string names;
    for (const auto& l : layers) names += (names.empty() ? "" : ", ") + l.first;
    auto check_used = [&](const std::vector<std::string>& patterns, const char* key) {
        for (const auto& p : patterns) {
            bool used = std::any_of(layers.begin(), layers.end(),
                                    [&](const auto& l) { return pattern_matches(p, l.first); });
            TRIT_CHECK(used, "quantization.", key, ": '", p, "' selects no layer; the model's layers are: ",
                       names);
        }
    };
    check_used(config.targets, "targets");
    check_used(config.ignore, "ignore");

    std::vector<std::string> selected;
    for (const auto& l : layers) {
        const std::string& name = l.first;
        bool take;
        if (name == output_layer) {  // only by its exact name
            take = std::find(config.targets.begin(), config.targets.end(), name) != config.targets.end();
        } else {
            take = std::any_of(config.targets.begin(), config.targets.end(),
                               [&](const std::string& p) { return pattern_matches(p, name); });
        }
        take = take && std::none_of(config.ignore.begin(), config.ignore.end(),
                                    [&](const std::string& p) { return pattern_matches(p, name); });
        if (take) selected.push_back(name);
    }
    return selected;
}

std::vector<std::string> apply_quantization(torch::nn::Module& model, const std::string& output_layer,
                                            const QuantizationConfig& config) {
    const LinearQuantSpec spec = linear_quant_spec(config);
    const std::vector<std::string> selected = selected_layers(model, output_layer, config);
    std::vector<std::string> quantized;
    for (auto& [name, layer] : quant_linears(model)) {
        const bool take = spec.enabled() && std::find(selected.begin(), selected.end(), name) != selected.end();
        layer->set_quant(take ? spec : LinearQuantSpec{});
        if (take) quantized.push_back(name);
    }
    return quantized;
}

}  // namespace trit::quantizers
