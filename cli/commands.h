// The subcommands of `trit`: each registers its options on the app and returns how to run it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace trit::cli {

struct Command {
    CLI::App* app;             // the subcommand, to ask whether it was selected
    std::function<int()> run;  // runs it after parsing; returns the exit code
};

Command add_train(CLI::App& app);
Command add_summary(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_export(CLI::App& app);
Command add_inspect(CLI::App& app);
Command add_validate(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_plot(CLI::App& app);
Command add_ptq(CLI::App& app);

}  // namespace trit::cli
