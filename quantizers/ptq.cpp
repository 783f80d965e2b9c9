// The layer output error: see ptq.h.
#include "quantizers/ptq.h"

#include <torch/torch.h>

#include <limits>

#include "core/error.h"

namespace trit::quantizers {

OutputError layer_output_error(const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& w_q) {
    TRIT_CHECK(w.dim() == 2 && w.sizes() == w_q.sizes(),
               "layer_output_error: W and W_q must be (out, in) of one shape, got ", w.sizes(),
               " and ", w_q.sizes());
    TRIT_CHECK(x.dim() == 2 && x.size(1) == w.size(1) && x.size(0) >= 1,
               "layer_output_error: X must be (rows >= 1, in = ", w.size(1), "), got ", x.sizes());
    torch::NoGradGuard no_grad;
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(w.device());
    torch::Tensor xd = x.detach().to(f64), wd = w.detach().to(f64);
    // X (W - W_q)^T rather than the difference of two outputs: no cancellation.
    torch::Tensor diff = xd.mm((wd - w_q.detach().to(f64)).t());
    const double n = static_cast<double>(x.size(0) * w.size(0));
    OutputError r;
    r.mse = diff.square().sum().item<double>() / n;
    const double ref = xd.mm(wd.t()).square().sum().item<double>() / n;
    if (ref > 0)
        r.relative = r.mse / ref;
    else
        r.relative = r.mse == 0 ? 0.0 : std::numeric_limits<double>::infinity();
    return r;
}

}  // namespace trit::quantizers
