// Tests for the fortune corpus loader and the byte-window samplers: entry parsing edge cases, the
// content-hashed split (golden keys, fraction, invariance), directory layout and every error,
// sampler determinism and coverage, and (when installed) Debian's corpus in /usr/share/games.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fortunes.h"
#include "core/fs.h"
#include "tests/support/error_of.h"

namespace {

using trit::data::fortune_entries;
using trit::data::fortune_split_key;
using trit::data::LmBatch;
using trit::data::LmEvalBatches;
using trit::data::LmWindowSampler;
using trit::data::load_fortunes;
using trit::data::TextCorpus;
using Strings = std::vector<std::string>;

using trit::testing::expect_error;

std::string as_string(const std::vector<uint8_t>& bytes) {
    return {bytes.begin(), bytes.end()};
}

std::vector<int64_t> as_vector(const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Entry i of a synthetic corpus: distinct, multi-line for some i, never blank.
std::string synthetic_entry(int i) {
    std::string e = "Fortune number " + std::to_string(i) +
                    " says: " + std::string(static_cast<size_t>(i % 7 + 1), "abcdefg"[i % 7]) +
                    "\n";
    if (i % 3 == 0) e += "    -- line two of " + std::to_string(i * 31) + "\n";
    return e;
}

// The text of a fortune file holding `entries`, each followed by "%\n".
std::string fortune_file(const Strings& entries) {
    std::string text;
    for (const std::string& e : entries)
        text += e + "%\n";
    return text;
}

class FortunesTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = trit::fs::make_temp_dir("trit-fortunes"); }
    void TearDown() override { trit::fs::remove_tree(dir_); }
    std::string path(const std::string& name) const { return dir_ + "/" + name; }

    void write(const std::string& name, const std::string& bytes) const {
        std::ofstream out(path(name), std::ios::binary);
        out << bytes;
        ASSERT_TRUE(out.good()) << path(name);
    }
    void link(const std::string& target, const std::string& name) const {
        ASSERT_EQ(::symlink(target.c_str(), path(name).c_str()), 0) << path(name);
    }
    // Files "f0".."f<files-1>" holding entries 0..n-1 dealt round-robin.
    Strings write_synthetic(int n, int files) const {
        std::vector<Strings> per_file(static_cast<size_t>(files));
        Strings all;
        for (int i = 0; i < n; ++i) {
            per_file[static_cast<size_t>(i % files)].push_back(synthetic_entry(i));
            all.push_back(synthetic_entry(i));
        }
        for (int f = 0; f < files; ++f)
            write("f" + std::to_string(f), fortune_file(per_file[static_cast<size_t>(f)]));
        return all;
    }

    std::string dir_;
};

TEST(FortunesParse, SplitsAtLinesOfASinglePercent) {
    EXPECT_EQ(fortune_entries("one\n%\ntwo\nlines\n%\n"), (Strings{"one\n", "two\nlines\n"}));
    // Only a line that is exactly "%" separates: these stay text.
    EXPECT_EQ(fortune_entries("a\n%%\n % \n%x\n50%\n% \n"), (Strings{"a\n%%\n % \n%x\n50%\n% \n"}));
    // An internal blank line and the first line's indentation are kept.
    EXPECT_EQ(fortune_entries("\n\n   indented\n\n  tail  \n \n%\n"),
              (Strings{"   indented\n\n  tail  \n"}));
    EXPECT_EQ(fortune_entries("first\n%\nlast entry, no percent\n"),
              (Strings{"first\n", "last entry, no percent\n"}));
    EXPECT_EQ(fortune_entries("no newline at all"), (Strings{"no newline at all\n"}));
    EXPECT_EQ(fortune_entries("x\n%"), (Strings{"x\n"}));
    // strfile -c style files often start with a separator.
    EXPECT_EQ(fortune_entries("%\nfirst\n%\n"), (Strings{"first\n"}));
}

TEST(FortunesParse, CrlfLineEndsBecomeLf) {
    const std::string lf = "alpha\nbeta\n%\ngamma\n%\n\ndelta\n";
    std::string crlf;
    for (char c : lf)
        crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    EXPECT_EQ(fortune_entries(crlf), fortune_entries(lf));
    EXPECT_EQ(fortune_entries(crlf), (Strings{"alpha\nbeta\n", "gamma\n", "delta\n"}));
    EXPECT_EQ(fortune_entries("a\r\n%\r\nb\r"), (Strings{"a\n", "b\n"}));
    // A CR inside a line is text.
    EXPECT_EQ(fortune_entries("a\rb\n"), (Strings{"a\rb\n"}));
}

TEST(FortunesParse, DropsEmptyAndWhitespaceOnlyEntries) {
    EXPECT_EQ(fortune_entries(""), Strings{});
    EXPECT_EQ(fortune_entries("\n\n"), Strings{});
    EXPECT_EQ(fortune_entries("%\n%\n%\n"), Strings{});
    EXPECT_EQ(fortune_entries("%\n%\n  \n\t\n\r\n%\nx\n%\n%\n \f\v\n"), (Strings{"x\n"}));
}

TEST(FortunesParse, EntriesJoinedBySeparatorParseBack) {
    const Strings entries = fortune_entries("  art\n\n   art\n%\r\nb\r\r\n%\n\n\nc\n\n%\nlast\n d");
    ASSERT_EQ(entries.size(), 4u);
    std::string joined;
    for (const std::string& e : entries)
        joined += e + trit::data::kFortuneSeparator;
    EXPECT_EQ(fortune_entries(joined), entries);
}

// Computed once by an independent Python transcription (FNV-1a 64, splitmix64 finalizer, top 53
// bits / 2^53); a change here moves entries between train and validation.
TEST(FortunesSplitKey, GoldenValues) {
    EXPECT_EQ(fortune_split_key(""), 0.9576734252420561);
    EXPECT_EQ(fortune_split_key("a\n"), 0.17439160170656154);
    EXPECT_EQ(fortune_split_key("Hello, world!\n"), 0.6834949648731207);
    EXPECT_EQ(fortune_split_key("The meek shall inherit the earth.\n"), 0.04558473405687735);
}

TEST(FortunesSplitKey, UniformOverManyEntries) {
    constexpr int kN = 20000;
    std::vector<int> bins(10);
    for (int i = 0; i < kN; ++i) {
        const double k = fortune_split_key(synthetic_entry(i));
        ASSERT_GE(k, 0.0);
        ASSERT_LT(k, 1.0);
        ++bins[static_cast<size_t>(k * 10)];
    }
    // Each bin is Binomial(20000, 0.1): mean 2000, sd ~42; 200 is > 4.7 sd.
    for (int b : bins)
        EXPECT_NEAR(b, 2000, 200);
}

TEST_F(FortunesTest, ReadsTextFilesOnlyInSortedOrder) {
    // Keys (see GoldenValues): "The meek..." 0.05 and "a" 0.17 go to validation at 0.5, "Hello..."
    // 0.68 to training.
    write("b", "Hello, world!\n%\na\n");
    write("a", "The meek shall inherit the earth.\n%\n");
    write("a.dat", std::string("\0\0\0\2binary index", 16));
    link("a", "a.u8");
    link("b", "alias");  // a second name for b: read once, under its first name
    write(".hidden", "hidden\n");
    trit::fs::make_dirs(path("sub"));
    write("sub/c", "in a subdirectory\n");
    link("sub", "subdir-link");  // a link to a directory is not a file either
    link("nowhere", "dangling");

    const TextCorpus c = load_fortunes(dir_, 0.5);
    EXPECT_EQ(c.files, (Strings{"a", "alias"}));
    // Each entry is on the side its key says, in file then entry order.
    EXPECT_EQ(c.train_entries, 1);
    EXPECT_EQ(c.valid_entries, 2);
    const std::string train = "Hello, world!\n%\n";
    const std::string valid = "The meek shall inherit the earth.\n%\na\n%\n";
    EXPECT_EQ(as_string(c.train), train);
    EXPECT_EQ(as_string(c.valid), valid);
}

TEST_F(FortunesTest, SplitIsDeterministicNearTheFractionAndNested) {
    const Strings all = write_synthetic(3000, 3);
    const TextCorpus a = load_fortunes(dir_);
    const TextCorpus b = load_fortunes(dir_);
    EXPECT_EQ(a.train, b.train);
    EXPECT_EQ(a.valid, b.valid);
    EXPECT_EQ(a.files, (Strings{"f0", "f1", "f2"}));
    ASSERT_EQ(a.train_entries + a.valid_entries, 3000);
    // Binomial(3000, 0.1): sd ~16; +-60 is 3.6 sd (and the result is fixed, not random).
    EXPECT_NEAR(a.valid_entries, 300, 60);

    // The splits read back as fortune files, and hold exactly the entries the rule assigns.
    const Strings train = fortune_entries(as_string(a.train));
    const Strings valid = fortune_entries(as_string(a.valid));
    EXPECT_EQ(static_cast<int64_t>(train.size()), a.train_entries);
    EXPECT_EQ(static_cast<int64_t>(valid.size()), a.valid_entries);
    for (const std::string& e : train)
        EXPECT_GE(fortune_split_key(e), 0.1);
    for (const std::string& e : valid)
        EXPECT_LT(fortune_split_key(e), 0.1);
    const std::set<std::string> seen_all(all.begin(), all.end());
    std::set<std::string> seen(train.begin(), train.end());
    seen.insert(valid.begin(), valid.end());
    EXPECT_EQ(seen, seen_all);

    // A larger fraction only adds validation entries.
    const TextCorpus wide = load_fortunes(dir_, 0.3);
    EXPECT_NEAR(wide.valid_entries, 900, 120);  // sd ~25
    const Strings wide_valid = fortune_entries(as_string(wide.valid));
    const std::set<std::string> wide_set(wide_valid.begin(), wide_valid.end());
    for (const std::string& e : valid)
        EXPECT_EQ(wide_set.count(e), 1u) << e;
}

TEST_F(FortunesTest, SplitIgnoresFileNamesOrderAndLineEnds) {
    write_synthetic(500, 2);
    const TextCorpus lf = load_fortunes(dir_);
    ASSERT_GT(lf.valid_entries, 0);

    // The same entries in one CRLF file, in reverse order, with blank padding: same membership.
    Strings entries = fortune_entries(as_string(lf.train) + as_string(lf.valid));
    std::string crlf;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
        for (char c : "\n" + *it + "\n%\n")
            crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    }
    const std::string other = trit::fs::make_temp_dir("trit-fortunes");
    {
        std::ofstream out(other + "/zz", std::ios::binary);
        out << crlf;
    }
    const TextCorpus c = load_fortunes(other);
    trit::fs::remove_tree(other);
    EXPECT_EQ(c.valid_entries, lf.valid_entries);
    const Strings a = fortune_entries(as_string(lf.valid));
    const Strings b = fortune_entries(as_string(c.valid));
    EXPECT_EQ(std::set<std::string>(a.begin(), a.end()), std::set<std::string>(b.begin(), b.end()));
}

TEST_F(FortunesTest, DuplicateEntriesLandInOneSplit) {
    write_synthetic(200, 1);
    // Every entry again in a second file: each copy must follow the first.
    std::string copy;
    for (int i = 0; i < 200; ++i)
        copy += synthetic_entry(i) + "%\n";
    write("g", copy);
    const TextCorpus c = load_fortunes(dir_);
    EXPECT_EQ(c.train_entries + c.valid_entries, 400);
    EXPECT_EQ(c.valid_entries % 2, 0);
    const Strings train = fortune_entries(as_string(c.train));
    const Strings valid = fortune_entries(as_string(c.valid));
    const std::set<std::string> train_set(train.begin(), train.end());
    for (const std::string& e : valid)
        EXPECT_EQ(train_set.count(e), 0u) << e;
}

TEST_F(FortunesTest, MissingDirectory) {
    const std::string gone = path("nowhere");
    expect_error([&] { load_fortunes(gone); },
                 {gone, "fortunes directory missing", "apt-get install fortunes"});
    write("plain", "x\n");
    expect_error([&] { load_fortunes(path("plain")); }, {path("plain"), "not a directory"});
}

TEST_F(FortunesTest, NoTextFiles) {
    expect_error([&] { load_fortunes(dir_); },
                 {dir_, "no fortune text files", "without an extension", ".dat"});
    write("cookie.dat", std::string("\0\0\0\2", 4));
    link("cookie.dat", "cookie.u8");
    trit::fs::make_dirs(path("off"));
    write("off/cookie", "rot13\n");
    expect_error([&] { load_fortunes(dir_); }, {dir_, "no fortune text files"});
}

TEST_F(FortunesTest, FilesWithoutEntries) {
    write("empty", "");
    write("blank", "%\n  \n%\n\n");
    expect_error([&] { load_fortunes(dir_); }, {dir_, "2 fortune files", "blank", "no entries"});
}

TEST_F(FortunesTest, BinaryFileWithoutExtension) {
    write("ok", "fine\n");
    write("index", std::string("ab\0cd", 5));
    expect_error([&] { load_fortunes(dir_); }, {path("index"), "NUL byte at offset 2", "text"});
}

TEST_F(FortunesTest, BadValidFraction) {
    write_synthetic(50, 1);
    for (double f : {0.0, 1.0, -0.1, 1.5}) {
        std::ostringstream value;
        value << f;
        expect_error([&] { load_fortunes(dir_, f); }, {"valid_fraction", "(0, 1)", value.str()});
    }
    expect_error([&] { load_fortunes(dir_, std::nan("")); }, {"valid_fraction", "nan"});
    // Checked before the directory: a bad fraction is reported even for a missing one.
    expect_error([&] { load_fortunes(path("nowhere"), 2.0); }, {"valid_fraction", "got 2"});
}

TEST_F(FortunesTest, EmptySplit) {
    // One entry cannot fill both splits.
    write("one", "The meek shall inherit the earth.\n");
    expect_error([&] { load_fortunes(dir_); }, {dir_, "1 entries", "0 training and 1 validation",
                                                "valid_fraction 0.1", "both splits non-empty"});
}

std::vector<uint8_t> ramp(int64_t n) {
    std::vector<uint8_t> b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        b[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 256);
    return b;
}

TEST(FortunesLmWindowSampler, RowsAreWindowsAndTargetsAreShiftedInputs) {
    LmWindowSampler s(ramp(200), /*context=*/8, /*seed=*/1);
    for (int step = 0; step < 5; ++step) {
        const LmBatch b = s.next(16);
        ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{16, 8}));
        ASSERT_EQ(b.target.sizes(), (std::vector<int64_t>{16, 8}));
        EXPECT_EQ(b.input.dtype(), torch::kInt64);
        EXPECT_EQ(b.target.dtype(), torch::kInt64);
        // ramp: byte i is i, so a row is start, start + 1, ..., and the start is in [0, 191].
        const torch::Tensor start = b.input.select(1, 0).unsqueeze(1);
        EXPECT_TRUE(torch::equal(b.input, start + torch::arange(8, torch::kInt64)));
        EXPECT_TRUE(torch::equal(b.target, b.input + 1));
        EXPECT_GE(start.min().item<int64_t>(), 0);
        EXPECT_LE(start.max().item<int64_t>(), 200 - 8 - 1);
    }
    EXPECT_EQ(s.step(), 5);
}

TEST(FortunesLmWindowSampler, DeterministicBySeedAndStepAndSeekable) {
    LmWindowSampler a(ramp(1000), 16, 7);
    LmWindowSampler b(ramp(1000), 16, 7);
    LmWindowSampler c(ramp(1000), 16, 8);
    std::vector<LmBatch> first;
    for (int i = 0; i < 4; ++i) {
        first.push_back(a.next(8));
        const LmBatch same = b.next(8);
        EXPECT_TRUE(torch::equal(first.back().input, same.input));
        EXPECT_TRUE(torch::equal(first.back().target, same.target));
        EXPECT_FALSE(torch::equal(first.back().input, c.next(8).input));
    }
    EXPECT_FALSE(torch::equal(first[0].input, first[1].input));
    // Resuming: seek(k) and at(k) give batch k again; a smaller batch is a prefix.
    a.seek(2);
    EXPECT_TRUE(torch::equal(a.next(8).input, first[2].input));
    EXPECT_EQ(a.step(), 3);
    EXPECT_TRUE(torch::equal(a.at(1, 8).input, first[1].input));
    EXPECT_TRUE(torch::equal(a.at(3, 3).input, first[3].input.narrow(0, 0, 3)));
}

// Frozen from this implementation and cross-checked once against an independent Python
// transcription (mt19937_64 + the seeding and rejection rule): a change means every byte-level
// run's batches changed.
TEST(FortunesLmWindowSampler, GoldenStarts) {
    LmWindowSampler s(ramp(250), 4, 42);
    EXPECT_EQ(as_vector(s.next(6).input.select(1, 0)),
              (std::vector<int64_t>{233, 133, 196, 61, 245, 98}));
    EXPECT_EQ(as_vector(s.next(6).input.select(1, 0)),
              (std::vector<int64_t>{40, 46, 57, 201, 23, 22}));
}

TEST(FortunesLmWindowSampler, EveryStartEquallyLikely) {
    // 10 bytes, context 4: starts 0..5, so the last byte is reachable as a target.
    LmWindowSampler s(ramp(10), 4, 3);
    std::map<int64_t, int> counts;
    for (int step = 0; step < 60; ++step) {
        for (int64_t v : as_vector(s.next(100).input.select(1, 0)))
            ++counts[v];
    }
    ASSERT_EQ(counts.size(), 6u);
    EXPECT_EQ(counts.begin()->first, 0);
    EXPECT_EQ(counts.rbegin()->first, 5);
    // Binomial(6000, 1/6): mean 1000, sd ~29; 150 is > 5 sd.
    for (const auto& [start, count] : counts)
        EXPECT_NEAR(count, 1000, 150) << "start " << start;
    // A split of exactly T + 1 bytes has one window.
    LmWindowSampler tight(ramp(5), 4, 3);
    EXPECT_TRUE(torch::equal(tight.next(3).input.select(1, 0), torch::zeros({3}, torch::kInt64)));
}

TEST(FortunesLmWindowSampler, Errors) {
    expect_error([] { LmWindowSampler(ramp(10), 0, 1); }, {"context must be >= 1", "got 0"});
    expect_error([] { LmWindowSampler(ramp(10), -3, 1); }, {"context must be >= 1", "got -3"});
    expect_error([] { LmWindowSampler(ramp(8), 8, 1); },
                 {"holds 8 bytes", "at least context + 1 = 9"});
    expect_error([] { LmWindowSampler({}, 1, 1); }, {"holds 0 bytes", "context + 1 = 2"});
    LmWindowSampler s(ramp(10), 4, 1);
    expect_error([&] { s.next(0); }, {"batch must be >= 1", "got 0"});
    expect_error([&] { s.at(0, -2); }, {"batch must be >= 1", "got -2"});
    expect_error([&] { s.seek(-1); }, {"step must be >= 0", "got -1"});
    EXPECT_EQ(s.step(), 0);
}

struct EvalCase {
    int64_t n, context, batch;
    int64_t batches, tail;  // expected batch count and last-batch targets when partial (else 0)
};

TEST(FortunesLmEvalBatches, PredictsEveryByteAfterTheFirstOnce) {
    const std::vector<EvalCase> cases = {
        {9, 8, 1, 1, 0},       // exactly one window
        {10, 8, 4, 2, 1},      // one window + a 1-byte tail
        {101, 10, 3, 4, 0},    // 10 windows in batches 3 3 3 1
        {100, 10, 3, 4, 9},    // 9 windows (3 3 3) + a 9-byte tail
        {50, 1, 7, 7, 0},      // context 1: 49 windows of one target
        {600, 7, 1000, 2, 4},  // batch larger than the window count
    };
    for (const EvalCase& k : cases) {
        SCOPED_TRACE("n=" + std::to_string(k.n) + " T=" + std::to_string(k.context) +
                     " B=" + std::to_string(k.batch));
        const std::vector<uint8_t> bytes = ramp(k.n);
        const LmEvalBatches ev(bytes, k.context, k.batch);
        ASSERT_EQ(ev.size(), k.batches);
        EXPECT_EQ(ev.targets(), k.n - 1);
        std::vector<int64_t> inputs, targets;
        for (int64_t i = 0; i < ev.size(); ++i) {
            const LmBatch b = ev.at(i);
            ASSERT_EQ(b.input.sizes(), b.target.sizes());
            const bool tail = k.tail > 0 && i == ev.size() - 1;
            EXPECT_EQ(b.input.size(1), tail ? k.tail : k.context);
            EXPECT_LE(b.input.size(0), tail ? 1 : k.batch);
            if (!tail && i + 1 < ev.size() - (k.tail > 0 ? 1 : 0)) {
                EXPECT_EQ(b.input.size(0), k.batch);  // only the last full batch may be short
            }
            const std::vector<int64_t> in = as_vector(b.input), tg = as_vector(b.target);
            inputs.insert(inputs.end(), in.begin(), in.end());
            targets.insert(targets.end(), tg.begin(), tg.end());
        }
        // Inputs tile bytes[0, n - 1) and targets tile bytes[1, n), in order.
        const std::vector<int64_t> all(bytes.begin(), bytes.end());
        EXPECT_EQ(inputs, std::vector<int64_t>(all.begin(), all.end() - 1));
        EXPECT_EQ(targets, std::vector<int64_t>(all.begin() + 1, all.end()));
    }
}

TEST(FortunesLmEvalBatches, Errors) {
    expect_error([] { LmEvalBatches(ramp(10), 0, 1); }, {"LmEvalBatches", "context", "got 0"});
    expect_error([] { LmEvalBatches(ramp(4), 4, 1); }, {"holds 4 bytes", "context + 1 = 5"});
    expect_error([] { LmEvalBatches(ramp(10), 4, 0); }, {"batch must be >= 1", "got 0"});
    const LmEvalBatches ev(ramp(10), 4, 1);
    expect_error([&] { ev.at(3); }, {"batch index 3", "i < 3"});
    expect_error([&] { ev.at(-1); }, {"batch index -1"});
}

TEST(FortunesBitsPerByte, DividesByLn2) {
    EXPECT_DOUBLE_EQ(trit::data::bits_per_byte(std::log(2.0)), 1.0);
    EXPECT_DOUBLE_EQ(trit::data::bits_per_byte(std::log(256.0)), 8.0);
    EXPECT_EQ(trit::data::bits_per_byte(0.0), 0.0);
}

TEST(FortunesReal, LoadsDebianCorpus) {
    if (!trit::fs::is_dir(trit::data::kFortunesDir)) {
        GTEST_SKIP() << trit::data::kFortunesDir << " not installed (apt-get install fortunes)";
    }
    const TextCorpus c = load_fortunes(trit::data::kFortunesDir);
    const int64_t entries = c.train_entries + c.valid_entries;
    const auto bytes = static_cast<int64_t>(c.train.size() + c.valid.size());
    std::cout << "fortunes: " << c.files.size() << " files, " << entries << " entries, " << bytes
              << " bytes; train " << c.train_entries << " entries " << c.train.size()
              << " bytes; valid " << c.valid_entries << " entries " << c.valid.size() << " bytes\n";
    EXPECT_GT(c.files.size(), 10u);
    EXPECT_EQ(std::count(c.files.begin(), c.files.end(), "cookie"), 1);
    for (const std::string& f : c.files)
        EXPECT_EQ(f.find('.'), std::string::npos) << f;
    EXPECT_GT(c.train_entries, 1000);
    EXPECT_GT(c.valid_entries, 1000);
    EXPECT_GT(bytes, 1000000);
    const double frac = static_cast<double>(c.valid_entries) / static_cast<double>(entries);
    EXPECT_GT(frac, 0.08);
    EXPECT_LT(frac, 0.12);
    const double byte_frac = static_cast<double>(c.valid.size()) / static_cast<double>(bytes);
    EXPECT_GT(byte_frac, 0.08);
    EXPECT_LT(byte_frac, 0.12);

    // Disjoint by entry, duplicates included, and each split reads back as its entries.
    const Strings train = fortune_entries(as_string(c.train));
    const Strings valid = fortune_entries(as_string(c.valid));
    EXPECT_EQ(static_cast<int64_t>(train.size()), c.train_entries);
    EXPECT_EQ(static_cast<int64_t>(valid.size()), c.valid_entries);
    const std::set<std::string> train_set(train.begin(), train.end());
    int64_t shared = 0;
    for (const std::string& e : valid)
        shared += static_cast<int64_t>(train_set.count(e));
    EXPECT_EQ(shared, 0);

    // Reference figure for a byte-level model: a unigram model of the training bytes (add-one
    // smoothed) scored on the validation split.
    std::vector<double> freq(256, 1.0);
    for (uint8_t v : c.train)
        freq[v] += 1.0;
    const double total = static_cast<double>(c.train.size()) + 256.0;
    double nll = 0.0;
    for (uint8_t v : c.valid)
        nll -= std::log(freq[v] / total);
    const double bpb = trit::data::bits_per_byte(nll / static_cast<double>(c.valid.size()));
    std::cout << "fortunes: unigram baseline " << bpb << " bits/byte on valid\n";
    EXPECT_GT(bpb, 3.0);
    EXPECT_LT(bpb, 6.0);

    const LmEvalBatches ev(c.valid, 256, 64);
    EXPECT_EQ(ev.targets(), static_cast<int64_t>(c.valid.size()) - 1);
    LmWindowSampler s(c.train, 256, 0);
    EXPECT_EQ(s.next(4).input.sizes(), (std::vector<int64_t>{4, 256}));
}

}  // namespace
