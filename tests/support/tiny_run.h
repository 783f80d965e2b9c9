// A tiny training setup on synthetic Fashion-MNIST-format data, for trainer and CLI tests: the
// data directory, a recipe text using it, and helpers to compare runs' final weights.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>

namespace trit::testing {

// Synthetic data (640 train, 200 test) written once per process into a temp directory.
const std::string& tiny_data_dir();

// A ternary MLP recipe on tiny_data_dir(); `extra` is appended (YAML at top level).
std::string tiny_recipe_yaml(const std::string& extra = "");

// Every parameter of the model saved in `run_dir`/checkpoint.pt, by name.
std::map<std::string, torch::Tensor> checkpoint_parameters(const std::string& run_dir);

}  // namespace trit::testing
