// `trit generate SOURCE [--prompt TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--seed S]
// [--device cpu|cuda[:N]] [--quiet]`: byte-level text from a gpt run (core/generate.h). The prompt
// is echoed, then each byte is written to stdout, raw, as soon as it is drawn; stats go to stderr.
// SOURCE is a run directory, a checkpoint or a packed model file (.h5: the CPU reference runtime,
// or the GPU runtime with --device cuda).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/generate.h"
#include "exporters/model_file.h"
#include "exporters/runtime_cpu.h"
#include "trainers/checkpoint.h"
#include "trainers/trainer.h"

#ifdef TRIT_HAVE_CUDA
#include "kernels/runtime_cuda.h"
#endif

namespace trit::cli {
namespace {

struct GenerationModel {
    std::shared_ptr<void> owner;  // what `model` refers to, if anything (a CudaModel): declared
                                  // first, so it outlives `model`
    std::shared_ptr<Model> model;
    std::string source;  // what errors call it: the checkpoint or model file read
};

bool is_model_file(const std::string& path) {
    const std::string ext = ".h5";
    if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
        return true;
    // An HDF5 file under another name: its signature at offset 0 (where write_model puts it).
    if (!fs::is_file(path)) return false;
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    char head[8] = {};
    const size_t n = std::fread(head, 1, sizeof(head), f);
    std::fclose(f);
    return n == sizeof(head) && std::string(head, sizeof(head)) == "\x89HDF\r\n\x1a\n";
}

uint64_t parse_seed(const std::string& text) {
    const bool digits = !text.empty() && text.size() <= 20 &&
                        text.find_first_not_of("0123456789") == std::string::npos;
    errno = 0;
    const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
    TRIT_CHECK(digits && errno != ERANGE, "--seed '", text, "': expected an integer in [0, ",
               std::numeric_limits<uint64_t>::max(), "]");
    return static_cast<uint64_t>(v);
}

// The model to generate with, on `device`: a run directory or checkpoint (the training forward)
// or a packed model file: on the CPU, the CPU reference runtime (exporters::packed_module_cpu);
// on a GPU, the GPU runtime's module (kernels::CudaModel), kept alive in `owner`.
GenerationModel load_generation_model(const std::string& source, const torch::Device& device) {
    if (!is_model_file(source)) {
        trainers::LoadedRun run = trainers::load_run(source);
        run.model->to(device);
        return {nullptr, run.model, run.checkpoint};
    }
    TRIT_CHECK(fs::is_file(source), "'", source, "': no such model file");
    const exporters::PackedModel packed = exporters::read_model(source);
    exporters::require_runnable(packed, "generate", source);
    if (device.is_cpu()) return {nullptr, exporters::packed_module_cpu(packed), source};
#ifdef TRIT_HAVE_CUDA
    auto gpu =
        std::make_shared<kernels::CudaModel>(packed, device.has_index() ? device.index() : 0);
    TRIT_CHECK(gpu->module() != nullptr, "generate needs a gpt model; ", source, " holds an mlp");
    return {gpu, gpu->module(), source};
#else
    TRIT_FAIL("--device ", device.str(), ": ", source,
              " is a packed model file, and this trit was built without the CUDA kernels (no nvcc "
              "found, or TRIT_CUDA=OFF): use --device cpu (the CPU reference runtime)");
#endif
}

}  // namespace

Command add_generate(CLI::App& app) {
    struct Args {
        std::string source, prompt, device = "cpu", seed = "0";
        GenerateOptions options;
        bool quiet = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub = app.add_subcommand("generate", "Generate text with a byte-level gpt model");
    sub->add_option("source", a->source, "Run directory, checkpoint or model file (.h5)")
        ->required();
    sub->add_option("--prompt", a->prompt,
                    "Text to continue (bytes as given); empty: start a new fortune entry, after "
                    "the corpus separator \"%\\n\"");
    sub->add_option("--max-tokens", a->options.max_tokens,
                    "Bytes to generate; may exceed the model's context (sliding window)")
        ->capture_default_str();
    sub->add_option("--temperature", a->options.temperature,
                    "Divides the logits before the softmax; 0 = greedy (argmax)")
        ->capture_default_str();
    sub->add_option("--top-k", a->options.top_k,
                    "Sample among the K most likely bytes (0 = all 256)")
        ->capture_default_str();
    // Read as text: CLI11 turns -1 into 2^64 - 1 for an unsigned option.
    sub->add_option("--seed", a->seed, "Seeds the sampler (same seed, same bytes)")
        ->capture_default_str();
    sub->add_option("--device", a->device,
                    "Where the model runs: cpu or cuda[:N] (model files: the CPU reference runtime "
                    "or the GPU "
                    "runtime)")
        ->capture_default_str();
    sub->add_flag("-q,--quiet", a->quiet, "No stats on stderr");
    sub->footer(
        "The prompt is echoed, then each byte goes to stdout as soon as it is drawn, raw (the "
        "model\nis byte-level: the output may hold invalid UTF-8). Stats go to stderr. An empty "
        "prompt starts\nfrom the corpus separator \"%\\n\" (a new fortune entry); a prompt longer "
        "than the context keeps\nits last context bytes. When the KV cache is full, a fresh one is "
        "prefilled with the last\ncontext/2 bytes, so --max-tokens may exceed the context.\n"
        "Sampling runs on the CPU in double precision with its own seeded generator: the same\n"
        "--seed gives the same bytes wherever the model gives the same logits.\n\n"
        "Example:\n  trit generate runs/gpt_ternary --prompt \"The \" --max-tokens 200 "
        "--temperature 0.8 --top-k 40 --seed 1");
    return {sub, [a]() {
                a->options.seed = parse_seed(a->seed);
                check_generate_options(a->options);
                const torch::Device device = trainers::parse_device(a->device);
                const GenerationModel m = load_generation_model(a->source, device);
                std::cout << a->prompt << std::flush;
                char last = a->prompt.empty() ? '\n' : a->prompt.back();
                const GenerateResult r = generate(
                    *m.model, a->prompt, a->options,
                    [&last](uint8_t byte) {
                        last = static_cast<char>(byte);
                        std::cout.put(last).flush();
                    },
                    m.source);
                if (a->quiet) return 0;
                const GenerateStats& s = r.stats;
                // stdout keeps the bytes exactly; the line break before the stats goes to stderr.
                if (last != '\n') std::cerr << '\n';
                std::cerr << std::fixed << std::setprecision(3) << "generate: " << s.tokens
                          << " bytes; prefill " << s.prompt_tokens << " tokens in "
                          << s.prefill_seconds << " s (" << std::setprecision(0)
                          << s.prefill_tokens_per_s() << " tokens/s); decode " << s.tokens
                          << " tokens in " << std::setprecision(3) << s.decode_seconds << " s ("
                          << std::setprecision(0) << s.decode_tokens_per_s() << " tokens/s); "
                          << s.refills << " window re-prefill" << (s.refills == 1 ? "" : "s")
                          << " (" << device.str() << ")" << std::endl;
                return 0;
            }};
}

}  // namespace trit::cli
