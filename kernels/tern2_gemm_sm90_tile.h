// The sm_90a tern2 GEMM's tile and work split, chosen on the host from the shape and the SM count
// alone (no CUDA: the benchmarks' option parsing and the host tests use it too). See
// kernels/tern2_gemm_sm90.h.
#pragma once

#include <cstdint>
#include <string>

namespace trit::kernels::detail {

// The tokens a tile can hold (wgmma's N; multiples of 16, <= 256), in increasing order.
inline constexpr int kTern2GemmSm90Tokens[] = {96, 128, 160, 176, 256};

// The list for messages: "96, 128, 160, 176 or 256".
inline std::string tern2_gemm_sm90_tokens_text() {
    std::string text;
    const int count = static_cast<int>(sizeof kTern2GemmSm90Tokens / sizeof *kTern2GemmSm90Tokens);
    for (int i = 0; i < count; ++i)
        text += (i == 0 ? "" : i + 1 == count ? " or " : ", ") +
                std::to_string(kTern2GemmSm90Tokens[i]);
    return text;
}

inline bool tern2_gemm_sm90_tokens_ok(int tokens) {
    for (const int t : kTern2GemmSm90Tokens)
        if (t == tokens) return true;
    return false;
}

// The tile of a launch: 256 (wide) or 128 weight rows, or 64 split over k (ksplit: both consumer
// warp groups hold the 64 rows, each every other k-tile), and one of kTern2GemmSm90Tokens (wgmma's
// N; the wide tile has 128, the k-split one 96 or 128).
struct Tern2GemmSm90Tile {
    bool wide = false;
    int tokens = 128;
    bool ksplit = false;
    int rows() const { return ksplit ? 64 : wide ? 256 : 128; }
};

// The persistent CTAs (one per SM) run ceil(tiles / sms) waves of tiles; a tile of R weight rows
// and T tokens costs about R * (T + 96) per k-tile: the wgmma and the epilogue grow with T, the
// decode of the codes, the ring's waits and the tile's start do not. 96 is fitted to the H100
// (docs/BENCHMARKS.md, session 23: each tile forced on the nine default shapes at m = 384, 512,
// 1024 and 2048; the rule below lost 0.3 % on average to the best tile, at most 5 %). The cost of
// a launch: waves x that.
inline int64_t tern2_gemm_sm90_cost(int64_t m, int64_t n, int sms, int rows, int tokens) {
    const int64_t tiles = (m + tokens - 1) / tokens * ((n + rows - 1) / rows);
    return (tiles + sms - 1) / sms * rows * (tokens + 96);
}

// 128 tokens: 256 weight rows unless 128 rows cost less (take fewer than half the waves).
inline Tern2GemmSm90Tile tern2_gemm_sm90_tile_128(int64_t m, int64_t n, int sms) {
    return {tern2_gemm_sm90_cost(m, n, sms, 256, 128) <= tern2_gemm_sm90_cost(m, n, sms, 128, 128),
            128};
}

// The k-split tile's tokens: 128 where that costs less than 96 (fewer waves), or where m = 97..128
// on k > 4096 (one token tile, not a second one a third full; H200, session 35, us, 96 / 128
// tokens at m = 128: 2560 x 6912 16.32 / 15.37, 4096 x 11008 27.81 / 22.89, but 2048 x 8192
// 16.36 / 17.53); else 96. Each consumer runs half of a tile's k-tiles, so a tile costs as a
// 64-row one.
inline int tern2_gemm_sm90_ksplit_tokens(int64_t m, int64_t n, int64_t k, int sms) {
    if (tern2_gemm_sm90_cost(m, n, sms, 64, 128) < tern2_gemm_sm90_cost(m, n, sms, 64, 96))
        return 128;
    return m > 96 && m <= 128 && k > 4096 ? 128 : 96;
}

// Whether the k-split tile pays, for 48 < m <= 256: its tiles fit in one wave, and either k <= 2n
// or, above m = 64, they are at least 32 and m > 128 or k <= 8192. Fitted on the H200
// (docs/BENCHMARKS.md, session 35: the k-split tile with 96 and 128 tokens, the 128-row tiles and
// the mma.sync kernel forced on 18 shapes at m = 56 .. 256; with the mma.sync/wgmma rule of
// kernels/tern2_gemm.cu for the rest, auto runs the fastest within 0.5 % on 131 of 144 cases, at
// most 15 % off). Where its tiles take two waves the 128-row tiles run faster; where few tiles
// hold long k (768 x 3072, 2048 x 8192 at m = 64) the mma.sync kernel's cluster split; where
// k > 8192 at m <= 128 the 128-row tiles split stream-K over every SM (4096 x 14336 at m = 96:
// 24.20 against 26.50 us), while at m > 128 they would need two token tiles (at m = 160: 35.99
// against 27.56).
inline bool tern2_gemm_sm90_ksplit_pays(int64_t m, int64_t n, int64_t k, int sms) {
    if (m <= 48 || m > 256) return false;
    const int64_t tokens = tern2_gemm_sm90_ksplit_tokens(m, n, k, sms);
    const int64_t tiles = (m + tokens - 1) / tokens * ((n + 63) / 64);
    return tiles <= sms && (k <= 2 * n || (m > 64 && tiles >= 32 && (m > 128 || k <= 8192)));
}

// Whether an auto launch of m x n x k on `sms` SMs runs stream-K: its 128 x 128 tiles fill at
// most half the SMs and k is long (>= 48 k-tiles of 128 columns). The dispatcher weighs it too.
inline bool tern2_gemm_sm90_stream_k(int64_t m, int64_t n, int64_t k, int sms) {
    const int64_t tiles = (m + 127) / 128 * ((n + 127) / 128), ktiles = (k + 127) / 128;
    return 2 * tiles <= sms && ktiles >= 48;
}

// The launcher's tile: the k-split tile where tern2_gemm_sm90_ksplit_pays; else outside stream-K,
// from m = 256, the 128-row tile with another token count
// where it costs less than both 128-token tiles (e.g. on 132 SMs at m = 2048: 2560 x 2560
// takes 2 waves of 128 x 160 instead of 3 of 128 x 128, 6912 x 2560 5 waves of 128 x 176
// instead of 7 of 128 x 128, 768 x 768 one wave of 132 tiles of 128 x 96 instead of 96 of
// 128 x 128, 4096 x 4096 2 waves of 128 x 256 instead of 2 of 256 x 128, decoding each weight for
// twice the tokens); below m = 256 only 96 tokens that way; else tern2_gemm_sm90_tile_128. 96
// tokens read more x and codes from L2 per MAC than 128 and are taken only for k <= 4096: on
// 2560 x 6912 they lost 12 % at m = 384 where the cost says they gain (H100, session 23). Below
// m = 256 (session 32, us, 128 / 96 tokens a tile): m = 32 3072 x 768 5.46 / 5.22; m = 64 768 x 768
// 5.74 / 5.47, 6912 x 2560 11.47 / 10.84; m = 128 4096 x 4096 16.66 / 15.79, 3072 x 768 6.02
// / 5.51.
inline Tern2GemmSm90Tile tern2_gemm_sm90_tile(int64_t m, int64_t n, int64_t k, int sms) {
    if (tern2_gemm_sm90_ksplit_pays(m, n, k, sms))
        return {false, tern2_gemm_sm90_ksplit_tokens(m, n, k, sms), true};
    const Tern2GemmSm90Tile t128 = tern2_gemm_sm90_tile_128(m, n, sms);
    if (tern2_gemm_sm90_stream_k(m, n, k, sms)) return t128;
    Tern2GemmSm90Tile best = t128;
    int64_t best_cost = tern2_gemm_sm90_cost(m, n, sms, t128.wide ? 256 : 128, 128);
    for (const int tokens : kTern2GemmSm90Tokens) {
        if (tokens == 128 || (tokens == 96 && k > 4096) || (m < 256 && tokens != 96)) continue;
        const int64_t cost = tern2_gemm_sm90_cost(m, n, sms, 128, tokens);
        if (cost < best_cost) best = {false, tokens}, best_cost = cost;
    }
    return best;
}

}  // namespace trit::kernels::detail
