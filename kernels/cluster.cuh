// Thread block cluster barriers (sm_90+) that the kernels share. No-ops below sm_90, where the
// launchers never form clusters.
#pragma once

#include <cstdint>

namespace trit::kernels::detail {

// The two halves of a cluster barrier, for work in between: arrive without ordering anything
// (e.g. "this CTA has started"), then wait for every CTA's arrival.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}

// barrier.cluster without its release (arrive.relaxed, then wait): for a kernel's last cluster
// barrier when it publishes nothing and only keeps each CTA's shared memory alive until its
// peers have read it: a peer arrives after the code that consumed the values it loaded there.
// cooperative_groups' cluster.sync() releases at cluster scope, which sm_90 compiles to
// MEMBAR.ALL.GPU, an L2 round trip: 2-7 % of a clustered tern2 call on the H100
// (docs/BENCHMARKS.md, session 18). A barrier that publishes shared-memory data to the peers
// keeps the release.
__device__ __forceinline__ void cluster_sync_relaxed() {
    cluster_arrive_relaxed();
    cluster_wait();
}

// The shared::cluster address of shared-memory address `local` in the cluster's CTA `rank`.
__device__ __forceinline__ uint32_t peer_addr(uint32_t local, int rank) {
    uint32_t theirs = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(theirs) : "r"(local), "r"(rank));
#else
    (void)local;
    (void)rank;
#endif
    return theirs;
}

// The 16-byte word at `local` (a shared-memory address) in the shared memory of the cluster's CTA
// `rank`: ld.shared::cluster, where a pointer from map_shared_rank() would make a generic load.
__device__ __forceinline__ int4 peer_int4(const int32_t* local, int rank) {
    int4 v = make_int4(0, 0, 0, 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uint32_t theirs = peer_addr(static_cast<uint32_t>(__cvta_generic_to_shared(local)), rank);
    asm volatile("ld.shared::cluster.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(theirs)
                 : "memory");
#else
    (void)local;
    (void)rank;
#endif
    return v;
}

// Stores two floats at `theirs` (from peer_addr, 8-byte aligned) in a peer's shared memory.
__device__ __forceinline__ void peer_store_f32x2(uint32_t theirs, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(theirs), "f"(a), "f"(b)
                 : "memory");
#else
    (void)theirs;
    (void)a;
    (void)b;
#endif
}

}  // namespace trit::kernels::detail
