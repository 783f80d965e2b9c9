// Shared pieces of the GPU tests: skip where no device is visible (host-side contract tests still
// run), an owning device buffer with upload/download, seeded random inputs, and a tern2 weight
// descriptor for the host-side contract checks.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/product.h"

namespace trit::gputest {

// Empty when a device is usable, else why not (no driver here gives an error, not a crash).
inline std::string gpu_unavailable_reason() {
    int n = 0;
    const cudaError_t st = cudaGetDeviceCount(&n);
    if (st != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(st);
    }
    return n > 0 ? std::string() : std::string("no CUDA device visible");
}

inline bool gpu_available() {
    static const bool ok = gpu_unavailable_reason().empty();
    return ok;
}

// Compute capability 9.0: where the sm_90a wgmma kernel runs.
inline bool device_is_sm90() {
    int device = 0, major = 0, minor = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
}

// Fixture base: device tests skip cleanly without a GPU.
template <typename Base>
class RequiresGpu : public Base {
  protected:
    void SetUp() override {
        static const std::string reason = gpu_unavailable_reason();
        if (!reason.empty()) GTEST_SKIP() << reason;
    }
};

// cudaMalloc'ed array of n T (at least one element, so get() is never null).
template <typename T>
class DeviceBuffer {
  public:
    explicit DeviceBuffer(size_t n) : n_(n) {
        TRIT_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n, 1) * sizeof(T)));
    }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() { (void)cudaFree(ptr_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    T* get() const { return ptr_; }
    size_t size() const { return n_; }
    void upload(const std::vector<T>& host) {
        TRIT_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), std::min(n_, host.size()) * sizeof(T),
                                   cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        TRIT_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }
    // Fills with a byte pattern (to show that a kernel writes every output).
    void poison(int byte = 0x5A) { TRIT_CUDA_CHECK(cudaMemset(ptr_, byte, std::max<size_t>(n_, 1) * sizeof(T))); }

  private:
    T* ptr_ = nullptr;
    size_t n_ = 0;
};

// Uniform integer codes in [lo, hi], from a fixed seed.
inline std::vector<int8_t> random_codes(size_t n, int lo, int hi, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<int8_t> v(n);
    for (auto& c : v) c = static_cast<int8_t>(dist(rng));
    return v;
}

inline std::vector<float> random_floats(size_t n, float lo, float hi, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& f : v) f = dist(rng);
    return v;
}

// tern2 (n, k) weights at `codes` (contract checks read only the pointer's alignment).
inline kernels::PackedWeights tern2_weights(int64_t n, int64_t k, const uint8_t* codes) {
    kernels::PackedWeights w;
    w.format = kernels::Format::kTern2;
    w.a = codes;
    w.n = n;
    w.k = k;
    return w;
}

// bt<depth> (n, k) weights at `bytes`, with their nibbles at `nib` (PackedWeights::dense; null for
// none). Contract checks read only the pointers' alignment.
inline kernels::PackedWeights bt_weights(int depth, int64_t n, int64_t k, const uint8_t* bytes, const uint8_t* nib) {
    kernels::PackedWeights w;
    w.format = kernels::Format::kBt;
    w.depth = depth;
    w.a = bytes;
    w.dense = nib;
    w.n = n;
    w.k = k;
    return w;
}

// tern24 (n, k) weights at mask / signs (contract checks read only the pointers' alignment).
inline kernels::PackedWeights tern24_weights(int64_t n, int64_t k, const uint8_t* mask, const uint8_t* signs) {
    kernels::PackedWeights w;
    w.format = kernels::Format::kTern24;
    w.a = mask;
    w.b = signs;
    w.n = n;
    w.k = k;
    return w;
}

}  // namespace trit::gputest
