// Programmatic dependent launch (PDL, sm_90+): a kernel launched with launch_kernel(..., pdl =
// true) may start while the kernel before it on the stream is still running, once every block of
// that kernel has called pdl_launch_dependents() (or exited). Until pdl_wait() returns, the kernel
// must not read anything the previous kernel may write, nor write anything it may read: pdl_wait()
// returns when the previous kernel has completed and its memory operations are visible. What a
// kernel may do before pdl_wait(): read data that no kernel writes right before it (packed weights
// uploaded once; see PackedWeights::pdl). Without the launch attribute, or before sm_90, both
// calls are no-ops. Host side: kernels/launch.h.
#pragma once

namespace trit::kernels::detail {

// Waits for the previous kernel on the stream (see above).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next PDL-launched kernel on the stream start (it still waits for this one in its own
// pdl_wait()).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace trit::kernels::detail
