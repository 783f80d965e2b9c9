// Training checkpoints: one LibTorch archive holding the model, the optimizer state, the trainer's
// position (step, epoch, batch within the epoch) and the resolved recipe text. Written to a
// temporary file, flushed, then renamed over the old one, so a kill never leaves a torn file.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/recipe.h"

namespace trit::trainers {

inline constexpr const char* kCheckpointFile = "checkpoint.pt";
inline constexpr int64_t kCheckpointVersion = 1;

struct TrainPosition {
    int64_t step = 0;   // optimizer steps done
    int64_t epoch = 0;  // epoch the next batch belongs to
    int64_t batch = 0;  // index of the next batch within that epoch
};

// `trainer_state`: numbers the trainer needs to resume beyond the position (the SMSQ stage state),
// stored as one float64 entry when not empty; `sparsity_state` likewise (the 2:4 masks' flip
// statistics; the masks themselves are the layers' buffers).
void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer, const TrainPosition& position,
                     const std::string& recipe_yaml, const std::vector<double>& trainer_state = {},
                     const std::vector<double>& sparsity_state = {});

// Restores model and optimizer in place, their tensors on `device` (a checkpoint written on a GPU
// loads on the CPU and the other way round); returns the position. `recipe_yaml` receives the text,
// `trainer_state` and `sparsity_state` the saved numbers (empty when there are none).
TrainPosition load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer* optimizer, std::string* recipe_yaml,
                              torch::Device device = torch::kCPU,
                              std::vector<double>* trainer_state = nullptr,
                              std::vector<double>* sparsity_state = nullptr);

// Only the recipe text of a checkpoint (to rebuild its model).
std::string read_checkpoint_recipe(const std::string& path);

// A trained model loaded for export or validation: `path` is a run directory (its checkpoint.pt)
// or a checkpoint file. The model is built from the recipe stored in the checkpoint, its layers
// quantized as in training (activation quantizers on the grid of the SMSQ stage the checkpoint was
// written in: the last stage's for a finished run; with sparsity the trained 2:4 masks), on the
// CPU, in eval mode.
struct LoadedRun {
    std::string checkpoint;   // the file read
    std::string recipe_yaml;  // as stored
    Recipe recipe;
    std::shared_ptr<Model> model;
    int64_t step = 0;
};
LoadedRun load_run(const std::string& path);

}  // namespace trit::trainers
