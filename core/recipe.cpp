// Recipe reading, validation and writing. The reader is strict (see yaml_schema.h); the model and
// data keys depend on model.type and data.dataset (a key of another family is an error, and the
// writer emits the family's keys only); cross-field rules (epochs xor steps, model shape vs
// dataset, heads vs dim, regex syntax) are checked after reading.
#include "core/recipe.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/yaml_schema.h"

namespace trit {
namespace {

constexpr int64_t kMaxI = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<std::string> kModelTypes = {"mlp", "vit", "gpt"};
const std::vector<std::string> kDatasets = {"fashion_mnist", "fortunes"};

bool contains(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v)
        out += (out.empty() ? "" : ", ") + x;
    return out;
}

// A key of `all` that the recipe sets although it does not apply is an error listing those that do.
void reject_inapplicable(const yaml::Object& o, const std::vector<std::string>& all,
                         const std::vector<std::string>& applicable, const std::string& what) {
    for (const auto& key : all)
        if (!contains(applicable, key) && o.has(key))
            o.fail(key, "does not apply to " + what + " (its keys: " + join(applicable) + ")");
}

const std::vector<std::string> kAllModelKeys = {
    "type",  "input", "hidden",     "classes", "activation", "bias",  "dim",
    "depth", "heads", "mlp_hidden", "subln",   "norm_eps",   "patch", "context"};

void read_model(yaml::Object o, ModelConfig& m) {
    std::string type = m.type;
    o.read_choice("type", type, kModelTypes);
    m = model_defaults(type);
    const std::vector<std::string> keys = model_keys(type);
    reject_inapplicable(o, kAllModelKeys, keys, "model type '" + type + "'");
    for (const auto& key : keys) {
        if (key == "input") o.read("input", m.input, 1, 1 << 24);
        if (key == "hidden") o.read("hidden", m.hidden, 1, 1 << 20);
        if (key == "classes") o.read("classes", m.classes, 2, 1 << 20);
        if (key == "activation")
            o.read_choice("activation", m.activation,
                          type == "mlp" ? std::vector<std::string>{"relu", "gelu"}
                                        : std::vector<std::string>{"gelu", "relu2", "swiglu"});
        if (key == "bias") o.read("bias", m.bias);
        if (key == "dim") o.read("dim", m.dim, 1, 1 << 16);
        if (key == "depth") o.read("depth", m.depth, 1, 1 << 10);
        if (key == "heads") o.read("heads", m.heads, 1, 1 << 10);
        if (key == "mlp_hidden") o.read("mlp_hidden", m.mlp_hidden, 0, 1 << 20);
        if (key == "subln") o.read("subln", m.subln);
        if (key == "norm_eps") o.read("norm_eps", m.norm_eps, 0.0, 1.0, /*min_open=*/true);
        if (key == "patch") o.read("patch", m.patch, 1, 1 << 12);
        if (key == "context") o.read("context", m.context, 1, 1 << 20);
    }
    const ModelConfigProblem p = check_model_config(m);
    if (!p.key.empty()) o.fail(p.key, p.message);
    o.finish();
}

const std::vector<std::string> kAllDataKeys = {"dataset",    "path",      "train_limit",
                                               "test_limit", "normalize", "valid_fraction"};

std::vector<std::string> data_keys(const std::string& dataset) {
    if (dataset == "fortunes") return {"dataset", "path", "valid_fraction"};
    return {"dataset", "path", "train_limit", "test_limit", "normalize"};
}

void read_data(yaml::Object o, DataConfig& d, const std::string& model_type) {
    const std::string wanted = dataset_for_model(model_type);
    std::string dataset = wanted;
    o.read_choice("dataset", dataset, kDatasets);
    if (dataset != wanted)
        o.fail("dataset", "model type '" + model_type + "' trains on " + wanted +
                              " (mlp and vit: fashion_mnist; gpt: fortunes), got '" + dataset +
                              "'");
    d = data_defaults(dataset);
    const std::vector<std::string> keys = data_keys(dataset);
    reject_inapplicable(o, kAllDataKeys, keys, "dataset '" + dataset + "'");
    for (const auto& key : keys) {
        if (key == "path") o.read("path", d.path);
        if (key == "train_limit") o.read("train_limit", d.train_limit, 0, kMaxI);
        if (key == "test_limit") o.read("test_limit", d.test_limit, 0, kMaxI);
        if (key == "normalize") o.read("normalize", d.normalize);
        if (key == "valid_fraction")
            o.read("valid_fraction", d.valid_fraction, 0.0, 0.5, /*min_open=*/true);
    }
    o.finish();
}

void check_pattern(const yaml::Object& o, const std::string& key, const std::string& p) {
    TRIT_CHECK(!p.empty(), o.where(key), ": empty layer name");
    if (p.rfind("re:", 0) != 0) return;
    try {
        std::regex re(p.substr(3));
    } catch (const std::regex_error& e) {
        o.fail(key, "invalid regular expression '" + p.substr(3) + "': " + e.what());
    }
}

void read_quantization(yaml::Object o, QuantizationConfig& q) {
    {
        yaml::Object w = o.object("weight");
        w.read_choice("method", q.weight.method,
                      {"none", "absmean", "absmax_threshold", "binary", "balanced"});
        w.read_choice("granularity", q.weight.granularity, {"tensor", "channel", "group"});
        w.read("group_size", q.weight.group_size, 1, 1 << 20);
        w.read("threshold", q.weight.threshold, 0.0, 1.0, /*min_open=*/false);
        w.read("depth", q.weight.depth, 1, 4);
        w.finish();
    }
    {
        yaml::Object a = o.object("activation");
        a.read_choice("method", q.activation.method, {"none", "int8_per_token", "ternary"});
        a.finish();
    }
    o.read_choice("attention", q.attention, {"none", "ternary"});
    o.read("targets", q.targets);
    o.read("ignore", q.ignore);
    for (const auto& p : q.targets) check_pattern(o, "targets", p);
    for (const auto& p : q.ignore) check_pattern(o, "ignore", p);
    {
        yaml::Object sel = o.object("select");
        sel.read("fraction", q.select.fraction, 0.0, 1.0);
        sel.read("calibration_batches", q.select.calibration_batches, 1, 1 << 20);
        sel.read_choice("metric", q.select.metric, {"mse", "relative_mse"});
        sel.read("layers", q.select.layers);
        if (!q.select.layers.empty() && q.select.fraction <= 0)
            sel.fail("layers", "is the trainer's record of a selection; it needs fraction > 0");
        sel.finish();
    }
    o.finish();
}

void read_sparsity(yaml::Object o, SparsityConfig& c) {
    o.read_choice("pattern", c.pattern, {"none", "2:4"});
    o.read_choice("mask", c.mask, {"dynamic", "frozen"});
    o.read("freeze_after", c.freeze_after, 0, kMaxI);
    o.read("recompute_every", c.recompute_every, 1, kMaxI);
    if (c.mask == "frozen" && c.freeze_after > 0)
        o.fail("freeze_after",
               "applies to mask: dynamic (a frozen mask never changes); expected 0 or "
               "mask: dynamic, got " +
                   std::to_string(c.freeze_after));
    if (c.mask == "frozen" && c.recompute_every != 1)
        o.fail("recompute_every",
               "applies to mask: dynamic (a frozen mask is computed once); expected 1 "
               "or mask: dynamic, got " +
                   std::to_string(c.recompute_every));
    o.finish();
}

bool is_power_of_two(int64_t v) {
    return v >= 1 && (v & (v - 1)) == 0;
}

void read_smsq(yaml::Object o, SmsqConfig& c) {
    o.read("stages", c.stages, 2, 255);
    o.read_choice("degradation", c.degradation, {"levelwise", "bitwise"});
    o.read_choice("rescale", c.rescale, {"projection", "mean", "none"});
    o.read("stage_steps", c.stage_steps, 1, kMaxI);
    o.read("final_fraction", c.final_fraction, 0.0, 1.0, /*min_open=*/true);
    o.read("calibration_batches", c.calibration_batches, 1, 1 << 20);
    o.read("early_stop_patience", c.early_stop_patience, 0, 1 << 20);
    o.read("early_stop_min_delta", c.early_stop_min_delta, 0.0, kInf);
    o.finish();
    for (size_t i = 0; i < c.stages.size(); ++i) {
        const int64_t n = c.stages[i];
        if (c.degradation == "levelwise" && (n % 2 == 0 || n < 3))
            o.fail("stages", "levelwise degradation takes odd level counts >= 3 (2L + 1 levels, "
                             "[-L, L]), got " + std::to_string(n));
        if (c.degradation == "bitwise" && !is_power_of_two(n))
            o.fail("stages", "bitwise degradation takes powers of two (2^bits levels), got " +
                                 std::to_string(n));
        if (i > 0 && n >= c.stages[i - 1])
            o.fail("stages", "level counts must decrease from stage to stage, got " +
                                 std::to_string(c.stages[i - 1]) + " then " + std::to_string(n));
    }
    if (!c.stage_steps.empty() && c.stage_steps.size() != c.stages.size())
        o.fail("stage_steps", "expected one step count per stage (" + std::to_string(c.stages.size()) +
                                  "), got " + std::to_string(c.stage_steps.size()));
}

void read_distillation(yaml::Object o, DistillationConfig& c) {
    o.read("teacher", c.teacher);
    o.read("ce", c.ce, 0.0, kInf);
    o.read("kl", c.kl, 0.0, kInf);
    o.read("temperature", c.temperature, 0.0, kInf, /*min_open=*/true);
    o.read("hidden_mse", c.hidden_mse, 0.0, kInf);
    if (!c.teacher.empty() && c.ce == 0 && c.kl == 0 && c.hidden_mse == 0)
        o.fail("ce", "ce, kl and hidden_mse are all 0: the loss would be zero");
    o.finish();
}

void read_optimizer(yaml::Object o, OptimizerConfig& c) {
    o.read_choice("type", c.type, {"adamw"});
    o.read("lr", c.lr, 0.0, kInf, /*min_open=*/true);
    o.read("weight_decay", c.weight_decay, 0.0, kInf);
    o.read("beta1", c.beta1, 0.0, 0.999999);
    o.read("beta2", c.beta2, 0.0, 0.999999);
    o.read("eps", c.eps, 0.0, 1.0, /*min_open=*/true);
    o.read("grad_clip", c.grad_clip, 0.0, kInf);
    o.read("scale_lr", c.scale_lr, 0.0, kInf);
    o.finish();
}

void read_schedule(yaml::Object o, ScheduleConfig& s) {
    o.read_choice("type", s.type, {"constant", "cosine", "linear"});
    o.read("warmup_steps", s.warmup_steps, 0, kMaxI);
    o.read("min_lr_ratio", s.min_lr_ratio, 0.0, 1.0);
    o.finish();
}

void read_training(yaml::Object o, TrainingConfig& t) {
    const bool has_epochs = o.has("epochs"), has_steps = o.has("steps");
    o.read("epochs", t.epochs, 0, 1 << 20);
    o.read("steps", t.steps, 0, kMaxI);
    if (has_steps && !has_epochs) t.epochs = 0;
    if ((t.epochs > 0) == (t.steps > 0))
        o.fail(t.steps > 0 ? "steps" : "epochs",
               "give exactly one of training.epochs and training.steps as a positive number "
               "(got epochs=" + std::to_string(t.epochs) + ", steps=" + std::to_string(t.steps) +
                   "; with --set, zero the other one, e.g. --set training.epochs=0)");
    o.read("batch_size", t.batch_size, 1, 1 << 24);
    o.read("eval_batch_size", t.eval_batch_size, 1, 1 << 24);
    o.read("eval_every", t.eval_every, 0, kMaxI);
    o.read("checkpoint_every", t.checkpoint_every, 1, kMaxI);
    o.read("log_every", t.log_every, 1, kMaxI);
    o.read("threads", t.threads, 0, 1024);
    o.finish();
}

}  // namespace

ModelConfig model_defaults(const std::string& type) {
    TRIT_CHECK(contains(kModelTypes, type), "model.type: unknown model '", type,
               "'; known: ", join(kModelTypes));
    ModelConfig m;
    m.type = type;
    if (type == "mlp") return m;
    // Transformers: bias-free linears as in Llama and BitNet; gelu as in ViT and GPT-2.
    m.activation = "gelu";
    m.bias = false;
    if (type == "gpt") m.dim = 128;
    return m;
}

std::vector<std::string> model_keys(const std::string& type) {
    TRIT_CHECK(contains(kModelTypes, type), "model.type: unknown model '", type,
               "'; known: ", join(kModelTypes));
    if (type == "mlp") return {"type", "input", "hidden", "classes", "activation", "bias"};
    std::vector<std::string> keys = {"type"};
    if (type == "vit") keys.insert(keys.end(), {"input", "classes", "patch"});
    if (type == "gpt") keys.push_back("context");
    keys.insert(keys.end(),
                {"dim", "depth", "heads", "mlp_hidden", "activation", "subln", "norm_eps", "bias"});
    return keys;
}

ModelConfigProblem check_model_config(const ModelConfig& c) {
    auto problem = [](const std::string& key, const auto&... what) {
        return ModelConfigProblem{key, detail::concat(what...)};
    };
    if (!contains(kModelTypes, c.type))
        return problem("type", "unknown model '", c.type, "'; known: ", join(kModelTypes));
    if (c.type == "mlp") {
        if (c.activation != "relu" && c.activation != "gelu")
            return problem("activation", "expected one of {relu, gelu} for mlp, got '",
                           c.activation, "'");
        if (c.input < 1) return problem("input", "expected an integer >= 1, got ", c.input);
        if (c.classes < 2) return problem("classes", "expected an integer >= 2, got ", c.classes);
        for (int64_t h : c.hidden)
            if (h < 1) return problem("hidden", "expected widths >= 1, got ", h);
        return {};
    }
    if (c.activation != "gelu" && c.activation != "relu2" && c.activation != "swiglu")
        return problem("activation", "expected one of {gelu, relu2, swiglu} for ", c.type,
                       ", got '", c.activation, "'");
    if (c.dim < 1) return problem("dim", "expected an integer >= 1, got ", c.dim);
    if (c.depth < 1) return problem("depth", "expected an integer >= 1, got ", c.depth);
    if (c.mlp_hidden < 0)
        return problem("mlp_hidden", "expected an integer >= 0 (0 = default), got ", c.mlp_hidden);
    if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps))
        return problem("norm_eps", "expected a number > 0, got ", c.norm_eps);
    if (c.heads < 1 || c.dim % c.heads != 0)
        return problem("heads", "expected a divisor of model.dim = ", c.dim, ", got ", c.heads);
    if (c.type == "gpt") {
        if ((c.dim / c.heads) % 2 != 0)
            return problem("heads",
                           "rotary positions need an even head dim, but model.dim / "
                           "model.heads = ",
                           c.dim, " / ", c.heads, " = ", c.dim / c.heads);
        if (c.context < 1) return problem("context", "expected an integer >= 1, got ", c.context);
        return {};
    }
    // vit
    if (c.classes < 2) return problem("classes", "expected an integer >= 2, got ", c.classes);
    int64_t side = 0;
    while ((side + 1) * (side + 1) <= c.input)
        ++side;
    if (side * side != c.input || side < 1)
        return problem("input", "vit takes square images (side * side features), got ", c.input);
    if (c.patch < 1 || side % c.patch != 0)
        return problem("patch", "expected a divisor of the image side ", side,
                       " (model.input = ", c.input, "), got ", c.patch);
    return {};
}

DataConfig data_defaults(const std::string& dataset) {
    TRIT_CHECK(contains(kDatasets, dataset), "data.dataset: unknown dataset '", dataset,
               "'; known: ", join(kDatasets));
    DataConfig d;
    d.dataset = dataset;
    if (dataset == "fortunes") d.path = kDefaultFortunesDir;
    return d;
}

std::string dataset_for_model(const std::string& type) {
    return type == "gpt" ? "fortunes" : "fashion_mnist";
}

Recipe parse_recipe(const std::string& text, const std::string& source_name,
                    const std::vector<std::string>& overrides) {
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        TRIT_FAIL(source_name, ":", e.mark.line + 1, ": not valid YAML: ", e.msg);
    }
    auto source = std::make_shared<yaml::Source>();
    source->name = source_name;
    for (const auto& o : overrides) source->overridden.insert(yaml::apply_override(root, o));

    Recipe r;
    r.name = fs::stem(source_name);
    yaml::Object top(root, "", source);
    top.read("name", r.name);
    TRIT_CHECK(!r.name.empty() && r.name.find('/') == std::string::npos, top.where("name"),
               ": expected a non-empty name without '/'");
    top.read("seed", r.seed);
    read_model(top.object("model"), r.model);
    read_data(top.object("data"), r.data, r.model.type);
    read_quantization(top.object("quantization"), r.quantization);
    read_sparsity(top.object("sparsity"), r.sparsity);
    read_smsq(top.object("smsq"), r.smsq);
    read_distillation(top.object("distillation"), r.distillation);
    {
        yaml::Object o = top.object("init");
        o.read("from", r.init.from);
        o.finish();
    }
    read_optimizer(top.object("optimizer"), r.optimizer);
    read_schedule(top.object("schedule"), r.schedule);
    read_training(top.object("training"), r.training);
    {
        yaml::Object o = top.object("output");
        o.read("dir", r.output.dir);
        o.finish();
    }
    top.finish();

    // Cross-section rules.
    if (r.data.dataset == "fashion_mnist") {
        yaml::Object m = top.object("model");
        TRIT_CHECK(r.model.input == 784, m.where("input"),
                   ": fashion_mnist images have 784 features (28x28), got ", r.model.input);
        TRIT_CHECK(r.model.classes == 10, m.where("classes"),
                   ": fashion_mnist has 10 classes, got ", r.model.classes);
    }
    {
        const auto& q = r.quantization;
        yaml::Object qo = top.object("quantization");
        if (q.attention != "none" && r.model.type == "mlp")
            qo.fail("attention", "applies to vit and gpt (an mlp has no attention)");
        const bool levels = q.activation.method == "ternary" || q.attention == "ternary";
        if (!r.smsq.stages.empty() && !levels)
            top.object("smsq").fail("stages",
                                    "needs quantization.activation.method: ternary or quantization."
                                    "attention: ternary (there are no activation levels to degrade)");
        if (r.smsq.early_stop_patience > 0 && r.training.eval_every == 0)
            top.object("smsq").fail("early_stop_patience",
                                    "needs training.eval_every > 0 (it counts evaluations)");
        if (q.select.fraction > 0 && r.init.from.empty())
            qo.object("select").fail("fraction",
                                     "ranks layers of a trained model: set init.from to a float run "
                                     "or checkpoint");
        const auto& w = q.weight.method;
        if (r.sparsity.enabled() && w != "absmean" && w != "absmax_threshold")
            top.object("sparsity")
                .fail("pattern",
                      "2:4 masks ternary weight codes: it needs quantization.weight."
                      "method absmean or absmax_threshold, got '" +
                          w + "'");
    }
    if (r.output.dir.empty()) r.output.dir = "runs/" + r.name;
    return r;
}

Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
    std::ifstream in(path, std::ios::binary);
    TRIT_CHECK(fs::is_file(path) && in,
               "recipe '", path, "': cannot open the file (expected a YAML recipe, e.g. "
               "recipes/fashion_mnist_ternary.yaml)");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_recipe(ss.str(), path, overrides);
}

std::string recipe_to_yaml(const Recipe& r) {
    YAML::Emitter e;
    e.SetDoublePrecision(17);
    auto seq = [&](const auto& v) {
        e << YAML::Flow << YAML::BeginSeq;
        for (const auto& x : v) e << x;
        e << YAML::EndSeq;
    };
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << r.name;
    e << YAML::Key << "seed" << YAML::Value << r.seed;

    const ModelConfig& m = r.model;
    e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    for (const auto& key : model_keys(m.type)) {
        e << YAML::Key << key << YAML::Value;
        if (key == "type") e << m.type;
        if (key == "input") e << m.input;
        if (key == "hidden") seq(m.hidden);
        if (key == "classes") e << m.classes;
        if (key == "activation") e << m.activation;
        if (key == "bias") e << m.bias;
        if (key == "dim") e << m.dim;
        if (key == "depth") e << m.depth;
        if (key == "heads") e << m.heads;
        if (key == "mlp_hidden") e << m.mlp_hidden;
        if (key == "subln") e << m.subln;
        if (key == "norm_eps") e << m.norm_eps;
        if (key == "patch") e << m.patch;
        if (key == "context") e << m.context;
    }
    e << YAML::EndMap;

    const DataConfig& d = r.data;
    e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
    for (const auto& key : data_keys(d.dataset)) {
        e << YAML::Key << key << YAML::Value;
        if (key == "dataset") e << d.dataset;
        if (key == "path") e << d.path;
        if (key == "train_limit") e << d.train_limit;
        if (key == "test_limit") e << d.test_limit;
        if (key == "normalize") e << d.normalize;
        if (key == "valid_fraction") e << d.valid_fraction;
    }
    e << YAML::EndMap;

    const auto& q = r.quantization;
    e << YAML::Key << "quantization" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "weight" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "method" << YAML::Value << q.weight.method;
    e << YAML::Key << "granularity" << YAML::Value << q.weight.granularity;
    e << YAML::Key << "group_size" << YAML::Value << q.weight.group_size;
    e << YAML::Key << "threshold" << YAML::Value << q.weight.threshold;
    e << YAML::Key << "depth" << YAML::Value << q.weight.depth;
    e << YAML::EndMap;
    e << YAML::Key << "activation" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "method" << YAML::Value << q.activation.method;
    e << YAML::EndMap;
    if (q.attention != "none") e << YAML::Key << "attention" << YAML::Value << q.attention;
    e << YAML::Key << "targets" << YAML::Value;
    seq(q.targets);
    e << YAML::Key << "ignore" << YAML::Value;
    seq(q.ignore);
    // Sections and keys added after format 1 recipes are written only when used, so the recipes
    // of earlier runs (checkpoints, model files) read and resume unchanged.
    if (q.select.fraction > 0) {
        e << YAML::Key << "select" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "fraction" << YAML::Value << q.select.fraction;
        e << YAML::Key << "calibration_batches" << YAML::Value << q.select.calibration_batches;
        e << YAML::Key << "metric" << YAML::Value << q.select.metric;
        e << YAML::Key << "layers" << YAML::Value;
        seq(q.select.layers);
        e << YAML::EndMap;
    }
    e << YAML::EndMap;

    if (r.sparsity.enabled()) {
        const auto& c = r.sparsity;
        e << YAML::Key << "sparsity" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "pattern" << YAML::Value << c.pattern;
        e << YAML::Key << "mask" << YAML::Value << c.mask;
        e << YAML::Key << "freeze_after" << YAML::Value << c.freeze_after;
        e << YAML::Key << "recompute_every" << YAML::Value << c.recompute_every;
        e << YAML::EndMap;
    }
    if (!r.smsq.stages.empty()) {
        const auto& c = r.smsq;
        e << YAML::Key << "smsq" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "stages" << YAML::Value;
        seq(c.stages);
        e << YAML::Key << "degradation" << YAML::Value << c.degradation;
        e << YAML::Key << "rescale" << YAML::Value << c.rescale;
        e << YAML::Key << "stage_steps" << YAML::Value;
        seq(c.stage_steps);
        e << YAML::Key << "final_fraction" << YAML::Value << c.final_fraction;
        e << YAML::Key << "calibration_batches" << YAML::Value << c.calibration_batches;
        e << YAML::Key << "early_stop_patience" << YAML::Value << c.early_stop_patience;
        e << YAML::Key << "early_stop_min_delta" << YAML::Value << c.early_stop_min_delta;
        e << YAML::EndMap;
    }
    if (!r.distillation.teacher.empty()) {
        const auto& c = r.distillation;
        e << YAML::Key << "distillation" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "teacher" << YAML::Value << c.teacher;
        e << YAML::Key << "ce" << YAML::Value << c.ce;
        e << YAML::Key << "kl" << YAML::Value << c.kl;
        e << YAML::Key << "temperature" << YAML::Value << c.temperature;
        e << YAML::Key << "hidden_mse" << YAML::Value << c.hidden_mse;
        e << YAML::EndMap;
    }
    if (!r.init.from.empty()) {
        e << YAML::Key << "init" << YAML::Value << YAML::BeginMap;
        e << YAML::Key << "from" << YAML::Value << r.init.from;
        e << YAML::EndMap;
    }

    const auto& o = r.optimizer;
    e << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "type" << YAML::Value << o.type;
    e << YAML::Key << "lr" << YAML::Value << o.lr;
    e << YAML::Key << "weight_decay" << YAML::Value << o.weight_decay;
    e << YAML::Key << "beta1" << YAML::Value << o.beta1;
    e << YAML::Key << "beta2" << YAML::Value << o.beta2;
    e << YAML::Key << "eps" << YAML::Value << o.eps;
    e << YAML::Key << "grad_clip" << YAML::Value << o.grad_clip;
    if (o.scale_lr > 0) e << YAML::Key << "scale_lr" << YAML::Value << o.scale_lr;
    e << YAML::EndMap;

    e << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "type" << YAML::Value << r.schedule.type;
    e << YAML::Key << "warmup_steps" << YAML::Value << r.schedule.warmup_steps;
    e << YAML::Key << "min_lr_ratio" << YAML::Value << r.schedule.min_lr_ratio;
    e << YAML::EndMap;

    const auto& t = r.training;
    e << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "epochs" << YAML::Value << t.epochs;
    e << YAML::Key << "steps" << YAML::Value << t.steps;
    e << YAML::Key << "batch_size" << YAML::Value << t.batch_size;
    e << YAML::Key << "eval_batch_size" << YAML::Value << t.eval_batch_size;
    e << YAML::Key << "eval_every" << YAML::Value << t.eval_every;
    e << YAML::Key << "checkpoint_every" << YAML::Value << t.checkpoint_every;
    e << YAML::Key << "log_every" << YAML::Value << t.log_every;
    e << YAML::Key << "threads" << YAML::Value << t.threads;
    e << YAML::EndMap;

    e << YAML::Key << "output" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "dir" << YAML::Value << r.output.dir;
    e << YAML::EndMap;
    e << YAML::EndMap;
    return std::string(e.c_str()) + "\n";
}

}  // namespace trit
