// `trit ptq`: post-training quantization of a trained float model to the packed formats, layer by
// layer. The recipe (PtqConfig, read from YAML with the strict reader of core/yaml_schema.h; every
// command-line flag sets one of its keys) says what to quantize and how:
//   - the model: a trit run directory or checkpoint (its recipe's architecture: the result is a
//     runnable model file), or a Hugging Face safetensors file (F32/F16/BF16; the result holds its
//     linear layers and other tensors by name: ModelArchitecture::kLinears);
//   - one grid (rtn: ternary absmean or absmax_threshold; bt: balanced ternary of depth 1..4 with a
//     searched per-group scale; binary), optionally with gptq (error compensation from the layer
//     Hessian) and 2:4 pruning (magnitude or saliency), per group of `group_size` inputs;
//   - or, with `select`, a choice among candidate formats per layer within a bits-per-weight
//     budget, the least sensitive layers getting the most aggressive formats;
//   - calibration inputs (gptq, saliency, select, the report's output error): samples of the trit
//     recipe's training data or windows of a text file (gpt), or for a safetensors model each
//     layer's recorded inputs from a safetensors file.
// The quantizers are in quantizers/ (grid, gptq, prune24, hessian); this file wires them to the
// sources, the calibration and the model file, and writes the per-layer report.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "exporters/packed_model.h"

namespace trit::cli {

struct PtqConfig {
    std::string model;   // run directory, checkpoint (.pt) or .safetensors file
    std::string output;  // the model file (.h5) to write
    // One grid (rtn | bt | binary), plus gptq and/or 2:4 ("2:4"), in any order. With select: only
    // gptq or nothing (the default then is nothing).
    std::vector<std::string> methods = {"bt"};
    std::string rtn_rule = "absmean";  // rtn: absmean | absmax_threshold
    double threshold = 0.05;           // rtn absmax_threshold: lambda
    int64_t depth = 2;                 // bt: trits per weight, 1..4
    std::string bt_scale = "search";   // bt: search (minimise each group's error) | max (max|w| / L)
    int64_t search_points = 100;       // bt search: candidate scales per group
    double search_min = 0.2;           // bt search: smallest candidate, as a fraction of max|w| / L
    int64_t group_size = 64;           // input weights per scale
    std::string scale_dtype = "float16";  // float16 | float32
    // gptq
    double damp = 0.01;         // lambda = damp * mean(diag H)
    int64_t block_size = 128;   // columns per lazy-update block
    bool act_order = false;     // columns by descending H_ii
    bool static_groups = false; // every scale from the original weights
    // 2:4
    std::string prune_criterion = "magnitude";  // magnitude | saliency (needs calibration)
    // Layers: names or re:<regex>; see ptq.cpp / docs for the output-layer and embedding rules.
    std::vector<std::string> targets = {"re:.*"};
    std::vector<std::string> ignore;
    // select: candidate formats (float, tern2, tern24, bin1, bt1..bt4) and the budget in bits per
    // weight over the selected layers (weights counted; scales and packing included).
    std::vector<std::string> select_candidates;
    double select_bits = 0;                    // > 0 turns selection on
    std::string select_metric = "relative_mse";  // relative_mse | mse
    // calibration
    int64_t calibration_samples = 128;   // examples (mlp, vit) or windows (gpt); 0 = no calibration
    int64_t calibration_batch = 32;      // per forward
    uint64_t calibration_seed = 0;       // which training examples / windows
    std::string calibration_text;        // gpt: windows of this text file instead of the recipe's data
    std::string calibration_data;        // dataset directory (default: the recipe's data.path)
    std::string calibration_activations; // safetensors model: each layer's inputs (rows, in)
    bool sequential = true;  // trit models: each layer's inputs come through the layers already quantized
    std::string activation = "none";  // trit models: none | int8_per_token (absmax per token)
    std::string float_dtype;          // storage of what stays float: "" (as the source) | float32 |
                                      // float16 | bfloat16
    int64_t threads = 0;              // CPU threads (0: LibTorch's default)
};

// Reads a ptq recipe (YAML text; `source_name` names it in errors) with `key=value` overrides
// (values in YAML, e.g. methods=[bt,gptq]); validates every key and combination.
PtqConfig parse_ptq_recipe(const std::string& text, const std::string& source_name,
                           const std::vector<std::string>& overrides = {});
PtqConfig load_ptq_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// The resolved recipe, every key included; parse_ptq_recipe reads it back.
std::string ptq_recipe_to_yaml(const PtqConfig& config);

struct PtqResult {
    std::vector<exporters::PtqLayerReport> layers;  // the quantized layers and those left float
    double bits_per_weight = 0;                     // over the layers in `layers`
    int64_t weights = 0;                            // their weights
    int64_t file_bytes = 0;                         // the output file's size
    double seconds = 0;
};

// Quantizes config.model into config.output; progress (one line per layer) goes to `log`.
PtqResult run_ptq(const PtqConfig& config, std::ostream& log);

// The codes (out, in) int8 and scales (out, G) float32 that `trit ptq` with recipe `c` stores for
// the weight `w` (out, in) of a layer in `format` (the layer's format in the file: with select it
// says which candidate was chosen), when they depend on the weight alone; nullopt when they also
// depend on calibration inputs (gptq, 2:4 by saliency). Throws when the recipe cannot give `format`.
struct PtqLayerCodes {
    torch::Tensor codes;
    torch::Tensor scales;
};
std::optional<PtqLayerCodes> reproduce_layer_codes(const PtqConfig& c, const std::string& format,
                                                   const torch::Tensor& w);

// The report as a fixed-width table (one row per layer, then the totals).
std::string format_ptq_report(const std::vector<exporters::PtqLayerReport>& layers);

}  // namespace trit::cli
