// Export of a trained model into packed form: see pack.h.
#include "exporters/pack.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/quant_linear.h"
#include "core/transformer.h"
#include "exporters/half.h"

namespace trit::exporters {
namespace {

bool is_ternary(WeightQuantMethod m) {
    return m == WeightQuantMethod::kAbsmean || m == WeightQuantMethod::kAbsmaxThreshold;
}

WeightQuantSpec rtn(WeightQuantMethod m) {
    WeightQuantSpec s;
    s.method = m;
    s.granularity = ScaleGranularity::kChannel;
    return s;
}

std::vector<float> to_vector(const torch::Tensor& t) {
    torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

float round_to(FloatDType d, float v) {
    switch (d) {
        case FloatDType::kF32: return v;
        case FloatDType::kF16: return f16_bits_to_f32(f32_to_f16_bits(v));
        case FloatDType::kBF16: return bf16_bits_to_f32(f32_to_bf16_bits(v));
    }
    return v;
}

// The quantizer `q` of layer or attention point `name` as stored: its grid must be the last SMSQ
// stage's ternary [-1, 1] (signed) or bool [0, 1], its scale initialised, positive and finite.
PackedActQuantizer exported_quantizer(const std::string& what, const std::string& name,
                                      ActLevelQuantizerImpl& q) {
    PackedActQuantizer p;
    p.name = name;
    p.mode = q.mode();
    p.grid = q.grid();
    const ActGrid want = exported_act_grid(p.mode);
    TRIT_CHECK(p.grid == want, "export: ", what, " ", name, ": its ", act_level_mode_name(p.mode),
               " activation quantizer is on the grid ", describe_grid(p.grid), " (", p.grid.count(),
               " levels); only ternary [-1, 1] (signed) and bool [0, 1] activations export, expected ",
               describe_grid(want),
               ". Was the run stopped before its last SMSQ stage, or does its schedule end on other "
               "levels (smsq.stages must end with 3)?");
    TRIT_CHECK(q.initialized(), "export: ", what, " ", name,
               ": its activation scale was never initialised (the run has not seen a batch)");
    p.scale = q.scale.detach().to(torch::kCPU, torch::kFloat32).item<float>();
    TRIT_CHECK(std::isfinite(p.scale) && p.scale > 0, "export: ", what, " ", name,
               ": activation scale ", p.scale, " is not a positive finite number");
    return p;
}

}  // namespace

std::string describe_spec(const WeightQuantSpec& s) {
    if (s.method == WeightQuantMethod::kNone) return "float";
    std::ostringstream os;
    os << weight_quant_method_name(s.method);
    if (s.method == WeightQuantMethod::kBalanced) os << " d=" << s.depth;
    if (s.method == WeightQuantMethod::kAbsmaxThreshold) os << " lambda=" << s.threshold;
    os << "/" << scale_granularity_name(s.granularity);
    if (s.granularity == ScaleGranularity::kGroup) os << " " << s.group_size;
    if (s.sparse24) os << ", 2:4";
    if (s.fp16_scales) os << ", fp16 scales";
    return os.str();
}

WeightQuantSpec export_spec(const WeightQuantSpec& trained, const ExportOptions& o, std::string* note) {
    WeightQuantSpec s;
    std::string why;
    switch (o.format.kind) {
        case WeightFormat::kTern2:
            // A layer trained with a stored 2:4 mask (sparsity) keeps its masked codes: they are
            // ternary codes too.
            if (is_ternary(trained.method) && (!trained.sparse24 || trained.mask.defined())) {
                s = trained;
                s.sparse24 = false;
            } else {
                s = rtn(WeightQuantMethod::kAbsmean);
                why = "round-to-nearest ternary";
            }
            break;
        case WeightFormat::kTern24:
            if (is_ternary(trained.method)) {  // with the trained mask when there is one
                s = trained;
                if (!trained.sparse24) why = "2:4 pruning by magnitude of the trained ternary weights";
            } else {
                s = rtn(WeightQuantMethod::kAbsmean);
                why = "round-to-nearest ternary, then 2:4 pruning by magnitude";
            }
            s.sparse24 = true;
            break;
        case WeightFormat::kBin1:
            if (trained.method == WeightQuantMethod::kBinary) {
                s = trained;
            } else {
                s = rtn(WeightQuantMethod::kBinary);
                why = "round-to-nearest binary";
            }
            break;
        case WeightFormat::kBt:
            if (trained.method == WeightQuantMethod::kBalanced && trained.depth == o.format.depth) {
                s = trained;
            } else {
                s = rtn(WeightQuantMethod::kBalanced);
                s.depth = o.format.depth;
                s.granularity = ScaleGranularity::kGroup;
                s.group_size = 64;
                why = "round-to-nearest balanced ternary";
            }
            if (o.scale_dtype.empty()) s.fp16_scales = true;  // bt's default: fp16 group scales
            if (o.group_size > 0) {
                s.granularity = ScaleGranularity::kGroup;
                s.group_size = o.group_size;
            }
            break;
        case WeightFormat::kFloat:
            TRIT_FAIL("export_spec: float is not a packed format");
    }
    TRIT_CHECK(o.scale_dtype.empty() || o.scale_dtype == "float32" || o.scale_dtype == "float16",
               "--scale-dtype: expected float32 or float16, got '", o.scale_dtype, "'");
    if (!o.scale_dtype.empty()) s.fp16_scales = o.scale_dtype == "float16";
    if (s.fp16_scales && !trained.fp16_scales && why.empty() && trained.method != WeightQuantMethod::kNone)
        why = "scales rounded to fp16";
    if (note) {
        *note = why.empty() ? std::string()
                            : why + ": " + describe_spec(s) + " (trained: " + describe_spec(trained) + ")";
    }
    return s;
}

ExportResult pack_model(const Recipe& recipe, const std::string& recipe_yaml, Model& model,
                        const ExportOptions& o) {
    TRIT_CHECK(o.format.packed(), "export: '", o.format.name(), "' is not a packed format");
    ExportResult r;
    r.model.recipe = recipe;
    r.model.recipe_yaml = recipe_yaml;
    r.model.producer = std::string("trit ") + TRIT_VERSION;
    torch::NoGradGuard no_grad;
    auto layers = quant_linears(model);
    for (const auto& wanted : o.layers)
        TRIT_CHECK(std::any_of(layers.begin(), layers.end(), [&](const auto& l) { return l.first == wanted; }),
                   "export: the model has no layer '", wanted, "'");
    for (auto& [name, layer] : layers) {
        PackedLayer p;
        p.name = name;
        p.out = layer->options.out_features();
        p.in = layer->options.in_features();
        if (layer->bias.defined()) p.bias = to_vector(layer->bias);
        const bool pack = std::find(o.layers.begin(), o.layers.end(), name) != o.layers.end();
        if (!pack) {
            TRIT_CHECK(layer->quant().activation != ActQuantMethod::kTernary, "export: layer ", name,
                       " has ternary activations but is not packed (a float layer has no activation "
                       "quantizer); pack it or train it without");
            p.format = FormatId{};
            p.weight_dtype = o.float_dtype;
            p.weight = to_vector(layer->weight);
            for (float& v : p.weight) v = round_to(o.float_dtype, v);
            r.model.layers.push_back(std::move(p));
            continue;
        }
        std::string note;
        p.format = o.format;
        p.spec = export_spec(layer->quant().weight, o, &note);
        if (!note.empty()) r.notes.push_back(name + ": " + note);
        p.activation = layer->quant().activation;
        if (p.activation == ActQuantMethod::kTernary) p.act = exported_quantizer("layer", name, *layer->act);
        QuantizedWeights q = quantize_weight(layer->weight, p.spec);
        p.spec.mask = torch::Tensor();  // a trained mask is in the codes; the file holds no mask
        std::vector<float> qf = to_vector(q.q);
        std::vector<int8_t> codes(qf.size());
        const int64_t max_code = format_max_code(o.format);
        for (size_t i = 0; i < qf.size(); ++i) {
            TRIT_CHECK(std::fabs(qf[i]) <= static_cast<float>(max_code), "export: layer ", name,
                       " code ", qf[i], " at ", i, " does not fit ", o.format.name());
            codes[i] = static_cast<int8_t>(qf[i]);
        }
        p.packed = pack_codes(o.format, codes.data(), p.out, p.in);
        p.scale = to_vector(q.scale);
        std::tie(p.scale_rows, p.scale_cols) = scale_shape(p.spec, p.out, p.in);
        TRIT_CHECK(static_cast<int64_t>(p.scale.size()) == p.scale_rows * p.scale_cols,
                   "export: layer ", name, ": scale has ", p.scale.size(), " values, expected ",
                   p.scale_rows, "x", p.scale_cols);
        r.model.layers.push_back(std::move(p));
    }
    // The attention's quantizers: their scales exactly (float32), whatever the float dtype.
    for (auto& [name, point] : act_points(model))
        if (point->quant) r.model.act_quantizers.push_back(exported_quantizer("attention point", name, *point->quant));
    // Embeddings, norms, class token, positions: float, in the float layers' dtype.
    for (auto& [name, tensor] : model_tensors(model)) {
        PackedTensor t;
        t.name = name;
        t.shape = tensor.sizes().vec();
        t.dtype = o.float_dtype;
        t.values = to_vector(tensor);
        for (size_t i = 0; i < t.values.size(); ++i) {
            const float v = round_to(o.float_dtype, t.values[i]);
            TRIT_CHECK(std::isfinite(v), "export: tensor ", name, " value ", i, " (", t.values[i],
                       ") is not finite in ", float_dtype_name(o.float_dtype));
            t.values[i] = v;
        }
        r.model.tensors.push_back(std::move(t));
    }
    return r;
}

}  // namespace trit::exporters
