// LibTorch adapter for act_int8_quantize: checks the tensor, makes it contiguous, allocates the
// outputs and launches on the current stream (kernels/torch_stream.h).
#include "kernels/act_int8_torch.h"

#include <c10/core/DeviceGuard.h>

#include "core/error.h"
#include "kernels/act_int8.h"
#include "kernels/torch_stream.h"

namespace trit::kernels {

std::pair<torch::Tensor, torch::Tensor> act_int8_quantize(const torch::Tensor& x) {
    TRIT_CHECK(x.defined(), "act_int8_quantize: expected a defined float32 CUDA tensor");
    TRIT_CHECK(x.is_cuda(), "act_int8_quantize: expected a CUDA tensor, got device ", x.device());
    TRIT_CHECK(x.scalar_type() == torch::kFloat32,
               "act_int8_quantize: expected dtype float32, got ", x.scalar_type());
    TRIT_CHECK(x.dim() >= 1, "act_int8_quantize: expected shape (..., cols), got a 0-dim tensor");
    const int64_t cols = x.size(-1);
    TRIT_CHECK(cols >= 1, "act_int8_quantize: expected cols (last dim) >= 1, got shape ",
               x.sizes());

    const c10::DeviceGuard guard(x.device());
    const torch::Tensor xc = x.contiguous();                                     // (..., cols)
    torch::Tensor q = torch::empty(x.sizes(), x.options().dtype(torch::kInt8));  // (..., cols)
    torch::Tensor scale = torch::empty(x.sizes().slice(0, x.dim() - 1), x.options());  // (...)
    const int64_t rows = xc.numel() / cols;
    if (rows == 0) return {q, scale};
    act_int8_quantize(xc.data_ptr<float>(), rows, cols, q.data_ptr<int8_t>(),
                      scale.data_ptr<float>(), current_stream(x.device()));
    return {q, scale};
}

}  // namespace trit::kernels
