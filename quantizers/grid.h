// Quantization grids for post-training quantization: how one group of weights maps to integer codes
// given a scale, how the group's scale is chosen, and round-to-nearest (RTN) of a whole (out, in)
// weight with one scale per output row per group of `group_size` input weights.
// Limits: codes are float32 tensors of integers (as core/weight_quant.h), scales float32.
#pragma once

#include <torch/types.h>

#include <string>

namespace trit::quantizers {

// The code rule of each grid, for a weight w and its group's scale s (dequantized value s * q):
//   kAbsmean          q = clip(round(w / (s + 1e-5)), -1, 1)     s = mean|w| of the group
//   kAbsmaxThreshold  q = sign(w) where |w| > lambda * s, else 0  s = max|w| of the group
//   kBalanced         q = clip(round(w / s), -L, L), L = (3^d - 1) / 2 (d balanced trits), 0 where
//                     s = 0;                                     s = max|w| / L, or the search
//                     below
//   kBinary           q = +1 where w >= 0, else -1                s = mean|w| of the group
// Binary differs from core's BWTA binary (which takes the sign of w - mean(w)): for the dequantized
// value s * q, sign(w) gives the smallest squared error for any s > 0, and mean|w| is then the
// least-squares scale. Ternary absmean and absmax_threshold are core's formulas, per group.
enum class GridKind { kAbsmean, kAbsmaxThreshold, kBalanced, kBinary };

// How a group's scale is chosen. kSearch is for kBalanced only (a balanced grid of depth 1 is the
// round-to-nearest ternary grid, so it serves ternary too): it keeps, of the candidates
//   s_k = max|w| / L * f_k,  f_k = search_min + (1 - search_min) * k / (search_points - 1),
//   k = 0 .. search_points - 1 (f = 1, the plain max|w| / L, comes first and wins ties),
// and, for each, the least-squares refit s_k* = sum(w * q_k) / sum(q_k^2) of its codes q_k (one
// alternation), the scale whose own codes give the smallest sum((w - s * q(s))^2). Since round to
// nearest, clipped, is the best code for a given s, the result is never worse than max|w| / L.
// Defaults: 100 points in [0.2, 1]. Measured on 2000 groups of 64 each of Gaussian, Laplace and
// heavier-tailed weights, d = 1..4: a search from f = 0.02 with 491 points picked f < 0.2 only for
// 11 heavy-tailed ternary groups, and its total squared error was at most 0.13 % lower (d = 4) than
// the default's; the search's gain over max|w| / L was 40-64 % (d = 1), 22-25 % (d = 2), 6-9 %
// (d = 3), 3-6 % (d = 4). Every candidate is rounded to float32 before its codes are computed, so
// the returned scale reproduces the returned codes exactly.
enum class ScaleRule { kStatistic, kSearch };

struct Grid {
    GridKind kind = GridKind::kBalanced;
    int64_t depth = 2;                             // kBalanced: trits per weight, 1..4
    double threshold = 0.05;                       // kAbsmaxThreshold: lambda
    ScaleRule scale_rule = ScaleRule::kStatistic;  // kSearch: kBalanced only
    int64_t search_points = 100;                   // kSearch: candidates f_k, >= 2
    double search_min = 0.2;                       // kSearch: smallest f, in (0, 1)
    // Scales are fp16 numbers (what a file with fp16 scales stores): every statistic and every
    // search candidate is rounded to fp16 (through float32) before its codes are computed, so the
    // stored scale reproduces the codes exactly. A scale below fp16's range rounds to 0 (codes 0).
    bool fp16_scales = false;
};

// Convenience constructors.
Grid grid_absmean();
Grid grid_absmax_threshold(double threshold = 0.05);
Grid grid_balanced(int64_t depth, ScaleRule rule = ScaleRule::kSearch);
Grid grid_binary();

// "absmean", "absmax_threshold(0.05)", "bt2+search", "binary"; "+fp16" with fp16 scales.
std::string grid_name(const Grid& grid);
// Largest code magnitude L: 1 for the ternary and binary grids, (3^d - 1) / 2 for kBalanced.
int64_t grid_levels(const Grid& grid);
// Throws trit::Error naming the bad field (depth outside 1..4, threshold outside [0, 1), search
// on a grid other than kBalanced, search_points < 2, search_min outside (0, 1)).
void grid_check(const Grid& grid);

// The scale of each row of `w` (G, n): every row is one group of n weights (n >= 1; a partial
// group is just a narrower call). Returns (G) in w's dtype, each value a float32 (or, with
// fp16_scales, an fp16) number. The search runs as one fused loop per group on the CPU (all cores,
// float64), as tensor operations elsewhere; both follow the rule above.
torch::Tensor grid_select_scale(const Grid& grid, const torch::Tensor& w);
// The search as tensor operations (any device; grid_select_scale uses it off the CPU): the
// reference the fused CPU loop is tested against.
torch::Tensor grid_search_scale_reference(const Grid& grid, const torch::Tensor& w);
// The codes of `w` for scales `scale` broadcast against it (element-wise; w's dtype).
torch::Tensor grid_codes(const Grid& grid, const torch::Tensor& w, const torch::Tensor& scale);

// A quantized (out, in) weight with one scale per output row per group of input weights; the last
// group holds in % group_size weights when group_size does not divide in (never dropped).
struct QuantizedLayer {
    torch::Tensor codes;    // (out, in) float32 integer codes in [-L, L]
    torch::Tensor scales;   // (out, ceil(in / group_size)) float32
    torch::Tensor dequant;  // (out, in) float32: scales (each repeated over its group) * codes
    int64_t group_size = 64;
};

// scales (out, G) repeated over their groups, times codes (out, in).
torch::Tensor dequantize_groups(const torch::Tensor& codes, const torch::Tensor& scales,
                                int64_t group_size);

// Round to nearest: every group's scale from grid_select_scale, then the grid's codes. `keep`, when
// defined, is an (out, in) bool mask (e.g. prune24_mask): weights it drops are zeroed before the
// scales are chosen (the scale fits the weights that remain) and get code 0. Binary grids take no
// mask (their codes cannot be 0). Works in float64 internally.
QuantizedLayer rtn_quantize(const torch::Tensor& w, const Grid& grid, int64_t group_size = 64,
                            const torch::Tensor& keep = {});

}  // namespace trit::quantizers
