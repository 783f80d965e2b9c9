// tern2 x int8 GEMM for Hopper (sm_90a only; see kernels/tern2_gemm_sm90.h). One CTA computes a
// (BM weights, BN tokens) tile of the transposed product with 3 warp groups:
//   - a producer: one thread streams k-tiles of 128 columns through an S-stage ring with the
//     tensor memory accelerator (TMA), x as BN token rows x 128 bytes in wgmma's 128-byte
//     swizzle and the codes as BM rows x 32 bytes, each stage completing on an mbarrier;
//   - two consumers, each owning BM / 2 weight rows as MW m64 blocks of
//     wgmma.m64nBNk32.s32.s8.s8, with the A operand in registers (codes decoded from shared
//     memory in natural column order, as wgmma's B operand x is laid out) and x read through a
//     shared-memory descriptor. A consumer decodes k-tile kt + 1 into its second set of A
//     registers while the tensor cores run k-tile kt, then releases kt's stage.
// TMA zero-fills what lies past m, n and k. No LibTorch. The tiles (Config aliases below): BM = 256
// with BN = 128 (wide), or BM = 128 with BN = 96, 128, 160, 176 or 256, or the k-split tile of
// BM = 64 with BN = 96 or 128 (both consumers hold the 64 rows, each runs every other k-tile, and
// they add each other's halves of the tokens through shared memory at the tile's end), picked on
// the host by tern2_gemm_sm90_tile (kernels/tern2_gemm_sm90_tile.h): the k-split tile where its
// tiles fill one wave (m = 49..256), else so that the busiest SM has the least work.
//
// Work split (Sched): CTAs are persistent. Tiles [0, tiles_dp) run whole ("data parallel"), CTA
// b taking b, b + grid, ...; the k-tiles of the remaining tiles, in order, are cut into grid
// contiguous ranges, one per CTA ("stream-K"). A range covers the end of one tile, whole tiles
// and the start of another; so a CTA holds at most one partial tile that does not start at k-tile
// 0. It writes that one to its workspace slot and publishes it with a flag set to the launch's
// epoch; the CTA whose range holds a tile's k-tile 0 (it reaches it last in its range, when the
// others wrote theirs first in theirs) waits for the flags of the following CTAs that share the
// tile, adds their int32 partials to its accumulators and runs the epilogue. int32 sums are
// exact, so y does not depend on the split. No CTA waits on a CTA of a lower index, and all run
// at once (grid <= SMs, one CTA per SM), so the waits end.
#include "kernels/tern2_gemm_sm90.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/fast_div.h"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_mma.cuh"

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
constexpr int kKSteps = kKS / 32;         // wgmma k32 steps per stage
constexpr int kCodeRowBytes = kKS / fmt::kTern2CodesPerByte;  // 32
constexpr int kProducerRegs = 40, kConsumerRegs = 232;        // 128 * 40 + 256 * 232 = 384 * 168

// The parameter of the kernels with several scale groups: the launcher adds the pairs of k32
// steps (64 columns) a group as a FastDiv, so that the consumers place a pair in its group with a
// multiply-high instead of an integer division.
struct GroupedArgs : Tern2GemmSm90Args {
    FastDiv group_pairs;
};

// MW m64 blocks per consumer warp group (BM = 128 * MW weight rows), S ring stages, the y tile
// staged YR tokens at a time, BN tokens per tile (wgmma N, one of kTern2GemmSm90Tokens). KS: the
// k-split tile, 64 weight rows (MW = 1) that both consumers hold, each running every other k-tile
// of the tile into its own accumulators; at the tile's end each hands the other the partial sums
// of the other's half of the tokens through shared memory and stores its own half (the tile's
// int32 sums are the same, so y is bit-identical to the other tiles').
// D: code planes a stage (1: tern2 codes; 2..4: bt's trit planes). GR: several scale groups,
// each folded into the consumers' float sums as it ends (y only).
template <int MW, int S, int YR, int BN, bool KS = false, int D = 1, bool GR = false>
struct Config {
    static constexpr int kMW = MW, kStages = S, kBN = BN, kD = D;
    static constexpr bool kKSplit = KS, kGrouped = GR;
    // The kernel's parameter: the one-group tern2 tiles keep the fields they read.
    using Args =
        std::conditional_t<GR, GroupedArgs,
                           std::conditional_t<D == 1, Tern2GemmSm90Base, Tern2GemmSm90Args>>;
    static constexpr int kBM = KS ? 64 : 2 * 64 * MW;  // <= 256: one TMA box of codes
    static constexpr int kAccRegs = BN / 2;  // a thread's share of an m64 x BN block
    // The tokens whose y a consumer stores: the tile's, or half of them with the k split.
    static constexpr int kTokens = KS ? BN / 2 : BN;
    static constexpr int kXStageBytes = BN * kKS;  // whole 1 KiB swizzle atoms (BN % 8 == 0)
    static constexpr int kCStageBytes = D * kBM * kCodeRowBytes;  // plane i at i * kBM rows
    static constexpr int kCodesOffset = S * kXStageBytes;
    // The staged epilogue's y: per consumer, its 64 * MW outputs x kYRows tokens of 4 bytes at a
    // time (kTokens / kYRows passes), as 2 * MW boxes of kYRows tokens x 128 bytes in the 128-byte
    // swizzle (whole 1 KiB atoms).
    static constexpr int kYRows = YR;
    static constexpr int kYOffset = kCodesOffset + S * kCStageBytes;
    static constexpr int kYBoxBytes = kYRows * 128;
    static constexpr int kBarOffset = kYOffset + 2 * 2 * MW * kYBoxBytes;
    // The staged epilogue's x scales: the consumer's kTokens tokens, per consumer warp group.
    static constexpr int kXsOffset = kBarOffset + 2 * S * 8;
    // The k split's exchange: per consumer, the partial sums of the other's half of the tokens,
    // kTokens / 8 int4 words per thread, stored (word, thread).
    static constexpr int kXchOffset = kXsOffset + 2 * kBN * 4;
    static constexpr int kXchBytes = KS ? 2 * (kTokens / 8) * kWarpGroup * 16 : 0;
    // + 1 KiB: the dynamic shared memory base is rounded up to the swizzle atom in the kernel.
    // The staged epilogue's w scales and biases: the tile's BM rows (each consumer's 64 * MW),
    // where they fit (the wide and the k-split tiles). The narrow tile's ring and y leave 896
    // bytes, so each of its threads loads its two rows' scales and biases into registers when a
    // tile starts.
    static constexpr int kWsOffset = kXchOffset + kXchBytes;
    static constexpr bool kEarlyW = kWsOffset + 2 * kBM * 4 + 1024 <= 227 * 1024;
    // Several groups: a ring of S slots of the scales the k-tiles' pairs of k32 steps fold with,
    // each consumer warp's 16 rows x 2 pairs (128 bytes a warp, 1 KiB a slot), copied a few
    // k-tiles ahead by the warp's own lanes.
    static constexpr int kWsRingOffset = kWsOffset + (kEarlyW ? 2 * kBM * 4 : 0);
    static constexpr int kSmemBytes = kWsRingOffset + (GR ? S * 1024 : 0) + 1024;
    static_assert(kSmemBytes <= 227 * 1024, "shared memory of one CTA");
    static_assert(kCStageBytes % 1024 == 0, "stages stay on 1 KiB");
    static_assert(kTokens % kYRows == 0 && kYRows % 8 == 0,
                  "whole passes of y, whole swizzle atoms");
    static_assert(!KS || (MW == 1 && BN % 16 == 0), "the k split: 64 rows, halves of int4 words");
    static_assert((D == 1 && !GR) || (MW == 1 && !KS),
                  "planes and groups run the 128-row tile, whole (no k split)");
    // With S even, ring uses u and u - S of one tile go to the same consumer, so a consumer never
    // waits on a stage whose previous use the other consumer has not seen land (across tiles the
    // exchange's barriers order them).
    static_assert(!KS || S % 2 == 0, "the k split needs an even ring");
    static_assert(kBN % 16 == 0 && kBN <= 256, "wgmma's N; one TMA box of x");
    // One CTA's int32 partial tile in the workspace, as int4 words.
    static constexpr int kPartialWords = kBM * kBN / 4;
};

// The launch's work split (see the top of the file).
struct Sched {
    int tiles_dp = 0;         // tiles [0, tiles_dp) whole, round-robin over the CTAs
    int sk_units = 0;         // k-tiles of tiles [tiles_dp, tiles), cut into grid ranges
    uint32_t* flags = nullptr;  // flags[b] == epoch: CTA b's partial tile is in its slot
    int4* partials = nullptr;   // grid slots of kPartialWords
    uint32_t epoch = 0;
};

// CTA b's stream-K range starts at k-tile unit sk_begin(s, b, grid) (ends at b + 1's start). The
// host keeps sk_units * grid within int32.
__host__ __device__ __forceinline__ int sk_begin(const Sched& s, int b, int grid) {
    return s.sk_units * b / grid;
}

// The segments of this CTA's work in order, each (tile, k-tiles [kt0, kt1)): its whole tiles,
// then the pieces of its stream-K range. The producer and the consumers walk the same list.
struct Segments {
    int tile, u, u1;
    __device__ explicit Segments(const Sched& s)
        : tile(static_cast<int>(blockIdx.x)),
          u(sk_begin(s, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x))),
          u1(sk_begin(s, static_cast<int>(blockIdx.x) + 1, static_cast<int>(gridDim.x))) {}
    __device__ bool next(const Sched& s, int ktiles, int& t, int& kt0, int& kt1) {
        if (tile < s.tiles_dp) {
            t = tile, kt0 = 0, kt1 = ktiles;
            tile += static_cast<int>(gridDim.x);
            return true;
        }
        if (u >= u1) return false;
        t = s.tiles_dp + u / ktiles;
        kt0 = u % ktiles;
        kt1 = kt0 + min(u1 - u, ktiles - kt0);
        u += kt1 - kt0;
        return true;
    }
};

// Calls f(tile, kt0, kt1) for each segment of this CTA's work in order. Without stream-K (kSK
// false) the segments are the tiles b, b + grid, ... < tiles, whole.
template <bool kSK, class F>
__device__ __forceinline__ void for_each_segment(const Sched& s, int tiles, int ktiles, F&& f) {
    if constexpr (kSK) {
        Segments segs(s);
        for (int tile, kt0, kt1; segs.next(s, ktiles, tile, kt0, kt1);) f(tile, kt0, kt1);
    } else {
        for (int tile = static_cast<int>(blockIdx.x); tile < tiles;
             tile += static_cast<int>(gridDim.x))
            f(tile, 0, ktiles);
    }
}

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

// Arrives on `bar` and adds `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

// TMA: the box at (c0 = innermost coordinate, c1) of `map` into shared memory at dst; completes
// its bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// TMA: shared memory at src to the box at (c0, c1) of `map` (clipped at the tensor's edges), in
// this thread's current bulk group.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int c0, int c1, uint32_t src) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
            reinterpret_cast<uint64_t>(map)),
        "r"(c0), "r"(c1), "r"(src)
        : "memory");
}

// Barrier `id` (1, 2: one per consumer warp group) over `threads` threads.
__device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Copies the 4-byte word at src to shared memory at dst, asynchronously (cp.async; the thread's
// cp.async.wait_all completes it), or zeros there when !ok (src is not read, but stays valid).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(ok ? 4 : 0)
                 : "memory");
}

// A stream-K flag: published with release semantics at GPU scope, read with acquire.
__device__ __forceinline__ void flag_release(uint32_t* f, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t flag_acquire(const uint32_t* f) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
    return v;
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

// d (64 x N, s32) = a (64 x 32, s8, registers) * b (32 x N, s8, K-major shared memory), plus d
// itself where scale_d != 0; N the tile's tokens (d: N / 2 registers per thread). One
// specialization per N: the instruction names N and lists every accumulator register;
// TRIT_ACC16(i) are the operands d[i .. i + 15].
template <int N>
__device__ __forceinline__ void wgmma_m64k32(int32_t (&d)[N / 2], const uint32_t (&a)[4],
                                             uint64_t desc, int scale_d);

#define TRIT_ACC4(i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3])
#define TRIT_ACC16(i) TRIT_ACC4(i), TRIT_ACC4(i + 4), TRIT_ACC4(i + 8), TRIT_ACC4(i + 12)

template <>
__device__ __forceinline__ void wgmma_m64k32<96>(int32_t (&d)[48], const uint32_t (&a)[4],
                                                 uint64_t desc, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %53, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, "
        "{%48, %49, %50, %51}, %52, p;\n"
        "}\n"
        : TRIT_ACC16(0), TRIT_ACC16(16), TRIT_ACC16(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k32<128>(int32_t (&d)[64], const uint32_t (&a)[4],
                                                  uint64_t desc, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
        "%55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p;\n"
        "}\n"
        : TRIT_ACC16(0), TRIT_ACC16(16), TRIT_ACC16(32), TRIT_ACC16(48)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k32<160>(int32_t (&d)[80], const uint32_t (&a)[4],
                                                  uint64_t desc, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %85, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n160k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
        "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, "
        "%73, %74, %75, %76, %77, %78, %79}, "
        "{%80, %81, %82, %83}, %84, p;\n"
        "}\n"
        : TRIT_ACC16(0), TRIT_ACC16(16), TRIT_ACC16(32), TRIT_ACC16(48), TRIT_ACC16(64)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k32<176>(int32_t (&d)[88], const uint32_t (&a)[4],
                                                  uint64_t desc, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %93, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n176k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
        "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, "
        "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, "
        "{%88, %89, %90, %91}, %92, p;\n"
        "}\n"
        : TRIT_ACC16(0), TRIT_ACC16(16), TRIT_ACC16(32), TRIT_ACC16(48), TRIT_ACC16(64),
          TRIT_ACC4(80), TRIT_ACC4(84)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

template <>
__device__ __forceinline__ void wgmma_m64k32<256>(int32_t (&d)[128], const uint32_t (&a)[4],
                                                  uint64_t desc, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
        "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, "
        "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, "
        "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, "
        "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, "
        "%122, %123, %124, %125, %126, %127}, "
        "{%128, %129, %130, %131}, %132, p;\n"
        "}\n"
        : TRIT_ACC16(0), TRIT_ACC16(16), TRIT_ACC16(32), TRIT_ACC16(48), TRIT_ACC16(64),
          TRIT_ACC16(80), TRIT_ACC16(96), TRIT_ACC16(112)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

#undef TRIT_ACC16
#undef TRIT_ACC4

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
    const uint32_t e01 = tern2dev::decode4(lo);  // [b0 c0, b0 c2, b1 c0, b1 c2]
    const uint32_t o01 = tern2dev::decode4(hi);  // [b0 c1, b0 c3, b1 c1, b1 c3]
    const uint32_t e23 = tern2dev::decode4(lo >> 16);
    const uint32_t o23 = tern2dev::decode4(hi >> 16);
    a[0] = __byte_perm(e01, o01, 0x5140);  // byte 0: row g, columns 4t .. 4t + 3
    a[2] = __byte_perm(e01, o01, 0x7362);  // byte 1: row g, columns 16 + 4t ..
    a[1] = __byte_perm(e23, o23, 0x5140);  // byte 2: row g + 8, columns 4t ..
    a[3] = __byte_perm(e23, o23, 0x7362);  // byte 3: row g + 8, columns 16 + 4t ..
}

// decode_step for bt's D trit planes (w0[i] .. h1[i]: plane i's words): the same fragment bytes,
// each the code sum_i 3^i t_i. prmt maps a field to its digit t + 1 (00 -> 1, 01 -> 2, 10 -> 0,
// the invalid 11 -> 1, as tern2's decode), Horner's rule adds the digits in 32-bit multiply-adds,
// plane 0's table adds 128 - (3^D - 1) / 2 to each byte so that it ends as code + 128 (88 .. 168,
// no carry), and one xor of the top bits makes the int8 code (as the mma.sync kernel's
// plane_fragments, kernels/tern2_gemm.cu).
template <int D>
__device__ __forceinline__ void decode_step_planes(const uint32_t (&w0)[D], const uint32_t (&w1)[D],
                                                   const uint32_t (&h0)[D], const uint32_t (&h1)[D],
                                                   uint32_t sel, uint32_t (&a)[4]) {
    constexpr uint32_t kDigit = 0x01000201u;
    constexpr uint32_t kDigit0 =
        kDigit + static_cast<uint32_t>(128 - fmt::bt_levels(D)) * 0x01010101u;
    static_assert(fmt::bt_levels(D) <= 40, "a byte's digits plus the offset stay below 256");
    uint32_t e01 = 0, o01 = 0, e23 = 0, o23 = 0;
#pragma unroll
    for (int i = D - 1; i >= 0; --i) {
        const uint32_t lut = i == 0 ? kDigit0 : kDigit;
        const uint32_t v =
            __byte_perm(__byte_perm(w0[i], w1[i], sel), __byte_perm(h0[i], h1[i], sel), 0x5410);
        const uint32_t lo = v & 0x33333333u, hi = (v >> 2) & 0x33333333u;
        e01 = e01 * 3 + __byte_perm(lut, 0, lo);
        o01 = o01 * 3 + __byte_perm(lut, 0, hi);
        e23 = e23 * 3 + __byte_perm(lut, 0, lo >> 16);
        o23 = o23 * 3 + __byte_perm(lut, 0, hi >> 16);
    }
    e01 ^= 0x80808080u, o01 ^= 0x80808080u, e23 ^= 0x80808080u, o23 ^= 0x80808080u;
    a[0] = __byte_perm(e01, o01, 0x5140);
    a[2] = __byte_perm(e01, o01, 0x7362);
    a[1] = __byte_perm(e23, o23, 0x5140);
    a[3] = __byte_perm(e23, o23, 0x7362);
}

// TMA: the box at (c0, c1, c2) of a 3-D `map` into shared memory at dst; completes on `bar`.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}

// An int32 of magnitude below 2^22 as a float, exactly: its bits added to those of 1.5 * 2^23
// land in [2^23, 2^24), where floats step by 1, and the subtraction is exact. Two full-rate
// instructions where I2F runs at a quarter of the FP32 rate.
__device__ __forceinline__ float small_int_to_float(int32_t v) {
    return __fsub_rn(__int_as_float(v + 0x4B400000), 12582912.0f);
}

// w * float(v) for such a v, exactly as __fmul_rn(w, small_int_to_float(v)), in one FFMA after the
// add: with C = 1.5 * 2^23 = 3 * 2^22 and nwc = -(w * C), fma(w, C + v, nwc) rounds w * v once.
// nwc must be exact: w's significand at most 22 bits (every fp16 value; w finite), then w * C is
// its significand times 3, at most 24 bits. Zero terms come out +0 where the product may give
// -0; a sum that starts at +0 takes either to the same value.
__device__ __forceinline__ float scaled_small_int(float w, float nwc, int32_t v) {
    return __fmaf_rn(w, __int_as_float(v + 0x4B400000), nwc);
}
#endif  // TRIT_SM90A_DEVICE

template <class C, bool kSK>
__global__ void __launch_bounds__(kThreads, 1)
    tern2_gemm_sm90_kernel(const __grid_constant__ CUtensorMap x_map,
                           const __grid_constant__ CUtensorMap codes_map,
                           const __grid_constant__ CUtensorMap y_map, const bool staged,
                           const typename C::Args a, const Sched sched) {
#if TRIT_SM90A_DEVICE
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    constexpr int kMW = C::kMW, kStages = C::kStages, kBM = C::kBM, kBN = C::kBN;
    constexpr int kXStageBytes = C::kXStageBytes, kAcc = C::kAccRegs;
    // The swizzle is a function of the address bits: atoms must start on 1 KiB.
    uint8_t* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
    const uint32_t s_base = smem_addr(smem);
    const uint32_t full0 = s_base + C::kBarOffset, empty0 = full0 + kStages * 8;
    const int tid = static_cast<int>(threadIdx.x), wg = tid / kWarpGroup;
    const int mtiles = static_cast<int>((a.m + kBN - 1) / kBN);
    const int tiles = mtiles * static_cast<int>((a.n + kBM - 1) / kBM);
    const int ktiles = static_cast<int>((a.k + kKS - 1) / kKS);

    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full0 + 8 * s, 1);  // the producer's arrival + the TMA bytes
            mbar_init(empty0 + 8 * s, C::kKSplit ? 4 : 8);  // every warp of its consumer(s)
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    // PDL: the next call's CTAs may take each SM as this call's CTA there exits (one CTA per SM,
    // all of this grid resident at once, so none waits for an SM this grid still needs).
    pdl_launch_dependents();

    // Persistent: CTA b walks its Segments; tile tile % mtiles is the token block, tile / mtiles
    // the weight block (neighbouring CTAs share weight rows). The ring runs on across segments:
    // its use number it gives the stage (it % S) and the phase ((it / S) & 1).
    if (wg == 0) {
        // Producer: one thread loads the stage of each k-tile once the consumers released it; it
        // runs ahead into the next tile while the consumers finish one.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
        if (tid == 0) {
            // Stage s of ring use `it`: its codes, then (after pdl_wait) its x.
            const auto load_codes = [&](int it, int kt, int n0) {
                const int s = it % kStages;
                const uint32_t full = full0 + 8 * s;
                mbar_arrive_expect_tx(full, kXStageBytes + C::kCStageBytes);
                const uint32_t dst = s_base + C::kCodesOffset + s * C::kCStageBytes;
                if constexpr (C::kD == 1) {
                    tma_load_2d(dst, &codes_map, kt * kCodeRowBytes, n0, full);
                } else {
#pragma unroll
                    for (int p = 0; p < C::kD; ++p)
                        tma_load_3d(dst + p * kBM * kCodeRowBytes, &codes_map, kt * kCodeRowBytes,
                                    n0, p, full);
                }
            };
            // Under PDL, the codes of the first S ring uses (free stages) load before the wait
            // when no kernel writes them (a.codes_early), their x after it.
            int early = 0;
            if (a.codes_early) {
                for_each_segment<kSK>(sched, tiles, ktiles, [&](int tile, int kt0, int kt1) {
                    for (int kt = kt0; kt < kt1 && early < kStages; ++kt, ++early)
                        load_codes(early, kt, tile / mtiles * kBM);
                });
            }
            pdl_wait();
            int it = 0;
            for_each_segment<kSK>(sched, tiles, ktiles, [&](int tile, int kt0, int kt1) {
                const int m0 = tile % mtiles * kBN, n0 = tile / mtiles * kBM;
                for (int kt = kt0; kt < kt1; ++kt, ++it) {
                    const int s = it % kStages;
                    if (it >= early) {
                        mbar_wait(empty0 + 8 * s, ((it / kStages) & 1) ^ 1);  // first round passes
                        load_codes(it, kt, n0);
                    }
                    tma_load_2d(s_base + s * kXStageBytes, &x_map, kt * kKS, m0, full0 + 8 * s);
                }
            });
        }
        return;
    }
    // Everything the consumers read or write in global memory may be the previous kernel's.
    pdl_wait();

    // Consumers: warp group c owns weight rows c0 + mw * 64 + [0, 64) of the tile (with the k
    // split, both own rows [0, 64), consumer c the k-tiles c, c + 2, ... of each tile).
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int c = wg - 1, lane = tid % kWarp, warp = (tid / kWarp) % 4;
    const int g = lane / 4, t = lane % 4;
    const uint32_t sel = static_cast<uint32_t>(t | (4 + t) << 4);
    const int c0 = C::kKSplit ? 0 : c * 64 * kMW;
    const int row0 = c0 + warp * 16 + g;  // + mw * 64 (+ 8)

    int32_t acc[kMW][kAcc];
    float sums[C::kGrouped ? kAcc : 1];  // several groups: the folded y sums of acc's outputs
    using Frag = uint32_t[kMW][kKSteps][4];
    // Waits for ring use `it` and decodes its codes into f.
    const auto fetch = [&](int it, Frag& f) {
        const int s = it % kStages;
        mbar_wait(full0 + 8 * s, (it / kStages) & 1);
        const uint8_t* cs = smem + C::kCodesOffset + s * C::kCStageBytes;
        if constexpr (C::kD > 1) {
            constexpr int kD = C::kD;
            uint4 l0[kD], l1[kD], h0[kD], h1[kD];
#pragma unroll
            for (int p = 0; p < kD; ++p) {
                const uint4* lo =
                    reinterpret_cast<const uint4*>(cs + (p * kBM + row0) * kCodeRowBytes);
                const uint4* hi = lo + 8 * kCodeRowBytes / 16;  // row + 8
                l0[p] = lo[0], l1[p] = lo[1], h0[p] = hi[0], h1[p] = hi[1];
            }
            // Step ks's words of plane p: l0 (.x, .y | .z, .w) for steps 0 | 1, l1 for 2 | 3.
            const auto step = [&](const uint4(&l)[kD], const uint4(&h)[kD], bool upper,
                                  uint32_t(&out)[4]) {
                uint32_t w0[kD], w1[kD], v0[kD], v1[kD];
#pragma unroll
                for (int p = 0; p < kD; ++p) {
                    w0[p] = upper ? l[p].z : l[p].x, w1[p] = upper ? l[p].w : l[p].y;
                    v0[p] = upper ? h[p].z : h[p].x, v1[p] = upper ? h[p].w : h[p].y;
                }
                decode_step_planes<kD>(w0, w1, v0, v1, sel, out);
            };
            step(l0, h0, false, f[0][0]);
            step(l0, h0, true, f[0][1]);
            step(l1, h1, false, f[0][2]);
            step(l1, h1, true, f[0][3]);
        } else {
#pragma unroll
            for (int mw = 0; mw < kMW; ++mw) {
                const uint4* lo =
                    reinterpret_cast<const uint4*>(cs + (row0 + mw * 64) * kCodeRowBytes);
                const uint4* hi = lo + 8 * kCodeRowBytes / 16;  // row + 8
                const uint4 l0 = lo[0], l1 = lo[1], h0 = hi[0], h1 = hi[1];
                decode_step(l0.x, l0.y, h0.x, h0.y, sel, f[mw][0]);
                decode_step(l0.z, l0.w, h0.z, h0.w, sel, f[mw][1]);
                decode_step(l1.x, l1.y, h1.x, h1.y, sel, f[mw][2]);
                decode_step(l1.z, l1.w, h1.z, h1.w, sel, f[mw][3]);
            }
        }
    };
    const auto fence_acc = [&] {
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
            for (int e = 0; e < kAcc; ++e)
                fence_operand(acc[mw][e]);
    };
    // Issues ring use it's wgmmas from f as one commit group.
    const auto issue = [&](int it, Frag& f) {
        const uint64_t desc = sw128_desc(s_base + (it % kStages) * kXStageBytes);
        fence_acc();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
            for (int ks = 0; ks < kKSteps; ++ks)
                wgmma_m64k32<kBN>(acc[mw], f[mw][ks], desc + 2 * ks, 1);  // + 32 bytes per k32
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    };
    // After the wait that completed ring use it's group: f (its A registers) is free again (kept
    // live up to here so that no decode reuses them early) and the warp releases the stage.
    const auto retire = [&](int it, Frag& f) {
        fence_acc();
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
            for (int ks = 0; ks < kKSteps; ++ks)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    fence_operand(f[mw][ks][e]);
        __syncwarp();
        if (lane == 0) mbar_arrive(empty0 + 8 * (it % kStages));
    };

    const ProductOut& o = a.out;
    const bool fused = o.acc == nullptr;
    const int ct = tid - kWarpGroup;  // consumer thread 0 .. 255
    // The staged epilogue's x scales (xs: the tile's 128 tokens) and, where they fit, w scales
    // and biases (wsm, bsm: the group's 64 * MW rows) in shared memory.
    const uint32_t xs = s_base + C::kXsOffset + c * kBN * 4;
    const uint32_t wsm = s_base + C::kWsOffset + c * 2 * 64 * kMW * 4, bsm = wsm + 64 * kMW * 4;
    const bool early = staged && fused;
    int next_it = 0;                  // ring use of the segment's first k-tile
    constexpr int kTok = C::kTokens;  // the tokens whose y this consumer stores
    for_each_segment<kSK>(sched, tiles, ktiles, [&](int tile, int kt0, int kt1) {
        const int it = next_it, nk = kt1 - kt0;
        next_it += nk;
        const int m0 = tile % mtiles * kBN, n0 = tile / mtiles * kBM;
        // This consumer's ring uses: it + kStep * q + q0 for q < nq (its k-tiles of the segment),
        // and the first of the tokens it stores.
        constexpr int kStep = C::kKSplit ? 2 : 1;
        const int q0 = C::kKSplit ? c : 0, nq = C::kKSplit ? (nk - c + 1) / 2 : nk;
        const int mc0 = m0 + (C::kKSplit ? c * kTok : 0);
        // The epilogue's operands go to shared memory now (cp.async), so that their latency
        // hides behind the k-loop: x scales by warp 0, a row's w scale and bias by its t = 0
        // thread. The previous tile's epilogue read them before its last barrier.
        if (early && !(kSK && kt0 > 0)) {
            if (warp == 0) {
#pragma unroll
                for (int q = 0; q < (kTok + kWarp - 1) / kWarp; ++q) {
                    if (kTok % kWarp != 0 && q * kWarp + lane >= kTok) break;
                    const int64_t oi = mc0 + q * kWarp + lane;
                    cp_async4(xs + 4 * (q * kWarp + lane),
                              o.x_scale + (o.x_scale_rows == 1 || oi >= a.m ? 0 : oi), oi < a.m);
                }
            }
            if constexpr (C::kEarlyW) {
                if (t == 0) {
#pragma unroll
                    for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int wl = warp * 16 + g + mw * 64 + 8 * h;
                            const int64_t oj = n0 + c0 + wl;
                            const bool in = oj < a.n;
                            cp_async4(wsm + 4 * wl, epilogue_w_scale(o, in ? oj : 0, 1), in);
                            cp_async4(bsm + 4 * wl, o.bias != nullptr ? o.bias + (in ? oj : 0)
                                                                      : o.x_scale,
                                      in && o.bias != nullptr);
                        }
                }
            }
        }
        // Where shared memory has no room for them, the thread's w scales and biases go to
        // registers now, their latency behind the k-loop (2 * kMW rows per thread; docs/
        // BENCHMARKS.md, session 17: 3-6 % on the narrow tile's shapes at m = 256 and 2048).
        float ws_r[kMW][2] = {}, bias_r[kMW][2] = {};
        if constexpr (!C::kEarlyW) {
            if (fused && !(kSK && kt0 > 0)) {
#pragma unroll
                for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int64_t oj = n0 + row0 + mw * 64 + h * 8;
                        if (oj >= a.n) continue;
                        ws_r[mw][h] = __ldg(epilogue_w_scale(o, oj, 1));
                        if (o.bias != nullptr) bias_r[mw][h] = __ldg(o.bias + oj);
                    }
            }
        }
        const auto use = [&](int q) { return it + kStep * q + q0; };
        if constexpr (C::kGrouped) {
            // Several scale groups (whole tiles: kt0 = 0, nq = the tile's k-tiles): each group's
            // wgmmas start from zero (scale_d 0) and, once they land, the group's int32 sums fold
            // into sums[] as s = s + w_scale[row][group] * float(sum), the CPU's order and
            // rounding. A k-tile runs as two pairs of k32 steps; a pair that ends a group waits
            // for its wgmmas and folds, so one accumulator set serves every group (the other
            // consumer warp group's wgmmas keep the tensor cores busy meanwhile). Steps past k
            // (k % 128 == 64: the last k-tile's upper half) do not run. Pair P (k32 steps 2P and
            // 2P + 1, P from 0) starts a group where P % gp == 0 and ends one where P % gp ==
            // gp - 1 or P + 1 == pairs (k % 64 == 0, group % 64 == 0).
            const int pairs = static_cast<int>(a.k / 64);
            const FastDiv& per_group = a.group_pairs;
            const int gp = static_cast<int>(per_group.divisor);
            const int64_t groups = per_group.div(static_cast<uint32_t>(pairs + gp - 1));
            // The scales: k-tile q's in slot q % S of the warp's ring, requested kAhead k-tiles
            // ahead (one cp.async commit group a k-tile, empty past the tile's k), so that a
            // fold never waits on memory (measured, no faster than loading each group's scales
            // a group ahead into registers: the kernel is bound by what it issues,
            // docs/BENCHMARKS.md session 53, part 4). Lane
            // (g, t) copies the scale of row row0 + 8 (t / 2) that pair t % 2 folds with, 0
            // where the pair ends no group or the row is past n; slot word p * 16 + h * 8 + g.
            constexpr int kAhead = 3;
            // fp16-exact scales (ProductOut::w_scale_half given): a term in one FFMA.
            const bool fma_fold = o.w_scale_half != nullptr;
            static_assert(kAhead < kStages, "a slot is rewritten only after its k-tile's folds");
            const uint32_t wring = s_base + C::kWsRingOffset + (c * 4 + warp) * 128;
            const int64_t oj_l = n0 + row0 + 8 * (t >> 1);
            const float* wrow_l = epilogue_w_scale(o, oj_l < a.n ? oj_l : 0, groups);
            const uint32_t w_word = 4 * ((t & 1) * 16 + (t >> 1) * 8 + g);
            const auto request = [&](int q) {
                if (q < nq) {
                    const int e = 2 * q + (t & 1) + 1;  // the pair's end, in 64 columns
                    const uint32_t ge = per_group.div(static_cast<uint32_t>(e));
                    const bool ends = e == pairs || (e < pairs && static_cast<int>(ge) * gp == e);
                    const uint32_t gr = per_group.div(static_cast<uint32_t>(min(e, pairs) - 1));
                    cp_async4(wring + (q % kStages) * 1024 + w_word, wrow_l + (ends ? gr : 0),
                              ends && oj_l < a.n);
                }
                asm volatile("cp.async.commit_group;\n" ::: "memory");
            };
#pragma unroll
            for (int q = 0; q < kAhead; ++q)
                request(q);
#pragma unroll
            for (int e = 0; e < kAcc; ++e)
                sums[e] = 0.0f;
            const auto stage = [&](int q, Frag& f, Frag& fn) {
                const int iq = use(q);
                const uint64_t desc = sw128_desc(s_base + (iq % kStages) * kXStageBytes);
                request(q + kAhead);
                asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead) : "memory");
                __syncwarp();
                const uint32_t slot = wring + (q % kStages) * 1024 + 4 * g;
#pragma unroll
                for (int p = 0; p < kKSteps / 2; ++p) {
                    const int pair = q * (kKSteps / 2) + p;
                    if (pair >= pairs) break;
                    const int rem = pair - static_cast<int>(per_group.div(pair)) * gp;
                    fence_acc();
                    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                    wgmma_m64k32<kBN>(acc[0], f[0][2 * p], desc + 4 * p, rem == 0 ? 0 : 1);
                    wgmma_m64k32<kBN>(acc[0], f[0][2 * p + 1], desc + 4 * p + 2, 1);
                    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                    const bool ends = rem == gp - 1 || pair + 1 == pairs;
                    const bool last = p == kKSteps / 2 - 1 || pair + 1 >= pairs;
                    if (last && q + 1 < nq) fetch(use(q + 1), fn);
                    float w[2];
                    asm volatile("ld.shared.f32 %0, [%1];\n"
                                 : "=f"(w[0])
                                 : "r"(slot + 64 * p)
                                 : "memory");
                    asm volatile("ld.shared.f32 %0, [%1];\n"
                                 : "=f"(w[1])
                                 : "r"(slot + 64 * p + 32)
                                 : "memory");
                    // Every pair waits (groups of 64, the common case, end at every pair): with
                    // the wait under a condition ptxas serialized the wgmmas.
                    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                    fence_acc();
                    if (ends && fma_fold) {
                        const float nwc[2] = {-__fmul_rn(w[0], 12582912.0f),
                                              -__fmul_rn(w[1], 12582912.0f)};
#pragma unroll
                        for (int e = 0; e < kAcc; ++e)
                            sums[e] = __fadd_rn(
                                sums[e],
                                scaled_small_int(w[(e / 2) % 2], nwc[(e / 2) % 2], acc[0][e]));
                    } else if (ends) {
#pragma unroll
                        for (int e = 0; e < kAcc; ++e) {
                            const float v = small_int_to_float(acc[0][e]);
                            sums[e] = __fadd_rn(sums[e], __fmul_rn(w[(e / 2) % 2], v));
                        }
                    }
                }
                retire(iq, f);
            };
            if (nq > 0) {
                Frag f0, f1;
                fetch(use(0), f0);
                for (int q = 0; q < nq; q += 2) {
                    stage(q, f0, f1);
                    if (q + 1 < nq) stage(q + 1, f1, f0);
                }
            }
        } else {
#pragma unroll
            for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                for (int e = 0; e < kAcc; ++e)
                    acc[mw][e] = 0;
            // Two sets of A registers: the consumer's k-tile q decodes into f0 when q is even, f1
            // when odd, while the other set feeds the wgmmas still in flight.
            if (nq > 0) {
                Frag f0, f1;
                fetch(use(0), f0);
                for (int q = 0; q < nq; q += 2) {
                    issue(use(q), f0);
                    if (q > 0) {
                        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                        retire(use(q - 1), f1);
                    }
                    if (q + 1 < nq) {
                        fetch(use(q + 1), f1);
                        issue(use(q + 1), f1);
                        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                        retire(use(q), f0);
                        if (q + 2 < nq) fetch(use(q + 2), f0);
                    }
                }
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
                if (nq % 2 == 1)
                    retire(use(nq - 1), f0);
                else
                    retire(use(nq - 1), f1);
            }
        }

        // The k split: consumer 1 first swaps its two halves of the tokens, so that for both its
        // own half is acc[0][0, kAcc / 2) and the other's acc[0][kAcc / 2, kAcc); each stores the
        // other's half for the other to add. The second barrier keeps the next tile's stores
        // behind the other consumer's loads.
        if constexpr (C::kKSplit) {
            constexpr int kHalf = kAcc / 2;
            if (c == 1) {
#pragma unroll
                for (int e = 0; e < kHalf; ++e) {
                    const int32_t v = acc[0][e];
                    acc[0][e] = acc[0][kHalf + e];
                    acc[0][kHalf + e] = v;
                }
            }
            const uint32_t out_x =
                s_base + C::kXchOffset + (c * (kHalf / 4) * kWarpGroup + ct % kWarpGroup) * 16;
            const uint32_t in_x = s_base + C::kXchOffset +
                                  ((1 - c) * (kHalf / 4) * kWarpGroup + ct % kWarpGroup) * 16;
#pragma unroll
            for (int q = 0; q < kHalf / 4; ++q)
                asm volatile(
                    "st.shared.v4.s32 [%0], {%1, %2, %3, %4};\n" ::"r"(out_x + q * kWarpGroup * 16),
                    "r"(acc[0][kHalf + 4 * q]), "r"(acc[0][kHalf + 4 * q + 1]),
                    "r"(acc[0][kHalf + 4 * q + 2]), "r"(acc[0][kHalf + 4 * q + 3])
                    : "memory");
            named_barrier(3, 2 * kWarpGroup);
#pragma unroll
            for (int q = 0; q < kHalf / 4; ++q) {
                int32_t p0, p1, p2, p3;
                asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(p0), "=r"(p1), "=r"(p2), "=r"(p3)
                             : "r"(in_x + q * kWarpGroup * 16)
                             : "memory");
                acc[0][4 * q] += p0;
                acc[0][4 * q + 1] += p1;
                acc[0][4 * q + 2] += p2;
                acc[0][4 * q + 3] += p3;
            }
            named_barrier(3, 2 * kWarpGroup);
        }

        // Stream-K. A piece that does not start the tile goes to this CTA's slot, each thread's
        // values as int4 words at (word, thread) so that a warp's stores are whole lines; the
        // barrier and the fence after it put every thread's stores before the flag.
        if (kSK && kt0 > 0) {
            int4* slot = sched.partials + static_cast<int64_t>(blockIdx.x) * C::kPartialWords;
#pragma unroll
            for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                for (int q = 0; q < kAcc / 4; ++q)
                    slot[(mw * kAcc / 4 + q) * 2 * kWarpGroup + ct] =
                        make_int4(acc[mw][4 * q], acc[mw][4 * q + 1], acc[mw][4 * q + 2],
                                  acc[mw][4 * q + 3]);
            named_barrier(3, 2 * kWarpGroup);
            if (ct == 0) {
                __threadfence();
                flag_release(sched.flags + blockIdx.x, sched.epoch);
            }
            return;
        }
        // The piece that starts a tile but does not end it: the tile's other pieces are the first
        // pieces of the next CTAs whose ranges begin inside it. One thread waits for their flags.
        if (kSK && kt1 < ktiles) {
            const int64_t tile_end = static_cast<int64_t>(tile - sched.tiles_dp + 1) * ktiles;
            const int grid = static_cast<int>(gridDim.x);
            if (ct == 0) {
                for (int cb = static_cast<int>(blockIdx.x) + 1; cb < grid; ++cb) {
                    const int64_t u = sk_begin(sched, cb, grid);
                    if (u >= tile_end) break;
                    if (u == sk_begin(sched, cb + 1, grid)) continue;  // an empty range
                    while (flag_acquire(sched.flags + cb) != sched.epoch) {
                    }
                }
            }
            named_barrier(3, 2 * kWarpGroup);
            for (int cb = static_cast<int>(blockIdx.x) + 1; cb < grid; ++cb) {
                const int64_t u = sk_begin(sched, cb, grid);
                if (u >= tile_end) break;
                if (u == sk_begin(sched, cb + 1, grid)) continue;
                const int4* slot = sched.partials + static_cast<int64_t>(cb) * C::kPartialWords;
#pragma unroll
                for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                    for (int q = 0; q < kAcc / 4; ++q) {
                        const int4 p = __ldcg(slot + (mw * kAcc / 4 + q) * 2 * kWarpGroup + ct);
                        acc[mw][4 * q] += p.x;
                        acc[mw][4 * q + 1] += p.y;
                        acc[mw][4 * q + 2] += p.z;
                        acc[mw][4 * q + 3] += p.w;
                    }
            }
        }

        // acc[mw][4j + 2h + e]: weight row row0 + mw * 64 + 8h, token 8j + 2t + e. The y
        // arithmetic is store_output's for one group (kernels/epilogue.cuh), with the weight-side
        // operands loaded once per tile and the token's x scale once per token.
        float ws[kMW][2], bias[kMW][2];
        const bool early_w = early && C::kEarlyW;
#pragma unroll
        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if constexpr (!C::kEarlyW) {
                    ws[mw][h] = ws_r[mw][h];
                    bias[mw][h] = bias_r[mw][h];
                    continue;
                }
                const int64_t oj = n0 + row0 + mw * 64 + h * 8;
                const bool load = fused && oj < a.n && !early_w;
                ws[mw][h] = load ? epilogue_w_scale(o, oj, 1)[0] : 0.0f;
                bias[mw][h] = load && o.bias != nullptr ? o.bias[oj] : 0.0f;
            }
        // Token oi's x scale (0 past m).
        const auto x_scale = [&](int64_t oi) {
            return fused && oi < a.m ? o.x_scale[o.x_scale_rows == 1 ? 0 : oi] : 0.0f;
        };
        const auto value = [&](int mw, int h, int j, int e, float sx) {
            if constexpr (C::kGrouped)
                return __float_as_uint(
                    __fadd_rn(__fmul_rn(sums[4 * j + 2 * h + e], sx), bias[mw][h]));
            const int32_t v = acc[mw][4 * j + 2 * h + e];
            return fused ? __float_as_uint(__fadd_rn(
                               __fmul_rn(epilogue_add(0.0f, ws[mw][h], v), sx), bias[mw][h]))
                         : static_cast<uint32_t>(v);
        };
        if (staged) {
            // Through shared memory, in passes of kYRows tokens: the warp group writes its 64 *
            // MW outputs x kYRows tokens into its 2 * MW boxes (conflict-free: a warp's 8 rows x
            // 4 tokens land on 8 distinct 16-byte columns of the swizzle), then one thread hands
            // them to TMA stores that run on while the next pass or tile computes. The boxes are
            // free again once the previous pass's stores have read them.
            const int wt = tid % kWarpGroup;
            const uint32_t ys = s_base + C::kYOffset + c * 2 * kMW * C::kYBoxBytes;
            // Output wl = warp * 16 + g + mw * 64 + 8h of the group, token r = 8j + 2t + e: box
            // wl / 32, row r % kYRows, 16-byte column (wl % 32) / 4 ^ r % 8, where r % 8 = 2t + e.
            uint32_t at[kMW][2][2];
#pragma unroll
            for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int wl = warp * 16 + g + mw * 64 + 8 * h, r8 = 2 * t + e;
                        at[mw][h][e] = ys + (wl / 32) * C::kYBoxBytes + r8 * 128 +
                                       (((wl % 32) / 4) ^ r8) * 16 + (wl % 4) * 4;
                    }
            // The tile's 128 x scales go to shared memory once (warp 0 of the group, by cp.async
            // at the segment's start for y); each thread then reads its tokens' there, a token
            // ahead of their use. Against a global load per token and thread, on the H100 at m =
            // 2048: 3-13 % faster with 128-row tiles, 1.5-2 % with 256-row ones (session 13);
            // loaded early rather than here, 1-6 % faster (session 16, docs/BENCHMARKS.md).
            if (early) {
                asm volatile("cp.async.wait_all;\n" ::: "memory");
            } else if (warp == 0) {
#pragma unroll
                for (int q = 0; q < (kTok + kWarp - 1) / kWarp; ++q) {
                    if (kTok % kWarp != 0 && q * kWarp + lane >= kTok) break;
                    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(xs + 4 * (q * kWarp + lane)),
                                 "f"(x_scale(mc0 + q * kWarp + lane))
                                 : "memory");
                }
            }
            const uint32_t xs_t = xs + 8 * t;  // token 8j + 2t + e at + 32j + 4e
            const auto load_sx = [&](int j, int e) {
                float v;
                asm volatile("ld.shared.f32 %0, [%1];\n"
                             : "=f"(v)
                             : "r"(xs_t + 32 * j + 4 * e)
                             : "memory");
                return v;
            };
            constexpr int kJ = C::kYRows / 8;  // j steps per pass
            float sx_next = 0.0f;
#pragma unroll
            for (int pass = 0; pass < kTok / C::kYRows; ++pass) {
                // The previous stores from these boxes have read them (and, on the first pass,
                // the x scales are in).
                if (wt == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                named_barrier(1 + c, kWarpGroup);
                if (pass == 0) {
                    sx_next = load_sx(0, 0);
                    if (early_w) {
#pragma unroll
                        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                            for (int h = 0; h < 2; ++h) {
                                const int wl = warp * 16 + g + mw * 64 + 8 * h;
                                asm volatile("ld.shared.f32 %0, [%1];\n"
                                             : "=f"(ws[mw][h])
                                             : "r"(wsm + 4 * wl)
                                             : "memory");
                                asm volatile("ld.shared.f32 %0, [%1];\n"
                                             : "=f"(bias[mw][h])
                                             : "r"(bsm + 4 * wl)
                                             : "memory");
                            }
                    }
                }
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int j = pass * kJ + jj;
                        const float sx = sx_next;
                        if (j < kTok / 8 - 1 || e == 0) sx_next = load_sx(j + e, 1 - e);
#pragma unroll
                        for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                            for (int h = 0; h < 2; ++h)
                                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at[mw][h][e] +
                                                                              jj * 1024),
                                             "r"(value(mw, h, j, e, sx))
                                             : "memory");
                    }
                // The writes went through the generic proxy; the TMA reads through the async one.
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                named_barrier(1 + c, kWarpGroup);
                if (wt == 0) {
                    for (int b = 0; b < 2 * kMW; ++b)
                        tma_store_2d(&y_map, n0 + c0 + 32 * b, mc0 + pass * C::kYRows,
                                     ys + b * C::kYBoxBytes);
                    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                }
            }
            return;
        }
        // Straight to global memory: a warp's store covers 4 tokens x 8 consecutive outputs, full
        // 32-byte sectors.
#pragma unroll
        for (int j = 0; j < kTok / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int64_t oi = mc0 + j * 8 + 2 * t + e;
                if (oi >= a.m) continue;
                const float sx = x_scale(oi);
#pragma unroll
                for (int mw = 0; mw < kMW; ++mw)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int64_t oj = n0 + row0 + mw * 64 + h * 8;
                        if (oj >= a.n) continue;
                        const uint32_t v = value(mw, h, j, e, sx);
                        if (fused)
                            o.y[oi * a.n + oj] = __uint_as_float(v);
                        else
                            o.acc[oi * a.n + oj] = static_cast<int32_t>(v);
                    }
            }
    });
    // The last stores must have read their boxes before the CTA's shared memory goes; their
    // writes complete with the grid (4096x4096, m = 2048: 61.3 -> 60.8 us against waiting for
    // them, session 15).
    if (staged && tid % kWarpGroup == 0)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#else
    (void)x_map;
    (void)codes_map;
    (void)y_map;
    (void)staged;
    (void)a;
    __trap();  // the launcher runs this kernel only on compute capability 9.0
#endif
}

// cuTensorMapEncodeTiled from the driver the runtime loaded (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        TRIT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                         cudaEnableDefault, &found));
        TRIT_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr,
                   "tern2_gemm_sm90: the CUDA driver has no cuTensorMapEncodeTiled (needs >= 12.0)");
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

// A 2-D byte tensor (rows x inner, rows `inner` bytes apart) read in boxes of box_rows x box_inner
// bytes; reads past the tensor's edges fill zeros.
CUtensorMap byte_map(const void* base, int64_t rows, int64_t inner, uint32_t box_inner,
                     uint32_t box_rows, CUtensorMapSwizzle swizzle) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner)};
    const cuuint32_t box[2] = {box_inner, box_rows};
    const cuuint32_t elem_strides[2] = {1, 1};
    const CUresult r = encode_tiled()(
        &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box,
        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TRIT_CHECK(r == CUDA_SUCCESS, "tern2_gemm_sm90: cuTensorMapEncodeTiled failed (CUresult ", r,
               ") for a ", rows, " x ", inner, " byte tensor");
    return map;
}

// bt's D trit planes as one 3-D byte tensor (k / 4 bytes, n rows, D planes), read in boxes of
// box_rows x box_inner bytes of one plane; reads past n and k fill zeros.
CUtensorMap plane_map(const void* base, int depth, int64_t rows, int64_t inner, uint32_t box_inner,
                      uint32_t box_rows) {
    CUtensorMap map;
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows),
                                static_cast<cuuint64_t>(depth)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(inner),
                                   static_cast<cuuint64_t>(inner * rows)};
    const cuuint32_t box[3] = {box_inner, box_rows, 1};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    const CUresult r = encode_tiled()(
        &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dims, strides, box,
        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TRIT_CHECK(r == CUDA_SUCCESS, "tern2_gemm_sm90: cuTensorMapEncodeTiled failed (CUresult ", r,
               ") for ", depth, " planes of ", rows, " x ", inner, " bytes");
    return map;
}

// A 2-D tensor of 4-byte words (rows x cols) in boxes of box_rows x box_cols, 128-byte swizzle.
CUtensorMap word_map(void* base, int64_t rows, int64_t cols, uint32_t box_cols, uint32_t box_rows) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 4};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t elem_strides[2] = {1, 1};
    const CUresult r = encode_tiled()(
        &map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, base, dims, strides, box, elem_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TRIT_CHECK(r == CUDA_SUCCESS, "tern2_gemm_sm90: cuTensorMapEncodeTiled failed (CUresult ", r,
               ") for a ", rows, " x ", cols, " output");
    return map;
}

// 256 weight rows per CTA halve the x bytes per MAC; 128 rows when that leaves fewer waves, with
// 96 to 256 tokens where that leaves less work on the busiest SM (tern2_gemm_sm90_tile).
using WideTile = Config<2, 6, 64, 128>;       // (256, 128): 144 KiB ring + 64 KiB of y, two passes
using NarrowTile = Config<1, 8, 128, 128>;    // (128, 128): 160 KiB ring + 64 KiB of y
using Narrow96Tile = Config<1, 8, 96, 96>;    // (128, 96): 128 KiB ring + 48 KiB of y
using Narrow160Tile = Config<1, 6, 160, 160>;  // (128, 160): 144 KiB ring + 80 KiB of y
using Narrow176Tile = Config<1, 6, 88, 176>;   // (128, 176): 156 KiB ring + 44 KiB of y, two passes
using Narrow256Tile = Config<1, 5, 64, 256>;   // (128, 256): 180 KiB ring + 32 KiB of y, 4 passes
// The k-split tiles: (64, 96): 112 KiB ring + 24 KiB of y + 24 KiB of exchange; (64, 128): 144 +
// 32 + 32 KiB. One pass of each consumer's half of the tokens.
using Split96Tile = Config<1, 8, 48, 96, true>;
using Split128Tile = Config<1, 8, 64, 128, true>;
// bt's planes and several scale groups: the (128, 128) tile, whole, its ring as deep as shared
// memory allows with D planes a stage (y in two passes where D > 1): D = 1 160 KiB ring + 64 KiB of
// y (140 + 64 and 7 KiB of scales with several groups); D = 2 168 + 32; D = 3 168 + 32; D = 4
// 160 + 32 (and S KiB of scales with several groups).
template <int D, bool GR>
constexpr int kPlaneStages = D == 1   ? (GR ? 7 : 8)
                             : D == 2 ? 7
                             : D == 3 ? 6
                                      : 5;
template <int D, bool GR>
using PlaneTile = Config<1, kPlaneStages<D, GR>, D == 1 ? 128 : 64, 128, false, D, GR>;

// The stream-K workspace of one (device, stream): flags for up to `sms` CTAs, then as many
// partial tiles of the wide tile. Kept for the life of the process.
struct Workspace {
    void* base = nullptr;
    size_t bytes = 0;
    uint32_t epoch = 0;  // the last launch's; flags start at 0, launches count from 1
};

// Fills sched's workspace fields for a launch on `stream`: allocates the workspace on first use.
void bind_workspace(Sched& sched, int sms, cudaStream_t stream) {
    static std::mutex mu;
    static std::map<std::pair<int, cudaStream_t>, Workspace> spaces;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    const size_t flag_bytes = (static_cast<size_t>(sms) * 4 + 255) / 256 * 256;
    const size_t bytes = flag_bytes + static_cast<size_t>(sms) * WideTile::kPartialWords * 16;
    const std::lock_guard<std::mutex> lock(mu);
    Workspace& w = spaces[{device, stream}];
    if (w.bytes < bytes) {
        if (w.base != nullptr) {
            TRIT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the last launch may still read it
            TRIT_CUDA_CHECK(cudaFree(w.base));
            w = Workspace{};
        }
        TRIT_CUDA_CHECK(cudaMalloc(&w.base, bytes));
        w.bytes = bytes;
        TRIT_CUDA_CHECK(cudaMemsetAsync(w.base, 0, flag_bytes, stream));
    }
    if (++w.epoch == 0) w.epoch = 1;
    sched.flags = static_cast<uint32_t*>(w.base);
    sched.partials = reinterpret_cast<int4*>(static_cast<uint8_t*>(w.base) + flag_bytes);
    sched.epoch = w.epoch;
}

// A launch's tile and work split.
struct Plan {
    bool wide = false, ksplit = false;
    int tokens = 128;
    int grid = 0;
    Sched sched;
};

constexpr int kAllWaves = 1 << 20;  // split's sk_waves for every tile stream-K

// Splits `tiles` tiles of `ktiles` k-tiles over `sms` CTAs: with `sk_waves` = 0, all whole;
// else the last partial wave and sk_waves - 1 full waves before it (all tiles when fewer) run
// stream-K on every SM.
Plan split(bool wide, int tokens, int64_t tiles, int64_t ktiles, int sms, int sk_waves) {
    Plan p;
    p.wide = wide;
    p.tokens = tokens;
    const int64_t full = tiles / sms, rest = tiles % sms;
    const int64_t dp = std::max<int64_t>(full - (sk_waves - 1), 0) * sms;
    // sk_begin multiplies the units by a CTA index in int32 (k-tile counts past 2^31 / sms: whole
    // tiles).
    const bool fits = (tiles - dp) * ktiles <= INT32_MAX / sms;
    if (sk_waves == 0 || (rest == 0 && sk_waves == 1) || !fits) {
        p.grid = static_cast<int>(std::min<int64_t>(tiles, sms));
        p.sched.tiles_dp = static_cast<int>(tiles);
        return p;
    }
    p.grid = sms;
    p.sched.tiles_dp = static_cast<int>(dp);
    p.sched.sk_units = static_cast<int>((tiles - dp) * ktiles);
    return p;
}

// The tile and the split. The tile: tern2_gemm_sm90_tile (the k-split tile where it pays, else by
// the work on the busiest SM), or the one a.ksplit and a.tokens force. The split: the k-split
// tile whole; stream-K where 128 x 128 tiles fill at most half the SMs
// and k is long (>= 48 k-tiles), else whole tiles; tiles of other token counts always run whole.
// Measured on the H100 (docs/BENCHMARKS.md, session 12), both kernels in one build: with
// 128 x 128 tiles, stream-K takes 4096x14336 from 51.6 to 26.2 us at m = 128 and from 51.7 to
// 36.6 at m = 256, 2560x6912 from 28.4 to 20.8 (m = 128) and 28.1 to 21.4 (m = 256). Where the
// tiles fill more of the GPU, or k is short, its fix-ups (int32 partial tiles through L2, the
// tile's first CTA adding them) cost about what the balance gains or more: 4096x4096, m = 128,
// 20.1 -> 18.4 us; 6912x2560, m = 128, 15.5 -> 17.2; 768x3072, m = 128, 16.4 -> 29.8.
Plan plan(const Tern2GemmSm90Args& a, int sms) {
    const int64_t ktiles = fmt::ceil_div(a.k, int64_t{kKS});
    // Planes and groups: (128, 128) tiles, whole.
    if (a.depth > 1 || (a.group > 0 && a.group < a.k)) {
        const int64_t tiles = fmt::ceil_div(a.m, int64_t{128}) * fmt::ceil_div(a.n, int64_t{128});
        return split(false, 128, tiles, ktiles, sms, 0);
    }
    // Forced stream-K (tests: every tile split) takes the 128-token tiles it runs on.
    const bool t128 =
        !a.ksplit && (a.tokens == 128 || (a.tokens == 0 && a.schedule == Sm90Schedule::kStreamK));
    const Tern2GemmSm90Tile tile =
        a.ksplit
            ? Tern2GemmSm90Tile{false,
                                a.tokens != 0 ? a.tokens
                                              : tern2_gemm_sm90_ksplit_tokens(a.m, a.n, a.k, sms),
                                true}
        : t128          ? tern2_gemm_sm90_tile_128(a.m, a.n, sms)
        : a.tokens == 0 ? tern2_gemm_sm90_tile(a.m, a.n, a.k, sms)
                        : Tern2GemmSm90Tile{false, a.tokens};
    const int64_t tiles =
        fmt::ceil_div(a.m, int64_t{tile.tokens}) * fmt::ceil_div(a.n, int64_t{tile.rows()});
    if (tile.ksplit) {
        Plan p = split(false, tile.tokens, tiles, ktiles, sms, 0);
        p.ksplit = true;
        return p;
    }
    if (tile.tokens != 128) return split(false, tile.tokens, tiles, ktiles, sms, 0);
    if (a.schedule == Sm90Schedule::kStreamK)
        return split(tile.wide, 128, tiles, ktiles, sms, kAllWaves);
    // With at most half the SMs' worth of tiles, the tile is the narrow one (128 x 128).
    const bool stream_k = tern2_gemm_sm90_stream_k(a.m, a.n, a.k, sms);
    return split(tile.wide, 128, tiles, ktiles, sms, stream_k ? 1 : 0);
}

template <class C>
void launch(const Tern2GemmSm90Args& a, Plan p, int sms, cudaStream_t stream) {
    // Stream-K runs only 128-token tiles (plan), so only they are compiled with it.
    auto kernel = tern2_gemm_sm90_kernel<C, false>;
    if constexpr (C::kBN == 128 && !C::kKSplit && C::kD == 1 && !C::kGrouped) {
        if (p.sched.sk_units > 0) kernel = tern2_gemm_sm90_kernel<C, true>;
    }
    TRIT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
    const CUtensorMap x_map = byte_map(a.x, a.m, a.k, kKS, C::kBN, CU_TENSOR_MAP_SWIZZLE_128B);
    const CUtensorMap codes_map =
        C::kD == 1
            ? byte_map(a.codes, a.n, a.k / fmt::kTern2CodesPerByte, kCodeRowBytes, C::kBM,
                       CU_TENSOR_MAP_SWIZZLE_NONE)
            : plane_map(a.codes, C::kD, a.n, a.k / fmt::kTern2CodesPerByte, kCodeRowBytes, C::kBM);
    // The staged epilogue stores y (or acc) through TMA: rows of n * 4 bytes on 16-byte
    // boundaries.
    void* out = a.out.acc != nullptr ? static_cast<void*>(a.out.acc) : a.out.y;
    const bool staged = a.n % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
    const CUtensorMap y_map = staged ? word_map(out, a.m, a.n, 32, C::kYRows) : CUtensorMap{};
    if (p.sched.sk_units > 0) bind_workspace(p.sched, sms, stream);
    if constexpr (C::kGrouped) {
        GroupedArgs ga;
        static_cast<Tern2GemmSm90Args&>(ga) = a;
        ga.group_pairs = FastDiv(static_cast<uint32_t>(a.group / 64));
        launch_kernel(kernel, dim3(static_cast<unsigned>(p.grid)), dim3(kThreads), C::kSmemBytes,
                      stream, true, x_map, codes_map, y_map, staged, ga, p.sched);
    } else {
        launch_kernel(kernel, dim3(static_cast<unsigned>(p.grid)), dim3(kThreads), C::kSmemBytes,
                      stream, true, x_map, codes_map, y_map, staged,
                      static_cast<const typename C::Args&>(a), p.sched);
    }
}

}  // namespace


bool tern2_gemm_sm90_built() {
    return true;
}

void tern2_gemm_sm90(const Tern2GemmSm90Args& a, int sms, cudaStream_t stream) {
    // TMA coordinates are 32-bit: the contract's m, n <= 2^31 - 1 and k / 4 fit.
    TRIT_CHECK(a.m <= INT32_MAX && a.n <= INT32_MAX && a.k <= INT32_MAX,
               "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k,
               "): m, n and k must be <= 2147483647");
    TRIT_CHECK(a.tokens == 0 || tern2_gemm_sm90_tokens_ok(a.tokens), "tern2_gemm_sm90 (m=", a.m,
               ", n=", a.n, ", k=", a.k, "): tokens per tile must be 0 (chosen by the launcher), ",
               tern2_gemm_sm90_tokens_text(), ", got ", a.tokens);
    TRIT_CHECK(a.schedule != Sm90Schedule::kStreamK || a.tokens == 0 || a.tokens == 128,
               "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k,
               "): stream-K runs 128-token tiles only, got ", a.tokens, " tokens per tile");
    TRIT_CHECK(!a.ksplit || a.schedule != Sm90Schedule::kStreamK, "tern2_gemm_sm90 (m=", a.m,
               ", n=", a.n, ", k=", a.k, "): the k-split tile runs whole tiles, not stream-K");
    TRIT_CHECK(!a.ksplit || a.tokens == 0 || a.tokens == 96 || a.tokens == 128,
               "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k,
               "): the k-split tile holds 96 or 128 tokens, got ", a.tokens);
    // One CTA per SM (384 threads x 168 registers): the time is ~ waves x work per CTA.
    // The most tiles: the fewest tokens per tile.
    TRIT_CHECK(fmt::ceil_div(a.m, int64_t{kTern2GemmSm90Tokens[0]}) *
                       fmt::ceil_div(a.n, int64_t{NarrowTile::kBM}) <=
                   INT32_MAX,
               "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k,
               "): more than 2147483647 output tiles of 128 x ", kTern2GemmSm90Tokens[0]);
    TRIT_CHECK(!a.ksplit || fmt::ceil_div(a.m, int64_t{kTern2GemmSm90Tokens[0]}) *
                                    fmt::ceil_div(a.n, int64_t{Split96Tile::kBM}) <=
                                INT32_MAX,
               "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k,
               "): more than 2147483647 output tiles of 64 x ", kTern2GemmSm90Tokens[0],
               " (the k-split tile)");
    const bool grouped = a.group > 0 && a.group < a.k;
    if (a.depth > 1 || grouped) {
        TRIT_CHECK(a.depth >= 1 && a.depth <= 4, "tern2_gemm_sm90 (m=", a.m, ", n=", a.n,
                   ", k=", a.k, "): 1 to 4 code planes, got ", a.depth);
        TRIT_CHECK(a.tokens == 0 || a.tokens == 128, "tern2_gemm_sm90 (m=", a.m, ", n=", a.n,
                   ", k=", a.k, ", depth=", a.depth, ", group=", a.group,
                   "): bt's planes and several scale groups run 128-token tiles, got ", a.tokens);
        TRIT_CHECK(a.schedule != Sm90Schedule::kStreamK && !a.ksplit, "tern2_gemm_sm90 (m=", a.m,
                   ", n=", a.n, ", k=", a.k, ", depth=", a.depth, ", group=", a.group,
                   "): bt's planes and several scale groups run whole 128-row tiles (no stream-K, ",
                   "no k split)");
        TRIT_CHECK(!grouped || (a.out.acc == nullptr && a.group % 64 == 0),
                   "tern2_gemm_sm90 (m=", a.m, ", n=", a.n, ", k=", a.k, ", group=", a.group,
                   "): several scale groups need a group of a multiple of 64 and write y only");
        const Plan p = plan(a, sms);
        switch (a.depth * 2 + (grouped ? 1 : 0)) {
            case 3:
                return launch<PlaneTile<1, true>>(a, p, sms, stream);
            case 4:
                return launch<PlaneTile<2, false>>(a, p, sms, stream);
            case 5:
                return launch<PlaneTile<2, true>>(a, p, sms, stream);
            case 6:
                return launch<PlaneTile<3, false>>(a, p, sms, stream);
            case 7:
                return launch<PlaneTile<3, true>>(a, p, sms, stream);
            case 8:
                return launch<PlaneTile<4, false>>(a, p, sms, stream);
            default:
                return launch<PlaneTile<4, true>>(a, p, sms, stream);
        }
    }
    const Plan p = plan(a, sms);
    if (p.ksplit) {
        if (p.tokens == 96) return launch<Split96Tile>(a, p, sms, stream);
        return launch<Split128Tile>(a, p, sms, stream);
    }
    if (p.wide) return launch<WideTile>(a, p, sms, stream);
    if (p.tokens == 96) return launch<Narrow96Tile>(a, p, sms, stream);
    if (p.tokens == 160) return launch<Narrow160Tile>(a, p, sms, stream);
    if (p.tokens == 176) return launch<Narrow176Tile>(a, p, sms, stream);
    if (p.tokens == 256) return launch<Narrow256Tile>(a, p, sms, stream);
    launch<NarrowTile>(a, p, sms, stream);
}

}  // namespace trit::kernels::detail
