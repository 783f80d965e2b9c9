// `trit bench kernels`: its flags, table and CSV (see kernels.h). No CUDA here, so that the CLI
// parses and the tests run on machines without a GPU or without nvcc.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <iomanip>
#include <sstream>

#include "bench/kernels.h"
#include "core/error.h"
#include "exporters/format_table.h"
#include "kernels/tern2_gemm_sm90_tile.h"

namespace trit::bench {
namespace {

// Sizes beyond this are typos, not benchmarks (and cuBLAS takes int dimensions).
constexpr int64_t kMaxDim = int64_t{1} << 20;

std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> items;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ','))
        items.push_back(item);
    if (!text.empty() && text.back() == ',') items.emplace_back();  // "1,2," has an empty item
    return items;
}

// A decimal integer in [1, kMaxDim], or false (no sign, no spaces, no suffix).
bool parse_dim(const std::string& s, int64_t* v) {
    if (s.empty() || s.size() > 7 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
    *v = std::stoll(s);
    return *v >= 1 && *v <= kMaxDim;
}

template <typename T, typename Key>
void check_unique(const char* flag, const std::vector<T>& items, Key key, const std::string& text) {
    for (size_t i = 0; i < items.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            TRIT_CHECK(key(items[i]) != key(items[j]), flag, ": '", key(items[i]),
                       "' is listed twice in '", text, "'");
}

std::string fixed(double v, int digits) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(digits) << v;
    return os.str();
}

}  // namespace

bool is_b1_format(const std::string& name) {
    return name == "bin1_tern" || name == "bool_tern" || name == "tern_tern";
}

const char* b1_format_names() {
    return "bin1_tern, bool_tern, tern_tern";
}

std::vector<KernelShape> default_kernel_shapes() {
    return {{2560, 2560, "BitNet-2B"}, {6912, 2560, "BitNet-2B"}, {2560, 6912, "BitNet-2B"},
            {4096, 4096, "Llama-8B"},  {14336, 4096, "Llama-8B"}, {4096, 14336, "Llama-8B"},
            {768, 768, "BWTA"},        {3072, 768, "BWTA"},       {768, 3072, "BWTA"}};
}

std::vector<KernelShape> parse_shapes(const std::string& text) {
    const std::vector<KernelShape> known = default_kernel_shapes();
    std::vector<KernelShape> shapes;
    for (const std::string& item : split_list(text)) {
        const size_t x = item.find('x');
        KernelShape s;
        const bool ok = x != std::string::npos && parse_dim(item.substr(0, x), &s.n) &&
                        parse_dim(item.substr(x + 1), &s.k);
        TRIT_CHECK(ok, "--shapes: expected NxK (out x in) with N, K in 1..", kMaxDim,
                   ", comma-separated, got '", item, "'");
        for (const KernelShape& d : known)
            if (d.n == s.n && d.k == s.k) s.model = d.model;
        shapes.push_back(s);
    }
    TRIT_CHECK(!shapes.empty(), "--shapes: expected NxK,... (e.g. 4096x4096), got an empty list");
    check_unique(
        "--shapes", shapes,
        [](const KernelShape& s) { return std::to_string(s.n) + "x" + std::to_string(s.k); }, text);
    return shapes;
}

std::vector<int64_t> parse_m_list(const std::string& text) {
    std::vector<int64_t> ms;
    for (const std::string& item : split_list(text)) {
        int64_t m = 0;
        TRIT_CHECK(parse_dim(item, &m), "--m: expected a comma-separated list of row counts in 1..",
                   kMaxDim, ", got '", item, "'");
        ms.push_back(m);
    }
    TRIT_CHECK(!ms.empty(),
               "--m: expected a comma-separated list of row counts (e.g. 1,16), got an empty list");
    check_unique(
        "--m", ms, [](int64_t m) { return std::to_string(m); }, text);
    return ms;
}

std::vector<KernelFormat> parse_format_list(const std::string& text) {
    std::vector<KernelFormat> formats;
    for (const std::string& item : split_list(text)) {
        if (is_b1_format(item)) {  // named formats run at every m
            formats.push_back({item, INT64_MAX, 1});
            continue;
        }
        exporters::FormatId f;
        try {
            f = exporters::parse_format(item);
        } catch (const Error& e) {
            TRIT_FAIL("--formats: ", e.what(), "; or a b1 GEMM: ", b1_format_names());
        }
        TRIT_CHECK(f.packed(), "--formats: expected packed formats (", exporters::known_formats(),
                   ") or b1 GEMMs (", b1_format_names(), "), got '", item, "'");
        formats.push_back({f.name(), INT64_MAX, 1});
    }
    TRIT_CHECK(!formats.empty(), "--formats: expected a comma-separated list of ",
               exporters::known_formats(), ", ", b1_format_names(), ", got an empty list");
    check_unique(
        "--formats", formats, [](const KernelFormat& f) { return f.name; }, text);
    return formats;
}

int wgmma_tokens_path(const std::string& path) {
    for (const std::string prefix : {"gemm.wgmma.t", "gemm.wgmma.ks"}) {
        // Digits only, no leading zero, at most three (so that stoi cannot overflow).
        if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size() ||
            path.size() > prefix.size() + 3 || path[prefix.size()] == '0' ||
            path.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
            continue;
        const int tokens = std::stoi(path.substr(prefix.size()));
        if (prefix == "gemm.wgmma.ks") return tokens == 96 || tokens == 128 ? tokens : 0;
        return kernels::detail::tern2_gemm_sm90_tokens_ok(tokens) ? tokens : 0;
    }
    return 0;
}

bool nib4_geometry_path(const std::string& path, Nib4Geometry* g) {
    // gemv.oneshot.l<L>r<R>[d<D>]: each value one of a few, written as such (no leading zeros).
    const std::string prefix = "gemv.oneshot.";
    if (path.rfind(prefix, 0) != 0) return false;
    size_t at = prefix.size();
    // Reads `letter` and one of `allowed` at `at` into *out and moves past them; false otherwise.
    const auto take = [&](char letter, std::initializer_list<int> allowed, int* out) {
        if (at >= path.size() || path[at] != letter) return false;
        const size_t end = path.find_first_not_of("0123456789", at + 1);
        const std::string digits =
            path.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
        for (int a : allowed)
            if (digits == std::to_string(a)) {
                *out = a;
                at = end == std::string::npos ? path.size() : end;
                return true;
            }
        return false;
    };
    Nib4Geometry v;
    if (!take('l', {16, 32, 64}, &v.lanes) || !take('r', {1, 2, 4}, &v.rows)) return false;
    if (at < path.size() && (!take('d', {0, 2, 4}, &v.ahead) || at != path.size())) return false;
    if (g != nullptr) *g = v;
    return true;
}

std::vector<std::string> parse_path_list(const std::string& text) {
    std::vector<std::string> paths;
    for (const std::string& item : split_list(text)) {
        TRIT_CHECK(item == "auto" || item == "gemv" || item == "gemm" || item == "generic" ||
                       item == "gemv.stream" || item == "gemv.warp" || item == "gemv.mma" ||
                       nib4_geometry_path(item, nullptr) || item == "gemm.mma_sync" ||
                       item == "gemm.wgmma" || item == "gemm.wgmma.sk" ||
                       wgmma_tokens_path(item) > 0,
                   "--paths: expected auto, gemv, gemm, generic, gemv.stream, gemv.warp, gemv.mma, "
                   "gemv.oneshot.l<L>r<R>[d<D>] (L: 16, 32 or 64, R: 1, 2 or 4, D: 0, 2 or 4), "
                   "gemm.mma_sync, gemm.wgmma, gemm.wgmma.sk, gemm.wgmma.t<N> (N: ",
                   kernels::detail::tern2_gemm_sm90_tokens_text(),
                   ") or gemm.wgmma.ks<N> (N: 96 or 128), comma-separated, got '", item, "'");
        paths.push_back(item);
    }
    TRIT_CHECK(!paths.empty(),
               "--paths: expected auto, gemv, gemm, generic, gemv.stream, gemv.warp, gemv.mma, "
               "gemv.oneshot.l<L>r<R>[d<D>], gemm.mma_sync, gemm.wgmma, gemm.wgmma.sk, "
               "gemm.wgmma.t<N> or gemm.wgmma.ks<N>, got an empty list");
    check_unique(
        "--paths", paths, [](const std::string& p) { return p; }, text);
    return paths;
}

KernelBenchOptions resolve_kernel_bench_args(const KernelBenchArgs& a) {
    KernelBenchOptions o;
    o.shapes = a.shapes.empty() ? default_kernel_shapes() : parse_shapes(a.shapes);
    if (!a.ms.empty()) {
        o.ms = parse_m_list(a.ms);
    } else {
        // 128: the bin1 x ternary target is stated at m >= 128 (docs/BENCHMARKS.md).
        o.ms = a.quick ? std::vector<int64_t>{1, 64, 128, 2048}
                       : std::vector<int64_t>{1, 16, 64, 256, 2048};
    }
    o.formats = a.formats.empty() ? std::vector<KernelFormat>{{"tern2", INT64_MAX, 1},
                                                              {"tern24", INT64_MAX, 1},
                                                              {"bt2", INT64_MAX, 1},
                                                              {"bin1_tern", INT64_MAX, 2}}
                                  : parse_format_list(a.formats);
    o.paths = a.paths.empty() ? std::vector<std::string>{"auto"} : parse_path_list(a.paths);
    if (a.reps_given) TRIT_CHECK(a.reps >= 1, "--reps: expected a sample count >= 1, got ", a.reps);
    if (a.warmup_given)
        TRIT_CHECK(a.warmup >= 0, "--warmup: expected a call count >= 0, got ", a.warmup);
    o.reps = a.reps_given ? a.reps : (a.quick ? 20 : 100);
    o.warmup = a.warmup_given ? a.warmup : (a.quick ? 3 : 10);
    o.budget_s = a.quick ? 0.25 : 1.0;
    TRIT_CHECK(a.bt_group >= 64 && a.bt_group % 64 == 0,
               "--bt-group: expected a positive multiple of 64 (columns a bt scale group), got ",
               a.bt_group);
    o.bt_group = a.bt_group;
    TRIT_CHECK(a.bt_scales == "f16" || a.bt_scales == "f32",
               "--bt-scales: expected f16 or f32 (the bt weight scales' type), got '", a.bt_scales,
               "'");
    o.bt_half_scales = a.bt_scales == "f16";
    return o;
}

void finish_row(KernelRow& r, double copy_gbps) {
    if (r.median_us <= 0) return;
    r.gbps = r.bytes / (r.median_us * 1e3);  // bytes / ns = GB/s
    r.pct_copy = copy_gbps > 0 ? 100.0 * r.gbps / copy_gbps : 0;
    r.tops = r.ops / (r.median_us * 1e6);  // ops / ps = TOP/s
}

// Columns: model, kernel, format, path, m, n, k, median, p10, p90 (µs), GB/s, % of copy, TOP/s,
// speed-ups against cuBLAS; a row that was not timed shows its note instead of the figures.
std::string kernel_table_header() {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%-10s %-16s %-9s %-12s %5s %6s %6s %10s %10s %10s %8s %6s %7s %7s %7s\n", "model",
                  "kernel", "format", "path", "m", "n", "k", "median_us", "p10_us", "p90_us",
                  "GB/s", "%copy", "TOP/s", "xFP16", "xINT8");
    return buf;
}

std::string kernel_table_line(const KernelRow& r) {
    char head[160];
    std::snprintf(head, sizeof head, "%-10s %-16s %-9s %-12s %5lld %6s %6lld ",
                  r.model.empty() ? "-" : r.model.c_str(), r.kernel.c_str(), r.format.c_str(),
                  r.path.c_str(), static_cast<long long>(r.m),
                  r.n > 0 ? std::to_string(r.n).c_str() : "-", static_cast<long long>(r.k));
    std::string line = head;
    if (r.samples == 0) return line + "-- " + r.note + "\n";
    auto ratio = [](double v) { return v > 0 ? fixed(v, 2) : std::string("-"); };
    char rest[200];
    std::snprintf(rest, sizeof rest, "%10.2f %10.2f %10.2f %8.1f %6.1f %7.2f %7s %7s", r.median_us,
                  r.p10_us, r.p90_us, r.gbps, r.pct_copy, r.tops, ratio(r.vs_fp16).c_str(),
                  ratio(r.vs_int8).c_str());
    return line + rest + (r.note.empty() ? "" : "  " + r.note) + "\n";
}

std::string kernel_csv(const KernelBenchReport& rep) {
    // Device and date on every row: CSVs of several runs can be concatenated and still compared.
    std::ostringstream os;
    os << "device,date,model,kernel,format,path,m,n,k,samples,batch,copies,median_us,min_us,p10_us,"
          "p90_us,bytes,gbps,"
          "pct_copy,tops,copy_gbps,vs_cublas_fp16,vs_cublas_int8,note\n";
    auto quoted = [](const std::string& s) {
        std::string q = "\"";
        for (char c : s)
            q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    };
    for (const KernelRow& r : rep.rows) {
        os << quoted(rep.device) << ',' << rep.date << ',' << r.model << ',' << r.kernel << ','
           << r.format << ',' << r.path << ',' << r.m << ',' << r.n << ',' << r.k << ','
           << r.samples << ',' << r.batch << ',' << r.copies << ',' << fixed(r.median_us, 3) << ','
           << fixed(r.min_us, 3) << ',' << fixed(r.p10_us, 3) << ',' << fixed(r.p90_us, 3) << ','
           << fixed(r.bytes, 0) << ',' << fixed(r.gbps, 2) << ',' << fixed(r.pct_copy, 2) << ','
           << fixed(r.tops, 4) << ',' << fixed(rep.copy_gbps, 2) << ',' << fixed(r.vs_fp16, 4)
           << ',' << fixed(r.vs_int8, 4) << ',' << quoted(r.note) << '\n';
    }
    return os.str();
}

#if !defined(TRIT_HAVE_CUDA)
KernelBenchReport run_kernel_bench(const KernelBenchOptions&, std::ostream&) {
    TRIT_FAIL(
        "bench kernels: this trit was built without CUDA (TRIT_CUDA=OFF or no nvcc at configure "
        "time), so it cannot run "
        "GPU kernels; rebuild on a machine with the CUDA toolkit (cmake -DTRIT_CUDA=ON)");
}
#endif

}  // namespace trit::bench
