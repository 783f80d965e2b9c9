// Thread block cluster barriers (sm_90+) that the kernels share. No-ops below sm_90, where the
// launchers never form clusters.
#pragma once

namespace trit::kernels::detail {

// barrier.cluster without its release (arrive.relaxed, then wait): for a kernel's last cluster
// barrier when it publishes nothing and only keeps each CTA's shared memory alive until its
// peers have read it: a peer arrives after the code that consumed the values it loaded there.
// cooperative_groups' cluster.sync() releases at cluster scope, which sm_90 compiles to
// MEMBAR.ALL.GPU, an L2 round trip: 2-7 % of a clustered tern2 call on the H100
// (docs/BENCHMARKS.md, session 18). A barrier that publishes shared-memory data to the peers
// keeps the release.
__device__ __forceinline__ void cluster_sync_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(
        "barrier.cluster.arrive.relaxed.aligned;\n"
        "barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

}  // namespace trit::kernels::detail
