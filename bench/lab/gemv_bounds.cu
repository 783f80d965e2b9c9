// Bounds lab for the tern2 GEMV (docs/BENCHMARKS.md, "What bounds the GEMVs"): the per-call floor
// (an empty kernel), the streaming-read ceiling at the GEMV's sizes (one-shot and persistent read
// kernels) and two dp4a tern2 GEMV layouts (one-shot blocks of R rows; a persistent grid with the
// next tile's weights in registers), each with and without programmatic dependent launch, timed
// like `trit bench kernels` (gated CUDA events, weights rotated past 2 x L2). Standalone, not
// part of the build; the GEMVs' outputs are checked against a CPU dot product ("ok"). On the GPU
// machine: nvcc -O3 -std=c++17 -arch=sm_90a bench/lab/gemv_bounds.cu -o gemv_bounds &&
// ./gemv_bounds
// `./gemv_bounds rw IN_BYTES OUT_BYTES ...` times only a kernel that reads IN bytes (rotated past
// L2) and writes OUT bytes, per pair: the floor of a small GEMM call (e.g. the BWTA shapes).
// `./gemv_bounds rw3 W_BYTES A_BYTES OUT_BYTES ...`: the same with a GEMM's dependency chain, per
// triple: W bytes (weights, rotated) read before the wait for the previous call, then A bytes
// (activations, not rotated: in L2, as the previous kernel left them) read after it, and OUT
// bytes written from both. `./gemv_bounds floors FORMAT:M:NxK ...`: rw3 under PDL with the bytes
// of that product call (call_floors below).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// A ring of copies of `units16` 16-byte units, 160 MB in all (past 2 x the 50 MB L2): the weights
// rotate through it so that they come from DRAM. Sets stride (bytes between copies) and count.
uint8_t* make_ring(int64_t units16, int64_t& stride, int64_t& count) {
    stride = (units16 * 16 + 255) / 256 * 256;
    count = std::max<int64_t>((160ll << 20) / stride, 1);  // one copy past 160 MB: DRAM anyway
    uint8_t* ring;
    CK(cudaMalloc(&ring, count * stride));
    CK(cudaMemset(ring, 1, count * stride));
    return ring;
}

// read_wait_read_write_kernel's time per call (us) for W weight bytes (rotated), A bytes of x and
// OUT bytes of y, chained with PDL (pdl = 1) or not.
double rw3_time(int64_t w_bytes, int64_t a_bytes, int64_t out_bytes, int pdl, cudaStream_t s) {
    const int B = 32, S = 30;
    const int64_t w16 = (w_bytes + 15) / 16, a16 = (a_bytes + 15) / 16,
                  out16 = (out_bytes + 15) / 16;
    int64_t stride, count;
    uint8_t* ring = make_ring(w16, stride, count);
    uint4 *a, *out;
    CK(cudaMalloc(&a, a16 * 16));
    CK(cudaMemset(a, 2, a16 * 16));
    CK(cudaMalloc(&out, out16 * 16));
    const int64_t units = std::max(std::max(w16, a16), out16);
    const unsigned blocks = static_cast<unsigned>((units + 255) / 256);
    const double us = time_calls(
        [&](int i) {
            launch_ex(read_wait_read_write_kernel, dim3(blocks), dim3(256), 0, s, pdl,
                      reinterpret_cast<const uint4*>(ring + (i % count) * stride), w16,
                      static_cast<const uint4*>(a), a16, out, out16);
        },
        B, S, s);
    CK(cudaFree(ring));
    CK(cudaFree(a));
    CK(cudaFree(out));
    return us;
}

// `gemv_bounds rw3 W A OUT ...`: read_wait_read_write_kernel's time per call for each triple.
int read_wait_read_write_floors(int argc, char** argv, cudaStream_t s) {
    for (int arg = 2; arg + 2 < argc; arg += 3) {
        const int64_t w_bytes = std::atoll(argv[arg]), a_bytes = std::atoll(argv[arg + 1]),
                      out_bytes = std::atoll(argv[arg + 2]);
        for (int pdl = 0; pdl < 2; ++pdl)
            printf("read W %lld B, wait, read A %lld B, write %lld B, pdl=%d: %.2f us/call\n",
                   (long long)w_bytes, (long long)a_bytes, (long long)out_bytes, pdl,
                   rw3_time(w_bytes, a_bytes, out_bytes, pdl, s));
    }
    return 0;
}

// `gemv_bounds floors FORMAT:M:NxK ...`: rw3's floor under PDL with the bytes `trit bench kernels`
// counts for the call (docs/BENCHMARKS.md, sessions 25 and 36): W the weights and their scales
// (tern2 n k / 4 + 4 n; tern24 3 n k / 16 + 4 n; bt2 nibbles and a float scale per 64, 9 n k / 16;
// bt2h the same with the scales' fp16 copy, ProductOut::w_scale_half, 17 n k / 32;
// bin1_tern the bit plane, rows padded to 256 bits, a scale and a bias a row), A the int8 x and
// its scales (m k + 4 m; bin1_tern two bit planes of x, 2 m ceil(k / 256) 32 + 4 m), OUT the
// float y (4 m n). One line per case: format, m, n, k, the three byte counts and the floor in us.
int call_floors(int argc, char** argv, cudaStream_t s) {
    printf("format m n k w_bytes a_bytes out_bytes floor_us\n");
    for (int arg = 2; arg < argc; ++arg) {
        char format[32];
        long long m = 0, n = 0, k = 0;
        if (std::sscanf(argv[arg], "%31[^:]:%lld:%lldx%lld", format, &m, &n, &k) != 4 || m < 1 ||
            n < 1 || k < 1) {
            printf("bad case '%s': expected FORMAT:M:NxK, e.g. tern2:1:2560x2560\n", argv[arg]);
            return 1;
        }
        const std::string f(format);
        const int64_t plane_row = (k + 255) / 256 * 32;  // bytes of one bit-plane row
        int64_t w = 0, a = m * k + 4 * m;
        if (f == "tern2") {
            w = n * k / 4 + 4 * n;
        } else if (f == "tern24") {
            w = 3 * n * k / 16 + 4 * n;
        } else if (f == "bt2") {
            w = 9 * n * k / 16;
        } else if (f == "bt2h") {
            w = 17 * n * k / 32;
        } else if (f == "bin1_tern") {
            w = n * plane_row + 8 * n;
            a = 2 * m * plane_row + 4 * m;
        } else {
            printf("unknown format '%s': expected tern2, tern24, bt2, bt2h or bin1_tern\n", format);
            return 1;
        }
        const int64_t out = 4 * m * n;
        printf("%s %lld %lld %lld %lld %lld %lld %.2f\n", format, m, n, k, (long long)w,
               (long long)a, (long long)out, rw3_time(w, a, out, 1, s));
        fflush(stdout);
    }
    return 0;
}

// `gemv_bounds rwp W OUT ...`: as rw3 (W before the wait, OUT written after it), but P 16-byte
// pieces a thread (P = 1, 2, 4, 8), in two layouts: coalesced (piece v of a block's thread t at
// unit (block * P + v) * 256 + t: each load instruction reads 4 KB in a row) and per-thread runs
// (thread i reads units i * P .. i * P + P - 1: one instruction reads 16 bytes every 16 * P, as a
// GEMV lane reading its 32- or 64-byte unit in 16-byte pieces does).
template <int P, bool kCoalesced>
__global__ void __launch_bounds__(256) read_pieces_kernel(const uint4* w, int64_t w16, uint4* out, int64_t out16) {
    const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    uint4 v[P];
#pragma unroll
    for (int q = 0; q < P; ++q) {
        const int64_t u = kCoalesced ? (int64_t{blockIdx.x} * P + q) * blockDim.x + threadIdx.x : i * P + q;
        v[q] = u < w16 ? ld_nc(w + u) : make_uint4(0, 0, 0, 0);
    }
    pdl_trigger();
    pdl_wait();
    uint4 r = v[0];
#pragma unroll
    for (int q = 1; q < P; ++q) r = make_uint4(r.x ^ v[q].x, r.y ^ v[q].y, r.z ^ v[q].z, r.w ^ v[q].w);
    if (i < out16) out[i] = r;
    else if ((r.x & r.y & r.z & r.w) == 0x12345678u) out[0] = r;  // keeps the loads
}

template <int P, bool kCoalesced>
double time_read_pieces(const uint8_t* ring, int64_t count, int64_t stride, int64_t w16, uint4* out, int64_t out16,
                        cudaStream_t s) {
    const unsigned blocks = static_cast<unsigned>((w16 + 256 * P - 1) / (256 * P));
    return time_calls(
        [&](int i) {
            launch_ex(read_pieces_kernel<P, kCoalesced>, dim3(blocks), dim3(256), 0, s, true,
                      reinterpret_cast<const uint4*>(ring + (i % count) * stride), w16, out, out16);
        },
        32, 30, s);
}

int read_pieces_floors(int argc, char** argv, cudaStream_t s) {
    for (int arg = 2; arg + 1 < argc; arg += 2) {
        const int64_t w_bytes = std::atoll(argv[arg]), out_bytes = std::atoll(argv[arg + 1]);
        const int64_t w16 = (w_bytes + 15) / 16, out16 = (out_bytes + 15) / 16;
        int64_t stride, count;
        uint8_t* ring = make_ring(w16, stride, count);
        uint4* out;
        CK(cudaMalloc(&out, out16 * 16 + 16));
        printf("read W %lld B, write %lld B, pdl, us/call: P=1 %.2f | coalesced P=2 %.2f P=4 %.2f P=8 %.2f | "
               "runs P=2 %.2f P=4 %.2f P=8 %.2f\n",
               (long long)w_bytes, (long long)out_bytes,
               time_read_pieces<1, true>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<2, true>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<4, true>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<8, true>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<2, false>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<4, false>(ring, count, stride, w16, out, out16, s),
               time_read_pieces<8, false>(ring, count, stride, w16, out, out16, s));
        CK(cudaFree(ring));
        CK(cudaFree(out));
    }
    return 0;
}

// `gemv_bounds nib N K ...`: a ladder of one-shot GEMVs over bt's 4-bit nibbles (code + 8, word q
// = columns 8q .. 8q + 7, low nibbles first: kernels/bt_nib4.h) with a float scale per 64 columns,
// m = 1, each step adding one part of the real kernel to the one before:
//   0: the weights (and the scales from step 3) read before the wait, y written: the bytes alone;
//   1: + x read after the wait (k bytes a row, from L1 / L2);
//   2: + the dot products (two masks and two dp4a per 8 columns), the row's lanes summed: one group;
//   3: groups of 64 instead: each unit's term w_scale[g] * float(sum) added in order by the row's
//      first lane through shuffles (the committed kernel's way);
//   4: the same terms through shared memory, one thread per row adding them in order.
// L lanes a row; lane l holds the row's 16-byte pieces l, l + L, ... (V of them), so each load
// instruction reads L * 16 bytes in a row (the committed kernel holds 32-byte units instead); with
// R > 1 each lane does so for R rows and reads x once for them.
// Unsigned bytes of a times signed bytes of b, plus c.
__device__ __forceinline__ int dp4a_us(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

template <int L, int V, int STEP, int R>
__global__ void __launch_bounds__(128) nib_ladder_kernel(const uint8_t* __restrict__ w, const float* __restrict__ ws,
                                                         const int8_t* __restrict__ x, int n, int k,
                                                         float* __restrict__ y) {
    extern __shared__ float terms_smem[];
    const int lane = threadIdx.x % 32, sub = lane % L, first = lane - sub;
    const int group_id = static_cast<int>(threadIdx.x) / L;  // the block's lane group
    const int64_t j0 = ((int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / L) * R;
    const int pieces = k / 32, units = k / 64;
    uint4 wv[R][V];
    float sc[R][V];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int64_t j = j0 + r;
        const bool ok = j < n;
        const uint4* row = reinterpret_cast<const uint4*>(w + (ok ? j : 0) * int64_t{k / 2});
#pragma unroll
        for (int v = 0; v < V; ++v) {
            const int p = sub + v * L;
            const bool has = ok && p < pieces;
            wv[r][v] = has ? ld_nc(row + p) : make_uint4(0, 0, 0, 0);
            sc[r][v] = STEP >= 3 && has && p % 2 == 0 ? __ldg(ws + (ok ? j : 0) * units + p / 2) : 0.0f;
        }
    }
    pdl_trigger();
    pdl_wait();
    if constexpr (STEP <= 1) {
        uint32_t rr = 0;
#pragma unroll
        for (int v = 0; v < V; ++v) {
#pragma unroll
            for (int r = 0; r < R; ++r) rr ^= wv[r][v].x ^ wv[r][v].y ^ wv[r][v].z ^ wv[r][v].w;
            if constexpr (STEP == 1) {
                const int p = sub + v * L;
                if (p < pieces) {
                    const uint4* xp = reinterpret_cast<const uint4*>(x) + 2 * p;
                    const uint4 a = __ldg(xp), b = __ldg(xp + 1);
                    rr ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
                }
            }
        }
        if (j0 < n && sub == 0) y[j0] = __uint_as_float(rr & 0x3FFFFFFFu);
        else if (rr == 0x12345678u) y[0] = 1.0f;
        return;
    } else {
        int sum[R][V];
#pragma unroll
        for (int v = 0; v < V; ++v) {
            const int p = sub + v * L;
#pragma unroll
            for (int r = 0; r < R; ++r) sum[r][v] = 0;
            if (p >= pieces) continue;
            const uint4* xp = reinterpret_cast<const uint4*>(x) + 2 * p;
            const uint4 a = __ldg(xp), b = __ldg(xp + 1);
            const uint32_t xw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
            int off = 0;
#pragma unroll
            for (int e = 0; e < 8; ++e) off = __dp4a(static_cast<int>(xw[e]), static_cast<int>(0xF8F8F8F8u), off);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const uint32_t wq[4] = {wv[r][v].x, wv[r][v].y, wv[r][v].z, wv[r][v].w};
                int lo = off, hi = 0;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    lo = dp4a_us(wq[q] & 0x0F0F0F0Fu, xw[2 * q], lo);
                    hi = dp4a_us(wq[q] & 0xF0F0F0F0u, xw[2 * q + 1], hi);
                }
                sum[r][v] = lo + (hi >> 4);
            }
        }
        if constexpr (STEP == 2) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int s = 0;
#pragma unroll
                for (int v = 0; v < V; ++v) s += sum[r][v];
#pragma unroll
                for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
                if (j0 + r < n && sub == 0) y[j0 + r] = static_cast<float>(s);
            }
        } else {
            float term[R][V];
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    const int u = sum[r][v] + __shfl_xor_sync(0xffffffffu, sum[r][v], 1);  // the unit's two pieces
                    term[r][v] = __fmul_rn(sc[r][v], __int2float_rn(u));
                }
            if constexpr (STEP == 3) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    float acc = 0.0f;
#pragma unroll
                    for (int v = 0; v < V; ++v)
#pragma unroll
                        for (int i = 0; i < L / 2; ++i) {
                            const float t = __shfl_sync(0xffffffffu, term[r][v], first + 2 * i);
                            if (v * (L / 2) + i < units) acc = __fadd_rn(acc, t);
                        }
                    if (j0 + r < n && sub == 0) y[j0 + r] = acc;
                }
            } else {
                const int stride = units + 4;  // floats per row: 16-byte rows, lanes' rows in different banks
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int v = 0; v < V; ++v) {
                        const int p = sub + v * L;
                        if (p < pieces && p % 2 == 0) terms_smem[(group_id * R + r) * stride + p / 2] = term[r][v];
                    }
                __syncthreads();
                const int rows = static_cast<int>(blockDim.x) / L * R;
                const int t = static_cast<int>(threadIdx.x);
                const int64_t j = int64_t{blockIdx.x} * rows + t;
                if (t < rows && j < n) {
                    const float4* tp = reinterpret_cast<const float4*>(terms_smem + t * stride);
                    float acc = 0.0f;
                    for (int u4 = 0; u4 < units / 4; ++u4) {
                        const float4 q = tp[u4];
                        acc = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc, q.x), q.y), q.z), q.w);
                    }
                    y[j] = acc;
                }
            }
        }
    }
}

template <int L, int V, int STEP, int R>
void launch_nib(const uint8_t* w, const float* ws, const int8_t* x, int n, int k, float* y, cudaStream_t s) {
    const int rows_per_block = 128 / L * R;
    const size_t smem = STEP == 4 ? static_cast<size_t>(rows_per_block) * (k / 64 + 4) * 4 : 0;
    launch_ex(nib_ladder_kernel<L, V, STEP, R>, dim3((n + rows_per_block - 1) / rows_per_block), dim3(128), smem, s,
              true, w, ws, x, n, k, y);
}

// Runs step STEP with L lanes a row, R rows a lane group (V = the pieces a lane needs) on ring copy i.
template <int STEP>
bool run_nib(int L, int R, const uint8_t* w, const float* ws, const int8_t* x, int n, int k, float* y,
             cudaStream_t s) {
    const int V = (k / 32 + L - 1) / L;
#define NIB_CASE(LL, VV, RR) \
    if (L == LL && V == VV && R == RR) return launch_nib<LL, VV, STEP, RR>(w, ws, x, n, k, y, s), true;
    NIB_CASE(16, 2, 1) NIB_CASE(16, 5, 1) NIB_CASE(16, 6, 1) NIB_CASE(16, 8, 1) NIB_CASE(16, 14, 1)
    NIB_CASE(32, 1, 1) NIB_CASE(32, 3, 1) NIB_CASE(32, 4, 1) NIB_CASE(32, 7, 1) NIB_CASE(32, 14, 1)
    NIB_CASE(32, 1, 2) NIB_CASE(32, 3, 2) NIB_CASE(32, 4, 2) NIB_CASE(32, 7, 2) NIB_CASE(32, 14, 2)
    NIB_CASE(32, 1, 4) NIB_CASE(32, 3, 4) NIB_CASE(32, 4, 4) NIB_CASE(32, 7, 4)
#undef NIB_CASE
    return false;
}

int nib_ladder(int argc, char** argv, cudaStream_t s) {
    const int64_t ring_total = 160ll << 20;
    int8_t* dx;
    float* dy;
    CK(cudaMalloc(&dx, 16384));
    CK(cudaMalloc(&dy, 16384 * 4 * 4));
    std::vector<int8_t> hx(16384);
    {
        std::mt19937 g(2);
        for (auto& v : hx) v = static_cast<int8_t>(int(g() % 255) - 127);
        CK(cudaMemcpy(dx, hx.data(), hx.size(), cudaMemcpyHostToDevice));
    }
    for (int arg = 2; arg + 1 < argc; arg += 2) {
        const int n = std::atoi(argv[arg]), k = std::atoi(argv[arg + 1]);
        const int64_t nib_bytes = int64_t{n} * k / 2, sc_bytes = int64_t{n} * (k / 64) * 4;
        const int64_t stride = (nib_bytes + sc_bytes + 255) / 256 * 256;
        const int64_t count = ring_total / stride;
        uint8_t* ring;
        CK(cudaMalloc(&ring, count * stride));
        std::vector<uint8_t> h(stride);
        std::mt19937 g(1);
        for (int64_t b = 0; b < nib_bytes; ++b) h[b] = static_cast<uint8_t>((4 + g() % 9) | ((4 + g() % 9) << 4));
        for (int64_t e = 0; e < sc_bytes / 4; ++e) {
            const float f = 0.01f + 0.001f * static_cast<float>(g() % 1000);
            std::memcpy(h.data() + nib_bytes + 4 * e, &f, 4);
        }
        for (int64_t c = 0; c < count; ++c) CK(cudaMemcpy(ring + c * stride, h.data(), stride, cudaMemcpyHostToDevice));
        auto wp = [&](int i) { return ring + (i % count) * stride; };
        auto sp = [&](int i) { return reinterpret_cast<const float*>(ring + (i % count) * stride + nib_bytes); };
        // The CPU's y for rows j (steps 2 and 3).
        auto ref = [&](int64_t j, bool groups) {
            float acc = 0.0f;
            int64_t one = 0;
            for (int u = 0; u < k / 64; ++u) {
                int64_t su = 0;
                for (int c = 64 * u; c < 64 * u + 64; ++c) {
                    const uint8_t byte = h[j * (k / 2) + (c / 8) * 4 + (c % 4)];
                    const int code = ((c % 8) < 4 ? (byte & 15) : (byte >> 4)) - 8;
                    su += code * hx[c];
                }
                one += su;
                float scale;
                std::memcpy(&scale, h.data() + nib_bytes + 4 * (j * (k / 64) + u), 4);
                acc = acc + scale * static_cast<float>(su);
            }
            return groups ? acc : static_cast<float>(one);
        };
        printf("nib ladder %dx%d (%.2f MB), steps 0-4:", n, k, (nib_bytes + sc_bytes) / 1e6);
        for (int L : {16, 32})
            for (int R : {1, 2, 4}) {
                if (L == 16 && R > 1) continue;
                const int V = (k / 32 + L - 1) / L;
                if (V > 14 || V * R > 28) continue;
                double us[5];
                bool bad = false;
                for (int step = 0; step < 5; ++step) {
                    auto go = [&](int i) {
                        const bool r = step == 0   ? run_nib<0>(L, R, wp(i), sp(i), dx, n, k, dy, s)
                                       : step == 1 ? run_nib<1>(L, R, wp(i), sp(i), dx, n, k, dy, s)
                                       : step == 2 ? run_nib<2>(L, R, wp(i), sp(i), dx, n, k, dy, s)
                                       : step == 3 ? run_nib<3>(L, R, wp(i), sp(i), dx, n, k, dy, s)
                                                   : run_nib<4>(L, R, wp(i), sp(i), dx, n, k, dy, s);
                        if (!r) {
                            printf(" (no kernel for L=%d R=%d V=%d)\n", L, R, V);
                            exit(1);
                        }
                    };
                    if (step >= 2) {
                        CK(cudaMemset(dy, 0, n * 4));
                        go(0);
                        CK(cudaStreamSynchronize(s));
                        std::vector<float> hy(n);
                        CK(cudaMemcpy(hy.data(), dy, n * 4, cudaMemcpyDeviceToHost));
                        for (int64_t j = 0; j < n; j += 61) bad |= hy[j] != ref(j, step >= 3);
                        bad |= hy[n - 1] != ref(n - 1, step >= 3);
                    }
                    us[step] = time_calls(go, 32, 30, s);
                }
                printf(" | L=%d R=%d: %.2f %.2f %.2f %.2f %.2f%s", L, R, us[0], us[1], us[2], us[3], us[4],
                       bad ? " MISMATCH" : " ok");
            }
        printf("\n");
        CK(cudaFree(ring));
    }
    return 0;
}

// `gemv_bounds rw IN_BYTES OUT_BYTES ...`: read_write_kernel's time per call for each pair, with
// and without PDL (e.g. the BWTA b1 GEMM shapes at m = 128: bin1 weights n * k / 8 bytes, y
// 128 * n * 4 bytes).
int read_write_floors(int argc, char** argv, cudaStream_t s) {
    const int B = 32, S = 30;
    for (int a = 2; a + 1 < argc; a += 2) {
        const int64_t in_bytes = std::atoll(argv[a]), out_bytes = std::atoll(argv[a + 1]);
        const int64_t in16 = (in_bytes + 15) / 16, out16 = (out_bytes + 15) / 16;
        int64_t stride, count;
        uint8_t* ring = make_ring(in16, stride, count);
        uint4* out;
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
    if (argc > 1 && std::string(argv[1]) == "floors") return call_floors(argc, argv, s);
    if (argc > 1 && std::string(argv[1]) == "rwp") return read_pieces_floors(argc, argv, s);
    if (argc > 1 && std::string(argv[1]) == "nib") return nib_ladder(argc, argv, s);
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
