// The QAT training loop: builds the recipe's model (optionally starting from a trained one,
// init.from), applies its quantization block (after an optional layer selection), trains with
// AdamW + warm-up/decay + gradient clipping on a deterministic data order (trainers/data.h: images
// for classifiers, byte windows for language models), evaluates, logs JSON lines, checkpoints
// atomically and resumes exactly. A non-finite loss stops the run. With activation quantizers the
// run goes through the SMSQ stages (trainers/smsq.h), each with a fresh optimizer and schedule;
// with a teacher the loss is the distillation loss; with 2:4 sparsity the masks are recomputed on
// the recipe's schedule (core/sparsity.h) and their flip rate logged.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/recipe.h"
#include "core/sparsity.h"
#include "quantizers/layer_sensitivity.h"
#include "trainers/autocast.h"
#include "trainers/data.h"

namespace trit::trainers {

struct TrainOptions {
    std::string out_dir;         // run directory; empty: the recipe's output.dir
    bool resume = false;         // continue from out_dir/checkpoint.pt
    bool overwrite = false;      // start afresh even if out_dir holds a run (its files are replaced)
    std::string device = "cpu";  // cpu | cuda
    Precision precision = Precision::kFp32;  // kBf16: bf16 autocast (cuda only)
    bool progress = true;        // progress and messages on stderr
    // Called after every optimizer step with the step count; tests throw from it to simulate a
    // kill between checkpoints.
    std::function<void(int64_t step)> after_step;
};

// One SMSQ stage transition and the training loss around it (kTransitionWindow steps each side).
struct StageTransition {
    int64_t step = 0;           // steps done when the new stage started
    int64_t from_levels = 0, to_levels = 0;
    double loss_before = 0;     // mean training loss of the window before
    double loss_after = 0;      // and after (valid when `measured`)
    bool measured = false;
    double loss_jump() const { return loss_after - loss_before; }
};

struct TrainSummary {
    std::string run_dir;
    std::vector<std::string> quantized_layers;
    int64_t steps = 0;
    int64_t resumed_from = -1;  // step of the checkpoint resumed from, -1 when fresh
    double seconds = 0;
    double samples_per_second = 0;  // training items (samples, or tokens) per second
    std::string item_name;          // "samples" | "tokens"
    double final_train_loss = 0;    // mean over the last log window
    EvalResult test;                // the last evaluation (test split, or validation text)
    std::vector<StageTransition> transitions;
    // 2:4 sparsity (recipe block sparsity): the layers with a mask; the recomputations of the
    // whole run (a resumed run counts the interrupted part too), the flip rate (mask entries
    // changed / all, over the sparse layers) of the last one and their mean; the step after
    // which the mask no longer changed (mask_frozen_step; -1: it changed to the end); the
    // final zero fractions of the codes.
    std::vector<std::string> sparse_layers;
    int64_t mask_recomputes = 0;
    double mask_flip_rate_last = 0, mask_flip_rate_mean = 0;
    int64_t mask_frozen_step = -1;
    CodeZeros code_zeros;
};

// Model, optimizer and device for a recipe; shared by the trainer and the throughput benchmark.
struct TrainingSetup {
    torch::Device device{torch::kCPU};
    std::shared_ptr<Model> model;
    std::unique_ptr<torch::optim::AdamW> optimizer;
    std::vector<double> group_lr_ratio;  // per param group: its lr / the schedule's lr
    std::vector<std::string> quantized_layers;
    std::vector<std::string> sparse_layers;  // layers with a 2:4 mask (sparsity)
    Precision precision = Precision::kFp32;
    std::shared_ptr<Model> teacher;  // distillation.teacher, eval mode, on `device`
    DistillationConfig distillation;
};

// Parses "cpu" or "cuda[:N]"; "cuda" without a GPU-enabled LibTorch is an error.
torch::Device parse_device(const std::string& name);
// Seeds torch, builds the model (weights from init.from when set), applies quantization (a layer
// selection must be resolved: select_layers) and 2:4 sparsity (masks from those weights), moves
// it to `device`, loads the teacher, creates AdamW (make_optimizer).
TrainingSetup make_training_setup(const Recipe& recipe, torch::Device device,
                                  Precision precision = Precision::kFp32);
// A fresh AdamW for the setup's model. Weight decay applies to the linear layers' weights only:
// not to biases, norms, embeddings, class token, positions or activation scales; activation scales
// learn at optimizer.scale_lr (when > 0) relative to optimizer.lr.
void make_optimizer(TrainingSetup& setup, const OptimizerConfig& config);
// Copies the weights of the model in `from` (run directory or checkpoint) into `model`, by name.
// Its model section must equal `config`; parameters of activation quantizers that one side lacks
// are skipped (a float run starts a BWTA one). Anything else missing or of another shape is an
// error naming it.
void load_init_weights(Model& model, const ModelConfig& config, const std::string& from);
// Resolves quantization.select: ranks the targeted layers of the init.from model on calibration
// batches of `data` (layer_sensitivity.h) and writes the chosen ones to select.layers. Returns the
// sensitivities (for the log). Does nothing when the selection is off or already resolved.
std::vector<quantizers::LayerSensitivity> select_layers(Recipe& recipe, torch::Device device,
                                                        TrainData& data);
// The training loss of a batch: task_loss, or with a teacher
//   ce * task_loss + kl * T^2 * KL(softmax(teacher / T) || softmax(student / T))
//      + hidden_mse * mean over blocks of mean((h_student - h_teacher)^2)
// (KL averaged over rows: examples, or tokens of a language model).
torch::Tensor training_loss(TrainingSetup& setup, const torch::Tensor& x, const torch::Tensor& y);
// One optimizer step on a batch at learning rate `lr` (forward and loss under the setup's
// autocast, the loss per training_loss); returns the loss (not synchronised).
torch::Tensor train_step(TrainingSetup& setup, const torch::Tensor& x, const torch::Tensor& y,
                         double lr, double grad_clip);

TrainSummary train(const Recipe& recipe, const TrainOptions& options);

}  // namespace trit::trainers
