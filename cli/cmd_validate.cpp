// `trit validate model.h5 --against RUN_DIR|CHECKPOINT [--device cpu|cuda[:N]]`: runs the packed
// model and the training forward (set up as the file describes each layer and tensor) on the same
// inputs; reports logit errors and top-1 agreement; exits 1 above tolerance. Inputs: the test
// split (mlp, vit) or the fortunes validation text in windows of model.context bytes (gpt, every
// position's next-byte logits). On cpu the packed model runs on the CPU reference runtime; on cuda
// it runs on the GPU runtime (the kernels), compared with the training forward on the same GPU
// (LibTorch CUDA, with the file's codes) and with the CPU reference runtime (required to agree
// only where the float parts are exact on both devices: an mlp with ReLU). Batches are compared
// as they come, so memory stays that of one batch.
#include <functional>
#include <optional>
#include <set>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/ptq.h"
#include "core/error.h"
#include "core/fortunes.h"
#include "core/safetensors.h"
#include "core/weight_quant.h"
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

// Default --batch: examples per forward, or for gpt windows of model.context bytes.
constexpr int64_t kImageBatch = 1000;
constexpr int64_t kWindowBatch = 32;

// Calls `fn(x, y)` for each input batch of the recipe's evaluation data: test images and labels
// (mlp, vit), or validation windows and their next bytes (gpt); `limit` > 0 keeps the first
// `limit` examples or windows. Returns a description of what was fed ("200 test examples").
std::string for_each_batch(
    const Recipe& recipe, const std::string& data_path, int64_t limit, int64_t batch,
    const std::function<void(const torch::Tensor&, const torch::Tensor&)>& fn) {
    DataConfig data = recipe.data;
    if (!data_path.empty()) data.path = data_path;
    if (recipe.model.type != "gpt") {
        if (limit > 0) data.test_limit = limit;
        auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);
        for (int64_t b = 0; b < x.size(0); b += batch) {
            const int64_t e = std::min(x.size(0), b + batch);
            fn(x.slice(0, b, e), y.slice(0, b, e));
        }
        return std::to_string(x.size(0)) + " test examples";
    }
    TRIT_CHECK(data.dataset == "fortunes",
               "validate: a gpt validates on the fortunes corpus, the recipe's data.dataset is '",
               data.dataset, "'");
    data::LmEvalBatches batches(data::load_fortunes(data.path, data.valid_fraction).valid,
                                recipe.model.context, batch);
    int64_t windows = 0, bytes = 0;
    for (int64_t i = 0; i < batches.size() && (limit == 0 || windows < limit); ++i) {
        data::LmBatch b = batches.at(i);
        const int64_t rows =
            limit == 0 ? b.input.size(0) : std::min(b.input.size(0), limit - windows);
        fn(b.input.slice(0, 0, rows), b.target.slice(0, 0, rows));
        windows += rows;
        bytes += b.input.slice(0, 0, rows).numel();
    }
    return std::to_string(bytes) + " predicted bytes (" + std::to_string(windows) +
           " windows of the validation text)";
}

struct LinearsOptions {
    std::string model, against, device;
    int64_t rows = 64;
    double rtol = 1e-4, rtol_cuda = 1e-3;
};

torch::ScalarType torch_dtype(exporters::FloatDType d) {
    return d == exporters::FloatDType::kF32 ? torch::kFloat32
           : d == exporters::FloatDType::kF16 ? torch::kHalf
                                              : torch::kBFloat16;
}

// A foreign model's file (quantized by trit ptq from a safetensors file) against that file: every
// layer runs on the runtime (CPU reference, or the GPU kernels) on seeded random inputs and is
// compared with the exact product of the file's codes and scales; the codes are re-derived from
// the source weights where they depend on the weights alone; biases and the other tensors must be
// the source's values (rounded to the stored dtype); the output error against the float layer is
// reported. Returns the exit code.
int validate_linears(const exporters::PackedModel& packed, const LinearsOptions& o, const torch::Device& device) {
    TRIT_CHECK(o.against.size() > 12 && o.against.compare(o.against.size() - 12, 12, ".safetensors") == 0,
               "validate: ", o.model, " holds a foreign model's layers; --against must be the .safetensors file it was "
               "quantized from, got '", o.against, "'");
    TRIT_CHECK(packed.ptq.present, o.model, ": a foreign model's file without the /ptq group");
    const SafetensorsFile src = open_safetensors(o.against);
    const PtqConfig cfg = parse_ptq_recipe(packed.ptq.recipe_yaml, o.model + ":/ptq@recipe");
#ifdef TRIT_HAVE_CUDA
    std::unique_ptr<kernels::CudaModel> gpu;
    if (device.is_cuda()) gpu = std::make_unique<kernels::CudaModel>(packed, device.index() < 0 ? 0 : device.index());
#endif
    std::cout << "validate " << o.model << " against " << o.against << " (" << gpu_runtime_name(device) << "), "
              << o.rows << " random input rows per layer:\n";
    torch::NoGradGuard no_grad;
    bool ok = true;
    std::set<std::string> covered;
    const double rtol = device.is_cuda() ? o.rtol_cuda : o.rtol;
    int64_t index = 0;
    for (const exporters::PackedLayer& l : packed.layers) {
        const std::string wname = l.name + ".weight", bname = l.name + ".bias";
        TRIT_CHECK(src.has(wname), o.against, ": no tensor '", wname, "' for the file's layer ", l.name);
        covered.insert(wname);
        torch::Tensor w = src.to_tensor(wname);
        TRIT_CHECK(w.dim() == 2 && w.size(0) == l.out && w.size(1) == l.in, o.against, ": tensor '", wname, "' has shape ",
                   w.sizes(), ", the file's layer (", l.out, ", ", l.in, ")");
        std::string problem;
        torch::Tensor bias;
        if (src.has(bname)) {
            covered.insert(bname);
            bias = src.to_tensor(bname);
            const torch::Tensor stored = torch::from_blob(const_cast<float*>(l.bias.data()),
                                                          {static_cast<int64_t>(l.bias.size())}, torch::kFloat32);
            if (l.bias.empty() || !torch::equal(stored, bias)) problem = "bias differs from the source's";
        } else if (!l.bias.empty()) {
            problem = "bias present, the source has none";
        }
        // The file's weights: codes x scales, exactly (float64).
        std::vector<int8_t> codes(static_cast<size_t>(l.out * l.in));
        exporters::unpack_codes(l.format, l.packed, l.out, l.in, codes.data());
        torch::Tensor q = torch::from_blob(codes.data(), {l.out, l.in}, torch::kInt8).to(torch::kFloat64);
        torch::Tensor scale = torch::from_blob(const_cast<float*>(l.scale.data()), {l.scale_rows, l.scale_cols},
                                               torch::kFloat32).to(torch::kFloat64);
        const torch::Tensor wq = dequantize(QuantizedWeights{q, scale}, l.spec);
        torch::Generator gen = at::detail::createCPUGenerator(1000 + static_cast<uint64_t>(index++));
        const torch::Tensor x = torch::randn({o.rows, l.in}, gen, torch::kFloat32);
        const torch::Tensor xd = x.to(torch::kFloat64);
        torch::Tensor ref = xd.mm(wq.t()), y = xd.mm(w.to(torch::kFloat64).t());
        if (!l.bias.empty()) {
            ref = ref + torch::from_blob(const_cast<float*>(l.bias.data()), {l.out}, torch::kFloat32).to(torch::kFloat64);
            if (bias.defined()) y = y + bias.to(torch::kFloat64);
        }
        torch::Tensor runtime = exporters::layer_forward_cpu(l, x);
#ifdef TRIT_HAVE_CUDA
        if (gpu) runtime = gpu->forward_layer(l.name, x).to(torch::kCPU);
#endif
        const double max_ref = ref.abs().max().item<double>();
        const double err = (runtime.to(torch::kFloat64) - ref).abs().max().item<double>() / std::max(max_ref, 1e-30);
        if (!(err <= rtol)) problem = "runtime error " + std::to_string(err) + " above tolerance";
        const double rel_src = (ref - y).square().sum().item<double>() / std::max(y.square().sum().item<double>(), 1e-300);
        std::string codes_check = "codes depend on calibration (not re-derived)";
        const std::optional<PtqLayerCodes> again = reproduce_layer_codes(cfg, l.format.name(), w);
        if (again) {
            const bool same = torch::equal(again->codes.to(torch::kFloat64), q) &&
                              torch::equal(again->scales.to(torch::kFloat64), scale);
            codes_check = same ? "codes and scales re-derived from the source: identical" : "codes differ from the source's";
            if (!same) problem = "codes or scales differ from what the recipe gives the source weights";
        }
        std::cout << std::scientific << std::setprecision(3) << "  " << l.name << " " << l.format.name()
                  << ": runtime vs file product " << err << ", output error vs source " << rel_src << "; "
                  << codes_check << (problem.empty() ? "" : "  FAIL: " + problem) << "\n";
        ok = ok && problem.empty();
    }
    for (const exporters::PackedTensor& t : packed.tensors) {
        TRIT_CHECK(src.has(t.name), o.against, ": no tensor '", t.name, "' (the file stores one)");
        covered.insert(t.name);
        const torch::Tensor want = src.to_tensor(t.name).to(torch_dtype(t.dtype)).to(torch::kFloat32).reshape(t.shape);
        const torch::Tensor got =
            torch::from_blob(const_cast<float*>(t.values.data()), t.shape, torch::kFloat32);
        if (!torch::equal(got, want)) {
            std::cout << "  tensor " << t.name << ": FAIL: values differ from the source's\n";
            ok = false;
        }
    }
    for (const auto& n : src.names())
        if (!covered.count(n)) {
            std::cout << "  tensor " << n << ": FAIL: in the source, missing from the file\n";
            ok = false;
        }
    std::cout << "  " << packed.layers.size() << " layers, " << packed.tensors.size() << " float tensors checked\n"
              << (ok ? "  PASS" : "  FAIL") << std::endl;
    return ok ? 0 : 1;
}

}  // namespace

Command add_validate(CLI::App& app) {
    struct Args {
        std::string model, against, data, device = "cpu";
        int64_t limit = 0, batch = 0;
        double rtol = 1e-4, rtol_cuda = 1e-3, min_agreement = 1.0;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand(
        "validate", "Check a model file against the training forward of its run on real inputs");
    sub->add_option("model", a->model, "Model file (.h5)")->required();
    sub->add_option("--against", a->against,
                    "Run directory or checkpoint the file was exported from (or quantized from by trit ptq); for a "
                    "foreign model's file, the .safetensors file")
        ->required();
    sub->add_option("--data", a->data,
                    "Dataset directory: Fashion-MNIST (mlp, vit) or fortunes (gpt) (default: the "
                    "recipe's data.path)");
    sub->add_option("--device", a->device, "Where the packed model runs: cpu (reference runtime) or cuda[:N] (kernels)")
        ->capture_default_str();
    sub->add_option("--limit", a->limit,
                    "Use the first N test examples (mlp, vit) or the first N windows of "
                    "model.context bytes of the validation text (gpt; every byte of a window is "
                    "predicted and compared) (0 = all); a foreign model's file: random input rows per "
                    "layer (0 = 64)")
        ->capture_default_str();
    sub->add_option("--batch", a->batch,
                    "Examples (mlp, vit) or windows (gpt) per forward (0 = 1000 examples, 32 "
                    "windows)")
        ->capture_default_str();
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
        "  trit validate fmnist-tern2.h5 --against runs/fashion_mnist_ternary --device cuda\n"
        "  trit validate gpt-tern2.h5 --against runs/gpt_ternary --limit 64");
    return {sub, [a]() {
        TRIT_CHECK(a->limit >= 0, "--limit: expected >= 0, got ", a->limit);
        TRIT_CHECK(a->batch >= 0, "--batch: expected >= 0, got ", a->batch);
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
        if (packed.architecture == exporters::ModelArchitecture::kLinears) {
            LinearsOptions o;
            o.model = a->model;
            o.against = a->against;
            o.rows = a->limit > 0 ? a->limit : 64;
            o.rtol = a->rtol;
            o.rtol_cuda = a->rtol_cuda;
            return validate_linears(packed, o, device);
        }
        trainers::LoadedRun run = trainers::load_run(a->against);
        TRIT_CHECK(recipe_to_yaml(packed.recipe) == recipe_to_yaml(run.recipe), a->model,
                   ": its recipe differs from the one in ", run.checkpoint,
                   " (was it exported from another run?)");
        // On a GPU the reference takes the file's codes (see configure_reference); on the CPU it
        // re-quantizes the latent weights, which also checks the export's quantization. A file
        // trit ptq wrote holds codes that calibration chose (gptq): the reference takes them.
        exporters::configure_reference(*run.model, packed, /*use_file_codes=*/device.is_cuda() || packed.ptq.present);
        run.model->to(device);
        const bool lm = run.model->task() == Task::kLanguageModel;
        // The mlp runs layer by layer (forward_cpu); the transformers as a packed module.
        std::shared_ptr<Model> cpu_module;
        if (packed.recipe.model.type != "mlp") cpu_module = exporters::packed_module_cpu(packed);

        torch::NoGradGuard no_grad;
#ifdef TRIT_HAVE_CUDA
        std::unique_ptr<kernels::CudaModel> gpu;
        if (device.is_cuda()) gpu = std::make_unique<kernels::CudaModel>(packed, device.index() < 0 ? 0 : device.index());
#endif
        // c: the runtime vs the training forward; g: the GPU runtime vs the CPU reference runtime.
        exporters::Comparison c, g;
        int64_t same = 0, logits = 0;
        const int64_t batch = a->batch > 0 ? a->batch : lm ? kWindowBatch : kImageBatch;
        const std::string inputs = for_each_batch(
            packed.recipe, a->data, a->limit, batch,
            [&](const torch::Tensor& xb, const torch::Tensor& yb) {
                const torch::Tensor cpu =
                    cpu_module ? cpu_module->forward(xb) : exporters::forward_cpu(packed, xb);
                const torch::Tensor ref = run.model->forward(xb.to(device)).to(torch::kCPU);
                torch::Tensor runtime = cpu;
#ifdef TRIT_HAVE_CUDA
                if (gpu) runtime = gpu->forward(xb).to(torch::kCPU);
#endif
                c = exporters::combine(c, exporters::compare_logits(runtime, ref, yb));
                if (device.is_cuda()) {
                    g = exporters::combine(g, exporters::compare_logits(runtime, cpu, yb));
                    same += torch::eq(runtime, cpu).sum().item<int64_t>();
                    logits += runtime.numel();
                }
            });
        const double rtol_ref = device.is_cuda() ? a->rtol_cuda : a->rtol;
        bool ok = c.relative_error <= rtol_ref && c.top1_agreement >= a->min_agreement;
        auto report = [&](const exporters::Comparison& r, const std::string& what, double rtol) {
            std::cout << std::setprecision(3) << std::scientific << "  " << what << ": max |logit error| "
                      << r.max_abs_error << ", max |logit| " << std::fixed << std::setprecision(3)
                      << r.max_abs_logit << ", relative " << std::scientific << r.relative_error
                      << " (tolerance " << rtol << ")\n"
                      << std::fixed << std::setprecision(2) << "    top-1 agreement " << 100 * r.top1_agreement
                      << "% (required " << 100 * a->min_agreement << "%)";
            if (r.first_disagreement >= 0)
                std::cout << ", first disagreement at " << (lm ? "predicted byte " : "example ")
                          << r.first_disagreement;
            std::cout << "\n";
        };
        std::cout << "validate " << a->model << " against " << run.checkpoint << " on " << inputs
                  << " (" << gpu_runtime_name(device) << "):\n";
        report(c, device.is_cuda() ? "GPU runtime vs training forward (" + a->device + ")"
                                   : "CPU reference runtime vs training forward",
               rtol_ref);
        if (device.is_cuda()) {
            // The GPU and CPU runtimes compute the same float operations bit for bit only for an
            // mlp with ReLU. Elsewhere LibTorch's CUDA and CPU kernels for norms, softmax and GELU
            // round differently, a difference that flips int8 activation codes at rounding ties:
            // the GPU runtime is then held to the training forward on the same GPU (above), and
            // this comparison is reported, not required.
            const ModelConfig& mc = packed.recipe.model;
            const bool exact_across_devices = mc.type == "mlp" && mc.activation == "relu";
            report(g, std::string("GPU runtime vs CPU reference runtime") +
                          (exact_across_devices ? "" : " (informational: float kernels differ between devices)"),
                   a->rtol);
            if (exact_across_devices)
                ok = ok && g.relative_error <= a->rtol && g.top1_agreement >= a->min_agreement;
            std::cout << "    bit-identical logits: " << same << " of " << logits << "\n";
#ifdef TRIT_HAVE_CUDA
            // Each layer's line names the rows its input has for a batch (a vit block layer sees
            // every token of every image, a gpt layer every position of every window).
            for (const std::string& line : gpu->describe(batch))
                std::cout << "    kernel " << line << "\n";
#endif
        }
        std::cout << std::fixed << std::setprecision(2)
                  << (lm ? "  next-byte accuracy: packed " : "  accuracy: packed ")
                  << 100 * c.packed_accuracy << "%, training forward " << 100 * c.reference_accuracy
                  << "%\n"
                  << (ok ? "  PASS" : "  FAIL: above tolerance") << std::endl;
        return ok ? 0 : 1;
    }};
}

}  // namespace trit::cli
