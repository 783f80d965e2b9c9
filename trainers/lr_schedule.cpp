// Warm-up + decay schedule: see lr_schedule.h.
#include "trainers/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace trit::trainers {

double lr_at(const ScheduleConfig& s, double peak, int64_t step, int64_t total) {
    if (s.warmup_steps > 0 && step < s.warmup_steps)
        return peak * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
    if (s.type == "constant") return peak;
    const int64_t decay_steps = std::max<int64_t>(1, total - s.warmup_steps - 1);
    const double t = std::clamp(static_cast<double>(step - s.warmup_steps) / decay_steps, 0.0, 1.0);
    const double floor = s.min_lr_ratio * peak;
    if (s.type == "linear") return floor + (peak - floor) * (1.0 - t);
    return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * t));  // cosine
}

}  // namespace trit::trainers
