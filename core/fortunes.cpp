// Fortune corpus reader and byte-window samplers: see fortunes.h. Any change to entry
// normalization, fortune_split_key or the sampler's seeding changes which bytes a run trains and
// validates on; tests/test_fortunes.cpp pins them with golden values.
#include "core/fortunes.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/fs.h"

namespace trit::data {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr double kLn2 = 0.693147180559945309417232121458176568;

// splitmix64's output function (Steele, Lea & Flood): a bijection that spreads every input bit
// over the whole word, which FNV-1a alone does poorly for its high bits on short inputs.
uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

bool is_blank(const std::string& line) {
    return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

// Appends the entry made of `lines`, trimmed of blank lines at both ends, to `out` unless nothing
// is left.
void flush_entry(const std::vector<std::string>& lines, std::vector<std::string>& out) {
    size_t first = 0;
    size_t last = lines.size();
    while (first < last && is_blank(lines[first]))
        ++first;
    while (last > first && is_blank(lines[last - 1]))
        --last;
    if (first == last) return;
    std::string entry;
    for (size_t i = first; i < last; ++i) {
        entry += lines[i];
        entry += '\n';
    }
    out.push_back(std::move(entry));
}

// Uniform in [0, bound) from mt19937_64's raw output: rejects the 2^64 mod bound lowest values so
// every residue is equally likely (as in core/sampler.cpp).
uint64_t below(std::mt19937_64& rng, uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        const uint64_t r = rng();
        if (r >= threshold) return r % bound;
    }
}

// The names in `dir` (without "." and ".."), sorted byte-wise.
std::vector<std::string> list_dir(const std::string& dir) {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    TRIT_CHECK(d != nullptr, dir, ": cannot list the fortunes directory (", std::strerror(errno),
               ")");
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(d.get())) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
        errno = 0;
    }
    TRIT_CHECK(errno == 0, dir, ": cannot list the fortunes directory (", std::strerror(errno),
               ")");
    std::sort(names.begin(), names.end());
    return names;
}

std::string read_file(const std::string& path) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    TRIT_CHECK(f != nullptr, path, ": cannot open (", std::strerror(errno), ")");
    std::string text;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0)
        text.append(buf, n);
    TRIT_CHECK(!std::ferror(f.get()), path, ": read error (", std::strerror(errno), ")");
    const size_t nul = text.find('\0');
    TRIT_CHECK(nul == std::string::npos, path, ": NUL byte at offset ", nul,
               "; expected a text fortune file (binary files need an extension, like the .dat "
               "indexes, to be skipped)");
    return text;
}

void append(std::vector<uint8_t>& dst, const std::string& entry) {
    dst.insert(dst.end(), entry.begin(), entry.end());
    for (const char* s = kFortuneSeparator; *s; ++s)
        dst.push_back(static_cast<uint8_t>(*s));
}

void check_window_args(const char* who, size_t bytes, int64_t context) {
    TRIT_CHECK(context >= 1, who, ": context must be >= 1 byte, got ", context);
    TRIT_CHECK(static_cast<uint64_t>(bytes) >= static_cast<uint64_t>(context) + 1, who,
               ": the split holds ", bytes,
               " bytes; expected at least context + 1 = ", static_cast<uint64_t>(context) + 1,
               " bytes for one window (a shorter context or a larger split)");
}

// input = bytes[s .. s + len), target = bytes[s + 1 .. s + len] for each start s: (B, len) each.
LmBatch make_batch(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& starts,
                   int64_t len) {
    const auto rows = static_cast<int64_t>(starts.size());
    LmBatch b;
    b.input = torch::empty({rows, len}, torch::kInt64);
    b.target = torch::empty({rows, len}, torch::kInt64);
    int64_t* in = b.input.data_ptr<int64_t>();
    int64_t* tg = b.target.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* src = bytes.data() + starts[r];
        for (int64_t t = 0; t < len; ++t) {
            in[r * len + t] = src[t];
            tg[r * len + t] = src[t + 1];
        }
    }
    return b;
}

}  // namespace

std::vector<std::string> fortune_entries(const std::string& text) {
    std::vector<std::string> entries;
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        const size_t next = end == std::string::npos ? text.size() : end + 1;
        if (end == std::string::npos) end = text.size();
        while (end > pos && text[end - 1] == '\r')
            --end;
        std::string line = text.substr(pos, end - pos);
        pos = next;
        if (line == "%") {
            flush_entry(lines, entries);
            lines.clear();
        } else {
            lines.push_back(std::move(line));
        }
    }
    flush_entry(lines, entries);
    return entries;
}

double fortune_split_key(const std::string& entry) {
    uint64_t h = kFnvOffset;
    for (const char c : entry) {
        h ^= static_cast<uint8_t>(c);
        h *= kFnvPrime;
    }
    // 53 bits: exactly representable, and the product by 2^-53 is exact.
    return static_cast<double>(mix64(h) >> 11) * 0x1.0p-53;
}

TextCorpus load_fortunes(const std::string& dir, double valid_fraction) {
    TRIT_CHECK(valid_fraction > 0.0 && valid_fraction < 1.0,
               "load_fortunes: valid_fraction must be in (0, 1), got ", valid_fraction);
    TRIT_CHECK(fs::exists(dir), dir,
               ": fortunes directory missing; expected a directory of fortune text files (install "
               "Debian's with `apt-get install fortunes`)");
    TRIT_CHECK(fs::is_dir(dir), dir,
               ": not a directory; expected a directory of fortune text files");

    TextCorpus corpus;
    std::set<std::pair<uint64_t, uint64_t>> seen;  // (device, inode) of the files read
    int64_t total_entries = 0;
    for (const std::string& name : list_dir(dir)) {
        if (name.find('.') != std::string::npos) continue;
        const std::string path = fs::join(dir, name);
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (!seen.emplace(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino))
                 .second)
            continue;
        corpus.files.push_back(name);
        for (const std::string& entry : fortune_entries(read_file(path))) {
            ++total_entries;
            if (fortune_split_key(entry) < valid_fraction) {
                append(corpus.valid, entry);
                ++corpus.valid_entries;
            } else {
                append(corpus.train, entry);
                ++corpus.train_entries;
            }
        }
    }
    TRIT_CHECK(!corpus.files.empty(), dir,
               ": no fortune text files; expected regular files without an extension (like "
               "`cookie`) holding entries separated by lines of a single %; .dat indexes, .u8 "
               "links, hidden files and subdirectories are skipped");
    TRIT_CHECK(total_entries > 0, dir, ": the ", corpus.files.size(), " fortune files (",
               corpus.files.front(), corpus.files.size() > 1 ? ", ..." : "",
               ") hold no entries; expected text separated by lines of a single %");
    TRIT_CHECK(corpus.valid_entries > 0 && corpus.train_entries > 0, dir, ": ", total_entries,
               " entries give ", corpus.train_entries, " training and ", corpus.valid_entries,
               " validation entries at valid_fraction ", valid_fraction,
               "; expected both splits non-empty (more entries, or another valid_fraction)");
    return corpus;
}

LmWindowSampler::LmWindowSampler(std::vector<uint8_t> bytes, int64_t context, uint64_t seed)
    : bytes_(std::move(bytes)), context_(context), seed_(seed) {
    check_window_args("LmWindowSampler", bytes_.size(), context_);
}

LmBatch LmWindowSampler::next(int64_t batch) {
    LmBatch b = at(step_, batch);
    ++step_;
    return b;
}

LmBatch LmWindowSampler::at(int64_t step, int64_t batch) const {
    TRIT_CHECK(step >= 0, "LmWindowSampler: step must be >= 0, got ", step);
    TRIT_CHECK(batch >= 1, "LmWindowSampler: batch must be >= 1 window, got ", batch);
    // Mix the seed before the step goes in, so nearby seeds and steps give unrelated streams.
    std::mt19937_64 rng(mix64(mix64(seed_) ^ static_cast<uint64_t>(step)));
    const auto starts_count = static_cast<uint64_t>(size() - context_);
    std::vector<int64_t> starts(static_cast<size_t>(batch));
    for (int64_t& s : starts)
        s = static_cast<int64_t>(below(rng, starts_count));
    return make_batch(bytes_, starts, context_);
}

void LmWindowSampler::seek(int64_t step) {
    TRIT_CHECK(step >= 0, "LmWindowSampler: step must be >= 0, got ", step);
    step_ = step;
}

LmEvalBatches::LmEvalBatches(std::vector<uint8_t> bytes, int64_t context, int64_t batch)
    : bytes_(std::move(bytes)), context_(context), batch_(batch) {
    check_window_args("LmEvalBatches", bytes_.size(), context_);
    TRIT_CHECK(batch_ >= 1, "LmEvalBatches: batch must be >= 1 window, got ", batch_);
    windows_ = targets() / context_;
    tail_ = targets() % context_;
    full_batches_ = (windows_ + batch_ - 1) / batch_;
}

LmBatch LmEvalBatches::at(int64_t i) const {
    TRIT_CHECK(i >= 0 && i < size(), "LmEvalBatches: batch index ", i,
               " out of range; expected 0 <= i < ", size());
    if (i == full_batches_) return make_batch(bytes_, {windows_ * context_}, tail_);
    const int64_t first = i * batch_;
    const int64_t rows = std::min(batch_, windows_ - first);
    std::vector<int64_t> starts(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
        starts[r] = (first + r) * context_;
    return make_batch(bytes_, starts, context_);
}

double bits_per_byte(double mean_nll_nats) {
    return mean_nll_nats / kLn2;
}

}  // namespace trit::data
