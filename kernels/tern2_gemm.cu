// tern2 x int8 GEMM on the int8 tensor cores (see kernels/tern2_gemm.h). One CTA computes a
// (BM, BN) output tile over a range of k: cp.async streams k-tiles of x (BM, KS) and of the packed
// codes (BN, KS / 4) through a STAGES-deep shared-memory ring; warps build mma fragments from
// shared memory (x permuted, codes decoded with __byte_perm) and run mma.sync m16n8k32 s8 into
// int32. Small grids split k over a thread block cluster and add the partial tiles through
// distributed shared memory (integer sums: exact in any order); with several scale groups, at m <=
// 16 only, each CTA sends its groups' float terms to the CTA owning their outputs, which adds them
// in group order (the CPU's float sum, bit for bit). The same kernel, reading d code
// planes a k-tile, is the bt GEMM (kernels/bt_gemm.h: bt_gemm and its rules are at the end of this
// file). No LibTorch here.
#include "kernels/tern2_gemm.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <type_traits>

#include "core/error.h"
#include "exporters/formats/bt.h"
#include "exporters/formats/common.h"
#include "exporters/formats/tern2.h"
#include "kernels/bt_gemm.h"
#include "kernels/cluster.cuh"
#include "kernels/cuda_check.h"
#include "kernels/epilogue.cuh"
#include "kernels/launch.h"
#include "kernels/pdl.cuh"
#include "kernels/tern2_gemm_sm90.h"

namespace trit::kernels {
namespace {

namespace fmt = trit::formats;

constexpr int kWarp = 32;
// Columns of one mma pair: each of a warp's 4 threads per weight row decodes one 32-bit word
// (16 codes), i.e. the B fragments of two m16n8k32 mmas.
constexpr int kChunk = 64;
constexpr int kChunkCodeBytes = kChunk / fmt::kTern2CodesPerByte;  // 16: one cp.async granule
constexpr int kGranule = 16;                                       // cp.async bytes
constexpr int kMaxSplit = 8;                                       // portable cluster size
constexpr int64_t kMaxNTiles = 65535;                              // grid.y limit
constexpr int kMinBN = 64;  // the n rule's tile width: every call can fall back to a tile this wide

// A CTA tile: WM x WN warps, each computing (MI * 16, NI * 8) outputs; KS columns per k-tile.
// Shared-memory rows are padded so that the fragment loads are free of bank conflicts:
//   x rows of KS + 64 bytes: the 8 lanes of a 16-byte load phase (2 rows x 4 threads) cover
//     both 64-byte halves of the 128-byte bank window (KS % 128 == 0);
//   code rows of KS / 4 + 16 bytes (an odd number of 16-byte units): the 8 rows of a 32-bit load
//     land on 8 distinct 4-bank groups.
// The output tile is staged through the same memory (int32, rows of BN + 8) for coalesced stores
// and the split-k reduction.
template <int MI, int NI, int WM, int WN, int KS, int STAGES>
struct Tile {
    static constexpr int kMI = MI, kNI = NI, kWM = WM, kKS = KS, kStages = STAGES;
    static constexpr int kBM = WM * MI * 16, kBN = WN * NI * 8;
    static constexpr int kThreads = WM * WN * kWarp;
    static constexpr int kXStride = KS + 64;
    static constexpr int kCStride = KS / fmt::kTern2CodesPerByte + 16;
    static constexpr int kStageBytes = kBM * kXStride + kBN * kCStride;
    static constexpr int kRedStride = kBN + 8;
    static constexpr int kRedBytes = kBM * kRedStride * 4;
    static constexpr int kSmemBytes =
        STAGES * kStageBytes > kRedBytes ? STAGES* kStageBytes : kRedBytes;
    static_assert(KS % 128 == 0 && STAGES >= 2 && kBN >= 32, "see the padding note above");
};

// The shared-memory ring of tile T reading D code planes a k-tile (bt's trit planes,
// kernels/bt_gemm.h; tern2: D = 1, T's own sizes): the planes' rows of a stage follow each other.
template <class T, int D, bool kScales = false>
struct Ring {
    // kScales: the k-tile's weight scales, kScaleSlots groups of BN floats after the codes (a
    // 128-column k-tile meets at most two groups of a multiple of 64 columns).
    static constexpr int kScaleSlots = kScales ? T::kKS / 64 : 0;
    static constexpr int kScaleOffset = T::kBM * T::kXStride + D * T::kBN * T::kCStride;
    static constexpr int kStageBytes = kScaleOffset + kScaleSlots * T::kBN * 4;
    static constexpr int kSmemBytes =
        T::kStages * kStageBytes > T::kRedBytes ? T::kStages* kStageBytes : T::kRedBytes;
    static_assert(D > 1 || kScales ||
                  (kStageBytes == T::kStageBytes && kSmemBytes == T::kSmemBytes));
};

// Whether tile T's grouped kernel stages the weight scales in the ring (Ring<T, D, true>) or
// loads each thread's scales of the next group into registers at a group's end. H200, bt2 with
// groups of 64 (BENCHMARKS.md, session 49): staging takes 13-19 % off every m = 64..2048 cell,
// where a group's end waited on its scales' global loads, but adds 3-7 % at m = 16 on three of
// four shapes, where one warp a scheduler issues the kernel's instructions back to back (ncu,
// part 3 there) and the copies add to them.
template <class T, bool kGrouped>
constexpr bool kScalesStaged = (kGrouped && T::kBM > 16);

// m <= 16 (memory bound): one m16 row of mma per warp, 4 warps along n. BN = 128 halves the x
// bytes per code byte read into shared memory (x (16, KS) against codes (BN, KS / 4)); short
// k-tiles and 6 stages keep ~20 KB of codes in flight per CTA; split-k fills the GPU.
using SmallTile = Tile<1, 4, 1, 4, 128, 6>;  // (16, 128)
// Several scale groups, to 16 tokens and above it where small_grouped_rows_pay says so: k splits
// only in the kernel's kSplit form, where choose_grouped_split says so, so the grid is mostly the
// tiles alone; (16, 64) tiles launch twice SmallTile's CTAs (bt's groups of 64 on 4096 x 14336: 64
// instead of 32).
using SmallGroupedTile = Tile<1, 2, 1, 4, 128, 6>;  // (16, 64)
// The same with one n8 a warp: four times SmallTile's CTAs where n <= 65535 * 32 (the grid's y).
using SmallGroupedTile32 = Tile<1, 1, 1, 4, 128, 6>;  // (16, 32)
// m <= 256, and grouped products above 16 tokens on large grids: warp tile (32, 32).
using MidTile = Tile<2, 4, 2, 2, 128, 4>;  // (64, 64)
// m > 256: warp tile (64, 64) amortizes the decode over 4 m16 rows and the x permute over 8 n8.
using LargeTile = Tile<4, 8, 2, 2, 128, 3>;  // (128, 128)

struct GemmArgs {
    const uint8_t* codes;  // (n, k / 4)
    const int8_t* x;       // (m, k)
    int64_t m, n, k, group, groups;
    int ktiles;  // ceil(k / KS)
    ProductOut out;
    bool codes_early;  // PackedWeights::pdl: the first k-tiles of codes load before pdl_wait()
    bool vector_out;   // n % 4 = 0 and y (acc) 16-byte aligned: 16-byte stores of 4 outputs
    // Grouped products split over a cluster (gridDim.z > 1, 16-row tiles): each split takes whole
    // units of unit_tiles k-tiles (lcm(group, KS) columns: its groups are whole) and its y terms go
    // to the shared memory of the CTA that owns their outputs (see the kernel). Unused otherwise.
    int unit_tiles = 1;
};

// bt: codes is the first of D trit planes (kernels/bt_gemm.h), each plane_bytes further on. A
// separate type, so that the tern2 kernel's parameter is GemmArgs alone.
struct PlaneGemmArgs : GemmArgs {
    int64_t plane_bytes;  // n * k / 4
};

template <int D>
using GemmArgsOf = std::conditional_t<D == 1, GemmArgs, PlaneGemmArgs>;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; zero-fills the destination when !valid (src is not read then).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

// 4-byte global -> shared copy (cp.async.ca: sizes below 16 bytes), zero-filled when !valid.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// d += a (16x32, row) * b (32x8, col), int8 in, int32 accumulate.
__device__ __forceinline__ void mma_s8(int32_t (&d)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
    __trap();         // the launcher refuses devices older than sm_80
#endif
}

// The k permutation of one 64-column chunk c (columns 64c .. 64c + 63 of the k-tile). Thread t
// of a fragment's group of 4 owns columns 16t .. 16t + 15 of the chunk; the even mma of the pair
// takes their even columns, the odd mma the odd ones:
//   mma p, k-slot 4t + e      <-> column 16t + 2e + p
//   mma p, k-slot 16 + 4t + e <-> column 16t + 8 + 2e + p          (e = 0..3, p = 0, 1)
// which is exactly what the __byte_perm decode of the code word yields, so only x is shuffled.

// A fragments of rows r (lo) and r + 8 (hi) from their 16 bytes of the chunk.
__device__ __forceinline__ void x_fragments(const uint4& lo, const uint4& hi, uint32_t (&a)[2][4]) {
    a[0][0] = __byte_perm(lo.x, lo.y, 0x6420);  // row r,     columns 0, 2, 4, 6
    a[0][1] = __byte_perm(hi.x, hi.y, 0x6420);  // row r + 8, columns 0, 2, 4, 6
    a[0][2] = __byte_perm(lo.z, lo.w, 0x6420);  // row r,     columns 8, 10, 12, 14
    a[0][3] = __byte_perm(hi.z, hi.w, 0x6420);
    a[1][0] = __byte_perm(lo.x, lo.y, 0x7531);  // odd columns
    a[1][1] = __byte_perm(hi.x, hi.y, 0x7531);
    a[1][2] = __byte_perm(lo.z, lo.w, 0x7531);
    a[1][3] = __byte_perm(hi.z, hi.w, 0x7531);
}

// B fragments from one word of 16 codes. L and H hold one 2-bit field per nibble (the nibble's
// top bit clear, so prmt copies instead of sign-replicating): L the fields of columns 0, 2, .., 14,
// H of 1, 3, .., 15. prmt's source bytes {0x00, 0x01, 0xFF, 0x00} map field 00 -> 0, 01 -> +1,
// 10 -> -1 (and the invalid 11 -> 0, as tern2_decode).
// (__byte_perm, not tern2dev::decode4: with it ptxas spilled 12-24 bytes in two of these kernels.)
__device__ __forceinline__ void code_fragments(uint32_t w, uint32_t (&b)[2][2]) {
    constexpr uint32_t kLut = 0x00FF0100u;
    const uint32_t lo = w & 0x33333333u, hi = (w >> 2) & 0x33333333u;
    b[0][0] = __byte_perm(kLut, 0, lo);        // columns 0, 2, 4, 6
    b[0][1] = __byte_perm(kLut, 0, lo >> 16);  // columns 8, 10, 12, 14
    b[1][0] = __byte_perm(kLut, 0, hi);        // columns 1, 3, 5, 7
    b[1][1] = __byte_perm(kLut, 0, hi >> 16);  // columns 9, 11, 13, 15
}

// B fragments of bt codes from the D plane words of the same 16 columns (w[i]: trit plane i),
// laid out as code_fragments': each byte is sum_i 3^i t_i. prmt maps a field to its digit t + 1
// (00 -> 1, 01 -> 2, 10 -> 0, and the invalid 11 -> 1, as tern2_decode) and Horner's rule adds
// the digits up in 32-bit multiply-adds. Plane 0's table also adds 128 - (3^D - 1) / 2 to every
// byte, so a byte ends as code + 128, in 88 .. 168 (no carry into the next byte), and one xor of
// the bytes' top bits makes it the int8 code ((c + 128) ^ 0x80 is c in two's complement for c in
// -40 .. 40): one instruction where the per-byte subtract (__vsub4) took three.
template <int D>
__device__ __forceinline__ void plane_fragments(const uint32_t (&w)[D], uint32_t (&b)[2][2]) {
    constexpr uint32_t kDigit = 0x01000201u;
    constexpr uint32_t kDigit0 =
        kDigit + static_cast<uint32_t>(128 - fmt::bt_levels(D)) * 0x01010101u;
    static_assert(fmt::bt_levels(D) <= 40, "a byte's digits plus the offset stay below 256");
    uint32_t s[2][2] = {};
#pragma unroll
    for (int i = D - 1; i >= 0; --i) {
        const uint32_t lut = i == 0 ? kDigit0 : kDigit;
        const uint32_t lo = w[i] & 0x33333333u, hi = (w[i] >> 2) & 0x33333333u;
        s[0][0] = s[0][0] * 3 + __byte_perm(lut, 0, lo);
        s[0][1] = s[0][1] * 3 + __byte_perm(lut, 0, lo >> 16);
        s[1][0] = s[1][0] * 3 + __byte_perm(lut, 0, hi);
        s[1][1] = s[1][1] * 3 + __byte_perm(lut, 0, hi >> 16);
    }
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            b[p][h] = s[p][h] ^ 0x80808080u;
}

// The first k-tile of split `split` of `splits` for a grouped product split over a cluster: whole
// units of unit_tiles k-tiles, so that a split holds whole scale groups (the last one may be
// short, or empty where there are fewer units than splits).
__device__ __forceinline__ int split_first_tile(const GemmArgs& a, int split, int splits) {
    const int64_t units = (a.ktiles + a.unit_tiles - 1) / a.unit_tiles;
    return static_cast<int>(min(int64_t{a.ktiles}, units * split / splits * a.unit_tiles));
}

// D = 1: tern2 codes; D = 2..4: bt's trit planes (kernels/bt_gemm.h). kSplit: a grouped product
// on 16-row tiles with k split over a cluster (gridDim.z CTAs; see split_y below); a separate
// kernel, so that the unsplit ones carry none of it.
template <class T, bool kGrouped, int D, bool kSplit = false>
__global__ void __launch_bounds__(T::kThreads) tern2_gemm_kernel(const GemmArgsOf<D> a) {
    // Grouped y's weight scales: staged in the ring with each k-tile where BM > 16, else loaded
    // into registers a group ahead (kScalesStaged above says why).
    constexpr bool kStaged = kScalesStaged<T, kGrouped>;
    using R = Ring<T, D, kStaged>;
    extern __shared__ __align__(16) uint8_t smem[];
    constexpr int kMI = T::kMI, kNI = T::kNI, kKS = T::kKS, kStages = T::kStages;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarp, warp = tid / kWarp;
    const int g = lane / 4, t = lane % 4;  // the mma fragments' group and thread in group
    const int wr = warp % T::kWM * kMI * 16, wc = warp / T::kWM * kNI * 8;  // warp tile origin
    const int64_t m0 = int64_t{blockIdx.x} * T::kBM, n0 = int64_t{blockIdx.y} * T::kBN;
    const int splits = static_cast<int>(gridDim.z), split = static_cast<int>(blockIdx.z);
    static_assert(!kSplit || (kGrouped && T::kBM == 16), "grouped splits are sized for 16 rows");
    const int kt0 = kSplit ? split_first_tile(a, split, splits)
                           : static_cast<int>(int64_t{a.ktiles} * split / splits);
    const int kt1 = kSplit ? split_first_tile(a, split + 1, splits)
                           : static_cast<int>(int64_t{a.ktiles} * (split + 1) / splits);

    // Copies k-tile kt of x (of the codes) into ring slot `slot`; rows past m / n and columns past
    // k are zero-filled. Each thread's 16-byte granules and their row checks are fixed when the
    // kernel starts (the k loop only adds the tile's column): granule i of x is column granule
    // tid % kXGran of row tid / kXGran + i * kXRows; granule i of the codes is column granule
    // tid % kCGran of the stage's code row cr + i * kCRows (cr = tid / kCGran; kCRows = 64 with
    // 128 threads and 128-column k-tiles), which is row (cr + i * kCRows) % BN of plane
    // (cr + i * kCRows) / BN. (Before, a loop over q = tid, tid + threads, .. recomputed every
    // granule's row and 64-bit offset each k-tile: 13 % of the grouped bt kernel's instructions.)
    constexpr int kXGran = kKS / kGranule, kXRows = T::kThreads / kXGran;
    constexpr int kXIters = T::kBM / kXRows;
    constexpr int kCGran = kKS / kChunk, kCRows = T::kThreads / kCGran;
    constexpr int kCIters = (D * T::kBN + kCRows - 1) / kCRows;
    static_assert(T::kThreads % kXGran == 0 && T::kBM % kXRows == 0 && kXIters <= 32);
    static_assert(T::kThreads % kCGran == 0 && (T::kBN % kCRows == 0 || kCRows % T::kBN == 0) &&
                  kCIters <= 32);
    const int xu = tid % kXGran, xr = tid / kXGran;
    const int64_t x_off = (m0 + xr) * a.k + xu * kGranule, x_step = kXRows * a.k;
    uint32_t x_rows = 0;  // bit i: row xr + i * kXRows of the tile is below m
#pragma unroll
    for (int i = 0; i < kXIters; ++i)
        if (m0 + xr + i * kXRows < a.m) x_rows |= 1u << i;
    const int cu = tid % kCGran, cr = tid / kCGran;
    const int cplane = cr / T::kBN, crow = cr % T::kBN;
    const int64_t row_bytes = a.k / fmt::kTern2CodesPerByte;
    int64_t c_off = (n0 + crow) * row_bytes + cu * kGranule;
    if constexpr (D > 1) c_off += cplane * a.plane_bytes;
    // Bit i: granule i's row is below n (else it is zero-filled). Where BN < 64 a granule's
    // plane may be past D too: such granules are not copied at all (their stage row is not the
    // stage's: it would be the next stage's x).
    uint32_t c_rows = 0, c_planes = 0;
#pragma unroll
    for (int i = 0; i < kCIters; ++i) {
        if (n0 + crow + i * kCRows % T::kBN < a.n) c_rows |= 1u << i;
        if (cplane + i * kCRows / T::kBN < D) c_planes |= 1u << i;
    }

    auto load_x = [&](int slot, int kt) {
        const uint32_t xs =
            smem_addr(smem + slot * R::kStageBytes) + xr * T::kXStride + xu * kGranule;
        const int64_t col = int64_t{kt} * kKS;
        const bool col_ok = col + xu * kGranule < a.k;
#pragma unroll
        for (int i = 0; i < kXIters; ++i) {
            const bool ok = col_ok && (x_rows >> i & 1u);
            const int8_t* src = ok ? a.x + x_off + i * x_step + col : a.x;
            cp_async16(xs + i * kXRows * T::kXStride, src, ok);
        }
    };
    auto load_codes = [&](int slot, int kt) {
        const uint32_t cs = smem_addr(smem + slot * R::kStageBytes + T::kBM * T::kXStride) +
                            cr * T::kCStride + cu * kGranule;
        const int64_t col = int64_t{kt} * kKS;
        const bool col_ok = col + cu * kChunk < a.k;
#pragma unroll
        for (int i = 0; i < kCIters; ++i) {
            const bool ok = col_ok && (c_rows >> i & 1u);
            int64_t at = c_off + (i * kCRows % T::kBN) * row_bytes + col / 4;
            if constexpr (D > 1) at += (i * kCRows / T::kBN) * a.plane_bytes;
            if (T::kBN < kCRows && !(c_planes >> i & 1u)) continue;
            cp_async16(cs + i * kCRows * T::kCStride, ok ? a.codes + at : a.codes, ok);
        }
    };
    // kStaged: the weight scales of the k-tile's groups ride in the ring with its x and codes,
    // so a group's end reads them from shared memory. Thread tid < 2 BN copies column
    // n0 + tid % BN's scale of the tile's (tid / BN)-th group; ld_group / ld_end track the group
    // holding the first column of the next tile to load (tiles load in increasing order).
    const int sc_col = kStaged ? tid % T::kBN : 0, sc_slot = kStaged ? tid / T::kBN : 0;
    const bool sc_copies = kStaged && a.out.y != nullptr && sc_slot < R::kScaleSlots;
    const bool sc_col_ok = kStaged && n0 + sc_col < a.n;
    const float* sc_row =
        sc_col_ok ? detail::epilogue_w_scale(a.out, n0 + sc_col, a.groups) : a.out.w_scale;
    int64_t ld_group = 0, ld_end = kStaged ? a.group : 0;
    auto load_scales = [&](int slot, int kt) {
        if constexpr (kStaged) {
            const int64_t col = int64_t{kt} * kKS;
            while (ld_end <= col)
                ++ld_group, ld_end += a.group;
            if (sc_copies) {
                const int64_t gi = ld_group + sc_slot;
                const bool ok = sc_col_ok && gi < a.groups && gi * a.group < col + kKS;
                cp_async4(smem_addr(smem + slot * R::kStageBytes + R::kScaleOffset) +
                              4u * static_cast<uint32_t>(sc_slot * T::kBN + sc_col),
                          ok ? sc_row + gi : a.out.w_scale, ok);
            }
        }
    };
    auto load_tile = [&](int slot, int kt) {
        load_x(slot, kt);
        load_codes(slot, kt);
        load_scales(slot, kt);
    };

    int32_t acc[kMI][kNI][4] = {};
    // Grouped: the finished groups' float sum per output, in increasing g (the CPU order).
    float ysum[kGrouped ? kMI : 1][kGrouped ? kNI : 1][4] = {};
    // kSplit: this split's first group (kt0 KS is a multiple of the group: see unit_tiles).
    int64_t group_index = kSplit ? int64_t{kt0} * kKS / a.group : 0;
    int64_t group_end =
        kSplit ? min(group_index * a.group + a.group, a.k) : (a.group < a.k ? a.group : a.k);
    // Grouped y, !kStaged (the 16-row tiles, kNI <= 2): the weight scales of this thread's 2 kNI
    // columns for the current group, loaded a group ahead (group g + 1's loads are issued as group
    // g's terms are added, and all of them together: one load latency a group at most, not one a
    // column). The columns' scale rows are found once, here (columns past n read row 0: their
    // outputs are not stored), so that a group's loads are one add and load a column.
    constexpr bool kRegScales = kGrouped && !kStaged;
    constexpr int kWsCols = kRegScales ? kNI : 1;
    float wsg[kWsCols][2] = {};
    const float* ws_rows[kWsCols][2];
#pragma unroll
    for (int ni = 0; ni < kWsCols; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t oj = n0 + wc + t * 2 + ni * 8 + h;
            ws_rows[ni][h] =
                kRegScales ? detail::epilogue_w_scale(a.out, oj < a.n ? oj : 0, a.groups) : nullptr;
        }
    auto load_reg_scales = [&](int64_t gi) {
#pragma unroll
        for (int ni = 0; ni < kWsCols; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                wsg[ni][h] = ws_rows[ni][h][gi];
    };

    // Grouped y split over a cluster: rank r of the S CTAs owns the tile's columns [r, r + 1) * BN
    // / S and keeps, after the ring, every group's term of its outputs: float terms[G][BM][BN / S].
    // A thread sends its terms w * float(sum) at each group's end to the owner of their columns
    // (st.shared::cluster, nothing to wait for; a thread's two columns 2t, 2t + 1 have one owner),
    // and after the loop each owner adds its outputs' terms in group order from its own shared
    // memory: the CPU's order, so y is the unsplit kernel's bit for bit.
    const bool split_y = kSplit && a.out.y != nullptr;
    const int own_cols = T::kBN / splits;
    uint32_t term_at[kNI] = {};  // owner's address of (g, 2t), group 0
    if constexpr (kSplit) {
        if (split_y) {
            detail::cluster_arrive_relaxed();  // waited for before the first remote store
            const uint32_t terms = smem_addr(smem + R::kSmemBytes);
#pragma unroll
            for (int ni = 0; ni < kNI; ++ni) {
                const int c = wc + ni * 8 + t * 2;
                const uint32_t local =
                    terms + 4u * static_cast<uint32_t>((wr + g) * own_cols + c % own_cols);
                term_at[ni] = detail::peer_addr(local, c / own_cols);
            }
        }
    }

    // Launched with PDL: x, and y below, may be the previous kernel's; the codes only where
    // PackedWeights::pdl says otherwise, and then the first stages' codes load before the wait, in
    // a commit group of their own ahead of the stages' groups (which the waits below count).
    const bool early = a.codes_early;
    if (early) {
        for (int s = 0; s < kStages - 1; ++s)
            if (kt0 + s < kt1) load_codes(s, kt0 + s);
        cp_async_commit();
    }
    detail::pdl_wait();
    if constexpr (kRegScales) {
        if (a.out.y != nullptr) load_reg_scales(kSplit ? group_index : 0);
    }
    for (int s = 0; s < kStages - 1; ++s) {
        if (kt0 + s < kt1) {
            load_x(s, kt0 + s);
            if (!early) load_codes(s, kt0 + s);
            load_scales(s, kt0 + s);
        }
        cp_async_commit();  // empty groups keep the wait count uniform
    }
    if (kSplit && split_y)
        detail::cluster_wait();  // every peer has started: its shared memory is there
    for (int kt = kt0; kt < kt1; ++kt) {
        const int i = kt - kt0;
        cp_async_wait<kStages - 2>();
        // Tile kt is visible to all, and everyone is done with slot (i - 1) % kStages, refilled
        // now.
        __syncthreads();
        if (kt + kStages - 1 < kt1) load_tile((i + kStages - 1) % kStages, kt + kStages - 1);
        cp_async_commit();

        const uint8_t* xs = smem + (i % kStages) * R::kStageBytes;
        const uint8_t* cs = xs + T::kBM * T::kXStride;
        [[maybe_unused]] const int64_t tile_group = group_index;  // holds the tile's 1st column
#pragma unroll
        for (int c = 0; c < kKS / kChunk; ++c) {
            uint32_t af[kMI][2][4];
#pragma unroll
            for (int mi = 0; mi < kMI; ++mi) {
                const uint8_t* p = xs + (wr + mi * 16 + g) * T::kXStride + c * kChunk + t * 16;
                x_fragments(*reinterpret_cast<const uint4*>(p),
                            *reinterpret_cast<const uint4*>(p + 8 * T::kXStride), af[mi]);
            }
            uint32_t bf[kNI][2][2];
#pragma unroll
            for (int ni = 0; ni < kNI; ++ni) {
                const uint8_t* p =
                    cs + (wc + ni * 8 + g) * T::kCStride + c * kChunkCodeBytes + t * 4;
                if constexpr (D == 1) {
                    code_fragments(*reinterpret_cast<const uint32_t*>(p), bf[ni]);
                } else {
                    uint32_t words[D];
#pragma unroll
                    for (int i = 0; i < D; ++i)
                        words[i] = *reinterpret_cast<const uint32_t*>(p + i * T::kBN * T::kCStride);
                    plane_fragments<D>(words, bf[ni]);
                }
            }
#pragma unroll
            for (int p = 0; p < 2; ++p)
#pragma unroll
                for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
                    for (int ni = 0; ni < kNI; ++ni)
                        mma_s8(acc[mi][ni], af[mi][p], bf[ni][p]);

            if constexpr (kGrouped) {
                // A group is whole chunks (group % 64 == 0); the last one ends at k. This thread
                // sees its CTA's groups in order: all of them, or a split's whole units (kSplit).
                if (int64_t{kt} * kKS + (c + 1) * kChunk == group_end) {
                    if (a.out.acc != nullptr) {
                        // Laundered through an empty asm so that the per-output addresses below
                        // are computed here, once per group, instead of being hoisted out of the
                        // k loop into dozens of live registers.
                        int64_t row0 = m0 + wr + g, col0 = n0 + wc + t * 2;
                        asm volatile("" : "+l"(row0), "+l"(col0));
#pragma unroll
                        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
                            for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
                                for (int e = 0; e < 4; ++e) {
                                    const int64_t oi = row0 + mi * 16 + (e / 2) * 8;
                                    const int64_t oj = col0 + ni * 8 + e % 2;
                                    if (oi < a.m && oj < a.n)
                                        a.out.acc[(oi * a.n + oj) * a.groups + group_index] =
                                            acc[mi][ni][e];
                                    acc[mi][ni][e] = 0;
                                }
                    } else if constexpr (kStaged) {
                        // This group's scales of the thread's columns, from the tile's stage.
                        const float* sc = reinterpret_cast<const float*>(xs + R::kScaleOffset) +
                                          (group_index - tile_group) * T::kBN + wc + t * 2;
#pragma unroll
                        for (int ni = 0; ni < kNI; ++ni) {
                            const float2 w = *reinterpret_cast<const float2*>(sc + ni * 8);
#pragma unroll
                            for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
                                for (int e = 0; e < 4; ++e) {
                                    ysum[mi][ni][e] = detail::epilogue_add(
                                        ysum[mi][ni][e], e % 2 == 0 ? w.x : w.y, acc[mi][ni][e]);
                                    acc[mi][ni][e] = 0;
                                }
                        }
                    } else if (kSplit && split_y) {
                        // Split (16-row tiles only): the terms go to their owner (see term_at).
                        const uint32_t group_at =
                            4u * static_cast<uint32_t>(group_index * T::kBM * own_cols);
#pragma unroll
                        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
                            for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
                                for (int h = 0; h < 2; ++h) {
                                    const uint32_t at =
                                        term_at[ni] + group_at +
                                        4u * static_cast<uint32_t>((mi * 16 + h * 8) * own_cols);
                                    detail::peer_store_f32x2(
                                        at,
                                        __fmul_rn(wsg[ni][0], __int2float_rn(acc[mi][ni][2 * h])),
                                        __fmul_rn(wsg[ni][1],
                                                  __int2float_rn(acc[mi][ni][2 * h + 1])));
                                    acc[mi][ni][2 * h] = 0;
                                    acc[mi][ni][2 * h + 1] = 0;
                                }
                        if (group_index + 1 < a.groups) load_reg_scales(group_index + 1);
                    } else {
#pragma unroll
                        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
                            for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
                                for (int e = 0; e < 4; ++e) {
                                    ysum[mi][ni][e] = detail::epilogue_add(
                                        ysum[mi][ni][e], wsg[ni][e % 2], acc[mi][ni][e]);
                                    acc[mi][ni][e] = 0;
                                }
                        if (group_index + 1 < a.groups) load_reg_scales(group_index + 1);
                    }
                    ++group_index;
                    group_end = group_end + a.group < a.k ? group_end + a.group : a.k;
                }
            }
        }
    }
    cp_async_wait<0>();
    // The next kernel may start now: this CTA only writes its outputs from here on (earlier, the
    // next call's CTAs could take SM slots from this call's later waves).
    detail::pdl_launch_dependents();
    __syncthreads();  // the ring is free: stage the output tile in it
    if constexpr (kGrouped) {
        if (a.out.acc != nullptr) return;  // stored group by group above
        if (kSplit && split_y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            // Every term has landed in its owner's shared memory (release / acquire).
            cooperative_groups::this_cluster().sync();
            const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
            const float* terms = reinterpret_cast<const float*>(smem + R::kSmemBytes);
            const int owned = T::kBM * own_cols;
            for (int o = tid; o < owned; o += T::kThreads) {
                const int r = o / own_cols, col = rank * own_cols + o % own_cols;
                const int64_t oi = m0 + r, oj = n0 + col;
                if (oi >= a.m || oj >= a.n) continue;
                float sum = 0.0f;
                const float* term = terms + o;
                int64_t gi = 0;
                for (; gi + 8 <= a.groups; gi += 8) {
                    float v[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u)
                        v[u] = term[(gi + u) * owned];
#pragma unroll
                    for (int u = 0; u < 8; ++u)
                        sum = __fadd_rn(sum, v[u]);
                }
                for (; gi < a.groups; ++gi)
                    sum = __fadd_rn(sum, term[gi * owned]);
                a.out.y[oi * a.n + oj] = detail::epilogue_finish(a.out, sum, oi, oj);
            }
#endif
            return;
        }
    }

    uint32_t* red = reinterpret_cast<uint32_t*>(smem);
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = wr + mi * 16 + g + h * 8, col = wc + ni * 8 + t * 2;
                uint2 v;
                if constexpr (kGrouped) {
                    v = make_uint2(__float_as_uint(ysum[mi][ni][2 * h]),
                                   __float_as_uint(ysum[mi][ni][2 * h + 1]));
                } else {
                    v = make_uint2(static_cast<uint32_t>(acc[mi][ni][2 * h]),
                                   static_cast<uint32_t>(acc[mi][ni][2 * h + 1]));
                }
                *reinterpret_cast<uint2*>(red + r * T::kRedStride + col) = v;
            }

    if constexpr (kGrouped) {
        // One CTA per tile (a split grouped product returned above): y from the finished groups'
        // float sums.
        __syncthreads();
        for (int e = tid; e < T::kBM * T::kBN; e += T::kThreads) {
            const int r = e / T::kBN, col = e % T::kBN;
            const int64_t oi = m0 + r, oj = n0 + col;
            if (oi < a.m && oj < a.n)
                a.out.y[oi * a.n + oj] = detail::epilogue_finish(
                    a.out, __uint_as_float(red[r * T::kRedStride + col]), oi, oj);
        }
    } else {
        // Split k: the S CTAs of a cluster hold partial tiles. A thread finishes four outputs (one
        // token, weights j .. j + 3): quads rank * threads + tid, stepping by S * threads, with one
        // 16-byte load per CTA of the cluster (ld.shared::cluster for the peers), issued together,
        // and one 16-byte store where vector_out.
        int rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (splits > 1) {
            cooperative_groups::this_cluster().sync();
            rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
        } else {
            __syncthreads();
        }
#else
        __syncthreads();  // splits == 1 before sm_90 (the launcher's rule)
#endif
        constexpr int kQuads = T::kBN / 4;
        for (int q = rank * T::kThreads + tid; q < T::kBM * kQuads; q += splits * T::kThreads) {
            const int r = q / kQuads, col = q % kQuads * 4;
            const int64_t oi = m0 + r, oj = n0 + col;
            if (oi >= a.m || oj >= a.n) continue;
            const int32_t* word = reinterpret_cast<const int32_t*>(red + r * T::kRedStride + col);
            int4 part[kMaxSplit];
#pragma unroll
            for (int c = 0; c < kMaxSplit; ++c) {
                part[c] = make_int4(0, 0, 0, 0);
                if (c < splits)
                    part[c] = c == rank ? *reinterpret_cast<const int4*>(word)
                                        : detail::peer_int4(word, c);
            }
            int32_t sum[4] = {};
#pragma unroll
            for (int c = 0; c < kMaxSplit; ++c) {
                sum[0] += part[c].x, sum[1] += part[c].y;
                sum[2] += part[c].z, sum[3] += part[c].w;
            }
            const int64_t at = oi * a.n + oj;
            if (a.out.acc != nullptr) {
                detail::store_quad<int4>(a.out.acc + at, sum, a.vector_out, oj, a.n);
                continue;
            }
            // store_output's arithmetic for one group; weights past n repeat weight j's scales.
            const float sx = a.out.x_scale[a.out.x_scale_rows == 1 ? 0 : oi];
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int64_t j = oj + e < a.n ? oj + e : oj;
                const float ws = a.out.w_scale[a.out.w_scale_rows == 1 ? 0 : j];
                const float b = a.out.bias != nullptr ? a.out.bias[j] : 0.0f;
                v[e] = __fadd_rn(__fmul_rn(detail::epilogue_add(0.0f, ws, sum[e]), sx), b);
            }
            detail::store_quad<float4>(a.out.y + at, v, a.vector_out, oj, a.n);
        }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (splits > 1) detail::cluster_sync_relaxed();  // peers may still read this CTA's tile
#endif
    }
}

// The current device's shared memory a CTA may opt in to.
int64_t max_smem_optin() {
    int device = 0, optin = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return optin;
}

// CTAs of `kernel` (`threads` threads, `smem` bytes of dynamic shared memory) that one SM of the
// current device holds at once; cached per device and size (one cache per kernel).
template <class Kernel>
int64_t resident_per_sm(Kernel kernel, int threads, int64_t smem) {
    static std::mutex mutex;
    static std::map<std::pair<int, int64_t>, int64_t> cache;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find({device, smem});
    if (it != cache.end()) return it->second;
    int blocks = 0;
    TRIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    TRIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads,
                                                                  static_cast<size_t>(smem)));
    cache.emplace(std::make_pair(device, smem), int64_t{blocks});
    return blocks;
}

// A grouped product on 16-row tiles (its y adds the groups' terms in order, so the kernel splits k
// only in its kSplit form) splits k over a cluster of S = 2, 4 or 8 CTAs (sm_90; a power of two,
// so that a thread's column pair has one owner) in whole units of lcm(group, KS) columns, where
// the owners' terms (y: G 16 BN / S floats a CTA) fit in shared memory beside the ring. The
// launcher takes the S, or no split, of least cost
//     waves (the grid over the CTAs the SMs hold at that shared memory) x (the busiest split's
//     k-tiles + kGroupedSplitFixedTiles),
// the constant standing for a CTA's fixed time (prologue, ring fill, the owners' ordered adds).
// Fitted on the H200 (docs/BENCHMARKS.md, session 50: bt2 with groups of 64 at m = 9 and 16 on the
// nine default shapes, S capped at 2, 4 and 8, against the unsplit kernel): it takes the fastest
// choice on each, or one within 1 %. us at m = 16, unsplit -> chosen: 2560 x 2560 12.2 -> 8.26 (S =
// 4; S = 8 takes two waves, 11.19); 4096 x 4096 19.6 -> 15.28 (S = 2; S = 4, 8: 18.80, 20.01);
// 2560 x 6912 -> 19.01 (S = 8); 768 x 3072 -> 4.87 (S = 8); 768 x 768 4.56 -> 3.72 (S = 4);
// 6912 x 2560 (S = 2, 4, 8: 20.46, 16.83, 23.07) and 4096 x 14336 (61.4; S = 8: 65.99) unsplit.
constexpr int64_t kGroupedSplitFixedTiles = 20;

// How launch() runs a call on tile T: `splits` CTAs of a cluster share each tile's k (1: none;
// grouped: the kernel's kSplit form, in units of unit_tiles k-tiles); `smem` bytes of dynamic
// shared memory a CTA (the ring; a grouped split adds its terms).
struct LaunchPlan {
    int splits = 1, unit_tiles = 1;
    int64_t smem = 0;
};

// The grouped split's plan (splits = 1: none), for the (16, BN) tiles, `tiles` of them; a.ktiles
// set.
template <class T, int D>
LaunchPlan choose_grouped_split(const GemmArgsOf<D>& a, int64_t tiles, int sms) {
    const int64_t ring = Ring<T, D, kScalesStaged<T, true>>::kSmemBytes;
    LaunchPlan best{1, 1, ring};
    const int64_t unit = std::lcm<int64_t>(a.group, T::kKS) / T::kKS;
    const int64_t units = fmt::ceil_div(int64_t{a.ktiles}, unit);
    if (units < 2) return best;
    const auto waves = [&](int64_t ctas, int64_t per_sm) {
        return per_sm > 0 ? fmt::ceil_div(ctas, per_sm * sms)
                          : std::numeric_limits<int64_t>::max() / 4;
    };
    int64_t best_cost =
        waves(tiles, resident_per_sm(tern2_gemm_kernel<T, true, D>, T::kThreads, ring)) *
        (a.ktiles + kGroupedSplitFixedTiles);
    const int64_t optin = max_smem_optin();
    for (int splits = 2; splits <= kMaxSplit && splits <= units; splits *= 2) {
        const int64_t terms =
            a.out.y != nullptr ? a.groups * T::kBM * (T::kBN / splits) * int64_t{4} : 0;
        if (ring + terms > optin) continue;
        const int64_t per_sm =
            resident_per_sm(tern2_gemm_kernel<T, true, D, true>, T::kThreads, ring + terms);
        const int64_t busiest = std::min<int64_t>(a.ktiles, fmt::ceil_div(units, splits) * unit);
        const int64_t cost = waves(tiles * splits, per_sm) * (busiest + kGroupedSplitFixedTiles);
        if (cost < best_cost) {
            best_cost = cost;
            best = LaunchPlan{splits, static_cast<int>(unit), ring + terms};
        }
    }
    return best;
}

// a.ktiles set (launch_mma_sync).
template <class T, bool kGrouped, int D>
LaunchPlan plan_launch(const GemmArgsOf<D>& a, int sms, bool clusters) {
    const int64_t mtiles = fmt::ceil_div(a.m, T::kBM), ntiles = fmt::ceil_div(a.n, T::kBN);
    LaunchPlan p;
    p.smem = Ring<T, D, kScalesStaged<T, kGrouped>>::kSmemBytes;
    // Split k when the tiles alone leave SMs idle (m small): up to 2 CTAs per SM, at least one
    // k-tile per split, at most a portable cluster. Grouped products split on 16-row tiles only,
    // by choose_grouped_split (their y adds the groups' terms in order; see the kernel's split_y).
    if (!clusters || mtiles * ntiles >= 2 * int64_t{sms}) return p;
    if constexpr (kGrouped && T::kBM == 16) {
        p = choose_grouped_split<T, D>(a, mtiles * ntiles, sms);
    } else if constexpr (!kGrouped) {
        const int64_t want = fmt::ceil_div(2 * int64_t{sms}, mtiles * ntiles);
        p.splits = static_cast<int>(std::min<int64_t>({want, kMaxSplit, a.ktiles}));
    }
    return p;
}

template <class T, bool kGrouped, int D = 1>
void launch(GemmArgsOf<D> a, int sms, bool clusters, cudaStream_t stream) {
    const LaunchPlan p = plan_launch<T, kGrouped, D>(a, sms, clusters);
    a.unit_tiles = p.unit_tiles;
    const auto run = [&](auto kernel) {
        TRIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(p.smem)));
        const dim3 grid(static_cast<unsigned>(fmt::ceil_div(a.m, T::kBM)),
                        static_cast<unsigned>(fmt::ceil_div(a.n, T::kBN)),
                        static_cast<unsigned>(p.splits));
        detail::launch_kernel_clustered(kernel, grid, dim3(T::kThreads), p.smem, stream, true,
                                        dim3(1, 1, static_cast<unsigned>(p.splits)), a);
        TRIT_CUDA_CHECK_LAST();
    };
    if constexpr (kGrouped && T::kBM == 16) {
        if (p.splits > 1) return run(tern2_gemm_kernel<T, true, D, true>);
    }
    run(tern2_gemm_kernel<T, kGrouped, D>);
}

// Grouped products above 16 tokens run the (64, 64) tile, or the 16-row tiles (with their k split
// where choose_grouped_split says so) where those take less time by a cost of the busiest SM:
//     max(k-tiles x latency, ceil(CTAs / SMs) x k-tiles x throughput) + fixed,
// the larger of a lone CTA's walk over k (one warp a scheduler: latency-bound) and the work of the
// SM that runs the most CTAs. A (64, 64) CTA does 8 times the outputs of a (16, 32) one for about
// 4 times the time on a busy SM, but the 16-row tiles give small grids 4 times the CTAs: bt2 with
// groups of 64 on 2560 x 2560 at 64 tokens runs 40 (64, 64) CTAs. Fitted on the H200 (docs/
// BENCHMARKS.md, session 51: bt2 with groups of 64 on the nine default shapes at m = 24 to 256,
// both tiles forced): the rule takes the faster tile in 71 of 72 cells, the miss (3072 x 768 at
// m = 192) 8 % slower than the other; us a k-tile of 128 columns and us a call. Checked there on
// cells it was not fitted on (bt1, bt3, bt4 and bt2 with groups of 128 at m = 24, 64, 128 on five
// shapes; bt2 on five shapes of n = 64 to 1024 at m = 24 to 2048): within 1.3 % of the faster
// forced tile but for 3 % on one cell and two cells whose two runs of the same plan differed by
// 4-5 %. Its largest gains, bt2 with groups of 64: 768 x 3072 at m = 24 26.95 -> 6.31 us,
// 2560 x 2560 at m = 64 24.38 -> 16.71.
struct GroupedTileCost {
    double latency, throughput, fixed;
};
constexpr GroupedTileCost kMidGroupedCost{0.95, 0.88, 4.0};
constexpr GroupedTileCost kSmallGroupedCost{0.70, 0.21, 3.0};

double grouped_tile_cost(const GroupedTileCost& c, int64_t ctas, int64_t ktiles, int sms) {
    return std::max(
               static_cast<double>(ktiles) * c.latency,
               static_cast<double>(fmt::ceil_div(ctas, int64_t{sms}) * ktiles) * c.throughput) +
           c.fixed;
}

bool small_grouped_rows_pay(int64_t m, int64_t n, int64_t k, int sms) {
    if (m <= 16) return true;
    static_assert(SmallGroupedTile32::kKS == MidTile::kKS);
    const int64_t ktiles = fmt::ceil_div(k, int64_t{MidTile::kKS});
    const int64_t small_bn =
        n <= kMaxNTiles * SmallGroupedTile32::kBN ? SmallGroupedTile32::kBN : SmallGroupedTile::kBN;
    const int64_t small_ctas = fmt::ceil_div(m, int64_t{16}) * fmt::ceil_div(n, small_bn);
    const int64_t mid_ctas =
        fmt::ceil_div(m, int64_t{MidTile::kBM}) * fmt::ceil_div(n, int64_t{MidTile::kBN});
    return grouped_tile_cost(kSmallGroupedCost, small_ctas, ktiles, sms) <
           grouped_tile_cost(kMidGroupedCost, mid_ctas, ktiles, sms);
}

template <class T, bool kGrouped>
struct TileOf {
    using Tile = T;
    static constexpr bool kIsGrouped = kGrouped;
};

// Calls f(TileOf<tile, grouped>{}) with the mma.sync kernel's tile by m (see the Tile aliases);
// G = 1 and G > 1 are separate kernels so that the one-group path carries no group bookkeeping.
template <int D, class F>
decltype(auto) with_mma_sync_tile(const GemmArgsOf<D>& a, int sms, F&& f) {
    if (a.groups == 1) {
        if (a.m <= 16) return f(TileOf<SmallTile, false>{});
        if (a.m <= 256) return f(TileOf<MidTile, false>{});
        return f(TileOf<LargeTile, false>{});
    }
    if (!small_grouped_rows_pay(a.m, a.n, a.k, sms)) return f(TileOf<MidTile, true>{});
    if (a.n <= kMaxNTiles * SmallGroupedTile32::kBN) return f(TileOf<SmallGroupedTile32, true>{});
    return f(TileOf<SmallGroupedTile, true>{});
}

template <int D>
void launch_mma_sync(GemmArgsOf<D> a, int sms, bool clusters, cudaStream_t stream) {
    with_mma_sync_tile<D>(a, sms, [&](auto tile) {
        using Of = decltype(tile);
        a.ktiles = static_cast<int>(fmt::ceil_div(a.k, Of::Tile::kKS));
        launch<typename Of::Tile, Of::kIsGrouped, D>(a, sms, clusters, stream);
    });
}

// The tile and k splits launch_mma_sync would run the call with.
template <int D>
BtGemmPlan mma_sync_plan(GemmArgsOf<D> a, int sms, bool clusters) {
    return with_mma_sync_tile<D>(a, sms, [&](auto tile) {
        using Of = decltype(tile);
        using T = typename Of::Tile;
        a.ktiles = static_cast<int>(fmt::ceil_div(a.k, T::kKS));
        return BtGemmPlan{T::kBM, T::kBN,
                          plan_launch<T, Of::kIsGrouped, D>(a, sms, clusters).splits};
    });
}

// The current device's SM count and compute capability.
struct DeviceInfo {
    int sms = 0, major = 0, minor = 0;
};
DeviceInfo device_info() {
    DeviceInfo d;
    int device = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, device));
    return d;
}

bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

std::atomic<Tern2GemmVariant> g_variant{Tern2GemmVariant::kAuto};
std::atomic<int> g_tokens{0};

// Whether auto dispatch sends a one-group call to the wgmma kernel on an sm_90 device with `sms`
// SMs: wherever its k-split tile pays (detail::tern2_gemm_sm90_ksplit_pays, kernels/
// tern2_gemm_sm90_tile.h; H200, session 35) but at m <= 64 on n <= k with n k <= 3072^2, else by
// the rule below. There the k-split tile, whose time grows with k (its CTAs each run all of k
// for 64 rows), lost to the mma.sync kernel after 05c5f9d (H200, session 49, both forced, us
// mma.sync / k-split at m = 56 and 64: 768 x 768 3.97 / 4.14, 4.03 / 4.17; 1024 x 1024 4.09 /
// 4.54, 4.18 / 4.57; 2048 x 2048 5.76 / 6.23, 5.98 / 6.26; 2560 x 2560 6.61 / 7.11, 7.39 / 7.13;
// 3072 x 3072 7.74 / 7.82, 7.85 / 7.87), while it kept winning where n > k or n k is larger
// (1536 x 768 4.49 / 4.11, 3072 x 768 5.49 / 4.16, 4096 x 4096 9.97 / 9.63, 6912 x 2560 10.53 /
// 7.50 at m = 56) and from m = 80 (768 x 768 4.33 / 4.22). Under auto (session 50, the 7 square
// and near-square shapes above at m = 49, 56, 64, 80) it takes the faster kernel to within 1 % in
// 27 of 28 cells; at 2560 x 2560, m = 64 mma.sync takes 7.37 us against the k-split's 7.14. Its
// other CTAs own (128 weights, 96 to 256 tokens) tiles, so its time hardly changes up to m = 256
// (one wave or stream-K); the mma.sync kernel's grows with n times its 64-token tiles, and where k
// <= 1024 with m itself. Measured on the H200 (session 34: 18 shapes from 768 x 768 to 14336 x
// 4096, m = 40 to 256, both kernels forced; the rule picks the faster kernel on all 144 cases, but
// for 768 x 768 at m = 256 (a tie, 5.62 against 5.58 us)): mma.sync while
//   - k <= 1024: n m <= 147456 (3072 x 768 at m = 48 / 56: 4.80 / 5.59 against 5.29 / 5.38;
//     1024 x 1024 at m = 128 / 160: 5.45 / 6.52 against 6.39 / 6.36);
//   - k <= 4096: n ceil(m / 64) <= 5120 (2560 x 2560 at m = 128 / 160: 9.79 / 12.71 against
//     11.01 / 11.03; 4096 x 4096 at m = 64 / 80: 12.40 / 24.60 against 15.43 / 15.44);
//   - longer k (stream-K): n ceil(m / 64) <= 4096 (session 49, after 05c5f9d made the mma.sync
//     kernel 0-31 % faster: 4096 x 11008 at m = 40 / 64: 18.75 / 19.86 against 24.17 / 23.81,
//     4096 x 14336 at m = 40 / 64: 23.36 / 24.64 against 28.19 / 25.93; 2560 x 6912 at m = 80:
//     16.32 against 14.09; session 34's bound, 2560, sent the first two to wgmma);
// wgmma above m = 256 (H100, session 17: 768 x 3072 at m = 384, 17.3 against 13.3).
bool wgmma_pays(int64_t m, int64_t n, int64_t k, int sms) {
    if (m > 256) return true;
    const bool ksplit_loses = m <= 64 && n <= k && n * k <= int64_t{3072} * 3072;
    if (!ksplit_loses && detail::tern2_gemm_sm90_ksplit_pays(m, n, k, sms)) return true;
    if (m <= 16) return false;
    if (k <= 1024) return n * m > 147456;
    const int64_t width = n * fmt::ceil_div(m, int64_t{64});
    return width > (k <= 4096 ? 5120 : 4096);
}

}  // namespace

#if !defined(TRIT_HAVE_SM90A)
namespace detail {
bool tern2_gemm_sm90_built() {
    return false;
}
void tern2_gemm_sm90(const Tern2GemmSm90Args&, int, cudaStream_t) {
    TRIT_CHECK(false, "tern2_gemm_sm90: this build has no sm_90a kernels (nvcc < 12)");
}
}  // namespace detail
#endif

namespace {

// "" when the wgmma kernel can run a call of `depth` code planes, else why not (a literal: every
// tern2 and bt GEMM call asks): sm_90a code runs on 9.0 only, and several scale groups fold into
// float sums (y only, sums below 2^22).
const char* wgmma_rejects(int depth, int64_t k, int64_t group, bool acc_out, int cc_major,
                          int cc_minor) {
    if (!detail::tern2_gemm_sm90_built()) return "an sm_90a build";
    if (cc_major != 9 || cc_minor != 0) return "a compute capability 9.0 device";
    return detail::tern2_gemm_sm90_rejects(depth, k, group, fmt::bt_levels(depth), acc_out);
}

bool wgmma_runs(int64_t k, int64_t group, int cc_major, int cc_minor) {
    return fmt::acc_num_groups(k, group) == 1 &&
           *wgmma_rejects(1, k, group, false, cc_major, cc_minor) == '\0';
}

}  // namespace

Tern2GemmVariant tern2_gemm_auto_kernel(int64_t m, int64_t n, int64_t k, int64_t group,
                                        int cc_major, int cc_minor, int sms) {
    const bool wgmma = wgmma_runs(k, group, cc_major, cc_minor) && wgmma_pays(m, n, k, sms);
    return wgmma ? Tern2GemmVariant::kWgmma : Tern2GemmVariant::kMmaSync;
}

void set_tern2_gemm_variant(Tern2GemmVariant v) {
    g_variant.store(v);
}

Tern2GemmVariant tern2_gemm_variant() {
    return g_variant.load();
}

void set_tern2_gemm_tokens(int tokens) {
    TRIT_CHECK(tokens == 0 || detail::tern2_gemm_sm90_tokens_ok(tokens),
               "set_tern2_gemm_tokens: tokens per tile of the wgmma kernel must be 0 (its own ",
               "choice), ", detail::tern2_gemm_sm90_tokens_text(), ", got ", tokens);
    g_tokens.store(tokens);
}

int tern2_gemm_tokens() {
    return g_tokens.load();
}

namespace {

// The mma.sync kernel's shape rules, for tern2 codes or bt planes (`codes`, named `what`).
std::string mma_sync_rejects(const PackedWeights& w, const uint8_t* codes, const char* what,
                             const int8_t* x, int64_t m, int64_t group) {
    if (m < 1 || w.n < 1 || w.k < 1 || group < 1) return "m, n, k and group must all be >= 1";
    if (w.k % kChunk != 0) return "k must be a multiple of 64";
    if (!aligned16(x) || !aligned16(codes))
        return std::string("x and ") + what + " must be 16-byte aligned";
    if (group < w.k && group % kChunk != 0) return "group must be >= k or a multiple of 64";
    if (m > std::numeric_limits<int32_t>::max()) return "m must be <= 2147483647";
    if (w.n > kMaxNTiles * kMinBN) return "n must be <= 4194240 (65535 tiles of 64)";
    return "";
}

// The mma.sync kernel's arguments for a call its rules take; ktiles is set by launch_mma_sync.
GemmArgs mma_sync_args(const PackedWeights& w, const uint8_t* codes, const int8_t* x, int64_t m,
                       int64_t group, const ProductOut& out) {
    GemmArgs a;
    a.codes = codes;
    a.x = x;
    a.m = m;
    a.n = w.n;
    a.k = w.k;
    a.group = group;
    a.groups = fmt::acc_num_groups(w.k, group);
    a.ktiles = 0;
    a.out = out;
    a.codes_early = w.pdl;
    const void* dst = out.acc != nullptr ? static_cast<const void*>(out.acc) : out.y;
    a.vector_out = w.n % 4 == 0 && aligned16(dst);
    return a;
}

// The wgmma kernel's arguments for `depth` code planes at `codes` (tern2: 1, its codes), with the
// variant and tokens per tile in force.
detail::Tern2GemmSm90Args wgmma_args(const PackedWeights& w, const uint8_t* codes, int depth,
                                     const int8_t* x, int64_t m, int64_t group,
                                     const ProductOut& out) {
    detail::Tern2GemmSm90Args s;
    s.codes = codes;
    s.depth = depth;
    s.x = x;
    s.m = m;
    s.n = w.n;
    s.k = w.k;
    s.group = group;
    s.out = out;
    s.codes_early = w.pdl;
    s.tokens = tern2_gemm_tokens();
    const Tern2GemmVariant variant = tern2_gemm_variant();
    if (variant == Tern2GemmVariant::kWgmmaStreamK) s.schedule = detail::Sm90Schedule::kStreamK;
    s.ksplit = variant == Tern2GemmVariant::kWgmmaKSplit;
    return s;
}

}  // namespace

std::string tern2_gemm_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kTern2) return "the weights must be tern2";
    return mma_sync_rejects(w, w.a, "the packed codes", x, m, group);
}

void tern2_gemm(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                const ProductOut& out, cudaStream_t stream) {
    check_product("tern2_gemm", w, x, m, group, out);
    const std::string rule = tern2_gemm_rejects(w, x, m, group);
    TRIT_CHECK(rule.empty(), "tern2_gemm (tern2, m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group, "): ", rule);

    const DeviceInfo dev = device_info();
    const int sms = dev.sms, major = dev.major, minor = dev.minor;
    TRIT_CHECK(major >= 8, "tern2_gemm (tern2, m=", m, ", n=", w.n, ", k=", w.k, ", group=", group,
               "): needs compute capability >= 8.0 (int8 mma.sync), the device has ", major, ".x");
    const bool clusters = major >= 9;

    const Tern2GemmVariant variant = tern2_gemm_variant();
    const bool forced_wgmma = variant == Tern2GemmVariant::kWgmma ||
                              variant == Tern2GemmVariant::kWgmmaStreamK ||
                              variant == Tern2GemmVariant::kWgmmaKSplit;
    if (forced_wgmma) {
        const char* no = wgmma_rejects(1, w.k, group, out.acc != nullptr, major, minor);
        TRIT_CHECK(*no == '\0', "tern2_gemm (tern2, m=", m, ", n=", w.n, ", k=", w.k,
                   ", group=", group, "): the forced wgmma kernel needs ", no,
                   " (this device: ", major, ".", minor, ")");
    }
    if (forced_wgmma || (variant == Tern2GemmVariant::kAuto &&
                         tern2_gemm_auto_kernel(m, w.n, w.k, group, major, minor, sms) ==
                             Tern2GemmVariant::kWgmma)) {
        return detail::tern2_gemm_sm90(wgmma_args(w, w.a, 1, x, m, group, out), sms, stream);
    }

    launch_mma_sync<1>(mma_sync_args(w, w.a, x, m, group, out), sms, clusters, stream);
}

std::string bt_gemm_rejects(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group) {
    if (w.format != Format::kBt) return "the weights must be bt";
    if (w.depth < fmt::kBtMinDepth || w.depth > fmt::kBtMaxDepth) return "bt depth must be in 1..4";
    if (w.planes == nullptr) return "needs the trit planes (PackedWeights::planes, bt_to_planes)";
    return mma_sync_rejects(w, w.planes, "the planes", x, m, group);
}

// See bt_gemm.h.
constexpr int64_t kBtGemmTwoTokensMaxK = 8192;

std::string bt_gemm_dispatch_rejects(const PackedWeights& w, const int8_t* x, int64_t m,
                                     int64_t group) {
    std::string no = bt_gemm_rejects(w, x, m, group);
    if (no.empty() && m == 2 && group < w.k && w.k > kBtGemmTwoTokensMaxK)
        no = "at m = 2 with several scale groups the GEMV for k > " +
             std::to_string(kBtGemmTwoTokensMaxK);
    return no;
}

namespace {

// bt_gemm's checks, device and arguments, for `who`.
struct BtGemmCall {
    DeviceInfo dev;
    PlaneGemmArgs a;
};
BtGemmCall bt_gemm_call(const char* who, const PackedWeights& w, const int8_t* x, int64_t m,
                        int64_t group, const ProductOut& out) {
    check_product(who, w, x, m, group, out);
    const std::string rule = bt_gemm_rejects(w, x, m, group);
    TRIT_CHECK(rule.empty(), who, " (bt", w.depth, ", m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group, "): ", rule);
    BtGemmCall c;
    c.dev = device_info();
    TRIT_CHECK(c.dev.major >= 8, who, " (bt", w.depth, ", m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group,
               "): needs compute capability >= 8.0 (int8 mma.sync), the device has ", c.dev.major,
               ".x");
    static_cast<GemmArgs&>(c.a) = mma_sync_args(w, w.planes, x, m, group, out);
    c.a.plane_bytes = w.n * (w.k / fmt::kTern2CodesPerByte);
    return c;
}

}  // namespace

namespace {

// Whether bt_gemm runs a call on the wgmma kernel: forced by the variant (kWgmma; the other wgmma
// variants are refused by its launcher), or under kAuto where bt_gemm_wgmma_pays. bt1 is tern2.
bool bt_takes_wgmma(const PackedWeights& w, int64_t m, int64_t group, const ProductOut& out,
                    const DeviceInfo& dev) {
    const Tern2GemmVariant variant = tern2_gemm_variant();
    if (variant == Tern2GemmVariant::kMmaSync) return false;
    const char* no = wgmma_rejects(w.depth, w.k, group, out.acc != nullptr, dev.major, dev.minor);
    if (variant == Tern2GemmVariant::kAuto)
        return *no == '\0' && bt_gemm_wgmma_pays(m, w.n, w.k, group, dev.sms);
    TRIT_CHECK(*no == '\0', "bt_gemm (bt", w.depth, ", m=", m, ", n=", w.n, ", k=", w.k,
               ", group=", group, "): the forced wgmma kernel needs ", no,
               " (this device: ", dev.major, ".", dev.minor, ")");
    return true;
}

}  // namespace

// The wgmma kernel's (128, 128) tiles at 128 tokens where they fill half the SMs or more, above
// 128 tokens where they number 30 % of the SMs or more. First fit (128 tokens on, half the SMs):
// H200, docs/BENCHMARKS.md session 52, call 1 (bt2, groups of 64, both kernels forced on the nine
// default shapes at m = 32, 64, 128, 256, 2048; us mma.sync / wgmma): the rule takes the faster
// kernel in 44 of the 45 cells. At m = 2048 the wgmma kernel wins on all nine (2560 x 2560 159.2
// / 115.2, 4096 x 14336 1328 / 817, 768 x 768 20.1 / 15.7); at m = 128 and 256 where its tiles
// fill half the SMs (14336 x 4096 106.4 / 63.8 and 176.5 / 121.7, 6912 x 2560 at 256 68.7 /
// 41.4), and not where they do not (2560 x 2560 at 256 37.2 / 41.8, 768 x 3072 22.0 / 49.2); the
// miss, 3072 x 768 at m = 256 (48 tiles), 17.0 against 15.1. Below 128 tokens its grid is ceil(n /
// 128) CTAs of half-empty tiles (14336 x 4096 at m = 64 58.3 / 63.3). On the H100 (session 53,
// part 3: the scales' ring and the FFMA fold) that rule took the faster kernel in 26 of 27 cells
// at m = 128, 256, 2048, the same miss. cf975eb then took 11-20 % off the wgmma kernel's time
// (part 7, forced, another H100: cuBLAS FP16 within 2.5 % of the first machine's on 17 of 18
// cells), and at m = 256 it is faster than mma.sync from 40 tiles (2560 x 2560 33.8 / 36.6,
// 3072 x 768 12.6 / 16.9, 4096 x 14336 159.7 / 183.4), slower at 12 (768 x 768 12.9 / 7.6,
// 768 x 3072 40.6 / 21.7): above 128 tokens the threshold is 30 % of the SMs (40 of 132), the
// faster kernel in all nine m = 256 cells and all nine at 2048. At 128 tokens the wgmma kernel's
// new times were not measured; the first fit stays.
bool bt_gemm_wgmma_pays(int64_t m, int64_t n, int64_t k, int64_t group, int sms) {
    (void)k, (void)group;
    const int64_t tiles = fmt::ceil_div(m, int64_t{128}) * fmt::ceil_div(n, int64_t{128});
    if (m < 128) return false;
    return m == 128 ? 2 * tiles >= sms : 10 * tiles >= 3 * int64_t{sms};
}

void bt_gemm(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
             const ProductOut& out, cudaStream_t stream) {
    const BtGemmCall c = bt_gemm_call("bt_gemm", w, x, m, group, out);
    const bool clusters = c.dev.major >= 9;
    if (bt_takes_wgmma(w, m, group, out, c.dev)) {
        return detail::tern2_gemm_sm90(wgmma_args(w, w.planes, w.depth, x, m, group, out),
                                       c.dev.sms, stream);
    }
    // bt1's one plane is a tern2 matrix: the tern2 kernel.
    switch (w.depth) {
        case 1:
            return launch_mma_sync<1>(c.a, c.dev.sms, clusters, stream);
        case 2:
            return launch_mma_sync<2>(c.a, c.dev.sms, clusters, stream);
        case 3:
            return launch_mma_sync<3>(c.a, c.dev.sms, clusters, stream);
        default:
            return launch_mma_sync<4>(c.a, c.dev.sms, clusters, stream);
    }
}

BtGemmPlan bt_gemm_plan(const PackedWeights& w, const int8_t* x, int64_t m, int64_t group,
                        const ProductOut& out) {
    const BtGemmCall c = bt_gemm_call("bt_gemm_plan", w, x, m, group, out);
    const bool clusters = c.dev.major >= 9;
    if (bt_takes_wgmma(w, m, group, out, c.dev)) return BtGemmPlan{128, 128, 1, true};
    switch (w.depth) {
        case 1:
            return mma_sync_plan<1>(c.a, c.dev.sms, clusters);
        case 2:
            return mma_sync_plan<2>(c.a, c.dev.sms, clusters);
        case 3:
            return mma_sync_plan<3>(c.a, c.dev.sms, clusters);
        default:
            return mma_sync_plan<4>(c.a, c.dev.sms, clusters);
    }
}

}  // namespace trit::kernels
