// Training-throughput benchmark: see train_throughput.h.
#include "bench/train_throughput.h"

#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/recipe.h"
#include "trainers/trainer.h"

namespace trit::bench {
namespace {

struct Candidate {
    Recipe recipe;
    trainers::TrainingSetup setup;
    std::unique_ptr<trainers::TrainData> data;
    int64_t next = 0;  // next batch, counted over epochs
    std::vector<double> rates;
};

void run_steps(Candidate& c, int64_t steps) {
    const int64_t per_epoch = c.data->batches_per_epoch();
    for (int64_t s = 0; s < steps; ++s, ++c.next) {
        // Full batches only (the last of an epoch may be short), so every step does the same work.
        int64_t b = c.next % per_epoch;
        if (per_epoch > 1 && b == per_epoch - 1) b = 0;
        const trainers::Batch batch = c.data->batch(c.next / per_epoch, b);
        // Same work as the trainer's step, including the loss read-back it does every step.
        trainers::train_step(c.setup, batch.x, batch.y, c.recipe.optimizer.lr, c.recipe.optimizer.grad_clip)
            .item<double>();
    }
    if (c.setup.device.is_cuda()) torch::cuda::synchronize();
}

}  // namespace

std::vector<ThroughputResult> bench_train_throughput(const ThroughputOptions& o) {
    TRIT_CHECK(!o.recipes.empty(), "bench train: give at least one recipe");
    TRIT_CHECK(o.steps >= 1 && o.repeats >= 1 && o.warmup_steps >= 0,
               "bench train: --steps and --repeats must be >= 1, --warmup >= 0");
    const torch::Device device = trainers::parse_device(o.device);
    std::vector<Candidate> cands;
    for (const auto& path : o.recipes) {
        Candidate c;
        c.recipe = load_recipe(path, o.overrides);
        if (c.recipe.training.threads > 0)
            torch::set_num_threads(static_cast<int>(c.recipe.training.threads));
        c.setup = trainers::make_training_setup(c.recipe, device, o.precision);
        c.data = trainers::make_train_data(c.recipe, device);
        run_steps(c, o.warmup_steps);
        cands.push_back(std::move(c));
    }
    // Interleave recipes within each repeat so slow drift of the machine hits all alike.
    for (int64_t r = 0; r < o.repeats; ++r) {
        for (auto& c : cands) {
            const auto t0 = std::chrono::steady_clock::now();
            run_steps(c, o.steps);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            c.rates.push_back(static_cast<double>(o.steps * c.data->items_per_batch()) / s);
        }
    }
    // Ratios are paired per repeat (each recipe against the baseline's rate in the same repeat),
    // then the median: drift of a shared machine between repeats cancels out.
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const size_t n = v.size();
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    std::vector<ThroughputResult> out;
    for (auto& c : cands) {
        std::vector<double> ratios;
        for (size_t r = 0; r < c.rates.size(); ++r) ratios.push_back(c.rates[r] / cands.front().rates[r]);
        const double ratio = median(ratios);
        std::sort(c.rates.begin(), c.rates.end());
        ThroughputResult r;
        r.recipe = c.recipe.name;
        r.item_name = c.data->item_name();
        for (const auto& q : c.setup.quantized_layers) r.quantized += (r.quantized.empty() ? "" : ",") + q;
        if (r.quantized.empty()) r.quantized = "none";
        r.quantized_count = static_cast<int64_t>(c.setup.quantized_layers.size());
        r.samples_per_second = median(c.rates);
        r.ratio_to_baseline = ratio;
        r.min_samples_per_second = c.rates.front();
        r.max_samples_per_second = c.rates.back();
        out.push_back(r);
    }
    return out;
}

std::string throughput_table(const std::vector<ThroughputResult>& results) {
    std::ostringstream os;
    os << std::left << std::setw(28) << "recipe" << std::setw(20) << "quantized" << std::right
       << std::setw(16) << "rate" << std::setw(22) << "min..max" << std::setw(12)
       << "vs first" << '\n';
    for (const auto& r : results) {
        std::ostringstream range;
        range << std::fixed << std::setprecision(0) << r.min_samples_per_second << ".."
              << r.max_samples_per_second;
        // Long layer lists go to the CSV; the table says how many.
        const std::string quantized =
            r.quantized.size() <= 18 ? r.quantized : std::to_string(r.quantized_count) + " layers";
        std::ostringstream rate;
        rate << std::fixed << std::setprecision(0) << r.samples_per_second << " " << r.item_name << "/s";
        os << std::left << std::setw(28) << r.recipe << std::setw(20) << quantized << std::right
           << std::setw(16) << rate.str() << std::setw(22) << range.str() << std::fixed
           << std::setprecision(3) << std::setw(11) << r.ratio_to_baseline << "x\n";
    }
    return os.str();
}

std::string throughput_csv(const std::vector<ThroughputResult>& results) {
    std::ostringstream os;
    os << "recipe,quantized,unit,per_s,min_per_s,max_per_s,ratio_to_first\n";
    for (const auto& r : results)
        os << r.recipe << ",\"" << r.quantized << "\"," << r.item_name << "," << std::fixed << std::setprecision(1)
           << r.samples_per_second << "," << r.min_samples_per_second << ","
           << r.max_samples_per_second << "," << std::setprecision(4) << r.ratio_to_baseline << "\n";
    return os.str();
}

}  // namespace trit::bench
