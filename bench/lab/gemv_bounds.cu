// Bounds lab for the tern2 GEMV (docs/BENCHMARKS.md, "What bounds the GEMVs"): the per-call floor
// (an empty kernel), the streaming-read ceiling at the GEMV's sizes (one-shot and persistent read
// kernels) and two dp4a tern2 GEMV layouts (one-shot blocks of R rows; a persistent grid with the
// next tile's weights in registers), each with and without programmatic dependent launch, timed
// like `trit bench kernels` (gated CUDA events, weights rotated past 2 x L2). Standalone, not
// part of the build; the GEMVs' outputs are checked against a CPU dot product ("ok"). On the GPU
// machine: nvcc -O3 -std=c++17 -arch=sm_90a bench/lab/gemv_bounds.cu -o gemv_bounds && ./gemv_bounds
// `./gemv_bounds rw IN_BYTES OUT_BYTES ...` times only a kernel that reads IN bytes (rotated past
// L2) and writes OUT bytes, per pair: the floor of a small GEMM call (e.g. the BWTA shapes).
// `./gemv_bounds rw3 W_BYTES A_BYTES OUT_BYTES ...`: the same with a GEMM's dependency chain, per
// triple: W bytes (weights, rotated) read before the wait for the previous call, then A bytes
// (activations, not rotated: in L2, as the previous kernel left them) read after it, and OUT
// bytes written from both.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e_ = (x);                                                       \
        if (e_ != cudaSuccess) {                                                    \
            printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static void CUDART_CB gate_fn(void* p) {
    auto* a = static_cast<std::atomic<int>*>(p);
    while (!a->load()) {
    }
}

template <class F>
double time_calls(F launch, int B, int samples, cudaStream_t s) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    int call = 0;
    for (int i = 0; i < 3; ++i) launch(call++);
    CK(cudaStreamSynchronize(s));
    for (int sm = 0; sm < samples; ++sm) {
        std::atomic<int> flag{0};
        CK(cudaLaunchHostFunc(s, gate_fn, &flag));
        CK(cudaEventRecord(e0, s));
        for (int b = 0; b < B; ++b) launch(call++);
        CK(cudaEventRecord(e1, s));
        flag.store(1);
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0 / B);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <typename K, typename... Args>
void launch_ex(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
               Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

__device__ __forceinline__ void pdl_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void empty_kernel(int* out) {
    pdl_trigger();
    pdl_wait();
    if (threadIdx.x == 1000) out[0] = 1;
}

__device__ __forceinline__ uint4 ld_nc(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// One shot: thread handles U consecutive-by-stride uint4.
template <int U>
__global__ void read_kernel(const uint4* p, int64_t n16, int* out) {
    pdl_trigger();
    const int64_t base = int64_t{blockIdx.x} * blockDim.x * U + threadIdx.x;
    uint32_t a = 0;
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int64_t i = base + int64_t{u} * blockDim.x;
        v[u] = i < n16 ? ld_nc(p + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) a ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    pdl_wait();
    if (a == 0x12345679u) out[0] = a;
}

constexpr uint32_t kTable = 0x00FF0100u;

__device__ __forceinline__ void permute_x(const uint4& v, uint32_t* r) {
    r[0] = __byte_perm(v.x, v.y, 0x6420);
    r[1] = __byte_perm(v.z, v.w, 0x6420);
    r[2] = __byte_perm(v.x, v.y, 0x7531);
    r[3] = __byte_perm(v.z, v.w, 0x7531);
}

__device__ __forceinline__ int dot16(uint32_t w, const uint32_t* xq, int a) {
    const uint32_t lo = w & 0x33333333u, hi = (w >> 2) & 0x33333333u;
    a = __dp4a(static_cast<int>(__byte_perm(kTable, 0, lo)), static_cast<int>(xq[0]), a);
    a = __dp4a(static_cast<int>(__byte_perm(kTable, 0, lo >> 16)), static_cast<int>(xq[1]), a);
    a = __dp4a(static_cast<int>(__byte_perm(kTable, 0, hi)), static_cast<int>(xq[2]), a);
    a = __dp4a(static_cast<int>(__byte_perm(kTable, 0, hi >> 16)), static_cast<int>(xq[3]), a);
    return a;
}

// Block: R rows; thread t takes 64-column pieces t, t + T, ...; all of a piece's R weight loads
// issue together (before the PDL wait for the first piece).
template <int R, int M>
__global__ void __launch_bounds__(256) gemv_kernel(const uint8_t* __restrict__ w,
                                                   const int8_t* __restrict__ x, int n, int k,
                                                   float* __restrict__ y) {
    __shared__ int red[8][R * M];
    const int t = threadIdx.x, T = blockDim.x, lane = t % 32, warp = t / 32;
    const int P = k / 64;
    const int64_t rb = k / 4;
    const int64_t row0 = int64_t{blockIdx.x} * R;
    int acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int mm = 0; mm < M; ++mm) acc[r][mm] = 0;
    const uint8_t* wr = w + row0 * rb;
    uint4 wv[R];
    int p = t;
    auto load = [&](int pp) {
#pragma unroll
        for (int r = 0; r < R; ++r)
            wv[r] = (pp < P && row0 + r < n) ? ld_nc(wr + r * rb + int64_t{pp} * 16)
                                             : make_uint4(0, 0, 0, 0);
    };
    load(p);
    pdl_trigger();
    pdl_wait();
    for (; p < P; p += T) {
        uint4 cur[R];
#pragma unroll
        for (int r = 0; r < R; ++r) cur[r] = wv[r];
        if (p + T < P) load(p + T);
#pragma unroll
        for (int mm = 0; mm < M; ++mm) {
            uint32_t xq[16];
            const uint4* xp = reinterpret_cast<const uint4*>(x + int64_t{mm} * k + int64_t{p} * 64);
#pragma unroll
            for (int q = 0; q < 4; ++q) permute_x(__ldg(xp + q), xq + 4 * q);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int a = acc[r][mm];
                a = dot16(cur[r].x, xq + 0, a);
                a = dot16(cur[r].y, xq + 4, a);
                a = dot16(cur[r].z, xq + 8, a);
                a = dot16(cur[r].w, xq + 12, a);
                acc[r][mm] = a;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int mm = 0; mm < M; ++mm) {
            const int s = __reduce_add_sync(0xffffffffu, acc[r][mm]);
            if (lane == 0) red[warp][r * M + mm] = s;
        }
    __syncthreads();
    if (t < R * M) {
        const int r = t / M, mm = t % M;
        int s = 0;
        for (int i = 0; i < T / 32; ++i) s += red[i][t];
        if (row0 + r < n) y[int64_t{mm} * n + row0 + r] = static_cast<float>(s);
    }
}


// Persistent read: grid-stride, U independent loads per thread in flight.
template <int U>
__global__ void read_persist(const uint4* p, int64_t n16, int* out) {
    pdl_trigger();
    const int64_t total = int64_t{gridDim.x} * blockDim.x;
    uint32_t a = 0;
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n16; i += total * U) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t j = i + u * total;
            v[u] = j < n16 ? ld_nc(p + j) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) a ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    pdl_wait();
    if (a == 0x12345679u) out[0] = a;
}

// Persistent GEMV, M = 1, one scale group: block loops over R-row tiles; thread t owns piece t
// (P <= T) so its x piece lives in registers; the next tile's weights load before this tile's
// math. XS: x from shared memory instead of registers (staged once).
template <int R>
__global__ void __launch_bounds__(256) gemv_persist(const uint8_t* __restrict__ w,
                                                    const int8_t* __restrict__ x, int n, int k,
                                                    float* __restrict__ y) {
    __shared__ int red[2][8][R];
    const int t = threadIdx.x, T = blockDim.x, lane = t % 32, warp = t / 32;
    const int P = k / 64;
    const int64_t rb = k / 4;
    const int tiles = (n + R - 1) / R;
    const bool has = t < P;
    uint4 wv[R];
    auto load = [&](int tile) {
        const int64_t row0 = int64_t{tile} * R;
#pragma unroll
        for (int r = 0; r < R; ++r)
            wv[r] = (has && tile < tiles && row0 + r < n)
                        ? ld_nc(w + (row0 + r) * rb + int64_t{t} * 16)
                        : make_uint4(0, 0, 0, 0);
    };
    int tile = blockIdx.x;
    load(tile);
    pdl_trigger();
    pdl_wait();
    uint32_t xq[16];
    {
        const uint4* xp = reinterpret_cast<const uint4*>(x + int64_t{has ? t : 0} * 64);
#pragma unroll
        for (int q = 0; q < 4; ++q) permute_x(has ? __ldg(xp + q) : make_uint4(0, 0, 0, 0), xq + 4 * q);
    }
    int par = 0;
    for (; tile < tiles; tile += gridDim.x, par ^= 1) {
        uint4 cur[R];
#pragma unroll
        for (int r = 0; r < R; ++r) cur[r] = wv[r];
        load(tile + gridDim.x);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int a = 0;
            a = dot16(cur[r].x, xq + 0, a);
            a = dot16(cur[r].y, xq + 4, a);
            a = dot16(cur[r].z, xq + 8, a);
            a = dot16(cur[r].w, xq + 12, a);
            const int s = __reduce_add_sync(0xffffffffu, a);
            if (lane == 0) red[par][warp][r] = s;
        }
        __syncthreads();
        if (t < R) {
            int s = 0;
            for (int i = 0; i < T / 32; ++i) s += red[par][i][t];
            const int64_t row = int64_t{tile} * R + t;
            if (row < n) y[row] = static_cast<float>(s);
        }
    }
}

struct Shape {
    int n, k;
};

// The floor of a small GEMM call: read `in16` 16-byte units (weights, rotated so they come from
// DRAM; read before pdl_wait, as the packed products do) and write `out16` units (the float y),
// one unit per thread, nothing else.
__global__ void read_write_kernel(const uint4* in, int64_t in16, uint4* out, int64_t out16) {
    const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (i < in16) v = ld_nc(in + i);
    pdl_trigger();
    pdl_wait();
    if (i < out16) out[i] = v;
}

// W before the wait, A after it, out from both (one 16-byte unit per thread).
__global__ void read_wait_read_write_kernel(const uint4* w, int64_t w16, const uint4* a, int64_t a16, uint4* out,
                                            int64_t out16) {
    const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (i < w16) v = ld_nc(w + i);
    pdl_trigger();
    pdl_wait();
    const uint4 u = i < a16 ? a[i] : make_uint4(0, 0, 0, 0);
    if (i < out16) out[i] = make_uint4(v.x ^ u.x, v.y ^ u.y, v.z ^ u.z, v.w ^ u.w);
}

// `gemv_bounds rw3 W A OUT ...`: read_wait_read_write_kernel's time per call for each triple.
int read_wait_read_write_floors(int argc, char** argv, cudaStream_t s) {
    const int B = 32, S = 30;
    const int64_t ring_total = 160ll << 20;
    for (int arg = 2; arg + 2 < argc; arg += 3) {
        const int64_t w_bytes = std::atoll(argv[arg]), a_bytes = std::atoll(argv[arg + 1]),
                      out_bytes = std::atoll(argv[arg + 2]);
        const int64_t w16 = (w_bytes + 15) / 16, a16 = (a_bytes + 15) / 16, out16 = (out_bytes + 15) / 16;
        const int64_t stride = (w16 * 16 + 255) / 256 * 256;
        const int64_t count = ring_total / stride;
        uint8_t* ring;
        uint4 *a, *out;
        CK(cudaMalloc(&ring, count * stride));
        CK(cudaMemset(ring, 1, count * stride));
        CK(cudaMalloc(&a, a16 * 16));
        CK(cudaMemset(a, 2, a16 * 16));
        CK(cudaMalloc(&out, out16 * 16));
        const int64_t units = std::max(std::max(w16, a16), out16);
        const unsigned blocks = static_cast<unsigned>((units + 255) / 256);
        for (int pdl = 0; pdl < 2; ++pdl) {
            const double us = time_calls(
                [&](int i) {
                    launch_ex(read_wait_read_write_kernel, dim3(blocks), dim3(256), 0, s, pdl,
                              reinterpret_cast<const uint4*>(ring + (i % count) * stride), w16,
                              static_cast<const uint4*>(a), a16, out, out16);
                },
                B, S, s);
            printf("read W %lld B, wait, read A %lld B, write %lld B, pdl=%d: %.2f us/call\n", (long long)w_bytes,
                   (long long)a_bytes, (long long)out_bytes, pdl, us);
        }
        CK(cudaFree(ring));
        CK(cudaFree(a));
        CK(cudaFree(out));
    }
    return 0;
}

// `gemv_bounds rw IN_BYTES OUT_BYTES ...`: read_write_kernel's time per call for each pair, with
// and without PDL (e.g. the BWTA b1 GEMM shapes at m = 128: bin1 weights n * k / 8 bytes, y
// 128 * n * 4 bytes).
int read_write_floors(int argc, char** argv, cudaStream_t s) {
    const int B = 32, S = 30;
    const int64_t ring_total = 160ll << 20;
    for (int a = 2; a + 1 < argc; a += 2) {
        const int64_t in_bytes = std::atoll(argv[a]), out_bytes = std::atoll(argv[a + 1]);
        const int64_t in16 = (in_bytes + 15) / 16, out16 = (out_bytes + 15) / 16;
        const int64_t stride = (in16 * 16 + 255) / 256 * 256;
        const int64_t count = ring_total / stride;
        uint8_t* ring;
        uint4* out;
        CK(cudaMalloc(&ring, count * stride));
        CK(cudaMemset(ring, 1, count * stride));
        CK(cudaMalloc(&out, out16 * 16));
        const int64_t units = std::max(in16, out16);
        const unsigned blocks = static_cast<unsigned>((units + 255) / 256);
        for (int pdl = 0; pdl < 2; ++pdl) {
            const double us = time_calls(
                [&](int i) {
                    launch_ex(read_write_kernel, dim3(blocks), dim3(256), 0, s, pdl,
                              reinterpret_cast<const uint4*>(ring + (i % count) * stride), in16, out, out16);
                },
                B, S, s);
            printf("read %lld B + write %lld B, pdl=%d: %.2f us/call\n", (long long)in_bytes, (long long)out_bytes,
                   pdl, us);
        }
        CK(cudaFree(ring));
        CK(cudaFree(out));
    }
    return 0;
}

int main(int argc, char** argv) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int* dout;
    CK(cudaMalloc(&dout, 64));
    if (argc > 1 && std::string(argv[1]) == "rw") return read_write_floors(argc, argv, s);
    if (argc > 1 && std::string(argv[1]) == "rw3") return read_wait_read_write_floors(argc, argv, s);
    const int B = 32, S = 30;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20);

    for (int pdl = 0; pdl < 2; ++pdl) {
        const double us = time_calls(
            [&](int) { launch_ex(empty_kernel, dim3(132), dim3(128), 0, s, pdl, dout); }, B, S, s);
        printf("empty kernel 132x128 pdl=%d: %.2f us/call\n", pdl, us);
        const double us2 = time_calls(
            [&](int) { launch_ex(empty_kernel, dim3(1), dim3(32), 0, s, pdl, dout); }, B, S, s);
        printf("empty kernel 1x32 pdl=%d: %.2f us/call\n", pdl, us2);
    }

    const std::vector<Shape> shapes = {{2560, 2560}, {6912, 2560}, {2560, 6912},
                                       {4096, 4096}, {14336, 4096}, {4096, 14336}};
    const int64_t max_bytes = int64_t{14336} * 4096 / 4;
    const int64_t ring_total = 160ll << 20;  // >= 2 x 50 MB L2 + a copy
    uint8_t* ring;
    CK(cudaMalloc(&ring, ring_total + max_bytes));
    {
        std::vector<uint8_t> h(ring_total + max_bytes);
        std::mt19937 g(1);
        for (auto& b : h) {
            uint8_t v = 0;
            for (int j = 0; j < 4; ++j) v |= static_cast<uint8_t>(g() % 3) << (2 * j);
            b = v;
        }
        CK(cudaMemcpy(ring, h.data(), h.size(), cudaMemcpyHostToDevice));
    }
    int8_t* dx;
    float* dy;
    CK(cudaMalloc(&dx, 8 * 16384));
    CK(cudaMalloc(&dy, 8 * 16384 * 4));
    {
        std::vector<int8_t> hx(8 * 16384);
        std::mt19937 g(2);
        for (auto& v : hx) v = static_cast<int8_t>(int(g() % 255) - 127);
        CK(cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice));
    }

    for (const Shape& sh : shapes) {
        const int64_t bytes = int64_t{sh.n} * sh.k / 4;
        const int64_t stride = (bytes + 255) / 256 * 256;
        const int64_t count = ring_total / stride;
        auto at = [&](int i) { return ring + (i % count) * stride; };
        printf("\n== %dx%d: %.2f MB, ring %lld copies\n", sh.n, sh.k, bytes / 1e6, (long long)count);
        for (int pdl = 0; pdl < 2; ++pdl) {
            const int64_t n16 = bytes / 16;
            for (int U : {1, 4}) {
                const int blocks = static_cast<int>((n16 + 256 * U - 1) / (256 * U));
                const double us = time_calls(
                    [&](int i) {
                        if (U == 1)
                            launch_ex(read_kernel<1>, dim3(blocks), dim3(256), 0, s, pdl,
                                      reinterpret_cast<const uint4*>(at(i)), n16, dout);
                        else
                            launch_ex(read_kernel<4>, dim3(blocks), dim3(256), 0, s, pdl,
                                      reinterpret_cast<const uint4*>(at(i)), n16, dout);
                    },
                    B, S, s);
                printf("read U=%d pdl=%d: %.2f us  %.0f GB/s\n", U, pdl, us, bytes / us / 1e3);
            }
        }
        for (int pdl = 0; pdl < 2; ++pdl)
            for (int U : {2, 4}) {
                const int64_t n16 = bytes / 16;
                for (int bps : {4, 8}) {
                    const double us = time_calls(
                        [&](int i) {
                            if (U == 2)
                                launch_ex(read_persist<2>, dim3(132 * bps), dim3(256), 0, s, pdl,
                                          reinterpret_cast<const uint4*>(at(i)), n16, dout);
                            else
                                launch_ex(read_persist<4>, dim3(132 * bps), dim3(256), 0, s, pdl,
                                          reinterpret_cast<const uint4*>(at(i)), n16, dout);
                        },
                        B, S, s);
                    printf("read_persist U=%d blocks/SM=%d pdl=%d: %.2f us  %.0f GB/s\n", U, bps, pdl, us,
                           bytes / us / 1e3);
                }
            }
        // correctness of the GEMV on copy 0
        std::vector<uint8_t> hw(bytes);
        CK(cudaMemcpy(hw.data(), at(0), bytes, cudaMemcpyDeviceToHost));
        std::vector<int8_t> hx(8 * sh.k);
        CK(cudaMemcpy(hx.data(), dx, hx.size(), cudaMemcpyDeviceToHost));
        const int P = sh.k / 64;
        const int T = std::min(256, (P + 31) / 32 * 32);
        auto run = [&](int R, int M, int i, bool pdl) {
            const dim3 grid((sh.n + R - 1) / R);
#define CASE(RR, MM)                                                                     \
    if (R == RR && M == MM)                                                              \
        launch_ex(gemv_kernel<RR, MM>, grid, dim3(T), 0, s, pdl, (const uint8_t*)at(i), \
                  (const int8_t*)dx, sh.n, sh.k, dy);
            CASE(1, 1) CASE(2, 1) CASE(4, 1) CASE(8, 1) CASE(4, 2) CASE(4, 4) CASE(8, 4) CASE(4, 8)
#undef CASE
        };

        for (int R : {2, 4, 8}) {
            auto runp = [&](int i, bool pdl, int grid) {
                if (R == 2) launch_ex(gemv_persist<2>, dim3(grid), dim3(T), 0, s, pdl, (const uint8_t*)at(i), (const int8_t*)dx, sh.n, sh.k, dy);
                if (R == 4) launch_ex(gemv_persist<4>, dim3(grid), dim3(T), 0, s, pdl, (const uint8_t*)at(i), (const int8_t*)dx, sh.n, sh.k, dy);
                if (R == 8) launch_ex(gemv_persist<8>, dim3(grid), dim3(T), 0, s, pdl, (const uint8_t*)at(i), (const int8_t*)dx, sh.n, sh.k, dy);
            };
            int bps = 0;
            if (R == 2) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, gemv_persist<2>, T, 0));
            if (R == 4) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, gemv_persist<4>, T, 0));
            if (R == 8) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, gemv_persist<8>, T, 0));
            const int tiles = (sh.n + R - 1) / R;
            for (int frac : {1, 2}) {
                const int grid = std::min(tiles, 132 * bps / frac);
                runp(0, false, grid);
                CK(cudaStreamSynchronize(s));
                std::vector<float> hy(sh.n);
                CK(cudaMemcpy(hy.data(), dy, hy.size() * 4, cudaMemcpyDeviceToHost));
                int bad = 0;
                for (int j = 0; j < sh.n; j += 97) {
                    int a = 0;
                    for (int c = 0; c < sh.k; ++c) {
                        const int f = (hw[int64_t{j} * sh.k / 4 + c / 4] >> (2 * (c % 4))) & 3;
                        a += ((f & 1) - (f >> 1)) * hx[c];
                    }
                    if (static_cast<float>(a) != hy[j]) ++bad;
                }
                for (int pdl = 0; pdl < 2; ++pdl) {
                    const double us = time_calls([&](int i) { runp(i, pdl, grid); }, B, S, s);
                    printf("persist R=%d T=%d grid=%d (%d/SM) pdl=%d: %.2f us  %.0f GB/s  %s\n", R, T, grid, bps / frac, pdl, us,
                           bytes / us / 1e3, bad ? "MISMATCH" : "ok");
                }
            }
        }
        for (int M : {1, 2}) {
            for (int R : {1, 2, 4, 8}) {
                if (M > 1 && !((R == 4) || (R == 8 && M == 4))) continue;
                run(R, M, 0, false);
                CK(cudaStreamSynchronize(s));
                std::vector<float> hy(int64_t{M} * sh.n);
                CK(cudaMemcpy(hy.data(), dy, hy.size() * 4, cudaMemcpyDeviceToHost));
                int bad = 0;
                for (int mm = 0; mm < M; ++mm)
                    for (int j = 0; j < sh.n; j += 97) {
                        int a = 0;
                        for (int c = 0; c < sh.k; ++c) {
                            const int f = (hw[int64_t{j} * sh.k / 4 + c / 4] >> (2 * (c % 4))) & 3;
                            const int code = (f & 1) - (f >> 1);
                            a += code * hx[int64_t{mm} * sh.k + c];
                        }
                        if (static_cast<float>(a) != hy[int64_t{mm} * sh.n + j]) ++bad;
                    }
                for (int pdl = 0; pdl < 2; ++pdl) {
                    const double us =
                        time_calls([&](int i) { run(R, M, i, pdl); }, B, S, s);
                    printf("gemv R=%d M=%d T=%d pdl=%d: %.2f us  %.0f GB/s  %s\n", R, M, T, pdl, us,
                           bytes / us / 1e3, bad ? "MISMATCH" : "ok");
                }
            }
        }
    }
    return 0;
}
