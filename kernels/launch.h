// launch_kernel: a checked kernel launch, optionally with programmatic dependent launch (PDL; the
// device side and its rules are in kernels/pdl.cuh). PDL only shortens the gap between kernels:
// every kernel launched with pdl = true calls detail::pdl_wait() before it touches data the
// previous kernel may have written, so the results are those of an ordinary launch. For .cu files.
// TRIT_PDL=0 in the environment launches everything without it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/cuda_check.h"

namespace trit::kernels::detail {

// TRIT_PDL=0 in the environment turns PDL off for every launch (read once): a way to rule it out
// when a result looks wrong, and to measure what it gains.
inline bool pdl_enabled() {
    static const bool enabled = [] {
        const char* v = std::getenv("TRIT_PDL");
        return v == nullptr || std::string(v) != "0";
    }();
    return enabled;
}

// A measured rule's override from the environment: unset (or anything but "0" and "1"), the
// measured rule; "0" never; "1" wherever the kernel's contract takes the call.
enum class OneshotPolicy { kMeasured, kNever, kAlways };
inline OneshotPolicy env_policy(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) return OneshotPolicy::kMeasured;
    const std::string s(v);
    return s == "0" ? OneshotPolicy::kNever : s == "1" ? OneshotPolicy::kAlways : OneshotPolicy::kMeasured;
}

// Whether a call goes to a kernel whose contract takes it (`takes`) under its measured rule
// (`measured`) and `policy`.
inline bool policy_runs(OneshotPolicy policy, bool measured, bool takes) {
    switch (policy) {
        case OneshotPolicy::kNever: return false;
        case OneshotPolicy::kAlways: return takes;
        case OneshotPolicy::kMeasured: break;
    }
    return takes && measured;
}

// TRIT_ONESHOT in the environment (read once) overrides the size rules that send one-token calls
// to the one-shot GEMVs (tern2_gemv_oneshot, bt_nib4_oneshot): "0" never runs them, "1" runs
// them wherever their contracts take the call, whatever its size. A way to rule them out when a
// result looks wrong, and to measure the dispatch (docs/BENCHMARKS.md, session 26).
inline OneshotPolicy oneshot_policy() {
    static const OneshotPolicy policy = env_policy("TRIT_ONESHOT");
    return policy;
}

// Whether a one-token call of `weights` = n * k goes to a one-shot GEMV whose contract takes it
// (`takes`), under the measured size rule `weights <= max_weights` and TRIT_ONESHOT.
inline bool oneshot_runs(int64_t weights, int64_t max_weights, bool takes) {
    return policy_runs(oneshot_policy(), weights <= max_weights, takes);
}

// TRIT_FUSE in the environment (read once) overrides the rules that send product_from_float's
// one-token calls to a one-shot GEMV that quantizes x itself (kernels/product.h): "0" always runs
// the quantizer and then the product, "1" fuses wherever the one-shot kernel takes the call. How
// the fusion rules are measured (docs/BENCHMARKS.md, session 27).
inline bool fuse_runs(bool measured, bool takes) {
    static const OneshotPolicy policy = env_policy("TRIT_FUSE");
    return policy_runs(policy, measured, takes);
}

// launch_kernel over clusters of `cluster` CTAs (a thread block cluster when it holds more than
// one; the grid is a whole number of them).
template <typename... KernelArgs, typename... Args>
void launch_kernel_clustered(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, bool pdl, dim3 cluster, Args&&... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute[2] = {};
    unsigned attributes = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
        attribute[attributes].id = cudaLaunchAttributeClusterDimension;
        attribute[attributes].val.clusterDim.x = cluster.x;
        attribute[attributes].val.clusterDim.y = cluster.y;
        attribute[attributes].val.clusterDim.z = cluster.z;
        ++attributes;
    }
    if (pdl && pdl_enabled()) {
        attribute[attributes].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute[attributes].val.programmaticStreamSerializationAllowed = 1;
        ++attributes;
    }
    config.attrs = attribute;
    config.numAttrs = attributes;
    TRIT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, bool pdl, Args&&... args) {
    launch_kernel_clustered(kernel, grid, block, smem, stream, pdl, dim3(1, 1, 1),
                            std::forward<Args>(args)...);
}

}  // namespace trit::kernels::detail
