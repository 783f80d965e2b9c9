// The GPU side of `trit bench kernels` that is not about kernels: device buffers, weight rotation
// past the L2, the stream gate and the timer (method: bench/kernels.h), and the device line. CUDA
// builds only (included by kernels.cpp and gpu_timing.cpp, both left out without TRIT_HAVE_CUDA).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/kernels.h"
#include "core/error.h"
#include "kernels/cuda_check.h"

namespace trit::bench::gpu {

// A sample batches calls up to ~this long: well above the ~0.5 us event resolution, and long
// enough that the calls run as a steady chain, as a model's layers do (only the first call of a
// sample starts on an idle GPU).
constexpr double kSampleTargetUs = 200;
constexpr int64_t kMaxBatch = 64;   // calls per sample at most
constexpr int64_t kMinSamples = 5;  // samples per case at least, whatever the budget
constexpr double kWarmupBudgetS = 0.5;  // warm-up stops early for slow calls (generic, large m)

void cublas_check(cublasStatus_t st, const char* what);

inline int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

class DeviceMem {
  public:
    explicit DeviceMem(size_t bytes) {
        TRIT_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 1)));
    }
    ~DeviceMem() { (void)cudaFree(p_); }
    DeviceMem(const DeviceMem&) = delete;
    DeviceMem& operator=(const DeviceMem&) = delete;
    void* ptr() const { return p_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(p_);
    }

  private:
    void* p_ = nullptr;
};

template <typename T>
std::unique_ptr<DeviceMem> upload(const std::vector<T>& host) {
    auto d = std::make_unique<DeviceMem>(host.size() * sizeof(T));
    TRIT_CUDA_CHECK(
        cudaMemcpy(d->ptr(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// `count` copies of one host image, `stride` (256-byte aligned) apart in one allocation; call i
// reads copy i % count. count = ceil(2 * L2 / bytes) + 1, so between two reads of a copy at least
// 2 * L2 of other copies are read and the copy has left the L2: its bytes come from DRAM.
struct Ring {
    std::shared_ptr<DeviceMem> mem;
    int64_t stride = 0, count = 1;
    uint8_t* at(int64_t i) const { return mem->as<uint8_t>() + (i % count) * stride; }
};

Ring make_ring(const std::vector<uint8_t>& image, int64_t l2_bytes);

// Appends `bytes` at a 256-byte aligned offset of `image` and returns the offset.
int64_t append(std::vector<uint8_t>& image, const void* data, size_t bytes);

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
    std::vector<uint8_t> image;
    append(image, v.data(), v.size() * sizeof(T));
    return image;
}

// Holds the stream until the host has enqueued a whole sample, so the events time GPU work only.
// Host functions run in stream order, so the i-th callback waits for the i-th open(). A call that
// synchronized inside a sample would deadlock against the gate: the callback gives up after 10 s
// and the timing throws.
class StreamGate {
  public:
    // Called when no earlier callback is pending (after the previous sample's synchronize).
    void close(cudaStream_t s);
    void open() { released_.fetch_add(1, std::memory_order_release); }
    bool timed_out() const { return timed_out_.load(); }

  private:
    static void CUDART_CB wait(void* gate);
    std::atomic<int64_t> released_{0}, passed_{0};
    std::atomic<bool> timed_out_{false};
};

struct Timed {
    int64_t samples = 0, batch = 0;
    double median = 0, min = 0, p10 = 0, p90 = 0;  // µs per call
};

// Linear interpolation between the closest ranks of a sorted, non-empty sample.
double percentile(const std::vector<double>& sorted, double q);

// GPU 0, its stream, events, gate and cuBLAS handle (on that stream); times calls.
class Gpu {
  public:
    explicit Gpu(const KernelBenchOptions& o);
    ~Gpu();
    Gpu(const Gpu&) = delete;
    Gpu& operator=(const Gpu&) = delete;

    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    int64_t l2() const { return l2_; }
    int sm_count() const { return sm_count_; }

    // Times call(i) (i = the rotation copy to use): one checked call (a trit::Error from it, a
    // kernel's contract or a cuBLAS refusal, reaches the caller untimed), up to o.warmup warm-up
    // calls (kWarmupBudgetS at most), one gated call as an estimate e, then gated samples of
    // B = clamp(floor(kSampleTargetUs / e) + 1, 1, kMaxBatch) calls, as many as fit o.budget_s
    // (kMinSamples .. o.reps). Returns statistics of the per-call times (sample time / B).
    Timed time(const std::function<void(int64_t)>& call);

  private:
    double sample(const std::function<void(int64_t)>& call, int64_t batch, int64_t& next);

    const KernelBenchOptions& o_;
    int64_t l2_ = 0;
    int sm_count_ = 1;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    StreamGate gate_;
};

// "NVIDIA H100 80GB HBM3 (sm_90), 132 SMs, SM clock 1980 MHz max, ..., cuBLAS 130000".
std::string device_line(cublasHandle_t h);
std::string utc_now();  // ISO 8601
// Throws trit::Error naming the reason when no CUDA device is visible.
void require_gpu();

}  // namespace trit::bench::gpu
