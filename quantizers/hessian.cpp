// Hessian accumulation and the damped inverse Cholesky factor: see hessian.h.
#include "quantizers/hessian.h"

#include <torch/torch.h>

#include <cmath>

#include "core/error.h"

namespace trit::quantizers {

HessianAccumulator::HessianAccumulator(int64_t in) : in_(in) {
    TRIT_CHECK(in >= 1, "HessianAccumulator: in must be >= 1, got ", in);
    sum_ = torch::zeros({in, in}, torch::kFloat64);
}

void HessianAccumulator::add(const torch::Tensor& x) {
    TRIT_CHECK(x.dim() >= 1 && x.size(-1) == in_, "HessianAccumulator::add: expected (..., ", in_,
               ") activations, got ", x.sizes());
    torch::NoGradGuard no_grad;
    torch::Tensor rows = x.detach().reshape({-1, in_}).to(torch::kCPU, torch::kFloat64);
    TRIT_CHECK(torch::isfinite(rows).all().item<bool>(),
               "HessianAccumulator::add: activations hold a non-finite value");
    sum_.add_(rows.t().mm(rows));
    rows_ += rows.size(0);
}

torch::Tensor HessianAccumulator::hessian() const {
    TRIT_CHECK(rows_ > 0, "HessianAccumulator::hessian: no calibration rows were added");
    return sum_ * (2.0 / static_cast<double>(rows_));
}

InverseHessian inverse_hessian(const torch::Tensor& hessian, double damp, int64_t max_retries,
                               const char* who) {
    TRIT_CHECK(hessian.dim() == 2 && hessian.size(0) == hessian.size(1) && hessian.size(0) >= 1,
               who, ": H must be a square (in, in) matrix, got ", hessian.sizes());
    TRIT_CHECK(damp >= 0.0 && std::isfinite(damp), who, ": damp must be >= 0, got ", damp);
    TRIT_CHECK(max_retries >= 0, who, ": max_retries must be >= 0, got ", max_retries);
    torch::NoGradGuard no_grad;
    torch::Tensor h = hessian.detach().to(torch::kFloat64).clone();
    TRIT_CHECK(torch::isfinite(h).all().item<bool>(), who, ": H holds a non-finite value");
    const int64_t n = h.size(0);
    InverseHessian r;
    torch::Tensor diag = h.diagonal();
    TRIT_CHECK((diag >= 0).all().item<bool>(), who, ": H has a negative diagonal entry (min ",
               diag.min().item<double>(), "): not a Hessian of the form 2/N sum x x^T");
    r.dead = diag == 0;
    diag.masked_fill_(r.dead, 1.0);
    const double mean_diag = diag.mean().item<double>();
    torch::Tensor eye = torch::eye(n, h.options());
    double d = damp;
    for (int64_t attempt = 0; attempt <= max_retries; ++attempt, d *= 10.0) {
        auto [chol, info] = torch::linalg_cholesky_ex(h + eye * (d * mean_diag));
        if (info.item<int64_t>() != 0) continue;
        torch::Tensor inv = torch::cholesky_inverse(chol);
        auto [upper, info2] = torch::linalg_cholesky_ex(inv, /*upper=*/true);
        if (info2.item<int64_t>() != 0) continue;
        r.h_inv_chol = upper;
        r.damp = d;
        r.retries = attempt;
        return r;
    }
    TRIT_FAIL(who,
              ": H + damp * mean(diag H) * I is not positive definite even with damp = ", d / 10.0,
              " (", max_retries, " retries, x10 each, from damp = ", damp,
              "); check the calibration activations or raise damp");
}

}  // namespace trit::quantizers
