// cp.async (sm_80+): copies from global to shared memory that do not pass through registers. A
// thread's copies are visible to that thread after cp_async_wait_all(), to the block after that
// and a barrier. Device code only. (bin1_gemm.cu keeps its own wrappers, without the memory
// clobbers, in its tuned pipeline.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

namespace trit::kernels::detail {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes, cached in L2 only; src_bytes 0 writes zeros without reading src.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

// 4 bytes (4- and 8-byte copies must go through L1: .ca).
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(shared_address(dst)), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// Until at most N of the thread's committed groups are pending (the last N committed).
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// cp_async_wait<n> for n in Ns, n known where the caller's loop is unrolled.
template <int... Ns>
__device__ __forceinline__ void cp_async_wait_n(int n, std::integer_sequence<int, Ns...>) {
    ((n == Ns ? cp_async_wait<Ns>() : void()), ...);
}

// Every copy the thread has issued, committed or not.
__device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_all;" ::: "memory");
}

}  // namespace trit::kernels::detail
