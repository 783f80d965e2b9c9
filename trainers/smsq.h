// Smooth Multi-stage Quantization (BWTA seed, §4): the stage plan of a run and the transition
// between stages. A stage sets one level count on every activation quantizer of the model
// (act_grid: signed quantizers get that many levels, bool ones the matching non-negative grid).
// At a transition the quantizers are calibrated on training batches under the old grid, switched
// to the new one, and their scales re-set:
//   projection  s <- p * s with p = E|A_hat under the old grid| / E|A_hat under the new grid|,
//               both at the old scale (§4.2, eq. 1: the Magnitude Alignment Projection Factor)
//   mean        s <- E|A| (eq. 6's initialisation again: the seed's "Mean" baseline)
//   none        s unchanged
// The trainer then starts a fresh optimizer and learning-rate schedule for the new stage.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/recipe.h"

namespace trit::trainers {

// Steps before and after a transition whose mean training losses give its loss jump.
inline constexpr int64_t kTransitionWindow = 50;

struct StagePlan {
    std::vector<int64_t> levels;  // level count per stage
    std::vector<int64_t> steps;   // optimizer steps per stage; they sum to the run's steps
};

// Without smsq stages a run is one stage: 3 levels (ternary) when it has level quantizers, or a
// plan without levels. With stages: smsq.stage_steps when given (their sum must be total_steps),
// else the last stage gets round(final_fraction * total) steps and the others share the rest
// evenly (earlier stages take the remainder). Every stage needs at least one step.
StagePlan plan_stages(const SmsqConfig& smsq, bool has_level_quantizers, int64_t total_steps);
// The level count the model's quantizers start with: the first stage's (3 without smsq).
int64_t first_stage_levels(const SmsqConfig& smsq);
// Whether the recipe puts any ActLevelQuantizer in the model.
bool has_level_quantizers(const QuantizationConfig& q);

// Sets every ActLevelQuantizer of `model` to the grid of `levels` levels.
void set_stage_levels(Model& model, int64_t levels);

struct QuantizerRescale {
    std::string name;
    double old_scale = 0, new_scale = 0;
    double factor = 1;  // new / old
    bool kept = false;  // the statistic was degenerate (no activation left non-zero): scale kept
};

// The transition to `levels`: calibrates every ActLevelQuantizer on `batches` training inputs
// (batch_x(i) for i < batches; forwards without gradient, the model's mode restored), switches the
// grids and re-sets the scales by `rescale` (projection | mean | none).
std::vector<QuantizerRescale> transition_quantizers(Model& model, int64_t levels,
                                                    const std::string& rescale,
                                                    const std::function<torch::Tensor(int64_t)>& batch_x,
                                                    int64_t batches);

}  // namespace trit::trainers
