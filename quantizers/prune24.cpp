// 2:4 pruning masks: see prune24.h.
#include "quantizers/prune24.h"

#include <torch/torch.h>

#include "core/error.h"
#include "quantizers/hessian.h"

namespace trit::quantizers {

const char* prune_criterion_name(PruneCriterion criterion) {
    switch (criterion) {
        case PruneCriterion::kMagnitude:
            return "magnitude";
        case PruneCriterion::kSaliency:
            return "saliency";
    }
    return "?";
}

torch::Tensor prune24_mask_from_scores(const torch::Tensor& scores) {
    TRIT_CHECK(scores.dim() == 2, "prune24_mask: expected (out, in) scores, got ", scores.sizes());
    torch::NoGradGuard no_grad;
    const int64_t out = scores.size(0), in = scores.size(1), pad = (4 - in % 4) % 4;
    // Padding scores below any real score: a partial group of r columns keeps min(2, r) of them.
    torch::Tensor s = scores.to(torch::kFloat64);
    if (pad) s = torch::constant_pad_nd(s, {0, pad}, -1.0);
    s = s.reshape({out, -1, 4});
    // A stable descending sort keeps equal scores in index order: ties keep the lower index.
    torch::Tensor order =
        std::get<1>(torch::sort(s, /*stable=*/true, /*dim=*/2, /*descending=*/true));
    torch::Tensor keep =
        torch::zeros_like(s, torch::kBool).scatter_(2, order.narrow(2, 0, 2), true);
    return keep.reshape({out, -1}).narrow(1, 0, in).contiguous();
}

torch::Tensor prune24_mask(const torch::Tensor& w, PruneCriterion criterion, const torch::Tensor& h,
                           double damp) {
    TRIT_CHECK(w.dim() == 2 && w.size(0) >= 1 && w.size(1) >= 1,
               "prune24_mask: expected a 2-D (out, in) weight, got ", w.sizes());
    torch::NoGradGuard no_grad;
    torch::Tensor wd = w.detach().to(torch::kFloat64);
    if (criterion == PruneCriterion::kMagnitude) return prune24_mask_from_scores(wd.abs());
    TRIT_CHECK(h.defined(), "prune24_mask: the saliency criterion needs the Hessian H");
    TRIT_CHECK(h.dim() == 2 && h.size(0) == w.size(1) && h.size(1) == w.size(1),
               "prune24_mask: H must be (in, in) = (", w.size(1), ", ", w.size(1), ") for W ",
               w.sizes(), ", got ", h.sizes());
    const InverseHessian inv = inverse_hessian(h, damp, /*max_retries=*/4, "prune24_mask");
    // diag(H^-1) = column norms of U, since H^-1 = U^T U.
    torch::Tensor hinv_diag = inv.h_inv_chol.square().sum(0).to(wd.device());  // (in)
    // A dead input (H_ii = 0) never reaches the output: its weights cost nothing to prune.
    torch::Tensor scores = wd.square() / hinv_diag.unsqueeze(0);
    return prune24_mask_from_scores(scores.masked_fill(inv.dead.to(wd.device()).unsqueeze(0), 0.0));
}

}  // namespace trit::quantizers
