// Writers for IDX test files; see synthetic_idx.h. The synthetic dataset uses its own splitmix64
// stream so that its bytes, like the real files, never change with the standard library.
#include "tests/support/synthetic_idx.h"

#include <stdlib.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/fs.h"

namespace trit::testing {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr uint32_t kSide = 28;
constexpr uint32_t kBlock = 6;

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Top-left corners of the ten class blocks: a 3x4 grid of non-overlapping 6x6 cells, first ten.
constexpr uint32_t kBlockRow[10] = {1, 1, 1, 1, 11, 11, 11, 11, 21, 21};
constexpr uint32_t kBlockCol[10] = {1, 8, 15, 22, 1, 8, 15, 22, 1, 8};

void write_split(const std::string& dir, const std::string& prefix, int64_t n, uint64_t& rng) {
    std::vector<uint8_t> images(static_cast<size_t>(n) * kSide * kSide);
    std::vector<uint8_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        const auto c = static_cast<uint32_t>(splitmix64(rng) % 10);
        labels[i] = static_cast<uint8_t>(c);
        uint8_t* img = images.data() + static_cast<size_t>(i) * kSide * kSide;
        for (uint32_t p = 0; p < kSide * kSide; ++p) {
            const uint32_t r = p / kSide, col = p % kSide;
            const bool in_block = r >= kBlockRow[c] && r < kBlockRow[c] + kBlock &&
                                  col >= kBlockCol[c] && col < kBlockCol[c] + kBlock;
            // Noise in [0, 100), block in [170, 256): far apart, yet no two images are equal.
            const auto u = static_cast<uint32_t>(splitmix64(rng) >> 32);
            img[p] = static_cast<uint8_t>(in_block ? 170 + u % 86 : u % 100);
        }
    }
    const auto count = static_cast<uint32_t>(n);
    write_idx_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", kImagesMagic, {count, kSide, kSide},
                 images);
    write_idx_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", kLabelsMagic, {count}, labels);
}

}  // namespace

std::string make_temp_dir(const std::string& prefix) { return fs::make_temp_dir(prefix); }

std::string make_idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                           const std::vector<uint8_t>& payload) {
    std::string out;
    auto put_be32 = [&out](uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8)
            out.push_back(static_cast<char>(v >> shift));
    };
    put_be32(magic);
    for (uint32_t d : dims)
        put_be32(d);
    out.append(payload.begin(), payload.end());
    return out;
}

void write_idx_gz(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
                  const std::vector<uint8_t>& payload) {
    const std::string bytes = make_idx_bytes(magic, dims, payload);
    gzFile f = gzopen(path.c_str(), "wb");
    TRIT_CHECK(f != nullptr, path, ": cannot create (", std::strerror(errno), ")");
    const int written = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    const int closed = gzclose(f);
    TRIT_CHECK(written == static_cast<int>(bytes.size()) && closed == Z_OK, path,
               ": gzip write failed");
}

void write_raw_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    TRIT_CHECK(out.good(), path, ": write failed");
}

void write_synthetic_fashion_mnist(const std::string& dir, int64_t n_train, int64_t n_test,
                                   uint64_t seed) {
    TRIT_CHECK(n_train >= 0 && n_test >= 0 && n_train <= UINT32_MAX && n_test <= UINT32_MAX,
               "write_synthetic_fashion_mnist: bad sizes ", n_train, ", ", n_test);
    fs::make_dirs(dir);
    uint64_t rng = seed;  // one stream: train first, then test
    write_split(dir, "train", n_train, rng);
    write_split(dir, "t10k", n_test, rng);
}

}  // namespace trit::testing
