// Kernel benchmark (`trit bench kernels`): the packed-weight products (kernels/product.h) and the
// b1 tensor-core GEMMs over tbits planes (kernels/bin1_gemm.h) against cuBLAS FP16 and INT8 on the
// same (m, n, k), next to the device-to-device copy bandwidth measured in the same run, plus the
// int8 activation quantizer alone and fused with a product at m = 1, and the fused float ->
// ternary planes quantizer with the bin1 x ternary GEMM (a BWTA layer).
//
// Method (docs/BENCHMARKS.md): per case one checked call, then warm-up, then samples timed with
// CUDA events. Each sample holds the stream behind a host-function gate until the host has enqueued
// the whole sample (start event, B calls, stop event), so the events time the GPU's work only,
// never the host's launch latency; a sample's time per call is its elapsed time / B, and B grows
// for calls shorter than ~50 µs so the events' ~0.5 µs resolution does not dominate. Weights (and
// their scales) cycle through ceil(2 * L2 / bytes) + 1 copies, one copy per call, so they come
// from DRAM. Reported: median, min, p10 and p90 of the per-call times.
//
// This header and kernels_options.cpp (parsing, table, CSV) build everywhere; the measurement
// (kernels.cpp, gpu_timing.h/.cpp) only where TRIT_HAVE_CUDA, so the CLI and tests can parse
// without a GPU.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace trit::bench {

// An (n, k) = (out, in) weight shape and the model it comes from ("" for a user's own shape).
struct KernelShape {
    int64_t n = 0, k = 0;
    std::string model;
};

// A format to bench and the m range it runs at (bt's only fast kernel is a gemv: larger m would
// time the generic fallback, a correctness baseline, so the default list stops bt2 at 8; the b1
// GEMMs are GEMMs, tiled 16 rows at least, so the default list starts bin1_tern at 2).
struct KernelFormat {
    // A packed weight format for product() (exporters::parse_format name: tern2, tern24, bin1,
    // bt1..bt4), or a b1 GEMM case (is_b1_format: bin1_tern, bool_tern, tern_tern).
    std::string name;
    int64_t max_m = INT64_MAX;
    int64_t min_m = 1;
};

// The b1 GEMM cases --formats takes next to the packed formats, as kernels::bin1_gemm runs them:
//     bin1_tern  bin1 weights (1 plane, (n, k)) x ternary activations (2 planes, (m, k))
//     bool_tern  {0,1} attention Att (m, k) x ternary V (given as Vᵀ rows, (n, k))
//     tern_tern  ternary Q (m, k) x ternary K (n, k)
bool is_b1_format(const std::string& name);
const char* b1_format_names();  // "bin1_tern, bool_tern, tern_tern"

// The flags as typed (strings: every list is parsed and checked by resolve_kernel_bench_args).
struct KernelBenchArgs {
    std::string shapes, ms, formats, paths;  // "" = default
    int64_t reps = 100, warmup = 10;
    int64_t bt_group = 64;  // --bt-group
    std::string bt_scales = "f16";  // --bt-scales
    bool reps_given = false, warmup_given = false;
    bool quick = false;
};

struct KernelBenchOptions {
    std::vector<KernelShape> shapes;
    std::vector<int64_t> ms;
    std::vector<KernelFormat> formats;
    // auto, gemv, gemm, generic, gemv.stream, gemv.warp, gemv.mma, gemv.oneshot.l<L>r<R>[d<D>],
    // gemm.mma_sync, gemm.wgmma, gemm.wgmma.sk, gemm.wgmma.t<N>, gemm.wgmma.ks<N> (product() rows
    // only; gemv.stream/warp/mma force that tern24 GEMV kernel, tern24 rows only;
    // gemv.oneshot.l<L>r<R>[d<D>] bt's one-shot nibble GEMV with that geometry, bt rows at m = 1
    // only; the gemm.* paths force that tern2 GEMM kernel, t<N> its tokens per tile, sk
    // stream-K, ks<N> its k-split tile with N tokens; tern2, tern24 and bt rows)
    std::vector<std::string> paths;
    int64_t reps = 100;     // timed samples per case (fewer when the case's budget runs out)
    int64_t warmup = 10;    // untimed calls per case (fewer for calls slower than ~50 ms)
    double budget_s = 1.0;  // timed GPU seconds per case, at least 5 samples
    // bt formats' scale group along k: a positive multiple of 64 (the container's default 64);
    // min(bt_group, k) columns a group, so any group >= k is one group a row.
    int64_t bt_group = 64;
    // bt formats' weight scales (--bt-scales): fp16 values, given to the kernels as floats and as
    // their fp16 copy (ProductOut::w_scale_half), as the GPU runtime gives a container's fp16
    // scales (the default for bt); or (false) fp32 values, floats only.
    bool bt_half_scales = true;
};

// The defaults: BitNet-2B, Llama-8B and BWTA projection shapes; m = 1, 16, 64, 256, 2048; tern2,
// tern24, bt2, bin1_tern (m >= 2); path auto.
std::vector<KernelShape> default_kernel_shapes();

// Parsers of one flag each; errors name the flag and say what was expected and what was given.
std::vector<KernelShape> parse_shapes(const std::string& text);        // "NxK,NxK"
std::vector<int64_t> parse_m_list(const std::string& text);            // "1,16,64"
std::vector<KernelFormat> parse_format_list(const std::string& text);  // "tern2,bin1_tern"
std::vector<std::string> parse_path_list(const std::string& text);     // "auto,gemv"
// N of a "gemm.wgmma.t<N>" path whose N is a tile's token count of the wgmma kernel, or of a
// "gemm.wgmma.ks<N>" path (its k-split tile) whose N is 96 or 128, else 0.
int wgmma_tokens_path(const std::string& path);
// The lane geometry a "gemv.oneshot.l<L>r<R>[d<D>]" path forces on bt's one-shot nibble GEMV
// (kernels/bt_nib4.h bt_nib4_oneshot's lanes, rows and ahead): L lanes a row (16, 32 or 64), R rows
// a lane group (1, 2 or 4), D pieces requested ahead (0, 2 or 4; without d: the kernel's rule, -1).
struct Nib4Geometry {
    int lanes = 0, rows = 0, ahead = -1;
};
// True, with the geometry in *g, when `path` is such a path with allowed values.
bool nib4_geometry_path(const std::string& path, Nib4Geometry* g);
// Defaults filled in, --quick applied (20 samples, 3 warm-up calls, m = 1,64,128,2048, 0.25 s per
// case, each unless given), every value checked.
KernelBenchOptions resolve_kernel_bench_args(const KernelBenchArgs& args);

struct KernelRow {
    std::string model;  // shape's model, "" for act_int8 and user shapes
    // product, cublas_fp16, cublas_int8, act_int8, act_int8+product, b1_gemm, pack+b1_gemm, copy
    std::string kernel;
    std::string format;  // tern2, tern24, bt2, bin1_tern, bool_tern, tern_tern, fp16, int8, -
    // product: path taken (auto: choose_path's), "gemv*" when forced by --paths; b1: the tile
    // bin1_gemm_choose_tile picks (tiny, small, medium, wide, large), "small+kg4" with k groups
    // (bin1_gemm_k_groups); else -
    std::string path;
    int64_t m = 0, n = 0, k = 0;
    int64_t samples = 0, batch = 0;  // timed samples, calls per sample; 0 when not timed
    int64_t copies = 0;              // rotation copies of the weights (act_int8: of x)
    double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
    double bytes = 0;  // bytes one call moves: weights (+ scales, bias) + x (+ scales) + y
    double ops = 0;    // 2 * m * n * k, 0 where not a product
    double gbps = 0, pct_copy = 0, tops = 0;
    double vs_fp16 = 0, vs_int8 = 0;  // cuBLAS time / this time; 0 when not measured
    std::string note;  // why not timed (a kernel's contract, cuBLAS refusal), or empty
};

struct KernelBenchReport {
    std::string device;  // one line: name, SMs, clocks, L2, versions
    std::string date;    // UTC, ISO 8601
    double copy_gbps = 0;
    std::vector<KernelRow> rows;
};

// Fills the derived columns (GB/s, % copy, TOP/s) of a timed row.
void finish_row(KernelRow& row, double copy_gbps);
// Fixed-width table: header line, and one line per row (so rows can be printed as they come).
std::string kernel_table_header();
std::string kernel_table_line(const KernelRow& row);
std::string kernel_csv(const KernelBenchReport& report);

// Runs the benchmark on GPU 0, printing the device, the copy bandwidth and each row to `out` as it
// is measured. Throws trit::Error when there is no GPU or trit was built without CUDA.
KernelBenchReport run_kernel_bench(const KernelBenchOptions& options, std::ostream& out);

}  // namespace trit::bench
