// Recipe reading, validation and writing. The reader is strict (see yaml_schema.h); cross-field
// rules (epochs xor steps, model shape vs dataset, regex syntax) are checked after reading.
#include "core/recipe.h"

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

void read_model(yaml::Object o, ModelConfig& m) {
    o.read_choice("type", m.type, {"mlp"});
    o.read("input", m.input, 1, 1 << 24);
    o.read("hidden", m.hidden, 1, 1 << 20);
    o.read("classes", m.classes, 2, 1 << 20);
    o.read_choice("activation", m.activation, {"relu", "gelu"});
    o.read("bias", m.bias);
    o.finish();
}

void read_data(yaml::Object o, DataConfig& d) {
    o.read_choice("dataset", d.dataset, {"fashion_mnist"});
    o.read("path", d.path);
    o.read("train_limit", d.train_limit, 0, kMaxI);
    o.read("test_limit", d.test_limit, 0, kMaxI);
    o.read("normalize", d.normalize);
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
        a.read_choice("method", q.activation.method, {"none", "int8_per_token"});
        a.finish();
    }
    o.read("targets", q.targets);
    o.read("ignore", q.ignore);
    for (const auto& p : q.targets) check_pattern(o, "targets", p);
    for (const auto& p : q.ignore) check_pattern(o, "ignore", p);
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
    read_data(top.object("data"), r.data);
    read_quantization(top.object("quantization"), r.quantization);
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

    e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "type" << YAML::Value << r.model.type;
    e << YAML::Key << "input" << YAML::Value << r.model.input;
    e << YAML::Key << "hidden" << YAML::Value;
    seq(r.model.hidden);
    e << YAML::Key << "classes" << YAML::Value << r.model.classes;
    e << YAML::Key << "activation" << YAML::Value << r.model.activation;
    e << YAML::Key << "bias" << YAML::Value << r.model.bias;
    e << YAML::EndMap;

    e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "dataset" << YAML::Value << r.data.dataset;
    e << YAML::Key << "path" << YAML::Value << r.data.path;
    e << YAML::Key << "train_limit" << YAML::Value << r.data.train_limit;
    e << YAML::Key << "test_limit" << YAML::Value << r.data.test_limit;
    e << YAML::Key << "normalize" << YAML::Value << r.data.normalize;
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
    e << YAML::Key << "targets" << YAML::Value;
    seq(q.targets);
    e << YAML::Key << "ignore" << YAML::Value;
    seq(q.ignore);
    e << YAML::EndMap;

    const auto& o = r.optimizer;
    e << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "type" << YAML::Value << o.type;
    e << YAML::Key << "lr" << YAML::Value << o.lr;
    e << YAML::Key << "weight_decay" << YAML::Value << o.weight_decay;
    e << YAML::Key << "beta1" << YAML::Value << o.beta1;
    e << YAML::Key << "beta2" << YAML::Value << o.beta2;
    e << YAML::Key << "eps" << YAML::Value << o.eps;
    e << YAML::Key << "grad_clip" << YAML::Value << o.grad_clip;
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
