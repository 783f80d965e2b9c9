// What a packed file is validated against: the training forward of the same model, with each layer
// set up as the file describes it: packed layers fake-quantize the latent weights with the file's
// spec and activation quantizer (the export's own quantization; a ternary one with the file's grid
// and scale), float layers and the other tensors (embeddings, norms, ...) take the file's stored
// values, rounding included, and the attention's quantizers the file's scales. Any difference is
// then the packed path's own error.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "core/model.h"
#include "exporters/packed_model.h"

namespace trit::exporters {

// Sets up `model` (built from the same recipe) as the reference for `packed`. With
// `use_file_codes`, packed layers forward with the file's own codes and scales
// (QuantLinear::freeze_weights) instead of re-quantizing the latent weights: for a reference on a
// GPU, whose reductions order the scale statistics differently from the CPU that exported the
// file (an ulp off flips a code at a rounding tie). On the CPU both give the same codes.
// A layer trained with 2:4 sparsity keeps its trained mask (the checkpoint's mask24, which
// QuantLinear::set_quant attaches to a ternary spec), so the re-quantized codes are the exported
// ones, in tern24 and tern2 alike.
void configure_reference(Model& model, const PackedModel& packed, bool use_file_codes = false);

// An example is one row of logits: an image, or one predicted position of a language model.
struct Comparison {
    int64_t examples = 0;
    double max_abs_error = 0;    // max |packed - reference| over all logits
    double max_abs_logit = 0;    // max |reference| over all logits
    double relative_error = 0;   // max_abs_error / max_abs_logit
    double top1_agreement = 0;   // fraction of examples with the same argmax
    int64_t first_disagreement = -1;                     // row index
    double packed_accuracy = 0, reference_accuracy = 0;  // against the labels
    int64_t agreements = 0, packed_correct = 0, reference_correct = 0;  // the counts behind them
};

// logits (n, classes) both with labels (n), or (B, T, vocab) with labels (B, T), taken as B * T
// rows in row-major order (a language model: top-1 is the argmax next token at each position).
Comparison compare_logits(const torch::Tensor& packed, const torch::Tensor& reference,
                          const torch::Tensor& labels);

// The comparison over `first`'s examples followed by `next`'s (for inputs compared in batches):
// the same figures as one compare_logits over both.
Comparison combine(const Comparison& first, const Comparison& next);

}  // namespace trit::exporters
