// `trit validate model.h5 --against RUN_DIR|CHECKPOINT [--device cpu|cuda[:N]]`: runs the packed
// model and the training forward (set up as the file describes each layer) on the same inputs;
// reports logit errors and top-1 agreement; exits 1 above tolerance. On cpu the packed model runs
// on the CPU reference runtime; on cuda it runs on the GPU runtime (the kernels), compared with
// the training forward on the same GPU (LibTorch CUDA) and with the CPU reference runtime.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "exporters/model_file.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "trainers/checkpoint.h"
#include "trainers/trainer.h"

#ifdef TRIT_HAVE_CUDA
#include "kernels/runtime_cuda.h"
#endif

namespace trit::cli {
namespace {

std::string gpu_runtime_name(const torch::Device& d) {
    return d.is_cuda() ? "GPU runtime, kernels on " + d.str() : std::string("CPU reference runtime");
}

}  // namespace

Command add_validate(CLI::App& app) {
    struct Args {
        std::string model, against, data, device = "cpu";
        int64_t limit = 0, batch = 1000;
        double rtol = 1e-4, rtol_cuda = 1e-3, min_agreement = 1.0;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand(
        "validate", "Check a model file against the training forward of its run on real inputs");
    sub->add_option("model", a->model, "Model file (.h5)")->required();
    sub->add_option("--against", a->against, "Run directory or checkpoint the file was exported from")
        ->required();
    sub->add_option("--data", a->data, "Dataset directory (default: the recipe's data.path)");
    sub->add_option("--device", a->device, "Where the packed model runs: cpu (reference runtime) or cuda[:N] (kernels)")
        ->capture_default_str();
    sub->add_option("--limit", a->limit, "Use the first N test examples (0 = all)")->capture_default_str();
    sub->add_option("--batch", a->batch, "Examples per forward")->capture_default_str();
    sub->add_option("--rtol", a->rtol, "Largest allowed max|error| / max|logit|")->capture_default_str();
    sub->add_option("--rtol-cuda", a->rtol_cuda,
                    "With --device cuda: largest max|error| / max|logit| against the training forward on the GPU "
                    "(it recomputes absmean scales with the GPU's reduction order: a scale an ulp off flips a code "
                    "at a rounding tie)")
        ->capture_default_str();
    sub->add_option("--min-agreement", a->min_agreement, "Smallest allowed top-1 agreement (fraction)")
        ->capture_default_str();
    sub->footer(
        "Examples:\n  trit validate fmnist-tern2.h5 --against runs/fashion_mnist_ternary\n"
        "  trit validate fmnist-tern2.h5 --against runs/fashion_mnist_ternary --device cuda");
    return {sub, [a]() {
        TRIT_CHECK(a->limit >= 0, "--limit: expected >= 0, got ", a->limit);
        TRIT_CHECK(a->batch >= 1, "--batch: expected >= 1, got ", a->batch);
        TRIT_CHECK(a->rtol >= 0, "--rtol: expected >= 0, got ", a->rtol);
        TRIT_CHECK(a->rtol_cuda >= 0, "--rtol-cuda: expected >= 0, got ", a->rtol_cuda);
        TRIT_CHECK(a->min_agreement >= 0 && a->min_agreement <= 1, "--min-agreement: expected a fraction in [0, 1], got ",
                   a->min_agreement);
        const torch::Device device = trainers::parse_device(a->device);
#ifndef TRIT_HAVE_CUDA
        TRIT_CHECK(device.is_cpu(), "--device ", a->device,
                   ": this trit was built without the CUDA kernels (no nvcc found, or TRIT_CUDA=OFF)");
#endif
        exporters::PackedModel packed = exporters::read_model(a->model);
        trainers::LoadedRun run = trainers::load_run(a->against);
        TRIT_CHECK(recipe_to_yaml(packed.recipe) == recipe_to_yaml(run.recipe), a->model,
                   ": its recipe differs from the one in ", run.checkpoint,
                   " (was it exported from another run?)");
        exporters::configure_reference(*run.model, packed);
        run.model->to(device);

        DataConfig data = packed.recipe.data;
        if (!a->data.empty()) data.path = a->data;
        if (a->limit > 0) data.test_limit = a->limit;
        auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> out_cpu, out_gpu, out_ref;
#ifdef TRIT_HAVE_CUDA
        std::unique_ptr<kernels::CudaModel> gpu;
        if (device.is_cuda()) gpu = std::make_unique<kernels::CudaModel>(packed, device.index() < 0 ? 0 : device.index());
#endif
        for (int64_t b = 0; b < x.size(0); b += a->batch) {
            torch::Tensor xb = x.slice(0, b, std::min(x.size(0), b + a->batch));
            out_cpu.push_back(exporters::forward_cpu(packed, xb));
            out_ref.push_back(run.model->forward(xb.to(device)).to(torch::kCPU));
#ifdef TRIT_HAVE_CUDA
            if (gpu) out_gpu.push_back(gpu->forward(xb).to(torch::kCPU));
#endif
        }
        const torch::Tensor cpu = torch::cat(out_cpu), ref = torch::cat(out_ref);
        const torch::Tensor runtime = out_gpu.empty() ? cpu : torch::cat(out_gpu);
        const exporters::Comparison c = exporters::compare_logits(runtime, ref, y);
        const double rtol_ref = device.is_cuda() ? a->rtol_cuda : a->rtol;
        bool ok = c.relative_error <= rtol_ref && c.top1_agreement >= a->min_agreement;
        auto report = [&](const exporters::Comparison& r, const std::string& what, double rtol) {
            std::cout << std::setprecision(3) << std::scientific << "  " << what << ": max |logit error| "
                      << r.max_abs_error << ", max |logit| " << std::fixed << std::setprecision(3)
                      << r.max_abs_logit << ", relative " << std::scientific << r.relative_error
                      << " (tolerance " << rtol << ")\n"
                      << std::fixed << std::setprecision(2) << "    top-1 agreement " << 100 * r.top1_agreement
                      << "% (required " << 100 * a->min_agreement << "%)";
            if (r.first_disagreement >= 0) std::cout << ", first disagreement at example " << r.first_disagreement;
            std::cout << "\n";
        };
        std::cout << "validate " << a->model << " against " << run.checkpoint << " on " << c.examples
                  << " test examples (" << (gpu_runtime_name(device)) << "):\n";
        report(c, device.is_cuda() ? "GPU runtime vs training forward (" + a->device + ")"
                                   : "CPU reference runtime vs training forward",
               rtol_ref);
        if (device.is_cuda()) {
            const exporters::Comparison g = exporters::compare_logits(runtime, cpu, y);
            report(g, "GPU runtime vs CPU reference runtime", a->rtol);
            ok = ok && g.relative_error <= a->rtol && g.top1_agreement >= a->min_agreement;
            const int64_t same = torch::eq(runtime, cpu).sum().item<int64_t>();
            std::cout << "    bit-identical logits: " << same << " of " << runtime.numel() << "\n";
#ifdef TRIT_HAVE_CUDA
            for (const std::string& line : gpu->describe(a->batch)) std::cout << "    kernel " << line << "\n";
#endif
        }
        std::cout << std::fixed << std::setprecision(2) << "  accuracy: packed " << 100 * c.packed_accuracy
                  << "%, training forward " << 100 * c.reference_accuracy << "%\n"
                  << (ok ? "  PASS" : "  FAIL: above tolerance") << std::endl;
        return ok ? 0 : 1;
    }};
}

}  // namespace trit::cli
