// trit: the one executable. Parses the command line (CLI11), runs the chosen subcommand, and is
// the only place that turns exceptions into a message and an exit code.
#include <c10/util/Exception.h>

#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

#ifdef TRIT_HAVE_CUDA
#include "kernels/train_quant_torch.h"
#endif

int main(int argc, char** argv) {
#ifdef TRIT_HAVE_CUDA
    trit::kernels::register_training_quantizers();  // QAT on a GPU uses the fused quantizers
#endif
    CLI::App app{"trit: train, quantize, pack and run ternary and binary neural networks"};
    app.set_version_flag("--version", std::string("trit ") + TRIT_VERSION);
    app.require_subcommand(1);
    app.footer("Example:\n  trit train recipes/fashion_mnist_ternary.yaml --set training.epochs=2\n"
               "Run 'trit SUBCOMMAND --help' for a subcommand's options.");
    const std::vector<trit::cli::Command> commands = {
        trit::cli::add_train(app),  trit::cli::add_export(app), trit::cli::add_inspect(app),
        trit::cli::add_validate(app), trit::cli::add_summary(app), trit::cli::add_bench(app),
        trit::cli::add_generate(app), trit::cli::add_eval(app),
        trit::cli::add_plot(app), trit::cli::add_ptq(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        for (const auto& c : commands)
            if (c.app->parsed()) return c.run();
        return 0;
    } catch (const trit::Error& e) {
        std::cerr << "trit: error: " << e.what() << std::endl;
        return 1;
    } catch (const c10::Error& e) {
        std::cerr << "trit: error (LibTorch): " << e.what_without_backtrace() << std::endl;
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "trit: error: " << e.what() << std::endl;
        return 2;
    }
}
