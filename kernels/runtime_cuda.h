// The GPU runtime: runs a PackedModel (an exported HDF5 model, exporters/model_file.h) on a CUDA
// device with the packed-weight kernels. The contract is the CPU reference runtime's
// (exporters/runtime_cpu.h), layer for layer:
//   - packed layers with int8 activations: kernels::act_int8_quantize, then kernels::product with
//     the fused epilogue (the dispatcher picks the kernel by format and shape). Both are bit-exact
//     with the CPU reference, so these layers give the CPU runtime's logits bit for bit;
//   - packed layers without activation quantization: the codes are unpacked once to a float
//     matrix on the device and multiplied per scale group by LibTorch (cuBLAS): float sums in
//     another order, so within rounding of the CPU runtime, not bit-exact;
//   - float layers: their stored weights, x W^T + b (LibTorch).
// Weights are uploaded once, at construction. Models: mlp (the transformer models when they land).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exporters/packed_model.h"
#include "kernels/product.h"

namespace trit::kernels {

class CudaModel {
  public:
    // Throws trit::Error when the model type is not supported, no CUDA device is usable, or the
    // device index is out of range.
    CudaModel(const exporters::PackedModel& model, int device_index = 0);
    ~CudaModel();
    CudaModel(const CudaModel&) = delete;
    CudaModel& operator=(const CudaModel&) = delete;

    // x: (batch, in_features) float32 on any device -> logits (batch, classes) float32 on the GPU.
    torch::Tensor forward(const torch::Tensor& x) const;

    // Which kernel each packed layer runs for a batch of m rows (for reports), e.g.
    // "fc1 tern2 gemv" or "fc1 tern2 generic (gemv declined: k must be a multiple of 64)".
    std::vector<std::string> describe(int64_t m) const;

    c10::Device device() const { return device_; }

  private:
    struct Layer;
    torch::Tensor layer_forward(const Layer& l, const torch::Tensor& x) const;

    c10::Device device_;
    std::string activation_;  // between layers: relu | gelu
    std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace trit::kernels
