// Test fixtures that write Fashion-MNIST-format IDX files: a learnable synthetic dataset, plus the
// raw building blocks that corrupt-file tests need. The writers never validate what they write:
// tests use them to produce deliberately broken files (wrong magic, truncated, trailing bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trit::testing {

// A fresh, empty directory under the system temp dir named <prefix>-XXXXXX; the caller removes it.
std::string make_temp_dir(const std::string& prefix);

// The bytes of an IDX file: big-endian magic, big-endian dims, then payload as given.
std::string make_idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                           const std::vector<uint8_t>& payload);

// make_idx_bytes gzip-compressed into `path`.
void write_idx_gz(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
                  const std::vector<uint8_t>& payload);

// `bytes` verbatim into `path` (no compression).
void write_raw_file(const std::string& path, const std::string& bytes);

// The four Fashion-MNIST .gz files in `dir`, deterministic from `seed`. Class c is a bright 6x6
// block at one of ten fixed positions over uniform noise, so a linear model or small MLP gets
// > 90% test accuracy within a few hundred steps; labels are uniform over 0..9.
void write_synthetic_fashion_mnist(const std::string& dir, int64_t n_train, int64_t n_test,
                                   uint64_t seed);

}  // namespace trit::testing
