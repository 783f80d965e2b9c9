// `trit eval RUN_DIR|CHECKPOINT|model.h5`: the model's metrics on its recipe's evaluation data:
// test accuracy and loss for a classifier; validation loss, bits per byte, perplexity and
// next-byte accuracy for a language model. A checkpoint runs its training forward (LibTorch, on
// --device); a model file runs its packed layers on the CPU reference runtime, or with
// --device cuda on the GPU runtime (the kernels).
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "exporters/model_file.h"
#include "exporters/runtime_cpu.h"
#include "trainers/checkpoint.h"
#include "trainers/data.h"
#include "trainers/trainer.h"

#ifdef TRIT_HAVE_CUDA
#include "kernels/runtime_cuda.h"
#endif

namespace trit::cli {
namespace {

bool is_model_file(const std::string& path) {
    return path.size() > 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
}

#ifdef TRIT_HAVE_CUDA
// The GPU runtime behind the Model interface the evaluation takes.
class CudaModelAdapter : public Model {
  public:
    CudaModelAdapter(const exporters::PackedModel& m, int device, Task task, std::string output)
        : gpu_(m, device), task_(task), output_(std::move(output)) {}
    torch::Tensor forward(const torch::Tensor& x) override { return gpu_.forward(x); }
    std::string output_layer() const override { return output_; }
    Task task() const override { return task_; }

  private:
    kernels::CudaModel gpu_;
    Task task_;
    std::string output_;
};
#endif

}  // namespace

Command add_eval(CLI::App& app) {
    struct Args {
        std::string source, data, device = "cpu";
        int64_t batch = 0;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand(
        "eval", "Evaluate a trained run or a model file on its recipe's evaluation data");
    sub->add_option("source", a->source, "Run directory, checkpoint file, or model file (.h5)")->required();
    sub->add_option("--device", a->device,
                    "cpu or cuda[:N]: a checkpoint's forward runs there; a model file runs on the CPU "
                    "reference runtime (cpu) or the GPU runtime (cuda)")
        ->capture_default_str();
    sub->add_option("--data", a->data, "Dataset directory (default: the recipe's data.path)");
    sub->add_option("--batch", a->batch,
                    "Examples (language model: windows) per forward (default: the recipe's "
                    "training.eval_batch_size)");
    sub->footer("Examples:\n  trit eval runs/vit_ternary\n  trit eval runs/gpt_ternary/model-tern2.h5\n"
                "  trit eval runs/gpt_ternary --device cuda");
    return {sub, [a]() {
        TRIT_CHECK(a->batch >= 0, "--batch: expected >= 1 (0: the recipe's eval_batch_size), got ", a->batch);
        const torch::Device device = trainers::parse_device(a->device);
        Recipe recipe;
        std::shared_ptr<Model> model;
        std::string what;
        if (is_model_file(a->source)) {
            exporters::PackedModel packed = exporters::read_model(a->source);
            exporters::require_runnable(packed, "eval", a->source);
            recipe = packed.recipe;
            if (device.is_cuda()) {
#ifdef TRIT_HAVE_CUDA
                auto probe = make_model(recipe.model);
                model = std::make_shared<CudaModelAdapter>(packed, device.index() < 0 ? 0 : device.index(),
                                                           probe->task(), probe->output_layer());
                what = "GPU runtime on " + device.str();
#else
                TRIT_FAIL("--device ", a->device,
                          ": this trit was built without the CUDA kernels (no nvcc found, or TRIT_CUDA=OFF)");
#endif
            } else {
                model = exporters::packed_module_cpu(packed);
                what = "CPU reference runtime";
            }
        } else {
            trainers::LoadedRun run = trainers::load_run(a->source);
            recipe = run.recipe;
            model = run.model;
            model->to(device);
            what = "training forward on " + device.str() + ", step " + std::to_string(run.step);
        }
        if (!a->data.empty()) recipe.data.path = a->data;
        if (a->batch > 0) recipe.training.eval_batch_size = a->batch;
        // Inputs go where the model runs; the GPU runtime takes them from anywhere.
        std::unique_ptr<trainers::EvalData> data = trainers::make_eval_data(recipe, device);
        const trainers::EvalResult r = data->evaluate(*model);
        std::cout << "eval " << a->source << " (" << recipe.model.type << ", " << what << ") on "
                  << data->describe() << ":\n  " << trainers::describe_eval(r) << std::endl;
        return 0;
    }};
}

}  // namespace trit::cli
