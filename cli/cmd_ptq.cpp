// `trit ptq [RECIPE] [flags]`: post-training quantization (cli/ptq.h). Every flag sets one key of
// the ptq recipe (docs/recipes.md, "trit ptq"), applied after the recipe file and before --set;
// --print-recipe shows the resolved recipe, the YAML equivalent of a command line.
#include <malloc.h>

#include <iomanip>
#include <iostream>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "cli/ptq.h"
#include "core/error.h"
#include "core/fs.h"

namespace trit::cli {
namespace {

// A YAML double-quoted scalar holding `s` exactly.
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        out += ch;
    }
    return out + "\"";
}

std::string quoted_list(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + quoted(items[i]);
    return out + "]";
}

}  // namespace

Command add_ptq(CLI::App& app) {
    struct Args {
        std::string recipe;
        std::vector<std::string> sets;
        // flag -> recipe key, in the order they are applied
        std::vector<std::pair<std::string, std::string>> scalar;  // (key, value as YAML)
        std::map<std::string, std::string> strings;
        std::map<std::string, std::vector<std::string>> lists;
        bool act_order = false, static_groups = false, no_sequential = false, print_recipe = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand(
        "ptq", "Quantize a trained float model (trit run or safetensors) to the packed formats, layer by layer");
    sub->add_option("recipe", a->recipe, "ptq recipe (YAML); flags override its keys (docs/recipes.md, trit ptq)");
    struct Flag {
        const char* name;
        const char* key;
        const char* help;
    };
    // Flags holding one value.
    static const Flag kValueFlags[] = {
        {"--model", "model", "Run directory, checkpoint, or .safetensors file (key model)"},
        {"-o,--output", "output", "Model file to write, .h5 (key output)"},
        {"--depth", "bt.depth", "bt: trits per weight, 1..4 (key bt.depth)"},
        {"--group-size", "group_size", "Input weights per scale (key group_size)"},
        {"--rtn-rule", "rtn.rule", "rtn: absmean | absmax_threshold (key rtn.rule)"},
        {"--threshold", "rtn.threshold", "rtn absmax_threshold: lambda (key rtn.threshold)"},
        {"--bt-scale", "bt.scale", "bt: search | max (key bt.scale)"},
        {"--scale-dtype", "scale_dtype", "float16 | float32 (key scale_dtype)"},
        {"--damp", "gptq.damp", "gptq: dampening, a fraction of mean(diag H) (key gptq.damp)"},
        {"--block-size", "gptq.block_size", "gptq: columns per lazy-update block (key gptq.block_size)"},
        {"--prune-criterion", "prune24.criterion", "2:4: magnitude | saliency (key prune24.criterion)"},
        {"--bits-per-weight", "select.bits_per_weight", "select: budget over the selected layers (key select.bits_per_weight)"},
        {"--select-metric", "select.metric", "select: relative_mse | mse (key select.metric)"},
        {"--calibration-samples", "calibration.samples", "Examples or windows (key calibration.samples)"},
        {"--calibration-batch", "calibration.batch", "Per forward (key calibration.batch)"},
        {"--calibration-seed", "calibration.seed", "Which samples (key calibration.seed)"},
        {"--calibration-text", "calibration.text", "gpt: calibrate on windows of this text file (key calibration.text)"},
        {"--calibration-data", "calibration.data", "Dataset directory (key calibration.data)"},
        {"--calibration-activations", "calibration.activations",
         "safetensors model: each layer's recorded inputs (key calibration.activations)"},
        {"--activation", "activation", "none | int8_per_token (key activation)"},
        {"--float-dtype", "float_dtype", "What stays float: float32 | float16 | bfloat16 (key float_dtype)"},
        {"--threads", "threads", "CPU threads, 0 = LibTorch's default (key threads)"},
    };
    for (const Flag& f : kValueFlags) {
        const std::string key = f.key;
        sub->add_option_function<std::string>(
            f.name, [a, key](const std::string& v) { a->strings[key] = v; }, f.help);
    }
    static const Flag kListFlags[] = {
        {"--method", "methods", "One grid (rtn | bt | binary) plus gptq and/or 2:4, e.g. bt,gptq (key methods)"},
        {"--targets", "targets", "Layers to quantize: names or re:<regex> (key targets)"},
        {"--ignore", "ignore", "Layers to leave float (key ignore)"},
        {"--select", "select.candidates", "Choose per layer among these formats, e.g. bt1,bt2,bt3 (key select.candidates)"},
    };
    for (const Flag& f : kListFlags) {
        const std::string key = f.key;
        sub->add_option_function<std::vector<std::string>>(
               f.name, [a, key](const std::vector<std::string>& v) { a->lists[key] = v; }, f.help)
            ->delimiter(',');
    }
    sub->add_flag("--act-order", a->act_order, "gptq: columns by descending H_ii (key gptq.act_order)");
    sub->add_flag("--static-groups", a->static_groups, "gptq: all scales from the original weights (key gptq.static_groups)");
    sub->add_flag("--no-sequential", a->no_sequential,
                  "trit model: calibrate every layer on the float model's inputs (key calibration.sequential)");
    sub->add_option("--set", a->sets, "Override a recipe key: --set key.path=value (repeatable; after the flags)");
    sub->add_flag("--print-recipe", a->print_recipe, "Print the resolved recipe and exit");
    sub->footer(
        "Examples:\n"
        "  trit ptq --model runs/gpt_fp32 --method bt --depth 3 -o gpt-bt3.h5\n"
        "  trit ptq --model runs/gpt_fp32 --method bt,gptq --depth 2 -o gpt-bt2-gptq.h5\n"
        "  trit ptq --model runs/vit_fp32 --method rtn,2:4,gptq --prune-criterion saliency -o vit-tern24.h5\n"
        "  trit ptq --model runs/gpt_fp32 --select bt1,bt2,bt3 --bits-per-weight 2.5 --method gptq -o gpt-mixed.h5\n"
        "  trit ptq --model model.safetensors --method bt --depth 2 -o model-bt2.h5\n"
        "  trit ptq recipes/ptq_gpt_bt2_gptq.yaml --set calibration.samples=64");
    return {sub, [a]() {
        std::vector<std::string> overrides;
        for (const auto& [key, v] : a->strings) overrides.push_back(key + "=" + quoted(v));
        for (const auto& [key, v] : a->lists) overrides.push_back(key + "=" + quoted_list(v));
        if (a->act_order) overrides.push_back("gptq.act_order=true");
        if (a->static_groups) overrides.push_back("gptq.static_groups=true");
        if (a->no_sequential) overrides.push_back("calibration.sequential=false");
        overrides.insert(overrides.end(), a->sets.begin(), a->sets.end());
        const PtqConfig c = a->recipe.empty() ? parse_ptq_recipe("{}", "<command line>", overrides)
                                              : load_ptq_recipe(a->recipe, overrides);
        if (a->print_recipe) {
            std::cout << ptq_recipe_to_yaml(c);
            return 0;
        }
#ifdef __GLIBC__
        // glibc raises its mmap threshold after the first large free (up to 32 MB), so the layers'
        // workspaces then come from the heap and stay with the process: measured, the resident
        // memory of a 1-billion-parameter run grew by ~220 MB per decoder block (3.99 GB peak for a
        // 2.08 GB model); a fixed threshold returns every large buffer when it is freed (0.28 GB of
        // heap for the same layers).
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
        std::cout << "ptq " << c.model << " -> " << c.output << std::endl;
        const PtqResult r = run_ptq(c, std::cout);
        const std::string table = format_ptq_report(r.layers);
        std::string report = c.output.substr(0, c.output.size() - 3) + ".report.txt";
        fs::write_file_atomic(report, ptq_recipe_to_yaml(c) + "\n" + table);
        std::cout << "\n" << table << std::fixed << std::setprecision(3) << "result: " << r.layers.size()
                  << " layers, " << r.weights << " weights at " << r.bits_per_weight << " bits per weight; "
                  << c.output << " (" << std::setprecision(1) << static_cast<double>(r.file_bytes) / 1e6
                  << " MB), report " << report << ", " << r.seconds << " s" << std::endl;
        return 0;
    }};
}

}  // namespace trit::cli
