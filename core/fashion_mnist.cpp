// Fashion-MNIST IDX reader. IDX layout: big-endian u32 magic 0x000008NN (0x08 = ubyte payload, NN =
// number of dims), NN big-endian u32 dims, then the ubyte payload row-major, and nothing after it.
// Files go through zlib's gz* API, which also reads an uncompressed file transparently.
#include "core/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"

namespace trit::data {
namespace {


constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// gzread takes an unsigned count; 16 MiB per call keeps calls few and the count far from overflow.
constexpr int64_t kChunkBytes = int64_t{1} << 24;
// A corrupt header may claim terabytes; reserve at most this much up front and grow only as data
// actually arrives, so such a file ends in a "truncated" error rather than an allocation failure.
constexpr int64_t kMaxReserveBytes = int64_t{1} << 28;

std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

// One open IDX file: header() then payload(), each validating what it reads.
class IdxReader {
  public:
    explicit IdxReader(std::string path) : path_(std::move(path)), file_(nullptr, gzclose) {
        file_.reset(gzopen(path_.c_str(), "rb"));
        TRIT_CHECK(file_ != nullptr, path_, ": cannot open (", std::strerror(errno), ")");
        gzbuffer(file_.get(), 1 << 20);  // must come before the first read; zlib's default is 8 KiB
        const bool named_gz = path_.size() > 3 && path_.compare(path_.size() - 3, 3, ".gz") == 0;
        TRIT_CHECK(!named_gz || gzdirect(file_.get()) == 0, path_,
                   ": not a gzip file (no gzip header); expected a gzip-compressed IDX file");
    }

    // Checks the magic, then returns the `ndims` dimensions that follow it. The magic comes
    // first so that a swapped or foreign file is reported as such, whatever its length.
    std::vector<uint32_t> header(uint32_t magic, const char* kind) {
        const uint32_t ndims = magic & 0xffu;
        const int64_t header_bytes = 4 * (1 + int64_t{ndims});
        const uint32_t found = read_be32(kind, header_bytes, 0);
        TRIT_CHECK(found == magic, path_, ": bad IDX magic; expected ", hex32(magic), " (", kind,
                   "), found ", hex32(found));
        std::vector<uint32_t> dims(ndims);
        for (uint32_t i = 0; i < ndims; ++i)
            dims[i] = read_be32(kind, header_bytes, 4 * (i + 1));
        return dims;
    }

    // Reads exactly count * unit bytes and checks that the file ends right after them.
    std::vector<uint8_t> payload(int64_t count, int64_t unit, const char* noun) {
        const int64_t expected = count * unit;
        std::vector<uint8_t> buf;
        buf.reserve(static_cast<size_t>(std::min(expected, kMaxReserveBytes)));
        while (static_cast<int64_t>(buf.size()) < expected) {
            const int64_t want = std::min(kChunkBytes, expected - static_cast<int64_t>(buf.size()));
            const size_t old = buf.size();
            buf.resize(old + static_cast<size_t>(want));
            const int64_t got = read(buf.data() + old, want);
            buf.resize(old + static_cast<size_t>(got));
            if (got < want) break;
        }
        const auto got = static_cast<int64_t>(buf.size());
        TRIT_CHECK(got == expected, path_, ": truncated; header says ", count, " ", noun, " (",
                   expected, " bytes of data), found only ", got, " bytes");
        std::array<uint8_t, 4096> rest;
        int64_t trailing = 0;
        for (int64_t n; (n = read(rest.data(), rest.size())) > 0;)
            trailing += n;
        TRIT_CHECK(trailing == 0, path_, ": ", trailing, " trailing bytes after the ", count, " ",
                   noun, " the header declares; expected the file to end there");
        return buf;
    }

  private:
    // The header word at byte `offset` of a `header_bytes`-long header.
    uint32_t read_be32(const char* kind, int64_t header_bytes, int64_t offset) {
        uint8_t b[4];
        const int64_t got = read(b, 4);
        TRIT_CHECK(got == 4, path_, ": truncated header; expected ", header_bytes,
                   " bytes for an IDX ", kind, " header, found ", offset + got);
        return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
    }

    // Reads up to n bytes; fewer only at the end of the data.
    int64_t read(uint8_t* dst, int64_t n) {
        int64_t got = 0;
        while (got < n) {
            const auto want = static_cast<unsigned>(std::min(n - got, kChunkBytes));
            const int r = gzread(file_.get(), dst + got, want);
            if (r <= 0) break;
            got += r;
        }
        // A cut-off stream is a short read plus an error flag, not a -1: check after every read.
        int errnum = Z_OK;
        std::string msg = gzerror(file_.get(), &errnum);
        if (msg.rfind(path_ + ": ", 0) == 0) msg.erase(0, path_.size() + 2);  // zlib adds the path
        TRIT_CHECK(errnum == Z_OK, path_, ": corrupt gzip stream (zlib: ", msg,
                   "); expected a complete gzip file, re-download or reinstall it");
        return got;
    }

    std::string path_;
    std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
};

// Prefers name.gz, falls back to the uncompressed name.
std::string resolve(const std::string& dir, const std::string& name) {
    const std::string gz = fs::join(dir, name + ".gz");
    if (fs::is_file(gz)) return gz;
    const std::string raw = fs::join(dir, name);
    if (fs::is_file(raw)) return raw;
    TRIT_FAIL(gz, ": file missing (nor is there an uncompressed ", raw,
              "); expected the Fashion-MNIST file ", name, ".gz in ", dir);
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, Split split, int64_t limit) {
    TRIT_CHECK(limit >= 0, "load_fashion_mnist: limit must be >= 0 (0 = all), got ", limit);
    TRIT_CHECK(
        fs::is_dir(dir), dir,
        ": Fashion-MNIST directory missing; install it with `apt-get install "
        "dataset-fashion-mnist`, or set data.path to a directory holding the four IDX files");
    const std::string prefix = split == Split::kTrain ? "train" : "t10k";
    const std::string images_path = resolve(dir, prefix + "-images-idx3-ubyte");
    const std::string labels_path = resolve(dir, prefix + "-labels-idx1-ubyte");

    IdxReader labels_in(labels_path);
    const int64_t n_labels = labels_in.header(kLabelsMagic, "labels")[0];
    IdxReader images_in(images_path);
    const std::vector<uint32_t> dims = images_in.header(kImagesMagic, "images");
    TRIT_CHECK(dims[1] == kFashionMnistRows && dims[2] == kFashionMnistCols, images_path,
               ": expected 28x28 images, found ", dims[1], "x", dims[2]);
    const int64_t n = dims[0];
    // Compare counts before reading 47 MB of pixels that could not be used anyway.
    TRIT_CHECK(n == n_labels, "image count != label count: ", images_path, " holds ", n,
               " images, ", labels_path, " holds ", n_labels, " labels; expected equal counts");
    TRIT_CHECK(n > 0, images_path, ": header says 0 images; expected at least one");
    TRIT_CHECK(limit <= n, "load_fashion_mnist: limit ", limit, " is larger than the ", n,
               " examples in ", images_path);
    const int64_t keep = limit > 0 ? limit : n;

    std::vector<uint8_t> label_bytes = labels_in.payload(n, 1, "labels");
    for (int64_t i = 0; i < n; ++i) {
        TRIT_CHECK(label_bytes[i] < kFashionMnistClasses, labels_path, ": label ",
                   int{label_bytes[i]}, " at index ", i, " is out of range; expected 0..9");
    }
    std::vector<uint8_t> pixels = images_in.payload(n, kFashionMnistPixels, "images");

    // from_blob borrows the vectors; .to() copies into tensors that own their storage.
    Dataset d;
    d.images = torch::from_blob(pixels.data(), {n, kFashionMnistPixels}, torch::kUInt8)
                   .narrow(0, 0, keep)
                   .to(torch::kFloat32)
                   .div_(255.0);
    d.labels = torch::from_blob(label_bytes.data(), {n}, torch::kUInt8)
                   .narrow(0, 0, keep)
                   .to(torch::kInt64);
    return d;
}

}  // namespace trit::data
