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

// The tile of a launch: 256 (wide) or 128 weight rows, and one of kTern2GemmSm90Tokens (wgmma's
// N; the wide tile has 128).
struct Tern2GemmSm90Tile {
    bool wide = false;
    int tokens = 128;
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

// Whether an auto launch of m x n x k on `sms` SMs runs stream-K: its 128 x 128 tiles fill at
// most half the SMs and k is long (>= 48 k-tiles of 128 columns). The dispatcher weighs it too.
inline bool tern2_gemm_sm90_stream_k(int64_t m, int64_t n, int64_t k, int sms) {
    const int64_t tiles = (m + 127) / 128 * ((n + 127) / 128), ktiles = (k + 127) / 128;
    return 2 * tiles <= sms && ktiles >= 48;
}

// The launcher's tile: outside stream-K, from m = 256, the 128-row tile with another token count
// where it costs less than both 128-token tiles (e.g. on 132 SMs at m = 2048: 2560 x 2560
// takes 2 waves of 128 x 160 instead of 3 of 128 x 128, 6912 x 2560 5 waves of 128 x 176
// instead of 7 of 128 x 128, 768 x 768 one wave of 132 tiles of 128 x 96 instead of 96 of
// 128 x 128, 4096 x 4096 2 waves of 128 x 256 instead of 2 of 256 x 128, decoding each weight for
// twice the tokens); below m = 256 only 96 tokens that way; else tern2_gemm_sm90_tile_128. 96
// tokens read more x and codes from L2 per MAC than 128 and are taken only for k <= 4096: on
// 2560 x 6912 they lost 12 % at m = 384 where the cost says they gain (H100, session 23). Below
// m = 256 (session 32, us, 128 / 96 tokens a tile): m = 32 3072 x 768 5.46 / 5.22; m = 64 768 x 768
// 5.74 / 5.47, 6912 x 2560 11.47 / 10.84; m = 128 4096 x 4096 16.66 / 15.79, 3072 x 768 6.02 / 5.51.
inline Tern2GemmSm90Tile tern2_gemm_sm90_tile(int64_t m, int64_t n, int64_t k, int sms) {
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
