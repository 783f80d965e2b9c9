// Quantization grids, scale selection and round-to-nearest: see grid.h.
#include "quantizers/grid.h"

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/weight_quant.h"

namespace trit::quantizers {
namespace {

// The float32 (fp16: the fp16, through float32) number nearest to each value, kept in the tensor's
// dtype: what a scale can be.
torch::Tensor to_scale_values(const Grid& grid, const torch::Tensor& x) {
    torch::Tensor f = x.to(torch::kFloat32);
    if (grid.fp16_scales) f = f.to(torch::kHalf).to(torch::kFloat32);
    return f.to(x.scalar_type());
}

// The same for one value.
double scale_value(const Grid& grid, double x) {
    const float f = static_cast<float>(x);
    return grid.fp16_scales ? static_cast<float>(c10::Half(f)) : f;
}

// round-half-even(x) for |x| <= 2^51 in the default rounding mode, as nearbyint but inlined (the
// search's inner loop; without SSE4.1 nearbyint is a libm call).
inline double round_even(double x) {
    constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
    return (x + kMagic) - kMagic;
}

// The search of search_scale for one group of n float64 weights, in one pass per candidate: the
// codes of a balanced grid (levels L) are clamp(round(w / s), -L, L), 0 where s = 0.
double search_group(const Grid& grid, const double* w, int64_t n, double levels) {
    double amax = 0;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(w[i]));
    const double base = amax / levels;
    // Clamping w / s to [-(L + 1), L + 1] before rounding gives the same codes (round is monotone)
    // and keeps round_even in range.
    const double lim = levels + 1;
    auto code = [&](double wi, double s) {
        return std::clamp(round_even(std::clamp(wi / s, -lim, lim)), -levels, levels);
    };
    auto error = [&](double s) {
        if (!(s > 0)) {
            double e = 0;
            for (int64_t i = 0; i < n; ++i) e += w[i] * w[i];
            return e;
        }
        double e = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double d = w[i] - s * code(w[i], s);
            e += d * d;
        }
        return e;
    };
    auto refit = [&](double s) {
        if (!(s > 0)) return s;
        double qq = 0, wq = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double q = code(w[i], s);
            qq += q * q;
            wq += w[i] * q;
        }
        return qq > 0 ? scale_value(grid, wq / qq) : s;
    };
    double best = scale_value(grid, base), best_err = error(best);
    auto consider = [&](double s) {
        const double e = error(s);
        if (e < best_err) {  // strict: earlier candidates win ties
            best = s;
            best_err = e;
        }
    };
    consider(refit(best));
    const int64_t points = grid.search_points;
    for (int64_t k = points - 2; k >= 0; --k) {  // f = 1 (k = points - 1) is `best` already
        const double f = grid.search_min + (1.0 - grid.search_min) * static_cast<double>(k) /
                                               static_cast<double>(points - 1);
        const double s = scale_value(grid, base * f);
        consider(s);
        consider(refit(s));
    }
    return best;
}

// search_scale on the CPU: (G, n) float64 contiguous, groups split across threads.
torch::Tensor search_scale_cpu(const Grid& grid, const torch::Tensor& w) {
    torch::Tensor wd = w.to(torch::kFloat64).contiguous();
    const int64_t groups = wd.size(0), n = wd.size(1);
    torch::Tensor out = torch::empty({groups}, wd.options());
    const double* src = wd.data_ptr<double>();
    double* dst = out.data_ptr<double>();
    const double levels = static_cast<double>(grid_levels(grid));
    at::parallel_for(0, groups, std::max<int64_t>(1, 4096 / n), [&](int64_t begin, int64_t end) {
        for (int64_t g = begin; g < end; ++g) dst[g] = search_group(grid, src + g * n, n, levels);
    });
    return out.to(w.scalar_type());
}

// Squared error of each row (G, n) for scales s (G, 1).
torch::Tensor row_error(const Grid& grid, const torch::Tensor& w, const torch::Tensor& s) {
    return (w - s * grid_codes(grid, w, s)).square_().sum(1);
}

}  // namespace

torch::Tensor grid_search_scale_reference(const Grid& grid, const torch::Tensor& w) {
    grid_check(grid);
    TRIT_CHECK(grid.scale_rule == ScaleRule::kSearch && w.dim() == 2 && w.size(1) >= 1,
               "grid_search_scale_reference: expected a search grid and (groups, n >= 1) weights");
    torch::NoGradGuard no_grad;
    const double levels = static_cast<double>(grid_levels(grid));
    torch::Tensor base = std::get<0>(w.abs().max(/*dim=*/1, /*keepdim=*/true)) / levels;  // (G, 1)
    torch::Tensor best = to_scale_values(grid, base);
    torch::Tensor best_err = row_error(grid, w, best);
    auto consider = [&](const torch::Tensor& s) {
        torch::Tensor err = row_error(grid, w, s);
        torch::Tensor better = err < best_err;  // strict: earlier candidates win ties
        best = torch::where(better.unsqueeze(1), s, best);
        best_err = torch::where(better, err, best_err);
    };
    auto refit = [&](const torch::Tensor& s) {
        torch::Tensor q = grid_codes(grid, w, s);
        torch::Tensor qq = q.square().sum(1, true), wq = (w * q).sum(1, true);
        return to_scale_values(grid, torch::where(qq > 0, wq / qq.clamp_min(1.0), s));
    };
    consider(refit(best));
    const int64_t n = grid.search_points;
    for (int64_t k = n - 2; k >= 0; --k) {  // f = 1 (k = n - 1) is `best` already
        const double f = grid.search_min + (1.0 - grid.search_min) * static_cast<double>(k) /
                                               static_cast<double>(n - 1);
        torch::Tensor s = to_scale_values(grid, base * f);
        consider(s);
        consider(refit(s));
    }
    return best.squeeze(1);
}

Grid grid_absmean() {
    Grid g;
    g.kind = GridKind::kAbsmean;
    return g;
}

Grid grid_absmax_threshold(double threshold) {
    Grid g;
    g.kind = GridKind::kAbsmaxThreshold;
    g.threshold = threshold;
    return g;
}

Grid grid_balanced(int64_t depth, ScaleRule rule) {
    Grid g;
    g.kind = GridKind::kBalanced;
    g.depth = depth;
    g.scale_rule = rule;
    return g;
}

Grid grid_binary() {
    Grid g;
    g.kind = GridKind::kBinary;
    return g;
}

std::string grid_name(const Grid& grid) {
    std::ostringstream os;
    switch (grid.kind) {
        case GridKind::kAbsmean:
            os << "absmean";
            break;
        case GridKind::kAbsmaxThreshold:
            os << "absmax_threshold(" << grid.threshold << ")";
            break;
        case GridKind::kBalanced:
            os << "bt" << grid.depth;
            break;
        case GridKind::kBinary:
            os << "binary";
            break;
    }
    if (grid.scale_rule == ScaleRule::kSearch) os << "+search";
    if (grid.fp16_scales) os << "+fp16";
    return os.str();
}

int64_t grid_levels(const Grid& grid) {
    if (grid.kind != GridKind::kBalanced) return 1;
    int64_t p = 1;
    for (int64_t i = 0; i < grid.depth; ++i)
        p *= 3;
    return (p - 1) / 2;
}

void grid_check(const Grid& grid) {
    TRIT_CHECK(grid.kind != GridKind::kBalanced || (grid.depth >= 1 && grid.depth <= 4),
               "grid: depth of a balanced grid must be 1..4, got ", grid.depth);
    TRIT_CHECK(
        grid.kind != GridKind::kAbsmaxThreshold || (grid.threshold >= 0.0 && grid.threshold < 1.0),
        "grid: threshold (lambda) of absmax_threshold must be in [0, 1), got ", grid.threshold);
    if (grid.scale_rule == ScaleRule::kSearch) {
        TRIT_CHECK(grid.kind == GridKind::kBalanced,
                   "grid: scale_rule search needs a balanced grid",
                   " (ternary round-to-nearest is balanced depth 1), got ", grid_name(grid));
        TRIT_CHECK(grid.search_points >= 2, "grid: search_points must be >= 2, got ",
                   grid.search_points);
        TRIT_CHECK(grid.search_min > 0.0 && grid.search_min < 1.0,
                   "grid: search_min must be in (0, 1), got ", grid.search_min);
    }
}

torch::Tensor grid_codes(const Grid& grid, const torch::Tensor& w, const torch::Tensor& scale) {
    switch (grid.kind) {
        case GridKind::kAbsmean:
            return (w / (scale + kAbsmeanEps)).round().clamp(-1, 1).add(0.0);  // -0 -> +0
        case GridKind::kAbsmaxThreshold:
            return torch::where(w.abs() > scale * grid.threshold, w.sign(), torch::zeros_like(w));
        case GridKind::kBalanced: {
            const double levels = static_cast<double>(grid_levels(grid));
            torch::Tensor s = scale.expand_as(w);
            return torch::where(s > 0, w / s, torch::zeros_like(w))
                .round()
                .clamp(-levels, levels)
                .add(0.0);
        }
        case GridKind::kBinary:
            return torch::where(w >= 0, torch::ones_like(w), -torch::ones_like(w));
    }
    TRIT_FAIL("grid_codes: unknown grid kind");
}

torch::Tensor grid_select_scale(const Grid& grid, const torch::Tensor& w) {
    grid_check(grid);
    TRIT_CHECK(w.dim() == 2 && w.size(1) >= 1,
               "grid_select_scale: expected (groups, n >= 1) weights, got ", w.sizes());
    torch::NoGradGuard no_grad;
    switch (grid.kind) {
        case GridKind::kAbsmean:
        case GridKind::kBinary:
            return to_scale_values(grid, w.abs().mean(1));
        case GridKind::kAbsmaxThreshold:
            return to_scale_values(grid, std::get<0>(w.abs().max(1)));
        case GridKind::kBalanced:
            if (grid.scale_rule == ScaleRule::kSearch)
                return w.device().is_cpu() ? search_scale_cpu(grid, w) : grid_search_scale_reference(grid, w);
            return to_scale_values(grid, std::get<0>(w.abs().max(1)) /
                                             static_cast<double>(grid_levels(grid)));
    }
    TRIT_FAIL("grid_select_scale: unknown grid kind");
}

torch::Tensor dequantize_groups(const torch::Tensor& codes, const torch::Tensor& scales,
                                int64_t group_size) {
    TRIT_CHECK(group_size >= 1, "dequantize_groups: group_size must be >= 1, got ", group_size);
    const int64_t in = codes.size(1);
    return codes * scales.repeat_interleave(group_size, /*dim=*/1).narrow(1, 0, in);
}

QuantizedLayer rtn_quantize(const torch::Tensor& weight, const Grid& grid, int64_t group_size,
                            const torch::Tensor& keep) {
    grid_check(grid);
    TRIT_CHECK(weight.dim() == 2 && weight.size(0) >= 1 && weight.size(1) >= 1,
               "rtn_quantize: expected a 2-D (out, in) weight, got ", weight.sizes());
    TRIT_CHECK(group_size >= 1, "rtn_quantize: group_size must be >= 1, got ", group_size);
    TRIT_CHECK(!keep.defined() || keep.sizes() == weight.sizes(),
               "rtn_quantize: keep mask must have the weight's shape ", weight.sizes(), ", got ",
               keep.sizes());
    TRIT_CHECK(!keep.defined() || grid.kind != GridKind::kBinary,
               "rtn_quantize: a keep (pruning) mask needs a grid with a zero code, got binary");
    torch::NoGradGuard no_grad;
    torch::Tensor w = weight.detach().to(torch::kFloat64);
    torch::Tensor keep_f;
    if (keep.defined()) {
        keep_f = keep.to(w.device()).to(torch::kBool);
        w = w * keep_f;
    }
    const int64_t out = w.size(0), in = w.size(1);
    const int64_t groups = (in + group_size - 1) / group_size, full = in / group_size;
    torch::Tensor scales = torch::empty({out, groups}, w.options());
    torch::Tensor codes = torch::empty_like(w);
    if (full > 0) {  // every whole group in one call: (out * full, group_size)
        torch::Tensor v = w.narrow(1, 0, full * group_size).reshape({out * full, group_size});
        torch::Tensor s = grid_select_scale(grid, v);
        codes.narrow(1, 0, full * group_size)
            .copy_(grid_codes(grid, v, s.unsqueeze(1)).reshape({out, full * group_size}));
        scales.narrow(1, 0, full).copy_(s.reshape({out, full}));
    }
    if (groups > full) {  // the partial last group: in % group_size weights
        torch::Tensor v = w.narrow(1, full * group_size, in - full * group_size);
        torch::Tensor s = grid_select_scale(grid, v);
        codes.narrow(1, full * group_size, v.size(1)).copy_(grid_codes(grid, v, s.unsqueeze(1)));
        scales.narrow(1, full, 1).copy_(s.unsqueeze(1));
    }
    if (keep_f.defined()) codes = codes * keep_f;
    QuantizedLayer r;
    r.group_size = group_size;
    r.codes = codes.to(torch::kFloat32).add(0.0).to(weight.device());
    r.scales = scales.to(torch::kFloat32).to(weight.device());
    r.dequant = dequantize_groups(r.codes, r.scales, group_size);
    return r;
}

}  // namespace trit::quantizers
