// The QAT training loop: builds the recipe's model, applies its quantization block, trains with
// AdamW + warm-up/decay + gradient clipping on a deterministic data order (trainers/data.h: images
// for classifiers, byte windows for language models), evaluates, logs JSON lines, checkpoints
// atomically and resumes exactly. A non-finite loss stops the run.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/recipe.h"
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
};

// Model, optimizer and device for a recipe; shared by the trainer and the throughput benchmark.
struct TrainingSetup {
    torch::Device device{torch::kCPU};
    std::shared_ptr<Model> model;
    std::unique_ptr<torch::optim::AdamW> optimizer;
    std::vector<std::string> quantized_layers;
    Precision precision = Precision::kFp32;
};

// Parses "cpu" or "cuda[:N]"; "cuda" without a GPU-enabled LibTorch is an error.
torch::Device parse_device(const std::string& name);
// Seeds torch, builds the model on `device`, applies quantization, creates AdamW. Weight decay
// applies to the linear layers' weights only: not to biases, norms, embeddings, class token or
// positions.
TrainingSetup make_training_setup(const Recipe& recipe, torch::Device device,
                                  Precision precision = Precision::kFp32);
// One optimizer step on a batch at learning rate `lr` (forward and loss under the setup's
// autocast, the loss per task_loss); returns the loss (not synchronised).
torch::Tensor train_step(TrainingSetup& setup, const torch::Tensor& x, const torch::Tensor& y,
                         double lr, double grad_clip);

TrainSummary train(const Recipe& recipe, const TrainOptions& options);

}  // namespace trit::trainers
