// PackedModel helpers: see packed_model.h.
#include "exporters/packed_model.h"

#include <torch/torch.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/quant_linear.h"
#include "core/transformer.h"

namespace trit::exporters {

const char* float_dtype_name(FloatDType d) {
    switch (d) {
        case FloatDType::kF32: return "float32";
        case FloatDType::kF16: return "float16";
        case FloatDType::kBF16: return "bfloat16";
    }
    return "?";
}

FloatDType parse_float_dtype(const std::string& name) {
    for (auto d : {FloatDType::kF32, FloatDType::kF16, FloatDType::kBF16})
        if (name == float_dtype_name(d)) return d;
    TRIT_FAIL("unknown float dtype '", name, "'; known: float32, float16, bfloat16");
}

ActGrid exported_act_grid(ActLevelMode mode) {
    return mode == ActLevelMode::kBool ? ActGrid{0, 1, false} : ActGrid{-1, 1, false};
}

std::string describe_act_quantizer(const PackedActQuantizer& q) {
    return std::string(q.mode == ActLevelMode::kBool ? "bool " : "ternary ") + describe_grid(q.grid);
}

ActLevelQuantizer make_act_quantizer(const PackedActQuantizer& q) {
    ActLevelQuantizer out{ActLevelQuantizerOptions(q.mode)};
    out->set_grid(q.grid);
    out->set_scale(static_cast<double>(q.scale));  // a float32 value: exact in the float32 parameter
    return out;
}

bool PackedModel::has_level_activations() const {
    if (!act_quantizers.empty()) return true;
    for (const auto& l : layers)
        if (l.activation == ActQuantMethod::kTernary) return true;
    return false;
}

int64_t PackedModel::file_version() const {
    if (architecture == ModelArchitecture::kLinears) return 3;
    return has_level_activations() ? 2 : 1;
}

void require_runnable(const PackedModel& model, const std::string& what, const std::string& source) {
    TRIT_CHECK(model.architecture == ModelArchitecture::kRecipe, what, ": ", source,
               " holds the linear layers of a foreign model (quantized by trit ptq from ",
               model.ptq.source.empty() ? std::string("a safetensors file") : model.ptq.source,
               ") without an architecture to run; check its layers with trit validate ", source,
               " --against <the safetensors file>, see them with trit inspect");
}

int64_t PackedLayer::weight_bytes() const {
    if (!format.packed()) return out * in * (weight_dtype == FloatDType::kF32 ? 4 : 2);
    int64_t bytes = scale_bytes();
    for (const auto& a : packed) bytes += static_cast<int64_t>(a.size());
    return bytes;
}

const PackedLayer& PackedModel::layer(const std::string& name) const {
    for (const auto& l : layers)
        if (l.name == name) return l;
    TRIT_FAIL("packed model has no layer '", name, "'");
}

int64_t PackedTensor::numel() const {
    int64_t n = 1;
    for (int64_t s : shape)
        n *= s;
    return n;
}

const PackedTensor& PackedModel::tensor(const std::string& name) const {
    for (const auto& t : tensors)
        if (t.name == name) return t;
    TRIT_FAIL("packed model has no tensor '", name, "'");
}

std::pair<int64_t, int64_t> scale_shape(const WeightQuantSpec& spec, int64_t out, int64_t in) {
    switch (spec.granularity) {
        case ScaleGranularity::kTensor: return {1, 1};
        case ScaleGranularity::kChannel: return {out, 1};
        case ScaleGranularity::kGroup: break;
    }
    return {out, (in + spec.group_size - 1) / spec.group_size};
}

std::vector<std::pair<std::string, torch::Tensor>> model_tensors(torch::nn::Module& model) {
    // A QuantLinear's own tensors are named "<layer>.<tensor>"; an ActLevelQuantizer (a layer's
    // "<layer>.act", an attention point's "<point>.quant") has no children, so its tensors are
    // "<quantizer>.<tensor>".
    std::set<std::string> owners;
    for (auto& [name, layer] : quant_linears(model))
        owners.insert(name);
    for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false))
        if (std::dynamic_pointer_cast<ActLevelQuantizerImpl>(item.value())) owners.insert(item.key());
    auto owned = [&](const std::string& name) {
        const size_t dot = name.rfind('.');
        return dot != std::string::npos && owners.count(name.substr(0, dot)) > 0;
    };
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : model.named_parameters(/*recurse=*/true))
        if (!owned(p.key())) out.emplace_back(p.key(), p.value());
    for (const auto& b : model.named_buffers(/*recurse=*/true))
        if (!owned(b.key())) out.emplace_back(b.key(), b.value());
    return out;
}

void load_float_values(torch::nn::Module& model, const PackedModel& packed) {
    torch::NoGradGuard no_grad;
    auto host = [](const std::vector<float>& v, at::IntArrayRef shape) {
        return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32);
    };
    auto tensors = model_tensors(model);
    TRIT_CHECK(tensors.size() == packed.tensors.size(), "packed model: ", packed.tensors.size(),
               " tensors, the ", packed.recipe.model.type, " model has ", tensors.size());
    for (auto& [name, t] : tensors) {
        const PackedTensor& p = packed.tensor(name);
        TRIT_CHECK(t.sizes() == at::IntArrayRef(p.shape), "packed model: tensor ", name,
                   " has shape ", at::IntArrayRef(p.shape), ", the model expects ", t.sizes());
        TRIT_CHECK(static_cast<int64_t>(p.values.size()) == p.numel(), "packed model: tensor ",
                   name, " holds ", p.values.size(), " values for shape ", t.sizes());
        t.copy_(host(p.values, p.shape));
    }
    // The attention quantizers: the file's, on every point it names, replacing the model's own.
    auto points = act_points(model);
    std::set<std::string> point_names;
    for (auto& [name, point] : points)
        point_names.insert(name);
    for (const auto& q : packed.act_quantizers)
        TRIT_CHECK(point_names.count(q.name), "packed model: activation quantizer ", q.name,
                   " names no attention point of the ", packed.recipe.model.type, " model");
    const auto params = model.parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params.front().device();
    for (auto& [name, point] : points) {
        const auto it = std::find_if(packed.act_quantizers.begin(), packed.act_quantizers.end(),
                                     [&](const PackedActQuantizer& q) { return q.name == name; });
        if (it == packed.act_quantizers.end()) {
            TRIT_CHECK(!point->quant, "packed model: the model quantizes ", name,
                       " (quantization.attention), the file has no quantizer for it");
            continue;
        }
        ActLevelQuantizer q = make_act_quantizer(*it);
        q->to(device);
        point->set_quantizer(q);
    }
    for (auto& [name, layer] : quant_linears(model)) {
        const PackedLayer& p = packed.layer(name);
        TRIT_CHECK(p.out == layer->options.out_features() && p.in == layer->options.in_features(),
                   "packed model: layer ", name, " has shape (", p.out, ", ", p.in,
                   "), the model expects (", layer->options.out_features(), ", ",
                   layer->options.in_features(), ")");
        TRIT_CHECK(
            p.bias.empty() != layer->bias.defined(), "packed model: layer ", name,
            p.bias.empty() ? " has no bias, the model has one" : " has a bias, the model has none");
        if (p.format.packed()) continue;
        TRIT_CHECK(static_cast<int64_t>(p.weight.size()) == p.out * p.in &&
                       (p.bias.empty() || static_cast<int64_t>(p.bias.size()) == p.out),
                   "packed model: float layer ", name, " holds ", p.weight.size(), " weights and ",
                   p.bias.size(), " biases for shape (", p.out, ", ", p.in, ")");
        layer->set_quant(LinearQuantSpec{});
        layer->weight.copy_(host(p.weight, {p.out, p.in}));
        if (layer->bias.defined()) layer->bias.copy_(host(p.bias, {p.out}));
    }
}

}  // namespace trit::exporters
