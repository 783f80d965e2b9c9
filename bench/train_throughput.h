// Training-throughput benchmark: samples (language models: tokens) per second of the training step (forward, backward,
// clipping, AdamW) for several recipes on the same machine, interleaved in short repeats. Rates are
// medians over repeats; each recipe's ratio to the first (the float baseline) is the median of the
// per-repeat ratios, which cancels the drift of a shared machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainers/autocast.h"

namespace trit::bench {

struct ThroughputOptions {
    std::vector<std::string> recipes;  // recipe files; the first is the baseline
    std::vector<std::string> overrides;  // --set applied to every recipe
    int64_t warmup_steps = 20;
    int64_t steps = 100;  // timed steps per repeat
    int64_t repeats = 21;
    std::string device = "cpu";
    trainers::Precision precision = trainers::Precision::kFp32;
};

struct ThroughputResult {
    std::string recipe;
    std::string quantized;             // quantized layers, comma-separated, or "none"
    int64_t quantized_count = 0;
    std::string item_name;             // what the rates count: "samples" | "tokens"
    double samples_per_second = 0;     // items per second, median over repeats
    double min_samples_per_second = 0;
    double max_samples_per_second = 0;
    double ratio_to_baseline = 0;      // median over repeats of rate / baseline rate
};

std::vector<ThroughputResult> bench_train_throughput(const ThroughputOptions& options);
// Aligned text table; CSV with a header line.
std::string throughput_table(const std::vector<ThroughputResult>& results);
std::string throughput_csv(const std::vector<ThroughputResult>& results);

}  // namespace trit::bench
