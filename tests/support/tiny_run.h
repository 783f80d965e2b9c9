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

// A synthetic fortune file (about 600 short entries of templated sentences, ~30 KB) written once
// per process into a temp directory: a byte-level model learns it quickly.
const std::string& tiny_text_dir();

// A tiny gpt recipe (dim 32, depth 1, heads 2, context 32) on tiny_text_dir(); `extra` is appended
// (YAML at top level). Float unless `extra` adds a quantization block.
std::string tiny_gpt_recipe_yaml(const std::string& extra = "");

// Every parameter of the model saved in `run_dir`/checkpoint.pt, by name.
std::map<std::string, torch::Tensor> checkpoint_parameters(const std::string& run_dir);

}  // namespace trit::testing
