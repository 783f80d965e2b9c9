// `trit bench ...`: benchmarks. `train` measures training throughput of recipes against the first;
// `kernels` the packed-weight product kernels and the b1 GEMMs against cuBLAS on the GPU.
#include <fstream>
#include <iostream>

#include <iomanip>
#include <unistd.h>

#include "bench/kernels.h"
#include "bench/ptq_memory.h"
#include "bench/train_throughput.h"
#include "cli/commands.h"
#include "core/error.h"

namespace trit::cli {
namespace {

// `bench kernels`: flags kept as typed; resolve_kernel_bench_args checks them before any GPU work.
std::function<int()> add_bench_kernels(CLI::App* sub) {
    auto a = std::make_shared<bench::KernelBenchArgs>();
    auto csv = std::make_shared<std::string>();
    CLI::App* k = sub->add_subcommand("kernels",
                                      "Packed-weight product kernels and b1 tensor-core GEMMs "
                                      "against cuBLAS FP16 and INT8 on the same shapes (CUDA GPU)");
    k->add_option(
        "--shapes", a->shapes,
        "Weight shapes NxK (out x in), comma-separated; default: BitNet-2B 2560x2560,6912x2560,"
        "2560x6912, Llama-8B 4096x4096,14336x4096,4096x14336, BWTA 768x768,3072x768,768x3072");
    k->add_option("--m", a->ms, "Rows of x (tokens), comma-separated; default 1,16,64,256,2048");
    k->add_option(
        "--formats", a->formats,
        "Comma-separated: packed formats for the int8-activation product (tern2, tern24, bin1, "
        "bt1..bt4) and b1 GEMMs over bit planes (bin1_tern: bin1 weights x ternary activations, "
        "timed alone and with the float -> ternary quantizer; bool_tern: {0,1} attention x "
        "ternary V; tern_tern: ternary Q x ternary K); default tern2,tern24,bt2,bin1_tern with "
        "bin1_tern at m >= 2");
    k->add_option("--paths", a->paths,
                  "Product paths, comma-separated: auto, gemv, gemm, generic, gemv.stream / "
                  "gemv.warp / gemv.mma (the gemv path with that tern24 GEMV kernel forced; tern24 "
                  "rows only), gemv.oneshot.l<L>r<R>[d<D>] (bt's one-shot nibble GEMV with L lanes "
                  "a row, 16, 32 or 64 (two warps: several scale groups, one or two rows), R rows "
                  "a lane group, 1, 2 or 4, and D pieces requested ahead, "
                  "0, 2 or 4; bt rows at m = 1 only), and gemm.mma_sync / "
                  "gemm.wgmma (the gemm path with that tern2 GEMM kernel forced; tern2, tern24 and "
                  "bt rows (bt with its planes: 128-token tiles); gemm.wgmma.t<N>, N one of 96, "
                  "128, 160, 176, 256, also forces its "
                  "tokens per tile; gemm.wgmma.sk splits every 128-token tile stream-K; "
                  "gemm.wgmma.ks<N>, N 96 or 128, runs its k-split tile of 64 weight rows); "
                  "default auto (the b1 GEMMs always run the tile their chooser "
                  "picks, shown in the path column)");
    k->add_option("--reps", a->reps,
                  "Timed samples per case (at most; a case stops after ~1 s of GPU time)")
        ->capture_default_str();
    k->add_option("--warmup", a->warmup, "Untimed calls per case before timing")
        ->capture_default_str();
    k->add_option("--bt-group", a->bt_group,
                  "bt formats' scale group along k, columns: a positive multiple of 64; a group "
                  ">= k is one group a row")
        ->capture_default_str();
    k->add_option("--bt-scales", a->bt_scales,
                  "bt formats' weight scales: f16 (fp16 values, as a container stores bt's by "
                  "default; the kernels that read halves get the fp16 copy) or f32 (fp32 values)")
        ->capture_default_str();
    k->add_flag("--quick", a->quick,
                "Short run: 20 samples, 3 warm-up calls, m = 1,64,128,2048 (unless given)");
    k->add_option("--csv", *csv, "Also write the rows as CSV to this file");
    k->footer(
        "Method: docs/BENCHMARKS.md. Examples:\n"
        "  trit bench kernels --quick --csv bench-kernels.csv\n"
        "  trit bench kernels --shapes 4096x4096 --m 1,16 --formats tern2 --paths auto,gemv\n"
        "  trit bench kernels --shapes 768x768,3072x768,768x3072 --m 128,256,2048 --formats "
        "bin1_tern");
    return [a, csv, k]() {
        a->reps_given = k->count("--reps") > 0;
        a->warmup_given = k->count("--warmup") > 0;
        const bench::KernelBenchOptions o = bench::resolve_kernel_bench_args(*a);
        std::ofstream out;
        if (!csv->empty()) {  // opened first: a long run must not fail at its end for a bad path
            out.open(*csv);
            TRIT_CHECK(out.good(), "--csv '", *csv, "': cannot write the file");
        }
        const bench::KernelBenchReport report = bench::run_kernel_bench(o, std::cout);
        if (!csv->empty()) {
            out << bench::kernel_csv(report);
            TRIT_CHECK(out.good(), "--csv '", *csv, "': writing failed");
            std::cout << "wrote " << *csv << "\n";
        }
        return 0;
    };
}

// `bench ptq`: a synthetic safetensors decoder through `trit ptq` (this executable) in a child.
std::function<int()> add_bench_ptq(CLI::App* sub) {
    auto o = std::make_shared<bench::PtqBenchOptions>();
    CLI::App* p = sub->add_subcommand(
        "ptq", "Post-training quantization of a synthetic ~1-billion-parameter BF16 safetensors decoder: "
               "time and peak memory of trit ptq");
    p->add_option("--layers", o->layers, "Decoder blocks")->capture_default_str();
    p->add_option("--hidden", o->hidden, "Model width")->capture_default_str();
    p->add_option("--kv-dim", o->kv_dim, "k and v projection outputs")->capture_default_str();
    p->add_option("--intermediate", o->intermediate, "MLP width")->capture_default_str();
    p->add_option("--vocab", o->vocab, "Embedding rows")->capture_default_str();
    p->add_option("--seed", o->seed, "Weights' seed")->capture_default_str();
    p->add_option("--dir", o->dir, "Directory for the model and the output (default: a temporary one)");
    p->add_flag("--keep", o->keep, "Keep the model and the output");
    p->add_option("--ptq-args", o->ptq_args, "Arguments for trit ptq (default: --method bt --depth 2)")
        ->allow_extra_args()
        ->expected(1, 64);
    p->footer("Method: docs/BENCHMARKS.md. Examples:\n  trit bench ptq\n  trit bench ptq --layers 2 --keep --dir /tmp/p\n"
              "  trit bench ptq --ptq-args --method rtn");
    return [o]() {
        char exe[4096];
        const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
        TRIT_CHECK(n > 0, "bench ptq: cannot find this executable (/proc/self/exe)");
        const bench::PtqBenchResult r = bench::run_ptq_bench(*o, std::string(exe, static_cast<size_t>(n)), std::cout);
        const double gb = 1e9;
        std::cout << std::fixed << std::setprecision(2) << "result: " << static_cast<double>(r.params) / gb
                  << " B parameters, model " << static_cast<double>(r.model_bytes) / gb << " GB (BF16), written in "
                  << std::setprecision(1) << r.write_seconds << " s; trit ptq " << r.ptq_seconds << " s, peak memory "
                  << std::setprecision(2) << static_cast<double>(r.peak_rss_bytes) / gb << " GB = "
                  << static_cast<double>(r.peak_rss_bytes) / static_cast<double>(r.model_bytes)
                  << "x the model file; output " << static_cast<double>(r.output_bytes) / gb << " GB" << std::endl;
        return 0;
    };
}

}  // namespace

Command add_bench(CLI::App& app) {
    auto o = std::make_shared<bench::ThroughputOptions>();
    auto csv = std::make_shared<std::string>();
    auto precision = std::make_shared<std::string>("fp32");
    o->recipes = {"recipes/fashion_mnist_fp32.yaml", "recipes/fashion_mnist_ternary.yaml"};
    CLI::App* sub = app.add_subcommand("bench", "Benchmarks (see docs/BENCHMARKS.md)");
    sub->require_subcommand(1);
    CLI::App* train = sub->add_subcommand(
        "train", "Training throughput (samples/s, or tokens/s for language models) of recipes, each against the first");
    train->add_option("--recipes", o->recipes, "Recipe files; the first is the baseline")
        ->capture_default_str();
    train->add_option("--set", o->overrides, "Override a key in every recipe: --set key.path=value");
    train->add_option("--steps", o->steps, "Timed steps per repeat")->capture_default_str();
    train->add_option("--warmup", o->warmup_steps, "Untimed steps first")->capture_default_str();
    train->add_option("--repeats", o->repeats, "Repeats (median reported)")->capture_default_str();
    train->add_option("--device", o->device, "cpu or cuda[:N]")->capture_default_str();
    train->add_option("--precision", *precision, "fp32, or bf16 (autocast; cuda only)")->capture_default_str();
    train->add_option("--csv", *csv, "Also write the results as CSV to this file");
    train->footer("Examples:\n  trit bench train --steps 300 --repeats 5 --csv bench-train.csv\n"
                  "  trit bench train --recipes recipes/gpt_fp32.yaml recipes/gpt_ternary.yaml --device cuda");
    std::function<int()> run_kernels = add_bench_kernels(sub);
    std::function<int()> run_ptq = add_bench_ptq(sub);
    CLI::App* ptq = sub->get_subcommand("ptq");
    return {sub, [o, csv, precision, train, run_kernels, run_ptq, ptq]() {
        if (ptq->parsed()) return run_ptq();
        if (!train->parsed()) return run_kernels();
        o->precision = trainers::parse_precision(*precision);
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
