// Smooth Multi-stage Quantization: see smsq.h.
#include "trainers/smsq.h"

#include <cmath>

#include "core/bwta_quant.h"
#include "core/error.h"
#include "quantizers/layer_selection.h"

namespace trit::trainers {

bool has_level_quantizers(const QuantizationConfig& q) {
    return q.activation.method == "ternary" || q.attention == "ternary";
}

int64_t first_stage_levels(const SmsqConfig& smsq) {
    return smsq.stages.empty() ? 3 : smsq.stages.front();
}

StagePlan plan_stages(const SmsqConfig& c, bool has_levels, int64_t total) {
    StagePlan p;
    if (c.stages.empty()) {
        if (has_levels) p.levels = {3};
        p.steps = {total};
        return p;
    }
    p.levels = c.stages;
    const int64_t n = static_cast<int64_t>(c.stages.size());
    if (!c.stage_steps.empty()) {
        int64_t sum = 0;
        for (int64_t s : c.stage_steps) sum += s;
        TRIT_CHECK(sum == total, "smsq.stage_steps: the stages' steps sum to ", sum,
                   "; expected the run's ", total, " steps (training.epochs or training.steps)");
        p.steps = c.stage_steps;
        return p;
    }
    const int64_t last = n == 1 ? total : std::llround(c.final_fraction * static_cast<double>(total));
    const int64_t rest = total - last;
    TRIT_CHECK(last >= 1 && (n == 1 || rest >= n - 1), "smsq: ", total, " steps cannot give ", n,
               " stages at least one step each with final_fraction ", c.final_fraction);
    for (int64_t i = 0; i + 1 < n; ++i) p.steps.push_back(rest / (n - 1) + (i < rest % (n - 1) ? 1 : 0));
    p.steps.push_back(last);
    return p;
}

void set_stage_levels(Model& model, int64_t levels) {
    for (auto& [name, q] : quantizers::act_level_quantizers(model)) q->set_grid(act_grid(levels, q->mode()));
}

std::vector<QuantizerRescale> transition_quantizers(Model& model, int64_t levels,
                                                    const std::string& rescale,
                                                    const std::function<torch::Tensor(int64_t)>& batch_x,
                                                    int64_t batches) {
    TRIT_CHECK(rescale == "projection" || rescale == "mean" || rescale == "none",
               "smsq.rescale: expected projection, mean or none, got '", rescale, "'");
    auto quantizers = quantizers::act_level_quantizers(model);
    if (rescale != "none") {
        for (auto& [name, q] : quantizers) q->begin_calibration(act_grid(levels, q->mode()));
        {
            torch::NoGradGuard no_grad;
            const bool was_training = model.is_training();
            model.eval();
            for (int64_t i = 0; i < batches; ++i) model.forward(batch_x(i));
            model.train(was_training);
        }
    }
    std::vector<QuantizerRescale> out;
    for (auto& [name, q] : quantizers) {
        QuantizerRescale r;
        r.name = name;
        r.old_scale = r.new_scale = q->scale_value();
        if (rescale != "none") {
            const ActCalibration c = q->end_calibration();
            double s = r.old_scale;
            if (rescale == "projection")
                s = c.sum_abs_next > 0 ? r.old_scale * (c.sum_abs_last / c.sum_abs_next) : NAN;
            else
                s = c.count > 0 ? c.sum_abs / static_cast<double>(c.count) : NAN;
            if (std::isfinite(s) && s > 0) {
                r.new_scale = s;
            } else {
                r.kept = true;
            }
        }
        q->set_grid(act_grid(levels, q->mode()));
        if (r.new_scale != r.old_scale) q->set_scale(r.new_scale);
        r.factor = r.new_scale / r.old_scale;
        out.push_back(r);
    }
    return out;
}

}  // namespace trit::trainers
