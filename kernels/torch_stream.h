// The current CUDA stream of a device, for the LibTorch adapters. Compiles against a CPU-only
// LibTorch (Debian's 1.13 ships c10/cuda/CUDAStream.h but cannot compile it there; the generated
// cuda_cmake_macros.h exists only in CUDA builds, whose TORCH_LIBRARIES also link c10_cuda): it
// then returns the legacy default stream, though no CUDA tensor can exist in such a build.
#pragma once

#include <c10/core/Device.h>
#include <cuda_runtime_api.h>

#if defined(__has_include)
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#include <c10/cuda/CUDAStream.h>
#define TRIT_TORCH_HAS_CUDA 1
#endif
#endif

namespace trit::kernels {

inline cudaStream_t current_stream(const c10::Device& device) {
#ifdef TRIT_TORCH_HAS_CUDA
    return c10::cuda::getCurrentCUDAStream(device.index()).stream();
#else
    (void)device;
    return nullptr;  // legacy default stream
#endif
}

}  // namespace trit::kernels
