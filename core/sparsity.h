// 2:4 sparsity of a model's quantized linears (the recipe block `sparsity`, Sparse-BitNet's
// quantize-then-mask): each layer's ternary codes are computed from its dense latent weights as
// without sparsity, then multiplied by a 2:4 keep mask stored in the layer's buffer `mask24`
// (QuantLinear::enable_mask24), so checkpoints hold it and a resumed run continues exactly. The
// straight-through gradient still reaches every latent weight. These functions put the masks on
// a model, recompute them and measure them; the trainer decides when (mask_recompute_due).
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/quant_linear.h"
#include "core/recipe.h"

namespace trit {

// With pattern 2:4: enables a mask, computed from the current latent weights, on every
// QuantLinear of `model` that has a weight quantizer (those apply_quantization chose), and
// returns their names in model order. Pattern none: nothing. A quantized layer whose method is
// not ternary (absmean, absmax_threshold) is an error naming quantization.weight.method.
std::vector<std::string> apply_sparsity(torch::nn::Module& model, const SparsityConfig& config);

// The QuantLinears of `model` that hold a 2:4 mask, with their names, in model order.
std::vector<std::pair<std::string, QuantLinear>> sparse_linears(torch::nn::Module& model);

// What a recomputation of the masks changed, over all sparse layers.
struct MaskFlips {
    int64_t changed = 0;  // mask entries that differ from the previous mask
    int64_t total = 0;    // mask entries (weights) of the sparse layers
    double rate() const {
        return total > 0 ? static_cast<double>(changed) / static_cast<double>(total) : 0.0;
    }
};

// Recomputes every sparse layer's mask from its current latent weights
// (QuantLinear::recompute_mask24), on their device; one synchronisation for the count.
MaskFlips recompute_masks(torch::nn::Module& model);

// Zero weight codes of the sparse layers: the natural zeros of the dense ternary codes, and the
// zeros of the codes the forward uses (after the mask).
struct CodeZeros {
    int64_t dense = 0, masked = 0, total = 0;
    double dense_fraction() const {
        return total > 0 ? static_cast<double>(dense) / static_cast<double>(total) : 0.0;
    }
    double masked_fraction() const {
        return total > 0 ? static_cast<double>(masked) / static_cast<double>(total) : 0.0;
    }
};
CodeZeros code_zeros(torch::nn::Module& model);

// Whether a dynamic mask is recomputed after optimizer step `step` (steps done, >= 1): at every
// multiple of recompute_every, up to and including freeze_after when that is > 0. Always false
// for mask: frozen (computed once, by apply_sparsity) and for pattern none.
bool mask_recompute_due(const SparsityConfig& config, int64_t step);

// The step after which the mask of a run of `total_steps` steps no longer changes: 0 for a
// frozen mask, the last recomputation at or before freeze_after for a dynamic one that freezes
// before the run ends; -1 when it keeps changing to the end (or sparsity is off).
int64_t mask_frozen_step(const SparsityConfig& config, int64_t total_steps);

}  // namespace trit
