// Layer selection by targets / ignore: see layer_selection.h.
#include "quantizers/layer_selection.h"

#include <algorithm>
#include <regex>

#include "core/error.h"
#include "core/model.h"
#include "core/transformer.h"

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
    // A finished layer selection (SelectionConfig::layers) narrows the layers down to its choice.
    if (!config.select.layers.empty()) {
        for (const auto& name : config.select.layers)
            TRIT_CHECK(std::find(selected.begin(), selected.end(), name) != selected.end(),
                       "quantization.select.layers: '", name,
                       "' is not among the layers targets / ignore select (", names, ")");
        std::vector<std::string> chosen;
        for (const auto& name : selected)
            if (std::find(config.select.layers.begin(), config.select.layers.end(), name) !=
                config.select.layers.end())
                chosen.push_back(name);
        selected = chosen;
    }
    return selected;
}

std::vector<std::string> apply_quantization(torch::nn::Module& model, const std::string& output_layer,
                                            const QuantizationConfig& config, int64_t act_levels) {
    LinearQuantSpec spec = linear_quant_spec(config);
    spec.act_levels = act_levels;
    const std::vector<std::string> selected = selected_layers(model, output_layer, config);
    const auto* typed = dynamic_cast<const Model*>(&model);
    std::vector<std::string> quantized;
    for (auto& [name, layer] : quant_linears(model)) {
        const bool take = spec.enabled() && std::find(selected.begin(), selected.end(), name) != selected.end();
        LinearQuantSpec s = take ? spec : LinearQuantSpec{};
        if (take && typed && typed->input_nonnegative(name)) s.act_mode = ActLevelMode::kBool;
        layer->set_quant(s);
        if (take) quantized.push_back(name);
    }
    TRIT_CHECK(config.attention == "none" || config.attention == "ternary",
               "quantization.attention: expected none or ternary, got '", config.attention, "'");
    if (config.attention == "ternary") {
        auto points = act_points(model);
        TRIT_CHECK(!points.empty(), "quantization.attention: the model has no attention");
        for (auto& [name, point] : points) {
            const bool probs = name.size() >= 9 && name.compare(name.size() - 9, 9, "probs_act") == 0;
            const ActLevelMode mode = probs ? ActLevelMode::kBool : ActLevelMode::kSigned;
            ActLevelQuantizer q{ActLevelQuantizerOptions(mode)};
            q->set_grid(act_grid(act_levels, mode));
            point->set_quantizer(q);
        }
    }
    return quantized;
}

std::vector<std::pair<std::string, ActLevelQuantizer>> act_level_quantizers(torch::nn::Module& model) {
    std::vector<std::pair<std::string, ActLevelQuantizer>> out;
    for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
        if (auto q = std::dynamic_pointer_cast<ActLevelQuantizerImpl>(item.value()))
            out.emplace_back(item.key(), ActLevelQuantizer(q));
    }
    return out;
}

}  // namespace trit::quantizers
