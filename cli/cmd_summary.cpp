// `trit summary RUN_DIR...`: one line per finished run (from its summary.json) and each run against
// the first (the baseline): classifiers by test accuracy (difference in points), language models
// by validation bits per byte (ratio).
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "trainers/metrics.h"

namespace trit::cli {

Command add_summary(CLI::App& app) {
    auto dirs = std::make_shared<std::vector<std::string>>();
    CLI::App* sub = app.add_subcommand("summary", "Compare finished runs (the first is the baseline)");
    sub->add_option("runs", *dirs, "Run directories holding summary.json")->required();
    sub->footer("Examples:\n  trit summary runs/fashion_mnist_fp32 runs/fashion_mnist_ternary\n"
                "  trit summary runs/gpt_fp32 runs/gpt_ternary");
    return {sub, [dirs]() {
        std::cout << std::left << std::setw(36) << "run" << std::right << std::setw(16) << "result"
                  << std::setw(10) << "vs first" << std::setw(10) << "loss" << std::setw(8) << "steps"
                  << std::setw(10) << "seconds" << std::setw(18) << "training rate" << '\n';
        bool base_lm = false;
        double base = 0;
        for (size_t i = 0; i < dirs->size(); ++i) {
            const std::string path = fs::join((*dirs)[i], "summary.json");
            std::ifstream in(path);
            TRIT_CHECK(in.good(), "'", path, "': no such file (is '", (*dirs)[i],
                       "' a finished run directory?)");
            std::string line;
            std::getline(in, line);
            auto num = [&](const char* key) { return trainers::json_number(line, key, path); };
            const bool lm = trainers::json_has(line, "valid_bits_per_byte");
            const double value = lm ? num("valid_bits_per_byte") : num("test_accuracy");
            if (i == 0) {
                base_lm = lm;
                base = value;
            }
            std::ostringstream result, versus, rate;
            result << std::fixed;
            versus << std::fixed;
            if (lm) {
                result << std::setprecision(4) << value << " bpb";
                if (base_lm) versus << std::setprecision(3) << value / base << "x";
            } else {
                result << std::setprecision(2) << 100 * value << "%";
                if (!base_lm) versus << std::showpos << std::setprecision(2) << 100 * (value - base);
            }
            if (versus.str().empty()) versus << "-";  // another kind of run than the first
            const char* rate_key = lm ? "train_tokens_per_s" : "train_samples_per_s";
            rate << std::fixed << std::setprecision(0) << num(rate_key) << (lm ? " tok/s" : " samples/s");
            std::cout << std::left << std::setw(36) << (*dirs)[i] << std::right << std::setw(16)
                      << result.str() << std::setw(10) << versus.str() << std::fixed
                      << std::setprecision(4) << std::setw(10) << num(lm ? "valid_loss" : "test_loss")
                      << std::setprecision(0) << std::setw(8) << num("steps") << std::setprecision(1)
                      << std::setw(10) << num("seconds") << std::setw(18) << rate.str() << '\n';
        }
        return 0;
    }};
}

}  // namespace trit::cli
