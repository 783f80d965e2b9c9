// `trit summary RUN_DIR...`: one line per finished run (from its summary.json), and each run's
// accuracy difference to the first one (the baseline).
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
    sub->footer("Example:\n  trit summary runs/fashion_mnist_fp32 runs/fashion_mnist_ternary");
    return {sub, [dirs]() {
        std::cout << std::left << std::setw(36) << "run" << std::right << std::setw(10)
                  << "accuracy" << std::setw(10) << "vs first" << std::setw(10) << "loss"
                  << std::setw(8) << "steps" << std::setw(10) << "seconds" << std::setw(12)
                  << "samples/s" << '\n';
        double base = 0;
        for (size_t i = 0; i < dirs->size(); ++i) {
            const std::string path = fs::join((*dirs)[i], "summary.json");
            std::ifstream in(path);
            TRIT_CHECK(in.good(), "'", path, "': no such file (is '", (*dirs)[i],
                       "' a finished run directory?)");
            std::string line;
            std::getline(in, line);
            const double acc = trainers::json_number(line, "test_accuracy", path);
            if (i == 0) base = acc;
            std::cout << std::left << std::setw(36) << (*dirs)[i] << std::right << std::fixed
                      << std::setprecision(2) << std::setw(9) << 100 * acc << "%" << std::showpos
                      << std::setw(10) << 100 * (acc - base) << std::noshowpos
                      << std::setprecision(4) << std::setw(10)
                      << trainers::json_number(line, "test_loss", path) << std::setprecision(0)
                      << std::setw(8) << trainers::json_number(line, "steps", path)
                      << std::setprecision(1) << std::setw(10)
                      << trainers::json_number(line, "seconds", path) << std::setprecision(0)
                      << std::setw(12) << trainers::json_number(line, "train_samples_per_s", path)
                      << '\n';
        }
        return 0;
    }};
}

}  // namespace trit::cli
