// `trit train RECIPE`: QAT (or float) training from a YAML recipe, with --set overrides.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "core/recipe.h"
#include "trainers/trainer.h"

namespace trit::cli {

Command add_train(CLI::App& app) {
    struct Args {
        std::string recipe, out, device = "cpu", precision = "fp32";
        std::vector<std::string> sets;
        bool resume = false, overwrite = false, quiet = false;
    };
    auto args = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand("train", "Train a model from a YAML recipe (QAT or float)");
    sub->add_option("recipe", args->recipe, "Recipe file (YAML); docs/recipes.md lists its keys")
        ->required();
    sub->add_option("--set", args->sets, "Override a recipe key: --set key.path=value (repeatable)");
    sub->add_option("--out", args->out, "Run directory (default: the recipe's output.dir)");
    sub->add_option("--device", args->device, "cpu or cuda[:N]");
    sub->add_option("--precision", args->precision,
                    "fp32, or bf16: matmuls in bfloat16 under autocast, weights and optimizer in float32 (cuda only)")
        ->capture_default_str();
    sub->add_flag("--resume", args->resume, "Continue the run in the run directory from its checkpoint");
    sub->add_flag("--overwrite", args->overwrite, "Start afresh even if the run directory holds a run");
    sub->add_flag("-q,--quiet", args->quiet, "No progress output; only the result summary");
    sub->footer("Examples:\n"
                "  trit train recipes/fashion_mnist_ternary.yaml\n"
                "  trit train recipes/fashion_mnist_fp32.yaml --set training.epochs=2 --out runs/fp32\n"
                "  trit train recipes/fashion_mnist_ternary.yaml --resume\n"
                "  trit train recipes/gpt_ternary.yaml --device cuda --precision bf16");
    return {sub, [args]() {
        Recipe recipe = load_recipe(args->recipe, args->sets);
        trainers::TrainOptions opt;
        opt.out_dir = args->out;
        opt.resume = args->resume;
        opt.overwrite = args->overwrite;
        opt.device = args->device;
        opt.precision = trainers::parse_precision(args->precision);
        opt.progress = !args->quiet;
        trainers::TrainSummary s = trainers::train(recipe, opt);
        std::cout << "result: " << recipe.name << ": " << trainers::describe_eval(s.test) << " after "
                  << s.steps << " steps, " << std::fixed << std::setprecision(1) << s.seconds << " s, "
                  << std::setprecision(0) << s.samples_per_second << " training " << s.item_name
                  << "/s; run directory " << s.run_dir << std::endl;
        return 0;
    }};
}

}  // namespace trit::cli
