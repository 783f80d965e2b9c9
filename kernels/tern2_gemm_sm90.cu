// tern2 x int8 GEMM for Hopper (sm_90a only; see kernels/tern2_gemm_sm90.h). One CTA computes a
// (BM weights, 128 tokens) tile of the transposed product: 3 warp groups, the first a producer
// that streams k-tiles of 128 columns (x: 128 token rows x 128 bytes, stored in wgmma's 128-byte
// swizzle; codes: BM rows x 32 bytes) into an S-stage ring with cp.async and mbarriers; the other
// two consumers, each owning BM / 2 weight rows as MW m64 blocks of wgmma.m64n128k32.s32.s8.s8
// with the A operand in registers (codes decoded from shared memory in natural column order, as
// wgmma's B operand x is laid out) and x read through a shared-memory descriptor. No LibTorch.
#include "kernels/tern2_gemm_sm90.h"

#include <algorithm>

#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"

// The wgmma / setmaxnreg body exists only in the sm_90a compilation (the only one this file gets,
// see kernels/CMakeLists.txt); any other target compiles a trap.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRIT_SM90A_DEVICE 1
#else
#define TRIT_SM90A_DEVICE 0
#endif

namespace trit::kernels::detail {
namespace {

namespace fmt = trit::formats;

constexpr int kWarp = 32;
constexpr int kWarpGroup = 128;
constexpr int kThreads = 3 * kWarpGroup;  // producer + 2 consumers
constexpr int kKS = 128;                  // k columns per stage: one 128-byte swizzled x row
constexpr int kCodeRowBytes = kKS / fmt::kTern2CodesPerByte;  // 32
constexpr int kBN = 128;                                      // tokens per CTA (wgmma N)
constexpr int kGranule = 16;                                  // cp.async bytes
constexpr int kXStageBytes = kBN * kKS;                       // 16 KiB, whole 1 KiB swizzle atoms
constexpr int kProducerRegs = 40, kConsumerRegs = 232;        // 128 * 40 + 256 * 232 = 384 * 168
constexpr uint32_t kDecodeTable = 0x00FF0100u;  // bytes: field 0 -> 0, 1 -> +1, 2 -> -1, 3 -> 0

// MW m64 blocks per consumer warp group (BM = 128 * MW weight rows), S ring stages.
template <int MW, int S>
struct Config {
    static constexpr int kMW = MW, kStages = S;
    static constexpr int kBM = 2 * 64 * MW;
    static constexpr int kCStageBytes = kBM * kCodeRowBytes;
    static constexpr int kCodesOffset = S * kXStageBytes;
    static constexpr int kBarOffset = kCodesOffset + S * kCStageBytes;
    // + 1 KiB: the dynamic shared memory base is rounded up to the swizzle atom in the kernel.
    static constexpr int kSmemBytes = kBarOffset + 2 * S * 8 + 1024;
    static_assert(kSmemBytes <= 227 * 1024, "shared memory of one CTA");
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if TRIT_SM90A_DEVICE
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrives on `bar` once all of this thread's earlier cp.async have landed (the barrier's count
// includes this arrival: .noinc).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// 16-byte global -> shared copy; zero-fills the destination when !valid (src is not read then).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

// Keeps a register live and unmoved across the asynchronous wgmma that reads or writes it.
__device__ __forceinline__ void fence_operand(uint32_t& r) {
    asm volatile("" : "+r"(r)::"memory");
}
__device__ __forceinline__ void fence_operand(int32_t& r) {
    asm volatile("" : "+r"(r)::"memory");
}

// wgmma's shared-memory descriptor of a K-major tile in the 128-byte swizzle: rows of 128 bytes,
// 8-row atoms of 1 KiB stacked along N (stride 1024), leading offset unused (16 by convention).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
           (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// d (64 x 128, s32) += a (64 x 32, s8, registers) * b (32 x 128, s8, K-major shared memory).
__device__ __forceinline__ void wgmma_m64n128k32(int32_t (&d)[64], const uint32_t (&a)[4],
                                                 uint64_t desc) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p;\n"
        "}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]),
          "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]),
          "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]),
          "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]),
          "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]),
          "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]),
          "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]),
          "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
          "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]),
          "+r"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

// A fragment (the m16n8k32 layout per warp: a0 = row g, columns 4t..4t+3; a1 = row g + 8, same
// columns; a2 / a3 = columns 16 + 4t ..) of one k32 step from the code words of rows g (w0: codes
// 0..15 of the step, w1: 16..31) and g + 8 (h0, h1): byte t of each word, decoded in natural
// column order. sel = t | (4 + t) << 4.
__device__ __forceinline__ void decode_step(uint32_t w0, uint32_t w1, uint32_t h0, uint32_t h1,
                                            uint32_t sel, uint32_t (&a)[4]) {
    // v bytes: [row g cols 4t.., row g cols 16+4t.., row g+8 cols 4t.., row g+8 cols 16+4t..]
    const uint32_t v = __byte_perm(__byte_perm(w0, w1, sel), __byte_perm(h0, h1, sel), 0x5410);
    // lo: nibbles = fields 0, 2 of each byte; hi: fields 1, 3 (top bit of each nibble clear).
    const uint32_t lo = v & 0x33333333u, hi = (v >> 2) & 0x33333333u;
    const uint32_t e01 = __byte_perm(kDecodeTable, 0, lo);  // [b0 c0, b0 c2, b1 c0, b1 c2]
    const uint32_t o01 = __byte_perm(kDecodeTable, 0, hi);  // [b0 c1, b0 c3, b1 c1, b1 c3]
    const uint32_t e23 = __byte_perm(kDecodeTable, 0, lo >> 16);
    const uint32_t o23 = __byte_perm(kDecodeTable, 0, hi >> 16);
    a[0] = __byte_perm(e01, o01, 0x5140);  // byte 0: row g, columns 4t .. 4t + 3
    a[2] = __byte_perm(e01, o01, 0x7362);  // byte 1: row g, columns 16 + 4t ..
    a[1] = __byte_perm(e23, o23, 0x5140);  // byte 2: row g + 8, columns 4t ..
    a[3] = __byte_perm(e23, o23, 0x7362);  // byte 3: row g + 8, columns 16 + 4t ..
}
#endif  // TRIT_SM90A_DEVICE

template <class C>
__global__ void __launch_bounds__(kThreads, 1) tern2_gemm_sm90_kernel(const Tern2GemmSm90Args a) {
#if TRIT_SM90A_DEVICE
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    constexpr int kMW = C::kMW, kStages = C::kStages, kBM = C::kBM;
    // The swizzle is a function of the address bits: atoms must start on 1 KiB.
    uint8_t* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
    const uint32_t s_base = smem_addr(smem);
    const uint32_t full0 = s_base + C::kBarOffset, empty0 = full0 + kStages * 8;
    const int tid = static_cast<int>(threadIdx.x), wg = tid / kWarpGroup;
    const int64_t m0 = int64_t{blockIdx.x} * kBN, n0 = int64_t{blockIdx.y} * kBM;
    const int ktiles = static_cast<int>((a.k + kKS - 1) / kKS);

    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full0 + 8 * s, kWarpGroup);  // every producer thread's cp.async arrival
            mbar_init(empty0 + 8 * s, 8);          // every consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // Producer: stage kt % S of k-tile kt once the consumers released it. Rows past m / n
        // and columns past k are zero-filled.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        const int64_t code_row_bytes = a.k / fmt::kTern2CodesPerByte;
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % kStages;
            mbar_wait(empty0 + 8 * s, ((kt / kStages) & 1) ^ 1);  // the first round passes
            const int64_t col = int64_t{kt} * kKS;
            const uint32_t xs = s_base + s * kXStageBytes;
            // x: 128 rows x 8 granules; granule u of row r goes to granule u ^ (r % 8).
#pragma unroll 1
            for (int q = tid; q < kBN * (kKS / kGranule); q += kWarpGroup) {
                const int r = q / (kKS / kGranule), u = q % (kKS / kGranule);
                const bool ok = m0 + r < a.m && col + u * kGranule < a.k;
                const int8_t* src = ok ? a.x + (m0 + r) * a.k + col + u * kGranule : a.x;
                cp_async16(xs + r * kKS + ((u ^ (r % 8)) * kGranule), src, ok);
            }
            const uint32_t cs = s_base + C::kCodesOffset + s * C::kCStageBytes;
#pragma unroll 1
            for (int q = tid; q < kBM * (kCodeRowBytes / kGranule); q += kWarpGroup) {
                const int r = q / (kCodeRowBytes / kGranule), u = q % (kCodeRowBytes / kGranule);
                const bool ok = n0 + r < a.n && col + u * kGranule * 4 < a.k;
                const uint8_t* src =
                    ok ? a.codes + (n0 + r) * code_row_bytes + col / 4 + u * kGranule : a.codes;
                cp_async16(cs + r * kCodeRowBytes + u * kGranule, src, ok);
            }
            cp_async_arrive(full0 + 8 * s);
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        return;
    }

    // Consumers: warp group c owns weight rows c * 64 * MW + mw * 64 + [0, 64) of the tile.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int c = wg - 1, lane = tid % kWarp, warp = (tid / kWarp) % 4;
    const int g = lane / 4, t = lane % 4;
    const uint32_t sel = static_cast<uint32_t>(t | (4 + t) << 4);
    const int row0 = c * 64 * kMW + warp * 16 + g;  // + mw * 64 (+ 8)

    int32_t acc[kMW][64];
#pragma unroll
    for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
        for (int e = 0; e < 64; ++e)
            acc[mw][e] = 0;

    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % kStages;
        mbar_wait(full0 + 8 * s, (kt / kStages) & 1);
        // The producer's cp.async wrote through the generic proxy; wgmma reads x through the
        // async proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        const uint8_t* cs = smem + C::kCodesOffset + s * C::kCStageBytes;
        const uint64_t desc = sw128_desc(s_base + s * kXStageBytes);
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
            for (int e = 0; e < 64; ++e)
                fence_operand(acc[mw][e]);
        // Block by block: decode its 4 k32 steps, then issue them (a fence after each decode, as
        // the A registers were just written); the live set stays at the accumulators plus
        // 16 registers of A per issued block.
        uint32_t af[kMW][kKS / 32][4];
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw) {
            const uint4* lo = reinterpret_cast<const uint4*>(cs + (row0 + mw * 64) * kCodeRowBytes);
            const uint4* hi = lo + 8 * kCodeRowBytes / 16;  // row + 8
            const uint4 l0 = lo[0], l1 = lo[1], h0 = hi[0], h1 = hi[1];
            decode_step(l0.x, l0.y, h0.x, h0.y, sel, af[mw][0]);
            decode_step(l0.z, l0.w, h0.z, h0.w, sel, af[mw][1]);
            decode_step(l1.x, l1.y, h1.x, h1.y, sel, af[mw][2]);
            decode_step(l1.z, l1.w, h1.z, h1.w, sel, af[mw][3]);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int ks = 0; ks < kKS / 32; ++ks)
                wgmma_m64n128k32(acc[mw], af[mw][ks], desc + 2 * ks);  // + 32 bytes per k32
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw) {
#pragma unroll
            for (int e = 0; e < 64; ++e)
                fence_operand(acc[mw][e]);
#pragma unroll
            for (int ks = 0; ks < kKS / 32; ++ks)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    fence_operand(af[mw][ks][e]);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * s);  // this warp is done with stage s
    }

    // acc[mw][4j + 2h + e]: weight row row0 + mw * 64 + 8h, token 8j + 2t + e. A warp's store
    // covers 4 tokens x 8 consecutive weights: full 32-byte sectors. The y arithmetic is
    // store_output's for one group (kernels/epilogue.cuh), with the weight-side operands loaded
    // once per row: that keeps the live set small enough beside the 64 * MW accumulators.
    const ProductOut& o = a.out;
#pragma unroll
    for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t oj = n0 + row0 + mw * 64 + h * 8;
            if (oj >= a.n) continue;
            float ws = 0.0f, bias = 0.0f;
            if (o.acc == nullptr) {
                ws = epilogue_w_scale(o, oj, 1)[0];
                bias = o.bias != nullptr ? o.bias[oj] : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int64_t oi = m0 + j * 8 + 2 * t + e;
                    if (oi >= a.m) continue;
                    const int32_t v = acc[mw][4 * j + 2 * h + e];
                    if (o.acc != nullptr) {
                        o.acc[oi * a.n + oj] = v;
                    } else {
                        const float sx = o.x_scale[o.x_scale_rows == 1 ? 0 : oi];
                        o.y[oi * a.n + oj] =
                            __fadd_rn(__fmul_rn(epilogue_add(0.0f, ws, v), sx), bias);
                    }
                }
        }
#else
    (void)a;
    __trap();  // the launcher runs this kernel only on compute capability 9.0
#endif
}

template <class C>
void launch(const Tern2GemmSm90Args& a, cudaStream_t stream) {
    const auto kernel = tern2_gemm_sm90_kernel<C>;
    TRIT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
    const dim3 grid(static_cast<unsigned>(fmt::ceil_div(a.m, int64_t{kBN})),
                    static_cast<unsigned>(fmt::ceil_div(a.n, int64_t{C::kBM})));
    kernel<<<grid, kThreads, C::kSmemBytes, stream>>>(a);
    TRIT_CUDA_CHECK_LAST();
}

// 256 weight rows per CTA halve the x bytes per MAC; 128 rows when that leaves fewer waves.
using WideTile = Config<2, 6>;    // (256, 128): 144 KiB ring
using NarrowTile = Config<1, 8>;  // (128, 128): 160 KiB ring

}  // namespace

bool tern2_gemm_sm90_built() {
    return true;
}

void tern2_gemm_sm90(const Tern2GemmSm90Args& a, int sms, cudaStream_t stream) {
    // One CTA per SM (384 threads x 168 registers): the time is ~ waves x rows per CTA.
    const int64_t mtiles = fmt::ceil_div(a.m, int64_t{kBN});
    const int64_t wide = fmt::ceil_div(mtiles * fmt::ceil_div(a.n, int64_t{WideTile::kBM}), sms);
    const int64_t narrow =
        fmt::ceil_div(mtiles * fmt::ceil_div(a.n, int64_t{NarrowTile::kBM}), sms);
    if (2 * wide <= narrow) return launch<WideTile>(a, stream);
    launch<NarrowTile>(a, stream);
}

}  // namespace trit::kernels::detail
