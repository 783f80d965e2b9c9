// CPU reference runtime: see runtime_cpu.h.
#include "exporters/runtime_cpu.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/act_int8.h"
#include "core/error.h"
#include "core/quant_linear.h"
#include "exporters/formats/act_levels.h"

namespace trit::exporters {
namespace {

int64_t groups_of(const PackedLayer& l) {
    return l.spec.granularity == ScaleGranularity::kGroup ? (l.in + l.spec.group_size - 1) / l.spec.group_size : 1;
}

int64_t group_len(const PackedLayer& l) {
    return l.spec.granularity == ScaleGranularity::kGroup ? l.spec.group_size : l.in;
}

// s_w for output j and group g.
float weight_scale(const PackedLayer& l, int64_t j, int64_t g) {
    switch (l.spec.granularity) {
        case ScaleGranularity::kTensor: return l.scale[0];
        case ScaleGranularity::kChannel: return l.scale[j];
        case ScaleGranularity::kGroup: break;
    }
    return l.scale[j * l.scale_cols + g];
}

// codes x scales: (out, in) float.
torch::Tensor dequantized_weight(const PackedLayer& l) {
    std::vector<int8_t> codes(static_cast<size_t>(l.out * l.in));
    unpack_codes(l.format, l.packed, l.out, l.in, codes.data());
    torch::Tensor w = torch::empty({l.out, l.in}, torch::kFloat32);
    float* wp = w.data_ptr<float>();
    const int64_t group = group_len(l);
    for (int64_t j = 0; j < l.out; ++j)
        for (int64_t k = 0; k < l.in; ++k)
            wp[j * l.in + k] =
                weight_scale(l, j, k / group) * static_cast<float>(codes[j * l.in + k]);
    return w;
}

}  // namespace

std::vector<int32_t> layer_accumulators(const PackedLayer& l, const int8_t* x_codes, int64_t m) {
    TRIT_CHECK(l.format.packed(), "layer_accumulators: layer ", l.name, " is float");
    std::vector<int32_t> acc(static_cast<size_t>(m * l.out * groups_of(l)));
    gemm_int8(l.format, l.packed, l.out, l.in, x_codes, m, group_len(l), acc.data());
    return acc;
}

torch::Tensor layer_forward_cpu(const PackedLayer& l, const torch::Tensor& input) {
    TRIT_CHECK(input.dim() == 2 && input.size(1) == l.in, "layer ", l.name, ": expected input (m, ",
               l.in, "), got ", input.sizes());
    torch::Tensor x = input.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t m = x.size(0), n = l.out, G = groups_of(l);
    torch::Tensor y = torch::empty({m, n}, torch::kFloat32);
    float* yp = y.data_ptr<float>();
    if (!l.format.packed()) {
        torch::Tensor w = torch::from_blob(const_cast<float*>(l.weight.data()), {n, l.in}, torch::kFloat32);
        torch::Tensor b = l.bias.empty() ? torch::Tensor()
                                         : torch::from_blob(const_cast<float*>(l.bias.data()), {n}, torch::kFloat32);
        return torch::linear(x, w, b);
    }
    if (l.activation == ActQuantMethod::kTernary) {
        // One scale for every row: codes by act_levels (levels 3, or bool), the exact product, the
        // same epilogue as int8. The training forward turns a NaN input into a NaN code, hence a
        // NaN output row; act_levels gives NaN code 0, so such rows are set to NaN here.
        if (m == 0) return y;
        const float* xp = x.data_ptr<float>();
        std::vector<int8_t> q(static_cast<size_t>(m * l.in));
        if (l.act.mode == ActLevelMode::kBool)
            formats::act_bool_quantize_ref(xp, m, l.in, l.act.scale, q.data());
        else
            formats::act_levels_quantize_ref(xp, m, l.in, l.act.scale, /*levels=*/3, q.data());
        const std::vector<int32_t> acc = layer_accumulators(l, q.data(), m);
        for (int64_t i = 0; i < m; ++i) {
            const bool nan_row = std::any_of(xp + i * l.in, xp + (i + 1) * l.in, [](float v) { return std::isnan(v); });
            for (int64_t j = 0; j < n; ++j) {
                const int32_t* a = acc.data() + (i * n + j) * G;
                float s = 0.0f;
                for (int64_t g = 0; g < G; ++g) s += weight_scale(l, j, g) * static_cast<float>(a[g]);
                yp[i * n + j] = nan_row ? std::numeric_limits<float>::quiet_NaN()
                                        : s * l.act.scale + (l.bias.empty() ? 0.0f : l.bias[j]);
            }
        }
        return y;
    }
    if (l.activation == ActQuantMethod::kInt8PerToken) {
        std::vector<int8_t> q(static_cast<size_t>(m * l.in));
        std::vector<float> sx(static_cast<size_t>(m));
        act_int8_quantize_ref(x.data_ptr<float>(), m, l.in, q.data(), sx.data());
        const std::vector<int32_t> acc = layer_accumulators(l, q.data(), m);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const int32_t* a = acc.data() + (i * n + j) * G;
                float s = 0.0f;
                for (int64_t g = 0; g < G; ++g) s += weight_scale(l, j, g) * static_cast<float>(a[g]);
                yp[i * n + j] = s * sx[i] + (l.bias.empty() ? 0.0f : l.bias[j]);
            }
        return y;
    }
    std::vector<float> acc(static_cast<size_t>(m * n * G));
    gemm_f32(l.format, l.packed, n, l.in, x.data_ptr<float>(), m, group_len(l), acc.data());
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            const float* a = acc.data() + (i * n + j) * G;
            float s = 0.0f;
            for (int64_t g = 0; g < G; ++g) s += weight_scale(l, j, g) * a[g];
            yp[i * n + j] = s + (l.bias.empty() ? 0.0f : l.bias[j]);
        }
    return y;
}

std::shared_ptr<Model> packed_module_cpu(const PackedModel& packed) {
    std::shared_ptr<Model> model = make_model(packed.recipe.model);
    load_float_values(*model, packed);
    torch::NoGradGuard no_grad;
    for (auto& [name, layer] : quant_linears(*model)) {
        auto p = std::make_shared<const PackedLayer>(packed.layer(name));
        if (!p->format.packed()) continue;
        layer->set_quant(LinearQuantSpec{});
        layer->weight.copy_(dequantized_weight(*p));
        if (layer->bias.defined())
            layer->bias.copy_(
                torch::from_blob(const_cast<float*>(p->bias.data()), {p->out}, torch::kFloat32));
        layer->set_forward_override([p](const torch::Tensor& x) {
            std::vector<int64_t> shape = x.sizes().vec();
            shape.back() = p->out;
            return layer_forward_cpu(*p, x.reshape({-1, p->in})).reshape(shape);
        });
    }
    model->to(torch::kCPU);
    model->eval();
    return model;
}

torch::Tensor forward_cpu(const PackedModel& model, const torch::Tensor& input) {
    const ModelConfig& c = model.recipe.model;
    torch::NoGradGuard no_grad;
    if (c.type != "mlp") return packed_module_cpu(model)->forward(input);
    torch::Tensor x = input;
    for (size_t i = 0; i < model.layers.size(); ++i) {
        x = layer_forward_cpu(model.layers[i], x);
        if (i + 1 < model.layers.size()) x = c.activation == "gelu" ? torch::gelu(x) : torch::relu(x);
    }
    return x;
}

}  // namespace trit::exporters
