// QuantLinear: a drop-in for torch::nn::Linear (same parameters, same initialisation) whose
// forward fake-quantizes its input activations and weight when a LinearQuantSpec is set:
// y = act_q(x) . W_eff^T + b, with straight-through gradients to x and the latent W. With int8
// activations and quantized weights the forward is integer-exact (int8_linear.h), which makes it
// bit-identical to packed inference. Ternary (BWTA) activations are quantized by a child module
// `act` (an ActLevelQuantizer with a learnable scale), integer-exact too with quantized weights
// (bwta_linear.h). A forward override (set_forward_override) replaces the whole
// forward: the packed runtimes use it to run a layer from its packed codes inside the model.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/options/linear.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/act_quant.h"
#include "core/bwta_quant.h"
#include "core/weight_quant.h"

namespace trit {

struct LinearQuantSpec {
    WeightQuantSpec weight;
    ActQuantMethod activation = ActQuantMethod::kNone;
    // kTernary only: signed, or bool for an input that is non-negative by construction, and the
    // level count of the grid the layer starts with (act_grid; SMSQ changes it stage by stage).
    ActLevelMode act_mode = ActLevelMode::kSigned;
    int64_t act_levels = 3;
    bool enabled() const {
        return weight.method != WeightQuantMethod::kNone || activation != ActQuantMethod::kNone;
    }
};

class QuantLinearImpl : public torch::nn::Cloneable<QuantLinearImpl> {
public:
    // (..., in) -> (..., out), in place of the layer's own forward.
    using ForwardOverride = std::function<torch::Tensor(const torch::Tensor&)>;

    QuantLinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
    explicit QuantLinearImpl(const torch::nn::LinearOptions& options);

    void reset() override;
    void reset_parameters();
    torch::Tensor forward(const torch::Tensor& x);
    // The weight the forward multiplies by: scale * W_q when quantized, else the latent weight.
    torch::Tensor effective_weight();

    // Sets the spec; with ternary activations registers (or replaces) the child `act`. The
    // spec's weight mask is the layer's own: mask24 for a ternary method, else none.
    void set_quant(const LinearQuantSpec& spec);
    const LinearQuantSpec& quant() const { return spec_; }

    // Fixed codes and scales (the layout quantize_weight returns, any device) that the forward
    // uses instead of quantizing the latent weight, which then only receives gradients. Used to
    // validate an exported file on a GPU against exactly its codes: there the statistics behind
    // the scales sum in another order than on the CPU that exported them, and an ulp flips a code
    // at a rounding tie. Needs a quantized spec; an undefined q clears it. Not saved.
    void freeze_weights(const QuantizedWeights& w);
    bool weights_frozen() const { return frozen_.q.defined(); }

    // 2:4 sparsity (core/sparsity.h): registers the buffer `mask24`, (out, in) bool, set to
    // sparse24_mask of the current latent weight, and marks the spec sparse24. From then on every
    // ternary weight spec the layer has (set_quant's too) carries mask24 as its mask, so the
    // forward keeps exactly the codes it marks: the mask changes only when recompute_mask24 or a
    // checkpoint load writes it, and it is saved with the module. A layer never enabled has no
    // such buffer (older checkpoints load). Needs a ternary weight quantizer (set_quant first).
    void enable_mask24();
    bool has_mask24() const { return mask24.defined(); }
    // Recomputes mask24 from the current latent weight in place (on its device); returns the
    // number of entries that changed, a 0-dim int64 tensor on that device (no synchronisation).
    torch::Tensor recompute_mask24();

    // When set, forward() checks the input's last dimension and returns fn(x), ignoring the
    // weight, bias and quantization spec; an empty function restores the normal forward. Used by
    // the packed runtimes (exporters/runtime_cpu.h, kernels/runtime_cuda.h) to run a layer from
    // its packed codes while the rest of the model runs as trained. Not saved with the module.
    void set_forward_override(ForwardOverride fn) { override_ = std::move(fn); }
    bool has_forward_override() const { return static_cast<bool>(override_); }

    torch::nn::LinearOptions options;
    torch::Tensor weight;            // (out, in) latent float weight
    torch::Tensor bias;              // (out) or undefined
    ActLevelQuantizer act{nullptr};  // ternary activations only
    torch::Tensor mask24;            // (out, in) bool 2:4 keep mask (enable_mask24), or undefined

private:
    LinearQuantSpec spec_;
    ForwardOverride override_;
    QuantizedWeights frozen_;
    void attach_mask();  // spec_.weight.mask from mask24 (see set_quant)
};
TORCH_MODULE(QuantLinear);

// Every QuantLinear below `module`, with its dotted name, in registration order.
std::vector<std::pair<std::string, QuantLinear>> quant_linears(torch::nn::Module& module);

}  // namespace trit
