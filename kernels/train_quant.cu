// Fused training-time quantizers: see train_quant.h. One block per row: a block reduction (max or
// sum), then a second pass over the row (now in L1/L2) that writes codes and dequantized values.
#include "kernels/train_quant.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <limits>

#include "core/act_int8.h"
#include "core/error.h"
#include "kernels/act_int8.cuh"
#include "kernels/cuda_check.h"

namespace trit::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;

using act8dev::block_reduce;

__global__ void __launch_bounds__(kThreads)
    act_fake_kernel(const float* __restrict__ x, int64_t cols, float* __restrict__ q,
                    float* __restrict__ x_hat, float* __restrict__ scale) {
    __shared__ float partial[kThreads / kWarp];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        const float a = fabsf(xr[i]);
        amax = fmaxf(amax, a <= FLT_MAX ? a : __int_as_float(0x7f800000));  // NaN, inf -> inf
    }
    amax = block_reduce(amax, partial, [](float a, float b) { return fmaxf(a, b); });
    const bool finite = amax <= FLT_MAX;
    amax = fmaxf(amax, kAct8Eps);
    const float qs = __fdiv_rn(127.0f, amax);
    const float s = finite ? __fdiv_rn(amax, 127.0f) : __int_as_float(0x7fc00000);
    if (threadIdx.x == 0) scale[row] = s;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        float c = 0.0f;
        if (finite) c = static_cast<float>(min(max(__float2int_rn(__fmul_rn(xr[i], qs)), -128), 127));
        q[row * cols + i] = c;
        x_hat[row * cols + i] = __fmul_rn(c, s);
    }
}

__global__ void __launch_bounds__(kThreads)
    absmean_kernel(const float* __restrict__ w, int64_t cols, bool fp16_scale, float eps, float* __restrict__ q,
                   float* __restrict__ w_eff, float* __restrict__ scale) {
    __shared__ float partial[kThreads / kWarp];
    const int64_t row = blockIdx.x;
    const float* wr = w + row * cols;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum = __fadd_rn(sum, fabsf(wr[i]));
    sum = block_reduce(sum, partial, [](float a, float b) { return __fadd_rn(a, b); });
    float s = __fdiv_rn(sum, static_cast<float>(cols));
    if (fp16_scale) s = __half2float(__float2half_rn(s));
    if (threadIdx.x == 0) scale[row] = s;
    const float d = __fadd_rn(s, eps);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        const float c = static_cast<float>(min(max(__float2int_rn(__fdiv_rn(wr[i], d)), -1), 1));
        q[row * cols + i] = c;
        w_eff[row * cols + i] = __fmul_rn(c, s);
    }
}

void check_rows(const char* what, const void* in, int64_t rows, int64_t cols, const void* a,
                const void* b, const void* c) {
    TRIT_CHECK(rows >= 1 && cols >= 1, what, ": rows and cols must be >= 1 (got rows=", rows,
               ", cols=", cols, ")");
    TRIT_CHECK(rows <= std::numeric_limits<int32_t>::max(), what, ": rows=", rows,
               " exceeds 2^31 - 1 (one block per row; cols=", cols, ")");
    TRIT_CHECK(in && a && b && c, what, ": null pointer (rows=", rows, ", cols=", cols, ")");
}

}  // namespace

void act_int8_fake_quantize(const float* x, int64_t rows, int64_t cols, float* q, float* x_hat,
                            float* scale, cudaStream_t stream) {
    check_rows("act_int8_fake_quantize", x, rows, cols, q, x_hat, scale);
    act_fake_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, q, x_hat, scale);
    TRIT_CUDA_CHECK_LAST();
}

void weight_absmean_channel(const float* w, int64_t rows, int64_t cols, bool fp16_scale, float eps,
                            float* q, float* w_eff, float* scale, cudaStream_t stream) {
    check_rows("weight_absmean_channel", w, rows, cols, q, w_eff, scale);
    absmean_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(w, cols, fp16_scale, eps, q, w_eff, scale);
    TRIT_CUDA_CHECK_LAST();
}

}  // namespace trit::kernels
