// The ptq recipe: reading (strict, core/yaml_schema.h), validation and writing. See ptq.h and the
// "trit ptq" section of docs/recipes.md.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/ptq.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/yaml_schema.h"
#include "exporters/format_table.h"

namespace trit::cli {
namespace {

const std::vector<std::string> kMethods = {"rtn", "bt", "binary", "gptq", "2:4"};

bool is_grid(const std::string& m) { return m == "rtn" || m == "bt" || m == "binary"; }

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joined(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
}

}  // namespace

PtqConfig parse_ptq_recipe(const std::string& text, const std::string& source_name,
                           const std::vector<std::string>& overrides) {
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        TRIT_FAIL(source_name, ":", e.mark.line + 1, ": not valid YAML: ", e.msg);
    }
    if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    TRIT_CHECK(root.IsMap(), source_name, ": expected a mapping of ptq recipe keys (model, output, methods, ...)");
    auto source = std::make_shared<yaml::Source>();
    source->name = source_name;
    for (const auto& o : overrides) source->overridden.insert(yaml::apply_override(root, o));

    PtqConfig c;
    yaml::Object top(root, "", source);
    top.read("model", c.model);
    top.read("output", c.output);
    const bool methods_given = top.has("methods");
    top.read("methods", c.methods);
    {
        yaml::Object o = top.object("rtn");
        o.read_choice("rule", c.rtn_rule, {"absmean", "absmax_threshold"});
        o.read("threshold", c.threshold, 0.0, 1.0);
        TRIT_CHECK(c.threshold < 1.0, o.where("threshold"), ": expected a value in [0, 1), got ", c.threshold);
        o.finish();
    }
    {
        yaml::Object o = top.object("bt");
        o.read("depth", c.depth, 1, 4);
        o.read_choice("scale", c.bt_scale, {"search", "max"});
        o.read("search_points", c.search_points, 2, 100000);
        o.read("search_min", c.search_min, 0.0, 1.0, /*min_open=*/true);
        TRIT_CHECK(c.search_min < 1.0, o.where("search_min"), ": expected a value in (0, 1), got ", c.search_min);
        o.finish();
    }
    top.read("group_size", c.group_size, 1, int64_t{1} << 40);
    top.read_choice("scale_dtype", c.scale_dtype, {"float16", "float32"});
    {
        yaml::Object o = top.object("gptq");
        o.read("damp", c.damp, 0.0, 1e6);
        o.read("block_size", c.block_size, 1, int64_t{1} << 40);
        o.read("act_order", c.act_order);
        o.read("static_groups", c.static_groups);
        o.finish();
    }
    {
        yaml::Object o = top.object("prune24");
        o.read_choice("criterion", c.prune_criterion, {"magnitude", "saliency"});
        o.finish();
    }
    top.read("targets", c.targets);
    top.read("ignore", c.ignore);
    {
        yaml::Object o = top.object("select");
        o.read("candidates", c.select_candidates);
        o.read("bits_per_weight", c.select_bits, 0.0, 64.0);
        o.read_choice("metric", c.select_metric, {"relative_mse", "mse"});
        for (const auto& f : c.select_candidates) {
            try {
                if (f != "float") exporters::parse_format(f);
            } catch (const Error& e) {
                o.fail("candidates", std::string(e.what()) + ", or float");
            }
        }
        TRIT_CHECK(c.select_candidates.empty() == (c.select_bits == 0), o.where("candidates"),
                   ": selection needs both candidates (at least 2 formats) and bits_per_weight > 0; got ",
                   c.select_candidates.size(), " candidates and bits_per_weight ", c.select_bits);
        TRIT_CHECK(c.select_candidates.empty() || c.select_candidates.size() >= 2, o.where("candidates"),
                   ": expected at least 2 formats to choose from, got ", joined(c.select_candidates));
        for (size_t i = 0; i < c.select_candidates.size(); ++i)
            for (size_t j = 0; j < i; ++j)
                TRIT_CHECK(c.select_candidates[i] != c.select_candidates[j], o.where("candidates"), ": '",
                           c.select_candidates[i], "' listed twice");
        o.finish();
    }
    {
        yaml::Object o = top.object("calibration");
        o.read("samples", c.calibration_samples, 0, int64_t{1} << 40);
        o.read("batch", c.calibration_batch, 1, int64_t{1} << 30);
        o.read("seed", c.calibration_seed);
        o.read("text", c.calibration_text);
        o.read("data", c.calibration_data);
        o.read("activations", c.calibration_activations);
        o.read("sequential", c.sequential);
        TRIT_CHECK(c.calibration_text.empty() || c.calibration_data.empty(), o.where("text"),
                   ": give either text (a text file) or data (the recipe's dataset directory), not both");
        TRIT_CHECK(c.calibration_activations.empty() || (c.calibration_text.empty() && c.calibration_data.empty()),
                   o.where("activations"),
                   ": recorded layer inputs replace text and data (those feed a trit model's forward)");
        o.finish();
    }
    top.read_choice("activation", c.activation, {"none", "int8_per_token"});
    top.read("float_dtype", c.float_dtype);
    TRIT_CHECK(c.float_dtype.empty() || c.float_dtype == "float32" || c.float_dtype == "float16" ||
                   c.float_dtype == "bfloat16",
               top.where("float_dtype"), ": expected float32, float16, bfloat16 or \"\" (as the source), got '",
               c.float_dtype, "'");
    top.read("threads", c.threads, 0, 4096);
    top.finish();

    // Cross-key rules.
    TRIT_CHECK(!c.model.empty(), top.where("model"),
               ": required: a run directory, a checkpoint or a .safetensors file (flag --model)");
    TRIT_CHECK(!c.output.empty() && ends_with(c.output, ".h5"), top.where("output"),
               ": required: the model file to write, ending in .h5 (flag --output), got '", c.output, "'");
    const bool select = !c.select_candidates.empty();
    if (select && !methods_given) c.methods.clear();  // the default grid gives way to the candidates
    int grids = 0;
    for (size_t i = 0; i < c.methods.size(); ++i) {
        const std::string& m = c.methods[i];
        TRIT_CHECK(std::find(kMethods.begin(), kMethods.end(), m) != kMethods.end(), top.where("methods"),
                   ": unknown method '", m, "'; known: ", joined(kMethods));
        for (size_t j = 0; j < i; ++j)
            TRIT_CHECK(c.methods[j] != m, top.where("methods"), ": '", m, "' listed twice");
        grids += is_grid(m);
    }
    const bool has_24 = std::count(c.methods.begin(), c.methods.end(), "2:4") > 0;
    if (select) {
        TRIT_CHECK(grids == 0 && !has_24, top.where("methods"),
                   ": with select the formats come from select.candidates; methods may only add gptq, got ",
                   joined(c.methods));
    } else {
        TRIT_CHECK(grids == 1, top.where("methods"),
                   ": expected exactly one grid (rtn, bt or binary), optionally with gptq and 2:4; got ",
                   c.methods.empty() ? std::string("none") : joined(c.methods));
    }
    TRIT_CHECK(!(has_24 && std::count(c.methods.begin(), c.methods.end(), "binary")), top.where("methods"),
               ": 2:4 needs a grid with a zero code; binary has none");
    return c;
}

PtqConfig load_ptq_recipe(const std::string& path, const std::vector<std::string>& overrides) {
    std::ifstream in(path, std::ios::binary);
    TRIT_CHECK(fs::is_file(path) && in, "ptq recipe '", path,
               "': cannot open the file (expected a YAML ptq recipe, e.g. recipes/ptq_gpt_bt2_gptq.yaml)");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_ptq_recipe(ss.str(), path, overrides);
}

std::string ptq_recipe_to_yaml(const PtqConfig& c) {
    YAML::Emitter e;
    e.SetDoublePrecision(17);
    auto seq = [&](const std::vector<std::string>& v) {
        e << YAML::Flow << YAML::BeginSeq;
        for (const auto& x : v) e << x;
        e << YAML::EndSeq;
    };
    e << YAML::BeginMap;
    e << YAML::Key << "model" << YAML::Value << c.model;
    e << YAML::Key << "output" << YAML::Value << c.output;
    e << YAML::Key << "methods" << YAML::Value;
    seq(c.methods);
    e << YAML::Key << "rtn" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "rule" << YAML::Value << c.rtn_rule;
    e << YAML::Key << "threshold" << YAML::Value << c.threshold;
    e << YAML::EndMap;
    e << YAML::Key << "bt" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "depth" << YAML::Value << c.depth;
    e << YAML::Key << "scale" << YAML::Value << c.bt_scale;
    e << YAML::Key << "search_points" << YAML::Value << c.search_points;
    e << YAML::Key << "search_min" << YAML::Value << c.search_min;
    e << YAML::EndMap;
    e << YAML::Key << "group_size" << YAML::Value << c.group_size;
    e << YAML::Key << "scale_dtype" << YAML::Value << c.scale_dtype;
    e << YAML::Key << "gptq" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "damp" << YAML::Value << c.damp;
    e << YAML::Key << "block_size" << YAML::Value << c.block_size;
    e << YAML::Key << "act_order" << YAML::Value << c.act_order;
    e << YAML::Key << "static_groups" << YAML::Value << c.static_groups;
    e << YAML::EndMap;
    e << YAML::Key << "prune24" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "criterion" << YAML::Value << c.prune_criterion;
    e << YAML::EndMap;
    e << YAML::Key << "targets" << YAML::Value;
    seq(c.targets);
    e << YAML::Key << "ignore" << YAML::Value;
    seq(c.ignore);
    e << YAML::Key << "select" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "candidates" << YAML::Value;
    seq(c.select_candidates);
    e << YAML::Key << "bits_per_weight" << YAML::Value << c.select_bits;
    e << YAML::Key << "metric" << YAML::Value << c.select_metric;
    e << YAML::EndMap;
    e << YAML::Key << "calibration" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "samples" << YAML::Value << c.calibration_samples;
    e << YAML::Key << "batch" << YAML::Value << c.calibration_batch;
    e << YAML::Key << "seed" << YAML::Value << c.calibration_seed;
    e << YAML::Key << "text" << YAML::Value << c.calibration_text;
    e << YAML::Key << "data" << YAML::Value << c.calibration_data;
    e << YAML::Key << "activations" << YAML::Value << c.calibration_activations;
    e << YAML::Key << "sequential" << YAML::Value << c.sequential;
    e << YAML::EndMap;
    e << YAML::Key << "activation" << YAML::Value << c.activation;
    e << YAML::Key << "float_dtype" << YAML::Value << c.float_dtype;
    e << YAML::Key << "threads" << YAML::Value << c.threads;
    e << YAML::EndMap;
    return std::string(e.c_str()) + "\n";
}

}  // namespace trit::cli
