// `trit bench ...`: benchmarks. `train` measures training throughput of recipes against the first.
#include <fstream>
#include <iostream>

#include "bench/train_throughput.h"
#include "cli/commands.h"
#include "core/error.h"

namespace trit::cli {

Command add_bench(CLI::App& app) {
    auto o = std::make_shared<bench::ThroughputOptions>();
    auto csv = std::make_shared<std::string>();
    o->recipes = {"recipes/fashion_mnist_fp32.yaml", "recipes/fashion_mnist_ternary.yaml"};
    CLI::App* sub = app.add_subcommand("bench", "Benchmarks (see docs/BENCHMARKS.md)");
    sub->require_subcommand(1);
    CLI::App* train = sub->add_subcommand(
        "train", "Training throughput (samples/s) of recipes, each against the first");
    train->add_option("--recipes", o->recipes, "Recipe files; the first is the baseline")
        ->capture_default_str();
    train->add_option("--set", o->overrides, "Override a key in every recipe: --set key.path=value");
    train->add_option("--steps", o->steps, "Timed steps per repeat")->capture_default_str();
    train->add_option("--warmup", o->warmup_steps, "Untimed steps first")->capture_default_str();
    train->add_option("--repeats", o->repeats, "Repeats (median reported)")->capture_default_str();
    train->add_option("--device", o->device, "cpu or cuda[:N]")->capture_default_str();
    train->add_option("--csv", *csv, "Also write the results as CSV to this file");
    train->footer("Example:\n  trit bench train --steps 300 --repeats 5 --csv bench-train.csv");
    return {sub, [o, csv]() {
        auto results = bench::bench_train_throughput(*o);
        std::cout << bench::throughput_table(results);
        if (!csv->empty()) {
            std::ofstream out(*csv);
            TRIT_CHECK(out.good(), "--csv '", *csv, "': cannot write the file");
            out << bench::throughput_csv(results);
        }
        return 0;
    }};
}

}  // namespace trit::cli
