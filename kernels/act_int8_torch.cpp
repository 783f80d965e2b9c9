// LibTorch adapter for act_int8_quantize: checks the tensor, makes it contiguous, allocates the
// outputs and launches on the current stream. Compiles against a CPU-only LibTorch (no
// c10/cuda config header there): it then uses the default stream, though no CUDA tensor can exist.
#include "kernels/act_int8_torch.h"

#include <c10/core/DeviceGuard.h>

#include "core/error.h"
#include "kernels/act_int8.h"

// c10/cuda/CUDAStream.h ships even in CPU-only LibTorch (Debian's 1.13) but cannot be compiled
// there; the generated cuda_cmake_macros.h exists only in CUDA builds, whose TORCH_LIBRARIES
// also link c10_cuda.
#if defined(__has_include)
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#include <c10/cuda/CUDAStream.h>
#define TRIT_TORCH_HAS_CUDA 1
#endif
#endif

namespace trit::kernels {
namespace {

cudaStream_t current_stream(const c10::Device& device) {
#ifdef TRIT_TORCH_HAS_CUDA
    return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#else
    (void)device;
    return nullptr;  // legacy default stream
#endif
}

}  // namespace

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
