// BWTA activation quantizer: see bwta_quant.h.
#include "core/bwta_quant.h"

#include <torch/autograd.h>

#include <cmath>

#include "core/error.h"

namespace trit {
namespace {

ActGrid levels_grid(ActLevelMode mode, int64_t levels) {
    return ActGrid{mode == ActLevelMode::kBool ? 0 : -levels, levels, false};
}

void check_levels(const char* where, int64_t levels) {
    TRIT_CHECK(levels >= 1, where, ": levels must be >= 1 (L levels on each side of zero; ",
               "L = 1 is ternary or bool), got ", levels);
}

void check_grid(const char* where, const ActGrid& g) {
    TRIT_CHECK(g.binary ? (g.lo == -1 && g.hi == 1) : (g.lo <= 0 && g.hi >= 1 && g.lo < g.hi), where,
               ": invalid grid lo = ", g.lo, ", hi = ", g.hi, (g.binary ? " (binary)" : ""),
               "; expected lo <= 0 < hi (binary: -1, 1)");
}

void check_scale(const char* where, double scale) {
    TRIT_CHECK(std::isfinite(scale) && scale > 0.0, where,
               ": the scale must be positive and finite, got ", scale);
}

void check_input(const char* where, const torch::Tensor& a) {
    TRIT_CHECK(
        a.defined() && a.is_floating_point(), where,
        ": expected a floating-point activation tensor, got ",
        a.defined() ? std::string(c10::toString(a.scalar_type())) : std::string("undefined"));
}

// Codes of v = a / s on the grid. + 0 turns round()'s -0 into +0.
torch::Tensor codes_of(const torch::Tensor& v, const ActGrid& g) {
    if (g.binary) return torch::where(v >= 0, torch::ones_like(v), -torch::ones_like(v));
    return v.round().clamp_(g.lo, g.hi).add_(0.0);
}

// Forward: s * codes(a / s). Backward (v = a / s, inside = lo <= v <= hi, q = codes(v)):
//   dL/da = dL/dA_hat where inside, else 0
//   dL/ds = g * sum(dL/dA_hat * (inside ? q - v : q))
struct ActLevelFn : torch::autograd::Function<ActLevelFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                 const torch::Tensor& s, int64_t lo, int64_t hi, bool binary,
                                 double grad_scale) {
        ctx->save_for_backward({a, s});
        ctx->saved_data["lo"] = lo;
        ctx->saved_data["hi"] = hi;
        ctx->saved_data["binary"] = binary;
        ctx->saved_data["grad_scale"] = grad_scale;
        return codes_of(a / s, ActGrid{lo, hi, binary}).mul_(s);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
        const auto saved = ctx->get_saved_variables();
        const ActGrid g{ctx->saved_data["lo"].toInt(), ctx->saved_data["hi"].toInt(),
                        ctx->saved_data["binary"].toBool()};
        torch::Tensor grad_a, grad_s;
        act_grid_backward(grad[0], saved[0], saved[1], g, ctx->saved_data["grad_scale"].toDouble(),
                          ctx->needs_input_grad(0) ? &grad_a : nullptr,
                          ctx->needs_input_grad(1) ? &grad_s : nullptr);
        return {grad_a, grad_s, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

void act_grid_backward(const torch::Tensor& grad, const torch::Tensor& a, const torch::Tensor& s,
                       const ActGrid& g, double grad_scale, torch::Tensor* grad_a,
                       torch::Tensor* grad_s) {
    const torch::Tensor v = a / s;
    const double lo = g.binary ? -1.0 : static_cast<double>(g.lo);
    const double hi = g.binary ? 1.0 : static_cast<double>(g.hi);
    const torch::Tensor inside = (v >= lo).logical_and_(v <= hi);
    if (grad_a) *grad_a = grad * inside;
    if (grad_s) {
        const torch::Tensor q = codes_of(v, g);
        torch::Tensor ds = torch::where(inside, q - v, q);
        *grad_s = (grad * ds).sum().mul_(grad_scale).reshape(s.sizes());
    }
}

ActGrid act_grid(int64_t count, ActLevelMode mode) {
    TRIT_CHECK(count >= 2, "activation grid: expected at least 2 levels, got ", count);
    if (mode == ActLevelMode::kBool) return ActGrid{0, count % 2 ? (count - 1) / 2 : count - 1, false};
    if (count % 2) return ActGrid{-(count - 1) / 2, (count - 1) / 2, false};
    if (count == 2) return ActGrid{-1, 1, true};
    return ActGrid{-count / 2, count / 2 - 1, false};
}

std::string describe_grid(const ActGrid& g) {
    if (g.binary) return "{-1, +1}";
    return "[" + std::to_string(g.lo) + ", " + std::to_string(g.hi) + "]";
}

ActLevelMode parse_act_level_mode(const std::string& name) {
    for (auto m : {ActLevelMode::kSigned, ActLevelMode::kBool})
        if (name == act_level_mode_name(m)) return m;
    TRIT_FAIL("unknown activation level mode '", name, "'; known: signed, bool");
}

const char* act_level_mode_name(ActLevelMode mode) {
    switch (mode) {
        case ActLevelMode::kSigned:
            return "signed";
        case ActLevelMode::kBool:
            return "bool";
    }
    return "?";
}

ActLevelQuantizerImpl::ActLevelQuantizerImpl(const ActLevelQuantizerOptions& options_)
    : options(options_) {
    reset();
}

void ActLevelQuantizerImpl::reset() {
    check_levels("ActLevelQuantizer", options.levels());
    grid_ = levels_grid(options.mode(), options.levels());
    scale = register_parameter("scale", torch::ones({}));
    initialized_ = register_buffer("initialized", torch::zeros({}, torch::kBool));
}

double ActLevelQuantizerImpl::scale_value() const {
    return scale.item<double>();
}

bool ActLevelQuantizerImpl::initialized() const {
    return initialized_.is_nonzero();
}

void ActLevelQuantizerImpl::initialize_scale(const torch::Tensor& a) {
    check_input("ActLevelQuantizer::initialize_scale", a);
    TRIT_CHECK(a.numel() > 0,
               "ActLevelQuantizer::initialize_scale: the batch is empty; expected at least one "
               "activation to take mean|A| from (eq. 6)");
    double mean_abs = 0.0;
    {
        torch::NoGradGuard no_grad;
        mean_abs = a.detach().abs().to(torch::kDouble).mean().item<double>();
    }
    TRIT_CHECK(std::isfinite(mean_abs) && mean_abs > 0.0,
               "ActLevelQuantizer::initialize_scale: the first batch has mean|A| = ", mean_abs,
               "; expected a positive finite mean to initialise the scale from (eq. 6): an ",
               "all-zero or non-finite batch?");
    set_scale(mean_abs);
}

void ActLevelQuantizerImpl::set_levels(int64_t levels) {
    check_levels("ActLevelQuantizer::set_levels", levels);
    options.levels(levels);
    grid_ = levels_grid(options.mode(), levels);
}

void ActLevelQuantizerImpl::set_grid(const ActGrid& grid) {
    check_grid("ActLevelQuantizer::set_grid", grid);
    TRIT_CHECK(options.mode() == ActLevelMode::kSigned || grid.lo == 0,
               "ActLevelQuantizer::set_grid: a bool quantizer takes grids from 0 up, got ",
               describe_grid(grid));
    grid_ = grid;
}

double ActLevelQuantizerImpl::grad_scale(int64_t numel) const {
    return options.lsq_grad_scale() && numel > 0
               ? 1.0 / std::sqrt(static_cast<double>(numel) * static_cast<double>(grid_.q_max()))
               : 1.0;
}

void ActLevelQuantizerImpl::begin_calibration(const ActGrid& next) {
    check_grid("ActLevelQuantizer::begin_calibration", next);
    calibrating_ = true;
    next_grid_ = next;
    calibration_ = {};
}

ActCalibration ActLevelQuantizerImpl::end_calibration() {
    TRIT_CHECK(calibrating_, "ActLevelQuantizer::end_calibration: not calibrating");
    calibrating_ = false;
    return calibration_;
}

void ActLevelQuantizerImpl::observe(const torch::Tensor& a) {
    check_input("ActLevelQuantizer", a);
    // The buffer is read (a host sync on a GPU) only until it is found set.
    if (!seen_initialized_) {
        if (!initialized()) initialize_scale(a);
        seen_initialized_ = true;
    }
    // The learned scale's sanity check reads it back: on the CPU only, where that is free; on a
    // GPU it would stall every forward (a diverged scale shows there as a non-finite loss).
    if (scale.is_cpu()) {
        const double s = scale_value();
        TRIT_CHECK(std::isfinite(s) && s > 0.0, "ActLevelQuantizer: the learned scale is ", s,
                   "; expected a positive finite value (a diverging step? lower the scale's "
                   "learning rate)");
    }
    if (calibrating_) {
        torch::NoGradGuard no_grad;
        const torch::Tensor x = a.detach().to(torch::kDouble);
        const torch::Tensor s = scale.detach().to(x.device(), torch::kDouble);
        const torch::Tensor v = x / s;
        calibration_.sum_abs += x.abs().sum().item<double>();
        calibration_.sum_abs_last += (codes_of(v, grid_) * s).abs().sum().item<double>();
        calibration_.sum_abs_next += (codes_of(v, next_grid_) * s).abs().sum().item<double>();
        calibration_.count += a.numel();
    }
}

void ActLevelQuantizerImpl::set_scale(double value) {
    check_scale("ActLevelQuantizer::set_scale", value);
    torch::NoGradGuard no_grad;
    scale.fill_(value);
    initialized_.fill_(1);
}

torch::Tensor ActLevelQuantizerImpl::forward(const torch::Tensor& a) {
    observe(a);
    return ActLevelFn::apply(a, scale.to(a.device(), a.scalar_type()), grid_.lo, grid_.hi,
                             grid_.binary, grad_scale(a.numel()));
}

namespace {
torch::Tensor quantize_checked(const char* where, const torch::Tensor& a, double scale,
                               const ActGrid& grid) {
    check_input(where, a);
    check_grid(where, grid);
    check_scale(where, scale);
    torch::NoGradGuard no_grad;
    const torch::Tensor s = torch::scalar_tensor(scale, a.options());
    return codes_of(a.detach() / s, grid).mul_(s);
}
}  // namespace

torch::Tensor act_grid_codes(const torch::Tensor& a, const torch::Tensor& scale, const ActGrid& grid) {
    torch::NoGradGuard no_grad;
    return codes_of(a.detach() / scale.detach().to(a.device(), a.scalar_type()), grid);
}

torch::Tensor act_grid_quantize(const torch::Tensor& a, double scale, const ActGrid& grid) {
    return quantize_checked("act_grid_quantize", a, scale, grid);
}

double mean_abs_quantized(const torch::Tensor& a, double scale, const ActGrid& grid) {
    TRIT_CHECK(!a.defined() || a.numel() > 0, "mean_abs_quantized: the activation tensor is ",
               "empty; expected at least one value to average");
    torch::Tensor q = quantize_checked("mean_abs_quantized", a, scale, grid);
    torch::NoGradGuard no_grad;
    return q.abs().to(torch::kDouble).mean().item<double>();
}

torch::Tensor act_level_quantize(const torch::Tensor& a, double scale, int64_t levels,
                                 ActLevelMode mode) {
    check_levels("act_level_quantize", levels);
    return quantize_checked("act_level_quantize", a, scale, levels_grid(mode, levels));
}

double mean_abs_quantized(const torch::Tensor& a, double scale, int64_t levels, ActLevelMode mode) {
    check_levels("mean_abs_quantized", levels);
    return mean_abs_quantized(a, scale, levels_grid(mode, levels));
}

}  // namespace trit
