// `trit bench ptq`: see ptq_memory.h.
#include "bench/ptq_memory.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <ostream>

#include "core/error.h"
#include "core/fs.h"
#include "core/safetensors.h"

namespace trit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> synthetic_decoder_tensors(const PtqBenchOptions& o) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    t.push_back({"model.embed_tokens.weight", {o.vocab, o.hidden}});
    for (int64_t i = 0; i < o.layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        t.push_back({p + "input_layernorm.weight", {o.hidden}});
        t.push_back({p + "self_attn.q_proj.weight", {o.hidden, o.hidden}});
        t.push_back({p + "self_attn.k_proj.weight", {o.kv_dim, o.hidden}});
        t.push_back({p + "self_attn.v_proj.weight", {o.kv_dim, o.hidden}});
        t.push_back({p + "self_attn.o_proj.weight", {o.hidden, o.hidden}});
        t.push_back({p + "post_attention_layernorm.weight", {o.hidden}});
        t.push_back({p + "mlp.gate_proj.weight", {o.intermediate, o.hidden}});
        t.push_back({p + "mlp.up_proj.weight", {o.intermediate, o.hidden}});
        t.push_back({p + "mlp.down_proj.weight", {o.hidden, o.intermediate}});
    }
    t.push_back({"model.norm.weight", {o.hidden}});
    return t;
}

PtqBenchResult run_ptq_bench(const PtqBenchOptions& o, const std::string& trit_exe, std::ostream& log) {
    TRIT_CHECK(o.layers >= 1 && o.hidden >= 1 && o.kv_dim >= 1 && o.intermediate >= 1 && o.vocab >= 1,
               "bench ptq: --layers, --hidden, --kv-dim, --intermediate and --vocab must be >= 1");
    PtqBenchResult r;
    const std::string dir = o.dir.empty() ? fs::make_temp_dir("trit-bench-ptq") : o.dir;
    if (!o.dir.empty()) fs::make_dirs(dir);
    r.model_path = fs::join(dir, "synthetic.safetensors");
    r.output_path = fs::join(dir, "synthetic-ptq.h5");

    const auto tensors = synthetic_decoder_tensors(o);
    std::vector<SafetensorsEntry> entries;
    for (const auto& [name, shape] : tensors) {
        entries.push_back({name, SafetensorsDtype::BF16, shape});
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        r.params += n;
    }
    log << "bench ptq: writing a synthetic BF16 decoder of " << r.params << " parameters (" << o.layers
        << " blocks, hidden " << o.hidden << ", k/v " << o.kv_dim << ", MLP " << o.intermediate << ", vocab "
        << o.vocab << ") to " << r.model_path << std::endl;
    auto t0 = Clock::now();
    {
        SafetensorsWriter w(r.model_path, entries, {{"format", "pt"}, {"producer", "trit bench ptq"}});
        torch::Generator gen = at::detail::createCPUGenerator(o.seed);
        constexpr int64_t kChunk = int64_t{1} << 22;
        for (const auto& [name, shape] : tensors) {
            int64_t n = 1;
            for (int64_t d : shape) n *= d;
            if (shape.size() == 1) {  // a norm weight
                w.write(name, torch::ones({n}));
                continue;
            }
            for (int64_t done = 0; done < n; done += kChunk) {
                const int64_t c = std::min(kChunk, n - done);
                w.write(name, torch::randn({c}, gen, torch::kFloat32) * 0.02);
            }
        }
        w.close();
    }
    r.write_seconds = seconds_since(t0);
    r.model_bytes = fs::file_size(r.model_path);
    log << "bench ptq: wrote " << r.model_bytes << " bytes in " << r.write_seconds << " s; running trit ptq"
        << std::endl;

    std::vector<std::string> args = {trit_exe, "ptq", "--model", r.model_path, "-o", r.output_path};
    args.insert(args.end(), o.ptq_args.begin(), o.ptq_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    log.flush();
    t0 = Clock::now();
    const pid_t pid = ::fork();
    TRIT_CHECK(pid >= 0, "bench ptq: fork failed: ", std::strerror(errno));
    if (pid == 0) {
        ::execv(trit_exe.c_str(), argv.data());
        std::perror("bench ptq: exec trit");
        ::_exit(127);
    }
    int status = 0;
    struct rusage ru;
    std::memset(&ru, 0, sizeof ru);
    TRIT_CHECK(::wait4(pid, &status, 0, &ru) == pid, "bench ptq: wait4 failed: ", std::strerror(errno));
    r.ptq_seconds = seconds_since(t0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.peak_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
    if (r.exit_code == 0) r.output_bytes = fs::file_size(r.output_path);
    if (!o.keep) {
        fs::remove_file(r.model_path);
        fs::remove_file(r.output_path);
        fs::remove_file(fs::join(dir, "synthetic-ptq.report.txt"));
        if (o.dir.empty()) fs::remove_tree(dir);
    }
    TRIT_CHECK(r.exit_code == 0, "bench ptq: trit ptq exited with ", r.exit_code);
    return r;
}

}  // namespace trit::bench
