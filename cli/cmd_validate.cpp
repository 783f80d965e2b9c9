// `trit validate model.h5 --against RUN_DIR|CHECKPOINT`: runs the packed model on the CPU
// reference runtime and the training forward (set up as the file describes each layer) on the
// same inputs; reports logit errors and top-1 agreement; exits 1 above tolerance.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "exporters/model_file.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "trainers/checkpoint.h"
#include "trainers/trainer.h"

namespace trit::cli {

Command add_validate(CLI::App& app) {
    struct Args {
        std::string model, against, data;
        int64_t limit = 0, batch = 1000;
        double rtol = 1e-4, min_agreement = 1.0;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand(
        "validate", "Check a model file against the training forward of its run on real inputs");
    sub->add_option("model", a->model, "Model file (.h5)")->required();
    sub->add_option("--against", a->against, "Run directory or checkpoint the file was exported from")
        ->required();
    sub->add_option("--data", a->data, "Dataset directory (default: the recipe's data.path)");
    sub->add_option("--limit", a->limit, "Use the first N test examples (0 = all)")->capture_default_str();
    sub->add_option("--batch", a->batch, "Examples per forward")->capture_default_str();
    sub->add_option("--rtol", a->rtol, "Largest allowed max|error| / max|logit|")->capture_default_str();
    sub->add_option("--min-agreement", a->min_agreement, "Smallest allowed top-1 agreement (fraction)")
        ->capture_default_str();
    sub->footer("Example:\n  trit validate fmnist-tern2.h5 --against runs/fashion_mnist_ternary");
    return {sub, [a]() {
        TRIT_CHECK(a->limit >= 0, "--limit: expected >= 0, got ", a->limit);
        TRIT_CHECK(a->batch >= 1, "--batch: expected >= 1, got ", a->batch);
        TRIT_CHECK(a->rtol >= 0, "--rtol: expected >= 0, got ", a->rtol);
        TRIT_CHECK(a->min_agreement >= 0 && a->min_agreement <= 1, "--min-agreement: expected a fraction in [0, 1], got ",
                   a->min_agreement);
        exporters::PackedModel packed = exporters::read_model(a->model);
        trainers::LoadedRun run = trainers::load_run(a->against);
        TRIT_CHECK(recipe_to_yaml(packed.recipe) == recipe_to_yaml(run.recipe), a->model,
                   ": its recipe differs from the one in ", run.checkpoint,
                   " (was it exported from another run?)");
        exporters::configure_reference(*run.model, packed);

        DataConfig data = packed.recipe.data;
        if (!a->data.empty()) data.path = a->data;
        if (a->limit > 0) data.test_limit = a->limit;
        auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> out_p, out_r;
        for (int64_t b = 0; b < x.size(0); b += a->batch) {
            torch::Tensor xb = x.slice(0, b, std::min(x.size(0), b + a->batch));
            out_p.push_back(exporters::forward_cpu(packed, xb));
            out_r.push_back(run.model->forward(xb));
        }
        exporters::Comparison c =
            exporters::compare_logits(torch::cat(out_p), torch::cat(out_r), y);
        const bool ok = c.relative_error <= a->rtol && c.top1_agreement >= a->min_agreement;
        std::cout << std::setprecision(3) << std::scientific << "validate " << a->model << " against "
                  << run.checkpoint << " on " << c.examples << " test examples (CPU reference runtime):\n"
                  << "  max |logit error| " << c.max_abs_error << ", max |logit| " << std::fixed
                  << std::setprecision(3) << c.max_abs_logit << ", relative " << std::scientific
                  << c.relative_error << " (tolerance " << a->rtol << ")\n"
                  << std::fixed << std::setprecision(2) << "  top-1 agreement " << 100 * c.top1_agreement
                  << "% (required " << 100 * a->min_agreement << "%)";
        if (c.first_disagreement >= 0) std::cout << ", first disagreement at example " << c.first_disagreement;
        std::cout << "\n  accuracy: packed " << 100 * c.packed_accuracy << "%, training forward "
                  << 100 * c.reference_accuracy << "%\n"
                  << (ok ? "  PASS" : "  FAIL: above tolerance") << std::endl;
        return ok ? 0 : 1;
    }};
}

}  // namespace trit::cli
