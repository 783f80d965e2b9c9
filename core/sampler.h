// Deterministic epoch shuffling and batch gathering for in-memory datasets.
// epoch_permutation is bit-identical on every platform and compiler: its PRNG (splitmix64 seeding
// xoshiro256**) and its bounded integers are self-contained, no <random> distributions involved.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace trit::data {

// A permutation of 0..n-1, a pure function of (n, seed, epoch): Fisher-Yates shuffle whose swaps
// come from unbiased bounded draws (rejection). n >= 0, epoch >= 0.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

// Rows idx[begin..end) of t, in that order: (end - begin, ...) on t's device. Used to cut batches
// out of a permutation; 0 <= begin <= end <= idx.size() and every index must be a row of t.
torch::Tensor gather_rows(const torch::Tensor& t, const std::vector<int64_t>& idx, int64_t begin,
                          int64_t end);

}  // namespace trit::data
