// 2:4 semi-structured pruning: of every 4 consecutive input weights of a row (columns 4k..4k+3),
// keep the 2 with the highest score. A partial last group of r < 4 columns keeps min(2, r).
// Ties keep the lower column index.
#pragma once

#include <torch/types.h>

namespace trit::quantizers {

// Scores:
//   kMagnitude  |w|
//   kSaliency   w^2 / [H^-1]_ii: the Optimal Brain Surgeon cost of zeroing w_i alone, H damped
//               as in inverse_hessian (issue 7's formula). SparseGPT writes w^2 / [H^-1]_ii^2 where
//               its [H^-1] is the Cholesky factor U of the inverse (U^T U = H^-1): U_ii^2 is the
//               inverse Hessian's diagonal of the columns not yet pruned, so the two agree on the
//               first column and differ only in which columns the inverse is taken over. Standalone
//               (this function) uses the full inverse; inside GPTQ (gptq.h) the sequential U_ii^2.
//               A dead input (H_ii = 0) scores 0: its weight never reaches the output.
enum class PruneCriterion { kMagnitude, kSaliency };

const char* prune_criterion_name(PruneCriterion criterion);

// The (out, in) bool keep mask of `w` (out, in). kSaliency needs `h` (in, in); damp as GPTQ's.
torch::Tensor prune24_mask(const torch::Tensor& w, PruneCriterion criterion,
                           const torch::Tensor& h = {}, double damp = 0.01);

// The keep mask for precomputed scores (out, in): 2 highest of each 4 columns.
torch::Tensor prune24_mask_from_scores(const torch::Tensor& scores);

}  // namespace trit::quantizers
