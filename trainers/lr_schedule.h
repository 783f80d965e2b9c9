// Learning-rate schedule: linear warm-up from 0 to the peak over warmup_steps, then constant,
// cosine or linear decay to min_lr_ratio * peak at the last step. A pure function of the step, so
// a resumed run follows the same schedule.
#pragma once

#include <cstdint>

#include "core/recipe.h"

namespace trit::trainers {

// LR for optimizer step `step` (0-based) of `total_steps`.
double lr_at(const ScheduleConfig& schedule, double peak_lr, int64_t step, int64_t total_steps);

}  // namespace trit::trainers
