// Mixed precision for training on a GPU: a scope in which LibTorch's autocast runs the matmuls
// (and the other ops on its lower-precision list) in bfloat16 while the parameters, the optimizer
// state and the loss stay float32. Forward and loss run inside the scope, backward outside, as
// LibTorch's autocast expects. Works with the autocast API of LibTorch 1.13 and of 2.4 and later.
#pragma once

#include <torch/types.h>

#include <string>

namespace trit::trainers {

enum class Precision { kFp32, kBf16 };

// "fp32" | "bf16"; anything else is an error naming the flag.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision p);

// bf16 needs a CUDA device: an error otherwise (CPU autocast is not offered: without bf16
// matrix units it is slower than float32).
void check_precision(Precision p, torch::Device device);

class AutocastScope {
  public:
    // Turns CUDA autocast to bfloat16 on for kBf16 (nothing for kFp32); restores the previous
    // state and clears autocast's weight-cast cache on exit.
    explicit AutocastScope(Precision p);
    ~AutocastScope();
    AutocastScope(const AutocastScope&) = delete;
    AutocastScope& operator=(const AutocastScope&) = delete;

  private:
    bool active_ = false, was_enabled_ = false;
    c10::ScalarType was_dtype_ = c10::ScalarType::Half;
};

}  // namespace trit::trainers
