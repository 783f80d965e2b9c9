// Adapters and registration of the fused training quantizers: see train_quant_torch.h.
#include "kernels/train_quant_torch.h"

#include <c10/core/DeviceGuard.h>

#include "core/error.h"
#include "kernels/torch_stream.h"
#include "kernels/train_quant.h"

namespace trit::kernels {

Int8FakeQuant act_int8_fake_quantize_cuda(const torch::Tensor& x) {
    TRIT_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1,
               "act_int8_fake_quantize_cuda: expected a contiguous float32 CUDA tensor, got ",
               x.scalar_type(), " on ", x.device(), " with shape ", x.sizes());
    const c10::DeviceGuard guard(x.device());
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    std::vector<int64_t> scale_shape = x.sizes().vec();
    scale_shape.back() = 1;
    Int8FakeQuant r{torch::empty_like(x), torch::empty_like(x), torch::empty(scale_shape, x.options())};
    act_int8_fake_quantize(x.data_ptr<float>(), rows, cols, r.q.data_ptr<float>(), r.x_hat.data_ptr<float>(),
                           r.scale.data_ptr<float>(), current_stream(x.device()));
    return r;
}

QuantizedWeightsEff weight_absmean_channel_cuda(const torch::Tensor& w, bool fp16_scales) {
    TRIT_CHECK(w.is_cuda() && w.scalar_type() == torch::kFloat32 && w.is_contiguous() && w.dim() == 2,
               "weight_absmean_channel_cuda: expected a contiguous 2-D float32 CUDA tensor, got ",
               w.scalar_type(), " on ", w.device(), " with shape ", w.sizes());
    const c10::DeviceGuard guard(w.device());
    QuantizedWeightsEff r{{torch::empty_like(w), torch::empty({w.size(0), 1}, w.options())}, torch::empty_like(w)};
    weight_absmean_channel(w.data_ptr<float>(), w.size(0), w.size(1), fp16_scales, kAbsmeanEps, r.w.q.data_ptr<float>(),
                           r.w_eff.data_ptr<float>(), r.w.scale.data_ptr<float>(), current_stream(w.device()));
    return r;
}

void register_training_quantizers() {
    set_act_int8_cuda_impl(&act_int8_fake_quantize_cuda);
    set_absmean_channel_cuda_impl(&weight_absmean_channel_cuda);
}

}  // namespace trit::kernels
