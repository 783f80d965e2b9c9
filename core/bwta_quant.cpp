// BWTA activation quantizer: see bwta_quant.h.
#include "core/bwta_quant.h"

#include <torch/autograd.h>

#include <cmath>

#include "core/error.h"

namespace trit {
namespace {

int64_t clip_low(ActLevelMode mode, int64_t levels) {
    return mode == ActLevelMode::kBool ? 0 : -levels;
}

void check_levels(const char* where, int64_t levels) {
    TRIT_CHECK(levels >= 1, where, ": levels must be >= 1 (L levels on each side of zero; ",
               "L = 1 is ternary or bool), got ", levels);
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

// s * clip(round(a / s), lo, hi) for a 0-dim `s` of a's dtype. + 0 turns round()'s -0 into +0.
torch::Tensor quantize_with(const torch::Tensor& a, const torch::Tensor& s, int64_t lo,
                            int64_t hi) {
    return (a / s).round_().clamp_(lo, hi).add_(0.0).mul_(s);
}

// Forward: quantize_with. Backward (v = a / s, inside = lo <= v <= hi):
//   dL/da = dL/dA_hat where inside, else 0
//   dL/ds = g * sum(dL/dA_hat * (inside ? round(v) - v : clamp(v, lo, hi)))
struct ActLevelFn : torch::autograd::Function<ActLevelFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                 const torch::Tensor& s, int64_t lo, int64_t hi,
                                 double grad_scale) {
        ctx->save_for_backward({a, s});
        ctx->saved_data["lo"] = lo;
        ctx->saved_data["hi"] = hi;
        ctx->saved_data["grad_scale"] = grad_scale;
        return quantize_with(a, s, lo, hi);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
        const auto saved = ctx->get_saved_variables();
        const torch::Tensor& a = saved[0];
        const torch::Tensor& s = saved[1];
        const int64_t lo = ctx->saved_data["lo"].toInt(), hi = ctx->saved_data["hi"].toInt();
        const double grad_scale = ctx->saved_data["grad_scale"].toDouble();
        const torch::Tensor v = a / s;
        const torch::Tensor inside = (v >= lo).logical_and_(v <= hi);
        torch::Tensor grad_a, grad_s;
        if (ctx->needs_input_grad(0)) grad_a = grad[0] * inside;
        if (ctx->needs_input_grad(1)) {
            torch::Tensor ds = torch::where(inside, v.round() - v, v.clamp(lo, hi));
            grad_s = (grad[0] * ds).sum().mul_(grad_scale).reshape(s.sizes());
        }
        return {grad_a, grad_s, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

ActLevelMode parse_act_level_mode(const std::string& name) {
    for (auto m : {ActLevelMode::kLevelwise, ActLevelMode::kBool})
        if (name == act_level_mode_name(m)) return m;
    TRIT_FAIL("unknown activation level mode '", name, "'; known: levelwise, bool");
}

const char* act_level_mode_name(ActLevelMode mode) {
    switch (mode) {
        case ActLevelMode::kLevelwise:
            return "levelwise";
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
}

void ActLevelQuantizerImpl::set_scale(double value) {
    check_scale("ActLevelQuantizer::set_scale", value);
    torch::NoGradGuard no_grad;
    scale.fill_(value);
    initialized_.fill_(1);
}

torch::Tensor ActLevelQuantizerImpl::forward(const torch::Tensor& a) {
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
    const int64_t levels = options.levels();
    const double grad_scale =
        options.lsq_grad_scale() && a.numel() > 0
            ? 1.0 / std::sqrt(static_cast<double>(a.numel()) * static_cast<double>(levels))
            : 1.0;
    return ActLevelFn::apply(a, scale.to(a.device(), a.scalar_type()),
                             clip_low(options.mode(), levels), levels, grad_scale);
}

namespace {
torch::Tensor quantize_checked(const char* where, const torch::Tensor& a, double scale,
                               int64_t levels, ActLevelMode mode) {
    check_input(where, a);
    check_levels(where, levels);
    check_scale(where, scale);
    torch::NoGradGuard no_grad;
    return quantize_with(a.detach(), torch::scalar_tensor(scale, a.options()),
                         clip_low(mode, levels), levels);
}
}  // namespace

torch::Tensor act_level_quantize(const torch::Tensor& a, double scale, int64_t levels,
                                 ActLevelMode mode) {
    return quantize_checked("act_level_quantize", a, scale, levels, mode);
}

double mean_abs_quantized(const torch::Tensor& a, double scale, int64_t levels, ActLevelMode mode) {
    TRIT_CHECK(!a.defined() || a.numel() > 0, "mean_abs_quantized: the activation tensor is ",
               "empty; expected at least one value to average");
    torch::Tensor q = quantize_checked("mean_abs_quantized", a, scale, levels, mode);
    torch::NoGradGuard no_grad;
    return q.abs().to(torch::kDouble).mean().item<double>();
}

}  // namespace trit
