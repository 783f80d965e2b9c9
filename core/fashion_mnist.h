// Fashion-MNIST loader: reads the four IDX files (gzip, or raw without .gz) of a split into
// tensors. Contract: images (N, 784) float32 = pixel / 255, labels (N) int64 in [0, 9]; every
// header field, size and label is checked, and any mismatch is a trit::Error naming the file. CPU,
// whole splits.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

namespace trit::data {

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kFashionMnistRows = 28;
inline constexpr int64_t kFashionMnistCols = 28;
inline constexpr int64_t kFashionMnistPixels = kFashionMnistRows * kFashionMnistCols;
inline constexpr int64_t kFashionMnistClasses = 10;

enum class Split { kTrain, kTest };

struct Dataset {
    torch::Tensor images;  // (N, 784) float32 in [0, 1]
    torch::Tensor labels;  // (N) int64 in [0, 9]
    int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Loads `split` from `dir`; limit > 0 keeps the first `limit` examples (the whole file is still
// read and validated). Throws trit::Error for a missing directory or file, a corrupt gzip stream,
// a wrong header, truncated or trailing data, a label > 9, or image/label counts that differ.
Dataset load_fashion_mnist(const std::string& dir, Split split, int64_t limit = 0);

}  // namespace trit::data
