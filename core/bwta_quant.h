// BWTA activation quantizer (seed 003, §4 and Appendix B): a learnable-scale quantizer of
// activations onto a grid of integer codes, for the Smooth Multi-stage Quantization schedule.
// Binary weights (eq. 5) are not here: they are WeightQuantMethod::kBinary of weight_quant.h.
//
// Grids (ActGrid, act_grid(count, mode)). A stage of SMSQ names a level count N:
//   signed, N odd (levelwise degradation):  codes [-(N-1)/2, (N-1)/2]   (N = 3: ternary, eq. 4)
//   signed, N even >= 4 (bitwise, k bits):  codes [-N/2, N/2 - 1]       (the seed's Practice 1)
//   signed, N = 2 (bitwise, 1 bit):         codes {-1, +1} = sign(v), 0 -> +1 (binary activations)
//   bool, N odd:   codes [0, (N-1)/2], the positive half of the signed grid (N = 3: eq. 3's bool)
//   bool, N even:  codes [0, N - 1], an unsigned k-bit integer (N = 2: bool)
// The seed's bool is [0, 1] only; the wider bool grids let SMSQ degrade non-negative activations
// stage by stage too.
//
// Forward, with v = A / s and the grid's clip range [lo, hi]:
//   A_hat = s * clip(round(v), lo, hi)          (eq. 3, 4 and 6: A_q = s_A * quant(A, s_A))
//   binary grid: A_hat = s * (v >= 0 ? +1 : -1)
// round() is torch::round, which rounds halves to even: v = +-0.5 gives 0, as eq. 3 and 4 say
// (the seed's ternary is 0 on -0.5 <= v <= 0.5); for wider grids 1.5 and 2.5 both give 2. A
// negative input to a bool grid is not an error: it clips to 0.
//
// Initialisation (eq. 6): s_A^0 = (1 / n_A) * sum_a |a|, the mean |A| of the first batch the
// module sees, with no constant factor (LSQ's 2 / sqrt(Q_P) is not used; §6.2.2 also calls this
// "the mean of absolute values"). A buffer `initialized` records it, so a checkpoint resumes.
// The grid is configuration, not state: a resumed SMSQ run sets its stage's grid again.
//
// Gradients. The seed writes the quantizers as round(clip(a / s, lo, hi)) "to enable learnable
// scaling factors" (Appendix B) and gives no boundary rule; we differentiate exactly that with a
// straight-through round and PyTorch's clamp convention (a closed interval). With q the code:
//   dA_hat/dA = 1 where lo <= v <= hi, else 0                   (clipped STE)
//   dA_hat/ds = q - v where lo <= v <= hi, else q (= lo or hi)  (LSQ)
// (binary: the range is [-1, 1].) At v = hi exactly, ds therefore gets round(hi) - hi = 0, not
// hi. The seed names no gradient scale for s; we apply LSQ's (Esser et al. 2020) default
// g = 1 / sqrt(numel(A) * Q_P), Q_P = max(-lo, hi), with numel the whole tensor passed (batch
// included; LSQ counts per-example features); ActLevelQuantizerOptions::lsq_grad_scale(false)
// turns it off.
//
// Stage transitions (§4.2, eq. 1): s_A^i = p * s_A^(i-1), p = E(|A^(i-1)|) / E(|A^i|), the ratio
// of the mean absolute quantized activations under the last and the new stage's grid, both at
// the last stage's scale. begin_calibration() / end_calibration() collect those means (and mean
// |A| for the "mean" re-initialisation) over calibration batches; set_grid() / set_scale() apply
// the transition.
#pragma once

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <algorithm>
#include <string>

namespace trit {

// signed: activations of either sign, codes symmetric around 0; bool: non-negative activations
// (attention probabilities, ReLU outputs), codes from 0 up.
enum class ActLevelMode { kSigned, kBool };

ActLevelMode parse_act_level_mode(const std::string& name);  // "signed" or "bool"
const char* act_level_mode_name(ActLevelMode mode);

// The codes of one quantizer at one stage: clip(round(v), lo, hi), or sign(v) when binary.
struct ActGrid {
    int64_t lo = -1;
    int64_t hi = 1;
    bool binary = false;  // {-1, +1}, no zero (lo = -1, hi = 1)
    int64_t count() const { return binary ? 2 : hi - lo + 1; }
    int64_t q_max() const { return std::max(-lo, hi); }  // LSQ's Q_P
    bool operator==(const ActGrid& o) const {
        return lo == o.lo && hi == o.hi && binary == o.binary;
    }
    bool operator!=(const ActGrid& o) const { return !(*this == o); }
};
// The grid of a stage with `count` levels (>= 2; a signed odd count >= 3) for `mode`: see above.
ActGrid act_grid(int64_t count, ActLevelMode mode);
// "[-1, 1]", "{-1, +1}" or "[0, 4]".
std::string describe_grid(const ActGrid& grid);

// Sums over calibration batches (begin_calibration .. end_calibration), in double.
struct ActCalibration {
    double sum_abs = 0;       // sum |A|
    double sum_abs_last = 0;  // sum |A_hat| under the grid in use
    double sum_abs_next = 0;  // sum |A_hat| under the next grid, same scale
    int64_t count = 0;        // activations seen
};

struct ActLevelQuantizerOptions {
    /* implicit */ ActLevelQuantizerOptions(ActLevelMode mode = ActLevelMode::kSigned,
                                            int64_t levels = 1)
        : mode_(mode), levels_(levels) {}
    TORCH_ARG(ActLevelMode, mode);           // signed: [-L, L]; bool: [0, L] at construction
    TORCH_ARG(int64_t, levels);              // L >= 1; set_grid() sets any grid later
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
    // Replaces the grid by [-L, L] (signed) or [0, L] (bool), L >= 1, for the next forward.
    void set_levels(int64_t levels);
    // Replaces the grid for the next forward: a stage transition.
    void set_grid(const ActGrid& grid);
    const ActGrid& grid() const { return grid_; }

    // What forward does before quantizing: initialises the scale from `a` when not yet
    // initialised and adds `a` to the calibration sums while calibrating. For layers that
    // quantize inside their own product (bwta_linear).
    void observe(const torch::Tensor& a);
    // The LSQ gradient scale forward uses for a tensor of `numel` activations.
    double grad_scale(int64_t numel) const;

    // Until end_calibration, every observed batch adds to the sums (no gradient, any mode).
    void begin_calibration(const ActGrid& next);
    ActCalibration end_calibration();
    bool calibrating() const { return calibrating_; }
    // Writes s in place (the optimizer keeps the same parameter) and marks it initialised;
    // s must be positive and finite.
    void set_scale(double scale);

    int64_t levels() const { return grid_.q_max(); }
    ActLevelMode mode() const { return options.mode(); }
    double scale_value() const;
    bool initialized() const;

    ActLevelQuantizerOptions options;
    torch::Tensor scale;  // learnable 0-dim s_A, parameter "scale" (1 until initialised)

  private:
    ActGrid grid_;
    bool calibrating_ = false;
    ActGrid next_grid_;
    ActCalibration calibration_;
    torch::Tensor initialized_;      // 0-dim buffer "initialized": non-zero once s has been set
    bool seen_initialized_ = false;  // the buffer was found set (it is not read again)
};
TORCH_MODULE(ActLevelQuantizer);

// The codes clip(round(a / scale), lo, hi) (or sign) as a tensor of a's dtype, no autograd history.
torch::Tensor act_grid_codes(const torch::Tensor& a, const torch::Tensor& scale,
                             const ActGrid& grid);
// The gradients of A_hat = s * codes(a / s) (the clipped STE and the scaled LSQ gradient above)
// for an incoming gradient `grad` (a's shape); null outputs are skipped.
void act_grid_backward(const torch::Tensor& grad, const torch::Tensor& a, const torch::Tensor& s,
                       const ActGrid& grid, double grad_scale, torch::Tensor* grad_a,
                       torch::Tensor* grad_s);
// A_hat = scale * codes, without autograd history; bit-identical to the module's forward.
torch::Tensor act_grid_quantize(const torch::Tensor& a, double scale, const ActGrid& grid);
double mean_abs_quantized(const torch::Tensor& a, double scale, const ActGrid& grid);

// A_hat = scale * clip(round(a / scale), lo, hi) without autograd history; bit-identical to the
// module's forward at the same scale (as a tensor of a's dtype). levels >= 1, scale > 0 finite.
torch::Tensor act_level_quantize(const torch::Tensor& a, double scale, int64_t levels,
                                 ActLevelMode mode);
// mean |A_hat| over all of `a` (non-empty), the statistic of the §4.2 projection factor.
double mean_abs_quantized(const torch::Tensor& a, double scale, int64_t levels, ActLevelMode mode);

}  // namespace trit
