// BWTA activation quantizer (seed 003, §4 and Appendix B): a learnable-scale quantizer onto
// 2L + 1 symmetric levels (levelwise; L = 1 is the ternary of eq. 4) or onto L + 1 non-negative
// levels (bool; L = 1 is the bool of eq. 3), for the Smooth Multi-stage Quantization schedule.
// Binary weights (eq. 5) are not here: they are WeightQuantMethod::kBinary of weight_quant.h with
// the straight-through weight_fake_quant.
//
// Forward, with v = A / s and the clip range [lo, hi] = [-L, L] (levelwise) or [0, L] (bool):
//   A_hat = s * clip(round(v), lo, hi)          (eq. 3, 4 and 6: A_q = s_A * quant(A, s_A))
// The seed's bool is [0, 1] only; bool mode here clips to [0, L] so that SMSQ can degrade
// non-negative activations stage by stage too, and is exactly eq. 3 at L = 1.
// round() is torch::round, which rounds halves to even: v = +-0.5 gives 0, as eq. 3 and 4 say
// (the seed's ternary is 0 on -0.5 <= v <= 0.5); for L >= 2, 1.5 and 2.5 both give 2. A negative
// input in bool mode is not an error: it clips to 0.
//
// Initialisation (eq. 6): s_A^0 = (1 / n_A) * sum_a |a|, the mean |A| of the first batch the
// module sees, with no constant factor (LSQ's 2 / sqrt(Q_P) is not used; §6.2.2 also calls this
// "the mean of absolute values"). A buffer `initialized` records it, so a checkpoint resumes.
// The level count L is configuration, not state: a resumed SMSQ run sets its stage's L again.
//
// Gradients. The seed writes the quantizers as round(clip(a / s, lo, hi)) "to enable learnable
// scaling factors" (Appendix B) and gives no boundary rule; we differentiate exactly that with a
// straight-through round and PyTorch's clamp convention (a closed interval):
//   dA_hat/dA = 1 where lo <= v <= hi, else 0                   (clipped STE)
//   dA_hat/ds = round(v) - v where lo <= v <= hi, lo where v < lo, hi where v > hi  (LSQ)
// At v = hi exactly, ds therefore gets round(hi) - hi = 0, not hi. The seed names no gradient
// scale for s; we apply LSQ's (Esser et al. 2020) default g = 1 / sqrt(numel(A) * L), with
// numel the whole tensor passed (batch included; LSQ counts per-example features), and
// ActLevelQuantizerOptions::lsq_grad_scale(false) turns it off.
//
// Stage transitions (§4.2, eq. 1): s_A^i = p * s_A^(i-1), p = E(|A^(i-1)|) / E(|A^i|), the ratio
// of the mean absolute activations of the last and the current stage; mean_abs_quantized() gives
// such means of quantized activations, and set_levels() / set_scale() apply the transition.
#pragma once

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <string>

namespace trit {

enum class ActLevelMode { kLevelwise, kBool };

ActLevelMode parse_act_level_mode(const std::string& name);  // "levelwise" or "bool"
const char* act_level_mode_name(ActLevelMode mode);

struct ActLevelQuantizerOptions {
    /* implicit */ ActLevelQuantizerOptions(ActLevelMode mode = ActLevelMode::kLevelwise,
                                            int64_t levels = 1)
        : mode_(mode), levels_(levels) {}
    TORCH_ARG(ActLevelMode, mode);           // levelwise: [-L, L]; bool: [0, L]
    TORCH_ARG(int64_t, levels);              // L >= 1, levels on each side of zero
    TORCH_ARG(bool, lsq_grad_scale) = true;  // scale dL/ds by 1 / sqrt(numel * L)
};

class ActLevelQuantizerImpl : public torch::nn::Cloneable<ActLevelQuantizerImpl> {
  public:
    explicit ActLevelQuantizerImpl(const ActLevelQuantizerOptions& options = {});

    void reset() override;
    // A_hat, same shape and dtype as `a` (floating point). Initialises the scale from `a` when
    // not yet initialised (in training and evaluation mode alike).
    torch::Tensor forward(const torch::Tensor& a);

    // Sets s = mean|a| (eq. 6) and marks the scale initialised; mean|a| must be positive and
    // finite.
    void initialize_scale(const torch::Tensor& a);
    // Replaces the level count L (>= 1) for the next forward: a stage transition.
    void set_levels(int64_t levels);
    // Writes s in place (the optimizer keeps the same parameter) and marks it initialised;
    // s must be positive and finite.
    void set_scale(double scale);

    int64_t levels() const { return options.levels(); }
    ActLevelMode mode() const { return options.mode(); }
    double scale_value() const;
    bool initialized() const;

    ActLevelQuantizerOptions options;
    torch::Tensor scale;  // learnable 0-dim s_A, parameter "scale" (1 until initialised)

  private:
    torch::Tensor initialized_;      // 0-dim buffer "initialized": non-zero once s has been set
    bool seen_initialized_ = false;  // the buffer was found set (it is not read again)
};
TORCH_MODULE(ActLevelQuantizer);

// A_hat = scale * clip(round(a / scale), lo, hi) without autograd history; bit-identical to the
// module's forward at the same scale (as a tensor of a's dtype). levels >= 1, scale > 0 finite.
torch::Tensor act_level_quantize(const torch::Tensor& a, double scale, int64_t levels,
                                 ActLevelMode mode);
// mean |A_hat| over all of `a` (non-empty), the statistic of the §4.2 projection factor.
double mean_abs_quantized(const torch::Tensor& a, double scale, int64_t levels, ActLevelMode mode);

}  // namespace trit
