// The CPU reference runtime: runs a PackedModel from its packed codes. Packed layers quantize their
// input as the file says (int8 per token with act_int8_quantize_ref; ternary or bool codes with
// act_levels_quantize_ref / act_bool_quantize_ref and the file's per-tensor s_x = s_A; or none),
// multiply with the format's reference product (exact int32 accumulators per scale group, or
// float), then y[i][j] = (sum_g s_w[j][g] * acc[i][j][g]) * s_x[i] + b[j] (sum over g in increasing
// order, in float; without activation quantization s_x = 1 and acc is the float product). A
// ternary layer's input row holding a NaN gives a NaN output row, as in the training forward.
// Float layers use their stored weights. This is the contract the CUDA runtime must match. The
// transformer models run as LibTorch modules (packed_module_cpu) whose packed layers go through
// layer_forward_cpu and whose other tensors (and attention quantizers) are the file's.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/model.h"
#include "exporters/packed_model.h"

namespace trit::exporters {

// One layer on a (m, in) float input: (m, out) float output.
torch::Tensor layer_forward_cpu(const PackedLayer& layer, const torch::Tensor& x);

// The integer accumulators of a packed layer with int8 activations: (m, out, G) int32, from the
// input's int8 codes (m, in). Exposed for tests that check them against the exact product.
std::vector<int32_t> layer_accumulators(const PackedLayer& layer, const int8_t* x_codes, int64_t m);

// The model of `packed.recipe.model` (make_model) on the CPU in eval mode, runnable from the file
// alone: its tensors and float layers hold the file's values (load_float_values); each packed
// layer's forward is overridden with layer_forward_cpu on the input flattened to (m, in) and
// reshaped back, and its latent weight holds the dequantized weights (codes x scales) for
// inspection only. The module keeps its own copy of the packed layers: `packed` may go away. A Gpt
// (dynamic_cast<Gpt*>) decodes with a KV cache through forward_cached. No gradient flows through
// the packed layers: run it under torch::NoGradGuard.
std::shared_ptr<Model> packed_module_cpu(const PackedModel& packed);

// The whole model, with the model's input and logits (Model::forward): the mlp layer by layer,
// (batch, features) -> (batch, classes); vit and gpt through a packed_module_cpu built for the
// call (build one with packed_module_cpu to run many batches).
torch::Tensor forward_cpu(const PackedModel& model, const torch::Tensor& x);

}  // namespace trit::exporters
