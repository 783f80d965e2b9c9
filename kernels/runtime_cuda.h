// The GPU runtime: runs a PackedModel (an exported HDF5 model, exporters/model_file.h) on a CUDA
// device with the packed-weight kernels. The contract is the CPU reference runtime's
// (exporters/runtime_cpu.h), layer for layer:
//   - packed layers with int8 activations: kernels::act_int8_quantize, then kernels::product with
//     the fused epilogue (the dispatcher picks the kernel by format and shape). Both are bit-exact
//     with the CPU reference, so these layers give the CPU runtime's logits bit for bit. Every
//     fast kernel asks k % 64 == 0: a layer whose in is not a multiple of 64 is packed at load
//     with each row padded by zero codes to the next multiple (where that keeps its scale
//     groups) and its input padded with zero columns, which change no code, no scale and no
//     sum. No int8 kernel takes bin1: its +-1 codes are packed as tern2 at load (2 bits a
//     weight on the device) and run the tern2 kernels, the same sums. bt layers also keep their
//     codes as trit planes (kernels/bt_gemm.h, 2 d bits a weight) for the bt GEMM, which runs
//     from 9 tokens, and for d <= 2 as nibbles (4 bits a weight) for the one-token GEMV;
//   - packed layers with ternary or bool (BWTA) activations and one per-tensor scale s_A: bin1
//     weights with one scale group (tensor or channel) run the fused quantize + bit-pack
//     (tbits_quantize_ternary / _bool) and the b1 tensor-core GEMM (bin1_gemm bin_tern / bool_bin)
//     with the fused epilogue (acc * s_w) * s_A + b, whose bin1 weights are repacked once to a
//     tbits plane at load; other formats, per-group scales and devices below sm_80 quantize to int8
//     codes (LibTorch) and run kernels::product (bin1 as tern2, above). Exact integer sums and the
//     same epilogue: bit for bit the CPU reference, NaN rows included (an input row holding a NaN
//     gives a NaN output row);
//   - packed layers without activation quantization: the codes are unpacked once to a float
//     matrix on the device and multiplied per scale group by LibTorch (cuBLAS): float sums in
//     another order, so within rounding of the CPU runtime, not bit-exact;
//   - float layers: their stored weights, x W^T + b (LibTorch).
// Weights are uploaded once, at construction. Models: the mlp layer by layer; vit and gpt as their
// LibTorch module on the device (tensors and float layers from the file, attention, norms and
// activations in LibTorch CUDA) whose packed layers' forward is overridden with the layer path
// above, as exporters::packed_module_cpu does on the CPU. Those non-linear parts round differently
// from the CPU's, so transformer logits match the CPU reference runtime within rounding only.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
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

    // The model's input on any device -> its logits, float32 on the GPU: mlp and vit (batch,
    // in_features) float -> (batch, classes); gpt (batch, tokens) int64 -> (batch, tokens, 256).
    // Not for a kLinears model (an error).
    torch::Tensor forward(const torch::Tensor& x) const;

    // One layer alone (any model, and the only way to run a kLinears model's layers): x (m, in) on
    // any device -> (m, out) float32 on the GPU.
    torch::Tensor forward_layer(const std::string& name, const torch::Tensor& x) const;

    // vit and gpt: the module forward() runs (eval mode, on device()), e.g. to decode with a KV
    // cache through dynamic_cast<Gpt*>(...)->forward_cached under torch::NoGradGuard. It refers to
    // this CudaModel's layers: use it only while this object lives. Null for the mlp.
    std::shared_ptr<Model> module() const { return module_; }

    // Which kernel each layer runs for a batch of `examples` model inputs (for reports), one line
    // a layer with the rows its input then has (layer_rows), e.g. "fc2 (1000 rows) tern2 gemm: m
    // in [1, inf] and its contract holds" or "head (1000 rows) float float (LibTorch linear)", with
    // " (the bin1 codes as tern2)" and " (k padded from 784 to 832 with zero weights)" where they
    // apply.
    std::vector<std::string> describe(int64_t examples) const;

    // Rows of layer `name`'s input for a batch of `examples` model inputs, per example: the mlp's
    // and a foreign model's layers 1; the vit's `patch` its patches, `head` 1 (the class token),
    // every block layer the tokens (patches + 1); every gpt layer the context (a full window,
    // every position, as trit validate runs it).
    int64_t layer_rows(const std::string& name, int64_t examples) const;

    c10::Device device() const { return device_; }

  private:
    struct Layer;
    torch::Tensor layer_forward(const Layer& l, const torch::Tensor& x) const;
    torch::Tensor level_layer_forward(const Layer& l, const torch::Tensor& x) const;
    // vit, gpt: module_ from the recipe, the file's tensors and float layers, packed layers
    // overridden with layer_forward.
    void build_module(const exporters::PackedModel& model);

    c10::Device device_;
    bool linears_ = false;    // a foreign model's layers (ModelArchitecture::kLinears)
    std::string activation_;  // between layers: relu | gelu
    std::vector<std::unique_ptr<Layer>> layers_;
    std::shared_ptr<Model> module_;  // vit, gpt
    bool vit_ = false;
    int64_t tokens_ = 1;  // rows an example: vit patches + 1, gpt context, else 1
};

}  // namespace trit::kernels
