// The recipe: everything a training run needs, as plain structs with defaults. One comment per
// field says what it means; docs/recipes.md is the user-facing reference. Reading (strict, with
// key paths and lines), validation and writing live in recipe.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trit {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ModelConfig {
    std::string type = "mlp";                 // model family: mlp
    int64_t input = 784;                      // input features (28x28 images flattened)
    std::vector<int64_t> hidden = {256, 128};  // hidden layer widths
    int64_t classes = 10;                     // output classes
    std::string activation = "relu";          // relu | gelu
    bool bias = true;                         // linear layers carry a bias
};

struct DataConfig {
    std::string dataset = "fashion_mnist";          // fashion_mnist
    std::string path = kDefaultFashionMnistDir;     // directory with the gzip IDX files
    int64_t train_limit = 0;                        // use the first N training examples (0 = all)
    int64_t test_limit = 0;                         // use the first N test examples (0 = all)
    bool normalize = true;                          // subtract the training mean, divide by std
};

struct WeightQuantConfig {
    std::string method = "none";  // none | absmean (BitNet b1.58) | absmax_threshold | binary | balanced
    std::string granularity = "channel";  // scale per: tensor | channel | group
    int64_t group_size = 64;            // input weights per scale when granularity = group
    double threshold = 0.05;            // absmax_threshold: zero where |w| <= threshold * max|w|
    int64_t depth = 2;                  // balanced: trits per weight, levels +-(3^depth - 1) / 2
};

struct ActQuantConfig {
    std::string method = "none";  // none | int8_per_token (absmax, BitNet)
};

struct QuantizationConfig {
    WeightQuantConfig weight;
    ActQuantConfig activation;
    std::vector<std::string> targets = {"re:.*"};  // layers to quantize: names or re:<regex>
    std::vector<std::string> ignore;               // layers to leave in float (wins over targets)
};

struct OptimizerConfig {
    std::string type = "adamw";  // adamw
    double lr = 1e-3;            // peak learning rate
    double weight_decay = 0.01;  // decoupled weight decay
    double beta1 = 0.9;          // Adam first-moment decay
    double beta2 = 0.999;        // Adam second-moment decay
    double eps = 1e-8;           // Adam denominator epsilon
    double grad_clip = 1.0;      // clip the global gradient norm to this (0 = off)
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
