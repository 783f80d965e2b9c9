// The recipe: everything a training run needs, as plain structs with defaults. One comment per
// field says what it means; docs/recipes.md is the user-facing reference. Reading (strict, with
// key paths and lines), validation and writing live in recipe.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trit {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kDefaultFortunesDir = "/usr/share/games/fortunes";

// One struct for every model family; model_defaults(type) holds each family's defaults and
// model_keys(type) the keys that apply to it (a recipe that sets another one is an error).
struct ModelConfig {
    std::string type = "mlp";                  // model family: mlp | vit | gpt
    int64_t input = 784;                       // mlp, vit: input features (vit: a square image)
    std::vector<int64_t> hidden = {256, 128};  // mlp: hidden layer widths
    int64_t classes = 10;                      // mlp, vit: output classes
    std::string activation = "relu";           // mlp: relu | gelu; vit, gpt: gelu | relu2 | swiglu
    bool bias = true;                          // linear layers carry a bias (vit, gpt: false)
    int64_t dim = 96;                          // vit, gpt: model width (gpt: 128)
    int64_t depth = 4;                         // vit, gpt: transformer blocks
    int64_t heads = 4;                         // vit, gpt: attention heads; must divide dim
    int64_t mlp_hidden = 0;                    // vit, gpt: MLP width (0 = 4*dim, swiglu 8*dim/3)
    bool subln = false;                        // vit, gpt: RMSNorm before attn.o and mlp.down
    double norm_eps = 1e-5;                    // vit, gpt: RMSNorm epsilon
    int64_t patch = 7;                         // vit: patch side; must divide the image side
    int64_t context = 256;                     // gpt: longest sequence, KV cache capacity
};

// The defaults of model family `type` (mlp, vit or gpt); throws for an unknown type.
ModelConfig model_defaults(const std::string& type);
// The model keys that apply to `type`, `type` included, in recipe order.
std::vector<std::string> model_keys(const std::string& type);

// A rule a ModelConfig breaks: the model key at fault and what was expected.
struct ModelConfigProblem {
    std::string key;
    std::string message;
};
// The first cross-field rule `c` breaks (heads divide dim, even head dim for gpt's rotary
// positions, patch divides the image side, ...), or an empty key when it has none. The recipe
// reader reports it with the key's line; make_model with "model.<key>: ".
ModelConfigProblem check_model_config(const ModelConfig& c);

struct DataConfig {
    std::string dataset = "fashion_mnist";       // fashion_mnist | fortunes
    std::string path = kDefaultFashionMnistDir;  // fashion_mnist: directory with the gzip IDX
                                                 // files; fortunes: kDefaultFortunesDir
    int64_t train_limit = 0;      // fashion_mnist: first N training examples (0 = all)
    int64_t test_limit = 0;       // fashion_mnist: first N test examples (0 = all)
    bool normalize = true;        // fashion_mnist: subtract the training mean, divide by std
    double valid_fraction = 0.1;  // fortunes: share of the text held out for validation
};

// The defaults of dataset `dataset` (fashion_mnist or fortunes); throws for an unknown one.
DataConfig data_defaults(const std::string& dataset);
// The dataset model family `type` trains on: fortunes for gpt, fashion_mnist otherwise.
std::string dataset_for_model(const std::string& type);

struct WeightQuantConfig {
    std::string method = "none";  // none | absmean (BitNet b1.58) | absmax_threshold | binary | balanced
    std::string granularity = "channel";  // scale per: tensor | channel | group
    int64_t group_size = 64;            // input weights per scale when granularity = group
    double threshold = 0.05;            // absmax_threshold: zero where |w| <= threshold * max|w|
    int64_t depth = 2;                  // balanced: trits per weight, levels +-(3^depth - 1) / 2
};

struct ActQuantConfig {
    std::string method = "none";  // none | int8_per_token (absmax, BitNet) | ternary (BWTA: learnable
                                  // scale, bool where the input is non-negative)
};

// LLM-style layer selection (BWTA seed, C.1): of the layers `targets` / `ignore` select, quantize
// only the `fraction` whose output changes least when quantized alone, measured on calibration
// batches of the model loaded by init.from.
struct SelectionConfig {
    double fraction = 0;                // share of the selected layers to quantize (0 = off)
    int64_t calibration_batches = 8;    // training batches the ranking is measured on
    std::string metric = "mse";         // mse | relative_mse (divided by the float output's mean square)
    std::vector<std::string> layers;    // written by the trainer: the layers chosen (recipe.yaml)
};

struct QuantizationConfig {
    WeightQuantConfig weight;
    ActQuantConfig activation;
    std::string attention = "none";  // none | ternary: Q, K, V ternary, probabilities bool (vit, gpt)
    std::vector<std::string> targets = {"re:.*"};  // layers to quantize: names or re:<regex>
    std::vector<std::string> ignore;               // layers to leave in float (wins over targets)
    SelectionConfig select;
};

// 2:4 structured sparsity of the quantized layers' ternary weight codes (Sparse-BitNet's
// quantize-then-mask): the codes come from the dense latent weights as without it, then in every
// 4 consecutive inputs only the 2 with the largest |W| among non-zero codes are kept. The mask is
// each layer's buffer `mask24` (saved in checkpoints); see core/sparsity.h.
struct SparsityConfig {
    std::string pattern = "none";  // none (off) | 2:4
    std::string mask = "dynamic";  // dynamic (recomputed from the latent weights) | frozen (once)
    int64_t freeze_after = 0;      // dynamic: no recomputation after this step (0 = never frozen)
    int64_t recompute_every = 1;   // dynamic: recompute after every N optimizer steps (1 = each)
    bool enabled() const { return pattern != "none"; }
};

// Smooth Multi-stage Quantization (BWTA seed, §4): the activation quantizers go through stages of
// decreasing level counts; at each transition their scales are re-set and the optimizer and
// schedule start afresh.
struct SmsqConfig {
    std::vector<int64_t> stages;          // level counts, e.g. [9, 7, 5, 3] (empty = off)
    std::string degradation = "levelwise";  // levelwise (odd counts) | bitwise (powers of two)
    std::string rescale = "projection";   // projection (§4.2) | mean (eq. 6 again) | none
    std::vector<int64_t> stage_steps;     // steps per stage (empty: final_fraction, rest even)
    double final_fraction = 0.5;          // share of the steps for the last stage
    int64_t calibration_batches = 4;      // training batches measured at a transition
    int64_t early_stop_patience = 0;      // earlier stages end after N evaluations without a
                                          // better eval loss (0 = off); needs eval_every
    double early_stop_min_delta = 0.0;    // an improvement must exceed this
};

// Knowledge distillation from a float model of the same architecture.
struct DistillationConfig {
    std::string teacher;        // run directory or checkpoint (empty = off)
    double ce = 1.0;            // weight of the cross-entropy with the labels
    double kl = 1.0;            // weight of T^2 * KL(teacher || student) at temperature T
    double temperature = 1.0;   // T
    double hidden_mse = 0.0;    // weight of the mean squared error of the blocks' outputs
};

struct InitConfig {
    std::string from;  // run directory or checkpoint whose model weights start the run (empty = off)
};

struct OptimizerConfig {
    std::string type = "adamw";  // adamw
    double lr = 1e-3;            // peak learning rate
    double weight_decay = 0.01;  // decoupled weight decay
    double beta1 = 0.9;          // Adam first-moment decay
    double beta2 = 0.999;        // Adam second-moment decay
    double eps = 1e-8;           // Adam denominator epsilon
    double grad_clip = 1.0;      // clip the global gradient norm to this (0 = off)
    double scale_lr = 0.0;       // peak learning rate of activation scales (0 = lr); no decay
};

struct ScheduleConfig {
    std::string type = "cosine";  // constant | cosine | linear (decay after warm-up)
    int64_t warmup_steps = 0;     // linear warm-up from 0 to lr over this many steps
    double min_lr_ratio = 0.0;    // final lr = min_lr_ratio * lr (cosine, linear)
};

struct TrainingConfig {
    int64_t epochs = 10;            // passes over the training split (0 when steps is given)
    int64_t steps = 0;              // optimizer steps instead of epochs (0 = use epochs)
    int64_t batch_size = 128;       // examples per optimizer step
    int64_t eval_batch_size = 1000;  // examples per evaluation forward
    int64_t eval_every = 0;         // evaluate every N steps (0 = at the end of each epoch)
    int64_t checkpoint_every = 500;  // write a checkpoint every N steps (and always at the end)
    int64_t log_every = 50;         // metrics line and plain progress line every N steps
    int64_t threads = 0;            // CPU threads for LibTorch (0 = its default)
};

struct OutputConfig {
    std::string dir;  // run directory (default runs/<name>); --out overrides
};

struct Recipe {
    std::string name;  // run name (default: the recipe file's stem)
    uint64_t seed = 0;  // seeds initialisation and data order
    ModelConfig model;
    DataConfig data;
    QuantizationConfig quantization;
    SparsityConfig sparsity;
    SmsqConfig smsq;
    DistillationConfig distillation;
    InitConfig init;
    OptimizerConfig optimizer;
    ScheduleConfig schedule;
    TrainingConfig training;
    OutputConfig output;
};

// Reads a recipe file, applies `--set key.path=value` overrides, validates everything.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from text; `source_name` is what errors call it.
Recipe parse_recipe(const std::string& text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});
// The fully resolved recipe (every key, defaults included) as YAML; parse_recipe reads it back.
std::string recipe_to_yaml(const Recipe& recipe);

}  // namespace trit
