// Byte-level text corpus from fortune files (Debian's `fortunes`), for byte-level language models:
// entries split at `%` lines, a fixed content-hashed train/validation split, random training
// windows and a sequential evaluation pass. CPU only; bytes are kept as they are (no decoding).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trit::data {

// Where Debian's fortunes package puts the files.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
inline constexpr double kFortunesValidFraction = 0.1;
// Written after every entry of a split, so that a split reads as a fortune file itself and the
// model sees entry boundaries exactly as they appear in the source ("...last line\n%\nnext...").
inline constexpr const char* kFortuneSeparator = "%\n";

// Entries of one fortune file's text. An entry ends at a line that is exactly "%" (after removing
// CRs before the LF) or at the end of the text, with or without a final newline. CRLF becomes LF;
// leading and trailing whitespace-only lines are dropped (the indentation of the first kept line
// stays), and entries with nothing else are dropped. Each entry ends with exactly one '\n'.
// Idempotent: entries joined with kFortuneSeparator parse back to the same entries.
std::vector<std::string> fortune_entries(const std::string& text);

// The split key of a (normalized) entry, in [0, 1): splitmix64's finalizer applied to the 64-bit
// FNV-1a hash of the entry's bytes, top 53 bits scaled by 2^-53. An entry goes to validation iff
// fortune_split_key(entry) < valid_fraction. The key depends on the text only, so the split is
// the same on every machine, whatever the file names, order or line ends, and duplicated entries
// (Debian's corpus has some) all land on one side. A larger fraction only moves entries to
// validation, never back.
double fortune_split_key(const std::string& entry);

struct TextCorpus {
    std::vector<uint8_t> train;  // entries (each + kFortuneSeparator) in file, then entry, order
    std::vector<uint8_t> valid;  // the same for the validation entries
    int64_t train_entries = 0;
    int64_t valid_entries = 0;
    std::vector<std::string> files;  // names of the files read, sorted
};

// Reads the fortune files of `dir`: regular files (symlinks followed) whose name has no '.', in
// byte-wise sorted name order; `.dat` indexes, `.u8` links, hidden files and subdirectories are
// skipped, and a second name for an already read file (same device and inode) is too. Throws
// trit::Error when valid_fraction is not in (0, 1), `dir` is missing or holds no such file, a file
// cannot be read or holds a NUL byte (binary), there are no entries, or a split would be empty.
TextCorpus load_fortunes(const std::string& dir, double valid_fraction = kFortunesValidFraction);

struct LmBatch {
    torch::Tensor input;   // (B, T) int64 bytes in [0, 255], CPU
    torch::Tensor target;  // (B, T) int64, input shifted by one: the byte after each input byte
};

// Random training windows: each row is bytes[s .. s + T] (T + 1 bytes) for a start s uniform in
// [0, size - T - 1]; windows may cross entry boundaries. Batch k is a pure function of (seed, k,
// batch): std::mt19937_64 seeded from a splitmix64 mix of (seed, k), bounded draws by rejection
// (no <random> distributions, which differ between standard libraries), never the torch RNG. So
// seek(k) resumes a run exactly, and a smaller batch is a prefix of a larger one.
class LmWindowSampler {
  public:
    // context T >= 1 and bytes.size() >= T + 1, else trit::Error naming the value.
    LmWindowSampler(std::vector<uint8_t> bytes, int64_t context, uint64_t seed);

    LmBatch next(int64_t batch);  // batch at step(), then step() + 1; batch >= 1
    LmBatch at(int64_t step, int64_t batch) const;
    int64_t step() const { return step_; }
    void seek(int64_t step);  // step >= 0
    int64_t context() const { return context_; }
    int64_t size() const { return static_cast<int64_t>(bytes_.size()); }

  private:
    std::vector<uint8_t> bytes_;
    int64_t context_;
    uint64_t seed_;
    int64_t step_ = 0;
};

// One deterministic pass over a split that predicts every byte after the first exactly once.
// Window w holds bytes[wT .. wT + T] (T + 1 bytes): its targets tile the split without overlap,
// so consecutive windows share one byte (the last target of w is the first input of w + 1); each
// window starts without context, like a training window. Windows go into batches of up to
// `batch` rows, in order; when (size - 1) is not a multiple of T, the remaining r < T targets form
// one last batch of shape (1, r). Sum the per-byte NLL over all batches and divide by targets().
class LmEvalBatches {
  public:
    // context T >= 1, batch >= 1 and bytes.size() >= T + 1, else trit::Error naming the value.
    LmEvalBatches(std::vector<uint8_t> bytes, int64_t context, int64_t batch);

    int64_t size() const { return full_batches_ + (tail_ > 0 ? 1 : 0); }  // number of batches
    LmBatch at(int64_t i) const;                                          // 0 <= i < size()
    int64_t targets() const { return static_cast<int64_t>(bytes_.size()) - 1; }
    int64_t context() const { return context_; }

  private:
    std::vector<uint8_t> bytes_;
    int64_t context_;
    int64_t batch_;
    int64_t windows_;       // full windows of T targets
    int64_t full_batches_;  // batches holding them
    int64_t tail_;          // targets left after the full windows, < T
};

// Mean negative log-likelihood per byte, in nats, to bits per byte (divides by ln 2).
double bits_per_byte(double mean_nll_nats);

}  // namespace trit::data
