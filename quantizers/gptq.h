// GPTQ (Frantar et al. 2022, "Accurate Post-Training Quantization for Generative Pre-trained
// Transformers"), with SparseGPT-style 2:4 pruning (Frantar & Alistarh 2023) folded in: quantize
// an (out, in) weight column by column, feeding each column's error forward onto the columns not
// yet quantized so that ||X W^T - X Q^T||^2 over the calibration inputs stays small.
//
// Algorithm (float64 throughout; rows of W are independent and share H):
//   1. Dead inputs (H_ii == 0): H_ii = 1 and W[:, i] = 0 (as the reference implementation).
//   2. act_order: columns are processed in order of descending H_ii (stable: ties keep index
//      order), else in index order. Codes, scales and masks are always returned in the original
//      column order, and groups (and 2:4 groups) are always the original columns
//      [k * group_size, (k + 1) * group_size) (resp. [4k, 4k + 4)), so a packed format reads them
//      as it reads RTN's.
//   3. U = upper Cholesky factor of (H + lambda I)^-1 in processing order, lambda =
//      damp * mean(diag H); when a factorisation fails damp is multiplied by 10 and retried (at
//      most max_damp_retries times, reported in the result), then a trit::Error.
//   4. For each column c at processing position p (d = U_pp):
//      - 2:4 (prune24): when c is the first column of its 2:4 group to be processed, that
//        group's mask is chosen from the group's *current* (error-updated) weights, scores |w| or
//        w^2 / U_jj^2 (SparseGPT's criterion; U_jj^2 is the inverse Hessian diagonal of the
//        columns not yet processed when column j is reached; 0 for a dead input).
//      - scales: when c is the first column of its group to be processed, the group's scale per row
//        is grid_select_scale of the group's *current* weights, all of which are still unquantized
//        at that moment (without act_order this is the standard GPTQ rule: the scale is chosen at
//        the group's first column; the reference gptq.py reads the group from W without the
//        current block's updates, so its scales depend on block_size: these do not). Pruned weights
//        are not zeroed for this choice (as SparseGPT with quantization). static_groups instead
//        chooses every scale up front from the original W (after step 1); with act_order both rules
//        are well defined, dynamic is the default.
//      - q = scale * code(w) (0 where pruned), loss += (w - q)^2 / d^2, and the error
//        (w - q) / d times U[p, p+1:] is subtracted from the later columns; updates to columns
//        beyond the current block of block_size columns are applied lazily, once per block (this
//        changes rounding only: codes match an unblocked column-by-column run).
// Reported loss: sum over rows and columns of (w - q)^2 / d^2. Exactly, it is
//   sum_rows e (H + lambda I) e^T,  e = W - Q (W after step 1),
// i.e. (2/N) ||X W^T - X Q^T||^2 + lambda ||W - Q||^2 for H = 2/N X^T X. (The reference
// implementation reports half of this.)
#pragma once

#include <torch/types.h>

#include "quantizers/grid.h"
#include "quantizers/prune24.h"

namespace trit::quantizers {

struct GptqOptions {
    int64_t group_size = 64;     // input weights per scale; >= 1 (>= in: one scale per row)
    double damp = 0.01;          // lambda = damp * mean(diag H); >= 0
    int64_t block_size = 128;    // columns per lazy-update block; >= 1
    bool act_order = false;      // process columns by descending H_ii
    bool static_groups = false;  // all scales from the original W, before any update
    bool prune24 = false;        // 2:4 pruning inside GPTQ (not with a binary grid)
    PruneCriterion prune_criterion = PruneCriterion::kSaliency;  // 2:4 scores, see above
    int64_t max_damp_retries = 4;  // damp x10 per failed Cholesky, at most this many times
};

struct GptqResult {
    QuantizedLayer layer;  // codes, scales, dequant in the original column order
    torch::Tensor keep;    // (out, in) bool 2:4 mask; undefined without pruning
    double loss = 0.0;     // sum (w - q)^2 / [U_pp]^2, see above
    double damp = 0.0;     // damp used (after retries)
    int64_t damp_retries = 0;
    int64_t dead_inputs = 0;  // columns with H_ii == 0 (their weights were zeroed)
};

// W (out, in) float (any floating dtype; returned tensors are float32 on W's device), H (in, in)
// from HessianAccumulator (or any symmetric positive semi-definite matrix).
GptqResult gptq_quantize(const torch::Tensor& w, const torch::Tensor& h, const Grid& grid,
                         const GptqOptions& options = {});

}  // namespace trit::quantizers
