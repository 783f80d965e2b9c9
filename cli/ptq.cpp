// `trit ptq`: see ptq.h.
#include "cli/ptq.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "core/safetensors.h"
#include "exporters/model_file.h"
#include "quantizers/layer_selection.h"
#include "quantizers/ptq.h"
#include "trainers/checkpoint.h"
#include "trainers/data.h"

namespace trit::cli {
namespace {

using exporters::FloatDType;
using exporters::FormatId;
using exporters::PackedLayer;
using exporters::PtqLayerReport;
using exporters::WeightFormat;
using quantizers::Grid;
using quantizers::PruneCriterion;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Weights per quantization call: a layer is quantized in blocks of whole rows (every method treats
// rows independently), so the workspace stays a few times this many float64 values. GPTQ takes
// larger blocks: each call factors the (in, in) inverse Hessian again.
constexpr int64_t kRowBlockWeights = int64_t{1} << 21;
constexpr int64_t kGptqRowBlockWeights = int64_t{1} << 25;

// ---------------------------------------------------------------------------------------------
// Methods

// How one layer is quantized and stored.
struct LayerMethod {
    FormatId format;       // kFloat: the layer stays float
    Grid grid;
    WeightQuantSpec spec;  // as the file describes the codes
    bool gptq = false;
    bool prune24 = false;
    PruneCriterion criterion = PruneCriterion::kMagnitude;
    std::string text;      // for the report
};

bool has_method(const PtqConfig& c, const std::string& m) {
    return std::find(c.methods.begin(), c.methods.end(), m) != c.methods.end();
}

// grid_kind: rtn | bt | binary.
LayerMethod make_method(const PtqConfig& c, const std::string& grid_kind, int64_t depth, bool prune24) {
    LayerMethod m;
    m.gptq = has_method(c, "gptq");
    m.prune24 = prune24;
    m.criterion = c.prune_criterion == "saliency" ? PruneCriterion::kSaliency : PruneCriterion::kMagnitude;
    WeightQuantSpec& s = m.spec;
    s.granularity = ScaleGranularity::kGroup;
    s.group_size = c.group_size;
    s.fp16_scales = c.scale_dtype == "float16";
    if (grid_kind == "rtn") {
        const bool absmean = c.rtn_rule == "absmean";
        m.grid = absmean ? quantizers::grid_absmean() : quantizers::grid_absmax_threshold(c.threshold);
        s.method = absmean ? WeightQuantMethod::kAbsmean : WeightQuantMethod::kAbsmaxThreshold;
        s.threshold = c.threshold;
        s.sparse24 = prune24;
        m.format = {prune24 ? WeightFormat::kTern24 : WeightFormat::kTern2, 0};
    } else if (grid_kind == "bt") {
        m.grid = quantizers::grid_balanced(depth, c.bt_scale == "search" ? quantizers::ScaleRule::kSearch
                                                                          : quantizers::ScaleRule::kStatistic);
        m.grid.search_points = c.search_points;
        m.grid.search_min = c.search_min;
        s.method = WeightQuantMethod::kBalanced;
        s.depth = depth;
        // Pruned ternary has a sparse layout; deeper grids keep their 2:4 zeros in bt<d>.
        s.sparse24 = prune24 && depth == 1;
        m.format = s.sparse24 ? FormatId{WeightFormat::kTern24, 0} : FormatId{WeightFormat::kBt, depth};
    } else {
        m.grid = quantizers::grid_binary();
        s.method = WeightQuantMethod::kBinary;
        m.format = {WeightFormat::kBin1, 0};
    }
    m.grid.fp16_scales = s.fp16_scales;
    std::ostringstream os;
    os << quantizers::grid_name(m.grid) << " g" << c.group_size;
    if (prune24) os << ", 2:4 " << quantizers::prune_criterion_name(m.criterion);
    if (m.gptq) os << ", gptq";
    m.text = os.str();
    return m;
}

LayerMethod float_method() {
    LayerMethod m;
    m.text = "float";
    return m;
}

// The method of the recipe's `methods` (no selection).
LayerMethod recipe_method(const PtqConfig& c) {
    std::string grid;
    for (const auto& m : c.methods)
        if (m == "rtn" || m == "bt" || m == "binary") grid = m;
    return make_method(c, grid, c.depth, has_method(c, "2:4"));
}

// A select candidate: float, tern2 (rtn), tern24 (rtn + 2:4), bin1 (binary), bt1..bt4.
LayerMethod candidate_method(const PtqConfig& c, const std::string& name) {
    if (name == "float") return float_method();
    const FormatId f = exporters::parse_format(name);
    switch (f.kind) {
        case WeightFormat::kTern2: return make_method(c, "rtn", 1, false);
        case WeightFormat::kTern24: return make_method(c, "rtn", 1, true);
        case WeightFormat::kBin1: return make_method(c, "binary", 1, false);
        case WeightFormat::kBt: return make_method(c, "bt", f.depth, false);
        case WeightFormat::kFloat: break;
    }
    return float_method();
}

int64_t float_bytes(FloatDType d) { return d == FloatDType::kF32 ? 4 : 2; }

// Stored bits per weight of an (out, in) layer in `m` (codes + scales, or the float weights).
double method_bits(const LayerMethod& m, int64_t out, int64_t in, FloatDType float_dtype) {
    if (!m.format.packed()) return 8.0 * static_cast<double>(float_bytes(float_dtype));
    int64_t bytes = 0;
    for (const auto& a : exporters::packed_arrays(m.format, in)) bytes += a.row_bytes * out;
    const auto [rows, cols] = exporters::scale_shape(m.spec, out, in);
    bytes += rows * cols * (m.spec.fp16_scales ? 2 : 4);
    return 8.0 * static_cast<double>(bytes) / static_cast<double>(out * in);
}

// ---------------------------------------------------------------------------------------------
// Layers

// Embeddings and the output head are left float unless a target names them exactly: a
// component "embed...", "...embeddings", "wte", "wpe", "tok_embeddings" or trit's vit "patch"; a
// last component lm_head, head, output, classifier or score, or the trit model's output layer.
bool embedding_or_head(const std::string& name, const std::string& output_layer) {
    if (!output_layer.empty() && name == output_layer) return true;
    static const std::regex embedding("embed.*|.*_embed.*|.*embeddings?|wte|wpe|tok_embeddings|patch");
    static const std::regex head("lm_head|head|output|classifier|score");
    std::vector<std::string> parts;
    std::stringstream ss(name);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    for (const auto& p : parts)
        if (std::regex_match(p, embedding)) return true;
    return !parts.empty() && std::regex_match(parts.back(), head);
}

std::string some_names(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 12; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > 12) out += ", ... (" + std::to_string(names.size()) + " in all)";
    return out;
}

// The layers of `all` that targets / ignore pick (see embedding_or_head); `held` receives those a
// regex target matched but the embedding / head rule kept float.
std::vector<std::string> pick_layers(const std::vector<std::string>& all, const PtqConfig& c,
                                     const std::string& output_layer, std::vector<std::string>* held) {
    auto check_used = [&](const std::vector<std::string>& patterns, const char* key) {
        for (const auto& p : patterns) {
            const bool used = std::any_of(all.begin(), all.end(),
                                          [&](const std::string& n) { return quantizers::pattern_matches(p, n); });
            TRIT_CHECK(used, "ptq: ", key, ": '", p, "' selects no layer; the model's linear layers are: ",
                       some_names(all));
        }
    };
    check_used(c.targets, "targets");
    check_used(c.ignore, "ignore");
    std::vector<std::string> out;
    for (const auto& name : all) {
        const bool exact = std::find(c.targets.begin(), c.targets.end(), name) != c.targets.end();
        bool take = exact;
        if (!exact && std::any_of(c.targets.begin(), c.targets.end(),
                                  [&](const std::string& p) { return quantizers::pattern_matches(p, name); })) {
            take = !embedding_or_head(name, output_layer);
            if (!take && held) held->push_back(name);
        }
        if (take && std::any_of(c.ignore.begin(), c.ignore.end(),
                                [&](const std::string& p) { return quantizers::pattern_matches(p, name); }))
            take = false;
        if (take) out.push_back(name);
    }
    TRIT_CHECK(!out.empty(), "ptq: targets and ignore leave no layer to quantize; the model's linear layers are: ",
               some_names(all));
    return out;
}

// ---------------------------------------------------------------------------------------------
// Quantizing one layer

// A quantized layer: int8 codes (out, in) and float scales (out, G), plus the error sums.
struct Quantized {
    std::vector<int8_t> codes;
    std::vector<float> scales;
    int64_t groups = 0;
    double err = 0, ref = 0;  // sum (W - Q) H (W - Q)^T and W H W^T over rows (H = I without calibration)
};

// Quantizes `w` (out, in) float on the CPU with `m`, in blocks of rows. `h` (in, in) float64 is
// the layer Hessian, or undefined without calibration. `read_rows(begin, end)` may stand in for w
// (a memory-mapped source converted block by block); then w is undefined.
Quantized quantize_layer(const std::function<torch::Tensor(int64_t, int64_t)>& read_rows, int64_t out,
                         int64_t in, const torch::Tensor& h, const LayerMethod& m, const PtqConfig& c) {
    torch::NoGradGuard no_grad;
    Quantized q;
    q.groups = (in + c.group_size - 1) / c.group_size;
    q.codes.resize(static_cast<size_t>(out * in));
    q.scales.resize(static_cast<size_t>(out * q.groups));
    const int64_t block = std::max<int64_t>(1, (m.gptq ? kGptqRowBlockWeights : kRowBlockWeights) / in);
    for (int64_t r0 = 0; r0 < out; r0 += block) {
        const int64_t r1 = std::min(out, r0 + block);
        torch::Tensor w = read_rows(r0, r1).to(torch::kFloat32).contiguous();
        TRIT_CHECK(torch::isfinite(w).all().item<bool>(), "rows ", r0, "..", r1 - 1,
                   " hold a weight that is not finite");
        quantizers::QuantizedLayer ql;
        if (m.gptq) {
            quantizers::GptqOptions o;
            o.group_size = c.group_size;
            o.damp = c.damp;
            o.block_size = c.block_size;
            o.act_order = c.act_order;
            o.static_groups = c.static_groups;
            o.prune24 = m.prune24;
            o.prune_criterion = m.criterion;
            ql = quantizers::gptq_quantize(w, h, m.grid, o).layer;
        } else {
            torch::Tensor keep;
            if (m.prune24) keep = quantizers::prune24_mask(w, m.criterion, h, c.damp);
            ql = quantizers::rtn_quantize(w, m.grid, c.group_size, keep);
        }
        torch::Tensor codes = ql.codes.to(torch::kInt8).contiguous();
        std::copy(codes.data_ptr<int8_t>(), codes.data_ptr<int8_t>() + codes.numel(), q.codes.begin() + r0 * in);
        torch::Tensor scales = ql.scales.to(torch::kFloat32).contiguous();
        std::copy(scales.data_ptr<float>(), scales.data_ptr<float>() + scales.numel(),
                  q.scales.begin() + r0 * q.groups);
        torch::Tensor wd = w.to(torch::kFloat64), e = wd - ql.dequant.to(torch::kFloat64);
        if (h.defined()) {
            q.err += (e.mm(h) * e).sum().item<double>();
            q.ref += (wd.mm(h) * wd).sum().item<double>();
        } else {
            q.err += e.square().sum().item<double>();
            q.ref += wd.square().sum().item<double>();
        }
    }
    return q;
}

// The report's figures from the error sums: with H = 2/N X^T X, ||X E^T||^2 / (N out) is
// tr(E H E^T) / (2 out); without calibration the weights' mean squared error.
void fill_errors(PtqLayerReport& r, const Quantized& q, int64_t out, int64_t in, bool calibrated) {
    r.error_basis = calibrated ? "output" : "weight";
    r.mse = calibrated ? q.err / (2.0 * static_cast<double>(out)) : q.err / static_cast<double>(out * in);
    r.relative_error = q.ref > 0 ? q.err / q.ref : (q.err > 0 ? INFINITY : 0.0);
}

// The report of a layer that selection left float (error 0).
PtqLayerReport float_report(const std::string& name, FloatDType dtype, bool calibrated) {
    PtqLayerReport r;
    r.name = name;
    r.method = "float";
    r.format = "float";
    r.bits_per_weight = 8.0 * static_cast<double>(float_bytes(dtype));
    r.error_basis = calibrated ? "output" : "weight";
    return r;
}

PackedLayer packed_layer(const std::string& name, int64_t out, int64_t in, const LayerMethod& m, const Quantized& q,
                         ActQuantMethod activation) {
    PackedLayer p;
    p.name = name;
    p.out = out;
    p.in = in;
    p.format = m.format;
    p.spec = m.spec;
    p.activation = activation;
    p.packed = exporters::pack_codes(m.format, q.codes.data(), out, in);
    p.scale = q.scales;
    std::tie(p.scale_rows, p.scale_cols) = exporters::scale_shape(p.spec, out, in);
    TRIT_CHECK(p.scale_rows * p.scale_cols == static_cast<int64_t>(q.scales.size()), "ptq: layer ", name,
               ": ", q.scales.size(), " scales, expected ", p.scale_rows, "x", p.scale_cols);
    return p;
}

// Float values as a dtype stores them (rounded to it), as float32.
std::vector<float> stored_values(const torch::Tensor& t, FloatDType d) {
    torch::ScalarType st = d == FloatDType::kF32 ? torch::kFloat32 : d == FloatDType::kF16 ? torch::kHalf : torch::kBFloat16;
    torch::Tensor c = t.detach().to(torch::kCPU).to(st).to(torch::kFloat32).contiguous();
    return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

void log_layer(std::ostream& log, size_t i, size_t n, const std::string& name, int64_t out, int64_t in,
               const PtqLayerReport& r) {
    log << "[" << i + 1 << "/" << n << "] " << name << " (" << out << "x" << in << "): " << r.method << " -> "
        << r.format << ", " << std::fixed << std::setprecision(3) << r.bits_per_weight << " bits/weight, "
        << "relative " << r.error_basis << " error " << std::scientific << std::setprecision(3) << r.relative_error
        << std::fixed << std::setprecision(2) << ", " << r.seconds << " s" << std::endl;
}

// ---------------------------------------------------------------------------------------------
// Layer selection within a bits budget

struct SelectionInput {
    std::string name;
    int64_t weights = 0;
    std::vector<double> bits;   // per candidate
    std::vector<double> error;  // per candidate, by the metric
};

// Starts every layer at its candidate with the most bits (the least error among equals), then
// repeatedly makes the cheapest move to a candidate with fewer bits: the one with the least error
// added per bit saved (a move that lowers the error first), until the total is within the budget.
// Returns the chosen candidate index per layer.
std::vector<size_t> select_formats(const std::vector<SelectionInput>& layers, double budget,
                                   const std::vector<std::string>& candidates) {
    std::vector<size_t> choice(layers.size());
    double total_bits = 0, total_weights = 0, min_bits = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
        const SelectionInput& s = layers[l];
        size_t best = 0;
        for (size_t k = 1; k < candidates.size(); ++k)
            if (s.bits[k] > s.bits[best] || (s.bits[k] == s.bits[best] && s.error[k] < s.error[best])) best = k;
        choice[l] = best;
        total_bits += s.bits[best] * static_cast<double>(s.weights);
        total_weights += static_cast<double>(s.weights);
        min_bits += *std::min_element(s.bits.begin(), s.bits.end()) * static_cast<double>(s.weights);
    }
    const double limit = budget * total_weights;
    TRIT_CHECK(min_bits <= limit * (1 + 1e-12), "ptq: select.bits_per_weight ", budget,
               " cannot be met: the fewest bits the candidates allow is ", min_bits / total_weights,
               " bits per weight over the selected layers");
    while (total_bits > limit * (1 + 1e-12)) {
        double best_ratio = INFINITY;
        size_t best_l = 0, best_k = 0;
        for (size_t l = 0; l < layers.size(); ++l) {
            const SelectionInput& s = layers[l];
            for (size_t k = 0; k < candidates.size(); ++k) {
                if (s.bits[k] >= s.bits[choice[l]]) continue;
                const double saved = (s.bits[choice[l]] - s.bits[k]) * static_cast<double>(s.weights);
                const double ratio = (s.error[k] - s.error[choice[l]]) / saved;
                if (ratio < best_ratio) {
                    best_ratio = ratio;
                    best_l = l;
                    best_k = k;
                }
            }
        }
        const SelectionInput& s = layers[best_l];
        total_bits -= (s.bits[choice[best_l]] - s.bits[best_k]) * static_cast<double>(s.weights);
        choice[best_l] = best_k;
    }
    return choice;
}

// ---------------------------------------------------------------------------------------------
// Calibration of trit models

// The calibration inputs of a trit model: batches of examples (mlp, vit) or windows (gpt).
struct Calibration {
    std::vector<torch::Tensor> batches;
    std::string description;
};

Calibration calibration_batches(const PtqConfig& c, const Recipe& run_recipe) {
    Calibration cal;
    const int64_t n = c.calibration_samples;
    if (!c.calibration_text.empty()) {
        TRIT_CHECK(run_recipe.model.type == "gpt", "ptq: calibration.text: a text file calibrates a gpt (byte windows); ",
                   c.model, " is a ", run_recipe.model.type, " (use calibration.data, or its recipe's dataset)");
        std::ifstream in(c.calibration_text, std::ios::binary);
        TRIT_CHECK(fs::is_file(c.calibration_text) && in, "ptq: calibration.text '", c.calibration_text,
                   "': cannot open the file (expected a text file)");
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const int64_t ctx = run_recipe.model.context;
        const int64_t windows = std::min<int64_t>(n, static_cast<int64_t>(text.size()) / ctx);
        TRIT_CHECK(windows >= 1, "ptq: calibration.text '", c.calibration_text, "' holds ", text.size(),
                   " bytes; expected at least one window of model.context = ", ctx, " bytes");
        torch::Tensor all = torch::empty({windows, ctx}, torch::kInt64);
        int64_t* p = all.data_ptr<int64_t>();
        for (int64_t i = 0; i < windows * ctx; ++i) p[i] = static_cast<unsigned char>(text[static_cast<size_t>(i)]);
        for (int64_t b = 0; b < windows; b += c.calibration_batch)
            cal.batches.push_back(all.slice(0, b, std::min(windows, b + c.calibration_batch)));
        cal.description = std::to_string(windows) + " windows of " + std::to_string(ctx) + " bytes from the start of " +
                          c.calibration_text;
        return cal;
    }
    Recipe r = run_recipe;
    r.seed = c.calibration_seed;
    r.training.batch_size = c.calibration_batch;
    if (!c.calibration_data.empty()) r.data.path = c.calibration_data;
    auto data = trainers::make_train_data(r, torch::kCPU);
    int64_t taken = 0;
    for (int64_t b = 0; taken < n; ++b) {
        TRIT_CHECK(b < data->batches_per_epoch(), "ptq: calibration.samples ", n, ": the training data has only ",
                   taken, " (", data->describe(), ")");
        torch::Tensor x = data->batch(0, b).x;
        if (taken + x.size(0) > n) x = x.slice(0, 0, n - taken);
        taken += x.size(0);
        cal.batches.push_back(x);
    }
    cal.description = std::to_string(n) + (run_recipe.model.type == "gpt" ? " windows of " + std::to_string(run_recipe.model.context) + " bytes" : " examples") +
                      " of the training split of " + r.data.path + " (seed " + std::to_string(c.calibration_seed) + ")";
    return cal;
}

// Runs the calibration batches through `model` and returns the Hessian of each layer in `names`
// from its inputs (the layers themselves run in float while they record).
std::map<std::string, torch::Tensor> collect_hessians(Model& model, std::map<std::string, QuantLinear>& layers,
                                                      const std::vector<std::string>& names, const Calibration& cal) {
    std::map<std::string, std::shared_ptr<quantizers::HessianAccumulator>> acc;
    for (const auto& name : names) {
        QuantLinear layer = layers.at(name);
        auto a = std::make_shared<quantizers::HessianAccumulator>(layer->options.in_features());
        acc[name] = a;
        layer->set_forward_override([layer, a](const torch::Tensor& x) {
            a->add(x);
            return torch::linear(x, layer->weight, layer->bias);
        });
    }
    try {
        torch::NoGradGuard no_grad;
        for (const auto& x : cal.batches) model.forward(x);
    } catch (...) {
        for (const auto& name : names) layers.at(name)->set_forward_override(nullptr);
        throw;
    }
    std::map<std::string, torch::Tensor> out;
    for (const auto& name : names) {
        layers.at(name)->set_forward_override(nullptr);
        out[name] = acc[name]->hessian();
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Sources

FloatDType float_dtype_or(const PtqConfig& c, FloatDType source) {
    return c.float_dtype.empty() ? source : exporters::parse_float_dtype(c.float_dtype);
}

bool needs_calibration(const PtqConfig& c) {
    return has_method(c, "gptq") || (has_method(c, "2:4") && c.prune_criterion == "saliency") ||
           (!c.select_candidates.empty() && std::count(c.select_candidates.begin(), c.select_candidates.end(), "tern24") &&
            c.prune_criterion == "saliency");
}

// Chooses each layer's method: the recipe's, or by selection from the candidates' errors.
// `measure(name, method)` quantizes one layer and returns its error sums, on calibration inputs
// when `calibrated`, else on the weights.
std::map<std::string, LayerMethod> plan_methods(
    const PtqConfig& c, const std::vector<std::string>& names, const std::map<std::string, std::pair<int64_t, int64_t>>& shapes,
    FloatDType float_dtype, bool calibrated, const std::function<Quantized(const std::string&, const LayerMethod&)>& measure,
    std::ostream& log) {
    std::map<std::string, LayerMethod> plan;
    if (c.select_candidates.empty()) {
        const LayerMethod m = recipe_method(c);
        for (const auto& n : names) plan[n] = m;
        return plan;
    }
    std::vector<LayerMethod> cands;
    for (const auto& f : c.select_candidates) cands.push_back(candidate_method(c, f));
    std::vector<SelectionInput> inputs;
    log << "select: measuring " << names.size() << " layers x " << cands.size() << " candidates ("
        << c.select_metric << ")" << std::endl;
    for (const auto& name : names) {
        const auto [out, in] = shapes.at(name);
        SelectionInput s;
        s.name = name;
        s.weights = out * in;
        for (const auto& m : cands) {
            s.bits.push_back(method_bits(m, out, in, float_dtype));
            if (!m.format.packed()) {
                s.error.push_back(0.0);
                continue;
            }
            const Quantized q = measure(name, m);
            PtqLayerReport r;
            fill_errors(r, q, out, in, calibrated);
            s.error.push_back(c.select_metric == "mse" ? r.mse : r.relative_error);
        }
        inputs.push_back(std::move(s));
    }
    const std::vector<size_t> choice = select_formats(inputs, c.select_bits, c.select_candidates);
    for (size_t l = 0; l < names.size(); ++l) {
        plan[names[l]] = cands[choice[l]];
        log << "select: " << names[l] << " -> " << c.select_candidates[choice[l]] << " (" << c.select_metric << " "
            << std::scientific << std::setprecision(3) << inputs[l].error[choice[l]] << std::fixed << ")" << std::endl;
    }
    return plan;
}

double total_bits(const std::vector<PtqLayerReport>& layers, const std::map<std::string, int64_t>& weights, int64_t* n);

// Writes the report into the file, closes it, and sums up.
PtqResult finish(exporters::ModelWriter& writer, const exporters::PtqInfo& info,
                 const std::map<std::string, int64_t>& weights, Clock::time_point t0) {
    writer.set_ptq(info);
    writer.close();
    PtqResult res;
    res.layers = info.layers;
    res.bits_per_weight = total_bits(info.layers, weights, &res.weights);
    res.seconds = seconds_since(t0);
    return res;
}

double total_bits(const std::vector<PtqLayerReport>& layers, const std::map<std::string, int64_t>& weights, int64_t* n) {
    double bits = 0;
    *n = 0;
    for (const auto& r : layers) {
        bits += r.bits_per_weight * static_cast<double>(weights.at(r.name));
        *n += weights.at(r.name);
    }
    return *n > 0 ? bits / static_cast<double>(*n) : 0.0;
}

PtqResult run_trit(const PtqConfig& c, std::ostream& log) {
    const auto t0 = Clock::now();
    trainers::LoadedRun run = trainers::load_run(c.model);
    const QuantizationConfig& q = run.recipe.quantization;
    TRIT_CHECK(q.weight.method == "none" && q.activation.method == "none" && q.attention == "none", "ptq: ",
               run.checkpoint, " was trained with quantization (weight ", q.weight.method, ", activation ",
               q.activation.method, ", attention ", q.attention,
               "); ptq quantizes float models: export a QAT run with trit export");
    TRIT_CHECK(c.calibration_activations.empty(), "ptq: calibration.activations (recorded layer inputs) is for a "
               "safetensors model; a trit model calibrates on samples of its data (calibration.samples, data, text)");
    Model& model = *run.model;
    model.to(torch::kCPU);
    model.eval();
    auto linear_list = quant_linears(model);
    std::map<std::string, QuantLinear> layers;
    std::vector<std::string> all;
    std::map<std::string, std::pair<int64_t, int64_t>> shapes;
    std::map<std::string, int64_t> weights;
    for (auto& [name, l] : linear_list) {
        layers.emplace(name, l);
        all.push_back(name);
        shapes[name] = {l->options.out_features(), l->options.in_features()};
        weights[name] = l->options.out_features() * l->options.in_features();
    }
    std::vector<std::string> held;
    const std::vector<std::string> names = pick_layers(all, c, model.output_layer(), &held);
    if (!held.empty())
        log << "left float (embedding / output head; name them in targets to quantize): " << some_names(held) << "\n";
    const bool calibrated = c.calibration_samples > 0;
    TRIT_CHECK(calibrated || !needs_calibration(c), "ptq: calibration.samples is 0, but ",
               has_method(c, "gptq") ? "gptq" : "2:4 saliency", " needs calibration inputs");
    Calibration cal;
    if (calibrated) {
        cal = calibration_batches(c, run.recipe);
        log << "calibration: " << cal.description << "\n";
    } else {
        cal.description = "none";
    }
    const FloatDType float_dtype = float_dtype_or(c, FloatDType::kF32);
    const ActQuantMethod activation = parse_act_quant_method(c.activation);

    // One float pass: the Hessians that selection (and a non-sequential run) use.
    std::map<std::string, torch::Tensor> float_h;
    if (calibrated && (!c.sequential || !c.select_candidates.empty()))
        float_h = collect_hessians(model, layers, names, cal);
    auto read_float = [&](const std::string& name) {
        torch::Tensor w = layers.at(name)->weight.detach();
        return [w](int64_t r0, int64_t r1) { return w.slice(0, r0, r1); };
    };
    const std::map<std::string, LayerMethod> plan = plan_methods(
        c, names, shapes, float_dtype, calibrated,
        [&](const std::string& name, const LayerMethod& m) {
            const auto [out, in] = shapes.at(name);
            return quantize_layer(read_float(name), out, in, calibrated ? float_h.at(name) : torch::Tensor(), m, c);
        },
        log);

    exporters::PackedModel header;
    header.architecture = exporters::ModelArchitecture::kRecipe;
    header.recipe_yaml = run.recipe_yaml;
    exporters::ModelWriter writer(c.output, header);
    exporters::PtqInfo info;
    info.present = true;
    info.recipe_yaml = ptq_recipe_to_yaml(c);
    info.source = c.model;
    info.calibration = cal.description + (calibrated && c.sequential ? " (sequential: each layer's inputs through the layers quantized before it)" : "");
    torch::NoGradGuard no_grad;
    size_t done = 0;
    for (auto& [name, layer] : linear_list) {
        const int64_t out = layer->options.out_features(), in = layer->options.in_features();
        std::vector<float> bias;
        if (layer->bias.defined()) bias = stored_values(layer->bias, FloatDType::kF32);
        const auto it = plan.find(name);
        if (it == plan.end() || !it->second.format.packed()) {
            PackedLayer p;
            p.name = name;
            p.out = out;
            p.in = in;
            p.weight_dtype = float_dtype;
            p.weight = stored_values(layer->weight, float_dtype);
            p.bias = bias;
            writer.add_layer(p);
            if (it != plan.end()) {  // selection kept it float: it is in the report
                info.layers.push_back(float_report(name, float_dtype, calibrated));
                log_layer(log, done++, names.size(), name, out, in, info.layers.back());
            }
            continue;
        }
        const LayerMethod& m = it->second;
        const auto t = Clock::now();
        torch::Tensor h;
        if (calibrated) h = c.sequential ? collect_hessians(model, layers, {name}, cal).at(name) : float_h.at(name);
        const Quantized qz = quantize_layer(read_float(name), out, in, h, m, c);
        PackedLayer p = packed_layer(name, out, in, m, qz, activation);
        p.bias = bias;
        if (c.sequential && calibrated) {  // later layers see this layer as the file runs it
            LinearQuantSpec spec;
            spec.weight = m.spec;
            spec.activation = activation;
            layer->set_quant(spec);
            QuantizedWeights frozen;
            frozen.q = torch::from_blob(const_cast<int8_t*>(qz.codes.data()), {out, in}, torch::kInt8).to(torch::kFloat32);
            frozen.scale = torch::from_blob(const_cast<float*>(qz.scales.data()), {out, qz.groups}, torch::kFloat32).clone();
            layer->freeze_weights(frozen);
        }
        PtqLayerReport r;
        r.name = name;
        r.method = m.text + (activation == ActQuantMethod::kInt8PerToken ? ", int8 activations" : "");
        r.format = m.format.name();
        r.bits_per_weight = method_bits(m, out, in, float_dtype);
        fill_errors(r, qz, out, in, calibrated);
        r.seconds = seconds_since(t);
        writer.add_layer(p);
        info.layers.push_back(r);
        log_layer(log, done++, names.size(), name, out, in, r);
    }
    for (auto& [name, tensor] : exporters::model_tensors(model)) {
        exporters::PackedTensor t;
        t.name = name;
        t.shape = tensor.sizes().vec();
        t.dtype = float_dtype;
        t.values = stored_values(tensor, float_dtype);
        writer.add_tensor(t);
    }
    return finish(writer, info, weights, t0);
}

// ---------------------------------------------------------------------------------------------
// safetensors models

FloatDType float_dtype_of(const SafetensorsTensorInfo& t) {
    switch (t.dtype) {
        case SafetensorsDtype::F32: return FloatDType::kF32;
        case SafetensorsDtype::F16: return FloatDType::kF16;
        case SafetensorsDtype::BF16: return FloatDType::kBF16;
        default: break;
    }
    TRIT_FAIL("tensor '", t.name, "': dtype ", to_string(t.dtype),
              "; a trit model file stores float tensors only (F32, F16, BF16)");
}

bool is_float(SafetensorsDtype d) {
    return d == SafetensorsDtype::F32 || d == SafetensorsDtype::F16 || d == SafetensorsDtype::BF16;
}

const std::string kWeightSuffix = ".weight";

// The Hessian of a layer from its recorded inputs: tensor `name` of `acts`, (..., in).
torch::Tensor recorded_hessian(const SafetensorsFile& acts, const std::string& name, int64_t in) {
    TRIT_CHECK(acts.has(name), acts.path(), ": no tensor '", name,
               "': calibration.activations must hold each quantized layer's inputs (rows, in_features) under the "
               "layer's name");
    const SafetensorsTensorInfo& t = acts.info(name);
    TRIT_CHECK(!t.shape.empty() && t.shape.back() == in && t.numel() > 0, acts.path(), ": tensor '", name,
               "': expected layer inputs (rows, ", in, "), got shape ", torch::IntArrayRef(t.shape));
    torch::Tensor x = acts.view(name).reshape({-1, in});
    quantizers::HessianAccumulator acc(in);
    const int64_t block = std::max<int64_t>(1, kRowBlockWeights / in);
    for (int64_t r = 0; r < x.size(0); r += block) {
        torch::Tensor b = x.slice(0, r, std::min(x.size(0), r + block)).to(torch::kFloat32);
        TRIT_CHECK(torch::isfinite(b).all().item<bool>(), acts.path(), ": tensor '", name,
                   "': a recorded input is not finite");
        acc.add(b);
    }
    acts.release(name);
    return acc.hessian();
}

PtqResult run_safetensors(const PtqConfig& c, std::ostream& log) {
    const auto t0 = Clock::now();
    TRIT_CHECK(c.activation == "none", "ptq: activation ", c.activation,
               " needs a trit model (its forward); a safetensors model's layers keep float inputs");
    TRIT_CHECK(c.calibration_text.empty() && c.calibration_data.empty(), "ptq: calibration.",
               c.calibration_text.empty() ? "data" : "text",
               " feeds a trit model's forward; for a safetensors model give calibration.activations (each layer's "
               "recorded inputs)");
    SafetensorsFile f = open_safetensors(c.model);
    // Linear layers: 2-D float tensors named <layer>.weight; a 1-D <layer>.bias of out values joins them.
    std::vector<std::string> all;
    std::map<std::string, std::pair<int64_t, int64_t>> shapes;
    std::map<std::string, int64_t> weights;
    for (const auto& n : f.names()) {
        const SafetensorsTensorInfo& t = f.info(n);
        TRIT_CHECK(n.find('/') == std::string::npos && !n.empty() && n != ".", c.model, ": tensor '", n,
                   "': a name with '/' cannot be stored in a trit model file");
        if (t.shape.size() == 2 && is_float(t.dtype) && n.size() > kWeightSuffix.size() &&
            n.compare(n.size() - kWeightSuffix.size(), kWeightSuffix.size(), kWeightSuffix) == 0 && t.numel() > 0) {
            const std::string layer = n.substr(0, n.size() - kWeightSuffix.size());
            all.push_back(layer);
            shapes[layer] = {t.shape[0], t.shape[1]};
            weights[layer] = t.shape[0] * t.shape[1];
        }
    }
    TRIT_CHECK(!all.empty(), c.model, ": no linear layer (a 2-D F32, F16 or BF16 tensor named <layer>.weight)");
    std::vector<std::string> held;
    const std::vector<std::string> names = pick_layers(all, c, "", &held);
    if (!held.empty())
        log << "left float (embedding / output head; name them in targets to quantize): " << some_names(held) << "\n";
    std::optional<SafetensorsFile> acts;
    if (!c.calibration_activations.empty()) acts.emplace(open_safetensors(c.calibration_activations));
    const bool calibrated = acts.has_value();
    TRIT_CHECK(calibrated || !needs_calibration(c), "ptq: ", has_method(c, "gptq") ? "gptq" : "2:4 saliency",
               " needs calibration inputs; a safetensors model has no forward in trit: give calibration.activations, "
               "a safetensors file with each quantized layer's inputs (rows, in_features) under the layer's name");
    if (!calibrated && !c.select_candidates.empty())
        log << "select: no calibration inputs, so layers are ranked by their weights' error\n";
    std::map<std::string, std::string> bias_of;  // bias tensor -> layer
    for (const auto& name : names) {
        const std::string b = name + ".bias";
        if (!f.has(b)) continue;
        const SafetensorsTensorInfo& t = f.info(b);
        TRIT_CHECK(t.shape.size() == 1 && t.shape[0] == shapes[name].first, c.model, ": tensor '", b,
                   "': expected the bias of ", name, ", shape (", shapes[name].first, ")");
        bias_of[b] = name;
    }
    auto read_rows = [&](const std::string& name) {
        const std::string w = name + kWeightSuffix;
        return [&f, w](int64_t r0, int64_t r1) { return f.view(w).slice(0, r0, r1); };
    };
    std::map<std::string, torch::Tensor> h_cache;  // only while selecting, one layer at a time
    auto hessian = [&](const std::string& name) -> torch::Tensor {
        if (!calibrated) return {};
        auto it = h_cache.find(name);
        if (it != h_cache.end()) return it->second;
        h_cache.clear();
        return h_cache[name] = recorded_hessian(*acts, name, shapes[name].second);
    };
    const std::map<std::string, LayerMethod> plan = plan_methods(
        c, names, shapes, float_dtype_or(c, FloatDType::kF32), calibrated,
        [&](const std::string& name, const LayerMethod& m) {
            const auto [out, in] = shapes[name];
            Quantized q = quantize_layer(read_rows(name), out, in, hessian(name), m, c);
            f.release(name + kWeightSuffix);
            return q;
        },
        log);

    exporters::PackedModel header;
    header.architecture = exporters::ModelArchitecture::kLinears;
    exporters::ModelWriter writer(c.output, header);
    exporters::PtqInfo info;
    info.present = true;
    info.recipe_yaml = ptq_recipe_to_yaml(c);
    info.source = c.model;
    info.calibration = calibrated ? "recorded layer inputs from " + c.calibration_activations : "none";
    size_t done = 0;
    torch::NoGradGuard no_grad;
    for (const auto& n : f.names()) {
        if (bias_of.count(n)) continue;  // stored with its layer
        const bool is_layer = n.size() > kWeightSuffix.size() &&
                              plan.count(n.substr(0, n.size() - kWeightSuffix.size())) &&
                              n.compare(n.size() - kWeightSuffix.size(), kWeightSuffix.size(), kWeightSuffix) == 0;
        const SafetensorsTensorInfo& t = f.info(n);
        if (!is_layer || !plan.at(n.substr(0, n.size() - kWeightSuffix.size())).format.packed()) {
            const FloatDType src = float_dtype_of(t), dst = float_dtype_or(c, src);
            if (dst == src) {
                writer.add_tensor_raw(n, dst, t.shape, f.data(n));
            } else {
                exporters::PackedTensor pt;
                pt.name = n;
                pt.shape = t.shape;
                pt.dtype = dst;
                pt.values = stored_values(f.to_tensor(n), dst);
                for (size_t i = 0; i < pt.values.size(); ++i)
                    TRIT_CHECK(std::isfinite(pt.values[i]), c.model, ": tensor '", n, "' value ", i,
                               " is not finite in ", exporters::float_dtype_name(dst));
                writer.add_tensor(pt);
            }
            f.release(n);
            if (is_layer) {  // selection kept it float
                const std::string name = n.substr(0, n.size() - kWeightSuffix.size());
                info.layers.push_back(float_report(name, dst, calibrated));
                log_layer(log, done++, names.size(), name, shapes[name].first, shapes[name].second, info.layers.back());
            }
            continue;
        }
        const std::string name = n.substr(0, n.size() - kWeightSuffix.size());
        const LayerMethod& m = plan.at(name);
        const auto [out, in] = shapes[name];
        const auto t1 = Clock::now();
        Quantized qz = [&] {
            try {
                return quantize_layer(read_rows(name), out, in, hessian(name), m, c);
            } catch (const Error& e) {
                TRIT_FAIL(c.model, ": layer ", name, ": ", e.what());
            }
        }();
        h_cache.clear();
        f.release(n);
        PackedLayer p = packed_layer(name, out, in, m, qz, ActQuantMethod::kNone);
        PtqLayerReport r;
        fill_errors(r, qz, out, in, calibrated);
        qz = Quantized{};
        const std::string b = name + ".bias";
        if (bias_of.count(b)) {
            p.bias = stored_values(f.to_tensor(b), FloatDType::kF32);
            for (float v : p.bias)
                TRIT_CHECK(std::isfinite(v), c.model, ": tensor '", b, "' holds a value that is not finite");
        }
        r.name = name;
        r.method = m.text;
        r.format = m.format.name();
        r.bits_per_weight = method_bits(m, out, in, FloatDType::kF32);
        r.seconds = seconds_since(t1);
        writer.add_layer(p);
        p = PackedLayer{};
        info.layers.push_back(r);
        log_layer(log, done++, names.size(), name, out, in, r);
    }
    return finish(writer, info, weights, t0);
}

}  // namespace

PtqResult run_ptq(const PtqConfig& c, std::ostream& log) {
    if (c.threads > 0) torch::set_num_threads(static_cast<int>(c.threads));
    const bool safetensors = c.model.size() > 12 && c.model.compare(c.model.size() - 12, 12, ".safetensors") == 0;
    PtqResult r = safetensors ? run_safetensors(c, log) : run_trit(c, log);
    r.file_bytes = fs::file_size(c.output);
    return r;
}

std::optional<PtqLayerCodes> reproduce_layer_codes(const PtqConfig& c, const std::string& format,
                                                   const torch::Tensor& w) {
    const LayerMethod m = c.select_candidates.empty() ? recipe_method(c) : candidate_method(c, format);
    TRIT_CHECK(m.format.packed() && m.format.name() == format, "the layer's format ", format,
               " is not what the ptq recipe gives (", m.format.packed() ? m.format.name() : std::string("float"),
               c.select_candidates.empty() ? std::string() : ", one of select.candidates", ")");
    if (m.gptq || (m.prune24 && m.criterion == PruneCriterion::kSaliency)) return std::nullopt;
    const int64_t out = w.size(0), in = w.size(1);
    const Quantized q = quantize_layer([&](int64_t r0, int64_t r1) { return w.slice(0, r0, r1); }, out, in, {}, m, c);
    PtqLayerCodes r;
    r.codes = torch::from_blob(const_cast<int8_t*>(q.codes.data()), {out, in}, torch::kInt8).clone();
    r.scales = torch::from_blob(const_cast<float*>(q.scales.data()), {out, q.groups}, torch::kFloat32).clone();
    return r;
}

std::string format_ptq_report(const std::vector<PtqLayerReport>& layers) {
    size_t w = 5;
    for (const auto& r : layers) w = std::max(w, r.name.size());
    std::ostringstream os;
    os << std::left << std::setw(static_cast<int>(w)) << "layer" << "  " << std::setw(7) << "format" << "  "
       << std::right << std::setw(6) << "bits" << "  " << std::setw(10) << "rel. error" << "  " << std::setw(10) << "mse"
       << "  " << std::left << std::setw(6) << "basis" << "  method\n";
    for (const auto& r : layers) {
        os << std::left << std::setw(static_cast<int>(w)) << r.name << "  " << std::setw(7) << r.format << "  "
           << std::right << std::fixed << std::setprecision(3) << std::setw(6) << r.bits_per_weight << "  "
           << std::scientific << std::setprecision(3) << std::setw(10) << r.relative_error << "  " << std::setw(10)
           << r.mse << "  " << std::left << std::setw(6) << r.error_basis << "  " << r.method << "\n";
    }
    return os.str();
}

}  // namespace trit::cli
