// The layer Hessian of PTQ and its damped inverse. For a linear layer y = x W^T and the loss
// ||X W^T - X Q^T||^2, the Hessian with respect to each row of W is H = 2/N sum_n x_n x_n^T over
// the N calibration rows. Inverse factors are computed in float64.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace trit::quantizers {

// Accumulates sum x x^T in float64 over batches of activations; hessian() is 2/N times the sum.
// Batches may have any leading shape: (..., in) is read as rows of `in`.
class HessianAccumulator {
  public:
    explicit HessianAccumulator(int64_t in);
    void add(const torch::Tensor& x);
    int64_t in() const { return in_; }
    int64_t rows() const { return rows_; }
    torch::Tensor hessian() const;  // (in, in) float64; at least one row must have been added

  private:
    int64_t in_ = 0, rows_ = 0;
    torch::Tensor sum_;  // (in, in) float64: sum x x^T
};

// The damped Hessian's inverse, as GPTQ needs it. Dead inputs (H_ii == 0: the input is always 0)
// get H_ii = 1 (the weights of those columns are then zeroed by the caller). Damping adds
// lambda = damp * mean(diag H) to the diagonal; when a Cholesky factorisation fails (H not
// positive definite), damp is multiplied by 10 and the factorisation retried, at most
// `max_retries` times, then a trit::Error says so. `who` prefixes error messages.
struct InverseHessian {
    torch::Tensor h_inv_chol;  // (in, in) float64 upper U with U^T U = (H + lambda I)^-1
    torch::Tensor dead;        // (in) bool: the inputs whose H_ii was 0
    double damp = 0.0;         // the fraction of mean(diag H) used, after retries
    int64_t retries = 0;       // how many times damp was multiplied by 10
};
InverseHessian inverse_hessian(const torch::Tensor& h, double damp, int64_t max_retries = 4,
                               const char* who = "inverse_hessian");

}  // namespace trit::quantizers
