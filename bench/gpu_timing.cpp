// Device buffers, rotation, the stream gate and the timer of `trit bench kernels` (gpu_timing.h).
#include "bench/gpu_timing.h"

#include <cstdlib>

#include <chrono>
#include <ctime>
#include <thread>

namespace trit::bench::gpu {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void cublas_check(cublasStatus_t st, const char* what) {
    TRIT_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLAS ", what, ": ", cublasGetStatusString(st));
}

Ring make_ring(const std::vector<uint8_t>& image, int64_t l2_bytes) {
    Ring r;
    const int64_t bytes = std::max<int64_t>(static_cast<int64_t>(image.size()), 1);
    r.stride = ceil_div(bytes, 256) * 256;
    r.count = ceil_div(2 * l2_bytes, bytes) + 1;
    r.mem = std::make_shared<DeviceMem>(static_cast<size_t>(r.count * r.stride));
    TRIT_CUDA_CHECK(cudaMemcpy(r.at(0), image.data(), image.size(), cudaMemcpyHostToDevice));
    // Doubling device copies: log2(count) memcpys instead of count (tiny images have ~10^4 copies).
    for (int64_t have = 1; have < r.count;) {
        const int64_t n = std::min(have, r.count - have);
        TRIT_CUDA_CHECK(cudaMemcpy(r.at(have), r.at(0), static_cast<size_t>(n * r.stride),
                                   cudaMemcpyDeviceToDevice));
        have += n;
    }
    return r;
}

int64_t append(std::vector<uint8_t>& image, const void* data, size_t bytes) {
    const size_t off = static_cast<size_t>(ceil_div(static_cast<int64_t>(image.size()), 256) * 256);
    image.resize(off + bytes);
    std::copy_n(static_cast<const uint8_t*>(data), bytes, image.data() + off);
    return static_cast<int64_t>(off);
}

void StreamGate::close(cudaStream_t s) {
    timed_out_ = false;
    TRIT_CUDA_CHECK(cudaLaunchHostFunc(s, &StreamGate::wait, this));
}

void CUDART_CB StreamGate::wait(void* p) {
    auto* g = static_cast<StreamGate*>(p);
    const int64_t ticket = g->passed_.fetch_add(1) + 1;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (g->released_.load(std::memory_order_acquire) < ticket) {
        if (Clock::now() > deadline) {
            g->timed_out_ = true;
            return;
        }
        std::this_thread::yield();
    }
}

double percentile(const std::vector<double>& sorted, double q) {
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

Gpu::Gpu(const KernelBenchOptions& o) : o_(o) {
    TRIT_CUDA_CHECK(cudaSetDevice(0));
    int l2 = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    l2_ = std::max(l2, 1 << 20);
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, 0));
    TRIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TRIT_CUDA_CHECK(cudaEventCreate(&start_));
    TRIT_CUDA_CHECK(cudaEventCreate(&stop_));
    cublas_check(cublasCreate(&cublas_), "cublasCreate");
    cublas_check(cublasSetStream(cublas_, stream_), "cublasSetStream");
}

Gpu::~Gpu() {
    (void)cudaStreamSynchronize(stream_);  // the gate's callbacks point at this object
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
    (void)cudaStreamDestroy(stream_);
}

Timed Gpu::time(const std::function<void(int64_t)>& call) {
    int64_t next = 0;
    const auto t0 = Clock::now();
    call(next++);
    TRIT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const double first_s = std::max(std::chrono::duration<double>(Clock::now() - t0).count(), 1e-6);
    const int64_t warm = std::min<int64_t>(
        o_.warmup, std::max<int64_t>(1, static_cast<int64_t>(kWarmupBudgetS / first_s)));
    for (int64_t i = 0; i < warm; ++i)
        call(next++);
    const double est_us = std::max(sample(call, 1, next), 0.5);
    Timed t;
    t.batch = std::clamp<int64_t>(static_cast<int64_t>(kSampleTargetUs / est_us) + 1, 1, kMaxBatch);
    const int64_t fit =
        static_cast<int64_t>(o_.budget_s * 1e6 / (est_us * static_cast<double>(t.batch)));
    t.samples = std::clamp<int64_t>(fit, std::min(kMinSamples, o_.reps), o_.reps);
    std::vector<double> us;
    for (int64_t s = 0; s < t.samples; ++s)
        us.push_back(sample(call, t.batch, next) / static_cast<double>(t.batch));
    std::sort(us.begin(), us.end());
    t.median = percentile(us, 0.5), t.min = us.front(), t.p10 = percentile(us, 0.1),
    t.p90 = percentile(us, 0.9);
    return t;
}

// One gated sample of `batch` calls; returns its elapsed µs.
double Gpu::sample(const std::function<void(int64_t)>& call, int64_t batch, int64_t& next) {
    struct Hold {  // opens the gate even when a call throws, or its callback would spin
        StreamGate& g;
        ~Hold() { g.open(); }
    };
    // TRIT_BENCH_UNGATED=1 for profilers: ncu serializes launches, so a launch behind the closed
    // gate would wait for a callback that waits for the launch (until the gate's timeout).
    static const bool ungated = std::getenv("TRIT_BENCH_UNGATED") != nullptr;
    if (ungated) {
        TRIT_CUDA_CHECK(cudaEventRecord(start_, stream_));
        for (int64_t b = 0; b < batch; ++b)
            call(next++);
        TRIT_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    } else {
        gate_.close(stream_);
        Hold hold{gate_};
        TRIT_CUDA_CHECK(cudaEventRecord(start_, stream_));
        for (int64_t b = 0; b < batch; ++b)
            call(next++);
        TRIT_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    }
    TRIT_CUDA_CHECK(cudaEventSynchronize(stop_));
    TRIT_CHECK(!gate_.timed_out(),
               "bench kernels: a timed call synchronized the stream (timing gate timed out)");
    float ms = 0;
    TRIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e3 * static_cast<double>(ms);
}

std::string device_line(cublasHandle_t h) {
    cudaDeviceProp p{};
    TRIT_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    int sm_khz = 0, mem_khz = 0, bus = 0, rt = 0, drv = 0, blas = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0));
    TRIT_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
    TRIT_CUDA_CHECK(cudaDriverGetVersion(&drv));
    cublas_check(cublasGetVersion(h, &blas), "cublasGetVersion");
    return detail::concat(
        p.name, " (sm_", p.major, p.minor, "), ", p.multiProcessorCount, " SMs, SM clock ",
        sm_khz / 1000, " MHz max, memory ", mem_khz / 1000, " MHz x ", bus, " bit, L2 ",
        p.l2CacheSize >> 20, " MiB, ", p.totalGlobalMem >> 30, " GiB; CUDA runtime ", rt / 1000,
        ".", rt % 1000 / 10, ", driver ", drv / 1000, ".", drv % 1000 / 10, ", cuBLAS ", blas);
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

void require_gpu() {
    int count = 0;
    const cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess) (void)cudaGetLastError();
    TRIT_CHECK(st == cudaSuccess && count > 0, "bench kernels: no CUDA GPU visible (",
               st != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(st)
                                 : std::string("0 devices"),
               "); run it on a machine with an NVIDIA GPU");
}

}  // namespace trit::bench::gpu
