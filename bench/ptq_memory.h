// `trit bench ptq`: post-training quantization of a large synthetic safetensors model, for time and
// peak memory. Writes a BF16 model with the tensor names and shapes of a Llama-style decoder
// (embedding, per block q/k/v/o projections with grouped-query k/v, gate/up/down MLP and two
// RMSNorm weights, a final norm; tied output head), streamed so that writing it needs little
// memory; then runs `trit ptq` on it in a child process and reads the child's peak resident set
// size from the kernel (wait4's ru_maxrss), so the figure is the ptq run's alone, mapped file pages
// included.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace trit::bench {

struct PtqBenchOptions {
    int64_t layers = 16;         // decoder blocks
    int64_t hidden = 2048;       // model width
    int64_t kv_dim = 512;        // k and v projections' outputs (grouped-query attention)
    int64_t intermediate = 8192; // MLP width
    int64_t vocab = 32000;       // embedding rows
    uint64_t seed = 0;           // weights ~ N(0, 0.02^2), norms 1
    std::string dir;             // where the model and the output go (default: a temporary dir)
    bool keep = false;           // keep the files
    std::vector<std::string> ptq_args = {"--method", "bt", "--depth", "2"};  // passed to trit ptq
};

struct PtqBenchResult {
    int64_t params = 0;
    int64_t model_bytes = 0;   // the safetensors file
    int64_t output_bytes = 0;  // the packed model file
    double write_seconds = 0;  // writing the synthetic model
    double ptq_seconds = 0;    // wall time of the trit ptq child
    int64_t peak_rss_bytes = 0;  // the child's ru_maxrss
    int exit_code = 0;           // the child's
    std::string model_path, output_path;
};

// The model's tensor names and shapes, in file order.
std::vector<std::pair<std::string, std::vector<int64_t>>> synthetic_decoder_tensors(const PtqBenchOptions& o);

// Writes the model, runs `<trit_exe> ptq --model <model> -o <out> <ptq_args>` (its output goes to
// `log`'s file descriptor, stdout), removes the files unless keep.
PtqBenchResult run_ptq_bench(const PtqBenchOptions& o, const std::string& trit_exe, std::ostream& log);

}  // namespace trit::bench
