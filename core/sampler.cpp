// epoch_permutation: splitmix64 derives a xoshiro256** state from (seed, epoch); Fisher-Yates with
// rejection-sampled bounded integers. Any change here changes every training run's batch order,
// which tests/test_fashion_mnist.cpp pins with golden values.
#include "core/sampler.h"

#include <numeric>
#include <utility>

#include "core/error.h"

namespace trit::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

// xoshiro256** (Blackman & Vigna), seeded from splitmix64 as its authors recommend.
class Xoshiro256 {
  public:
    explicit Xoshiro256(uint64_t seed) {
        for (uint64_t& w : s_)
            w = splitmix64(seed);
    }

    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }

    // Uniform in [0, bound): rejects the 2^64 mod bound lowest values so that every residue is
    // equally likely. Plain 64-bit arithmetic, unlike Lemire's method, needs no 128-bit product.
    uint64_t below(uint64_t bound) {
        const uint64_t threshold = (0 - bound) % bound;
        for (;;) {
            const uint64_t r = next();
            if (r >= threshold) return r % bound;
        }
    }

  private:
    uint64_t s_[4];
};

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
    TRIT_CHECK(n >= 0, "epoch_permutation: n must be >= 0, got ", n);
    TRIT_CHECK(epoch >= 0, "epoch_permutation: epoch must be >= 0, got ", epoch);
    // Key the stream by (seed, epoch): one splitmix64 step scrambles the seed, then the epoch is
    // mixed in, so nearby seeds and nearby epochs give unrelated generators.
    uint64_t key = seed;
    key = splitmix64(key) ^ static_cast<uint64_t>(epoch);
    Xoshiro256 rng(key);
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = n - 1; i > 0; --i) {
        const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
        std::swap(perm[i], perm[j]);
    }
    return perm;
}

torch::Tensor gather_rows(const torch::Tensor& t, const std::vector<int64_t>& idx, int64_t begin,
                          int64_t end) {
    const auto size = static_cast<int64_t>(idx.size());
    TRIT_CHECK(0 <= begin && begin <= end && end <= size, "gather_rows: bad slice [", begin, ", ",
               end, ") of ", size, " indices; expected 0 <= begin <= end <= ", size);
    TRIT_CHECK(t.defined() && t.dim() >= 1, "gather_rows: expected a tensor with a row dimension");
    const int64_t rows = t.size(0);
    for (int64_t i = begin; i < end; ++i) {
        TRIT_CHECK(0 <= idx[i] && idx[i] < rows, "gather_rows: index ", idx[i], " at position ", i,
                   " is out of range; expected 0 <= index < ", rows);
    }
    // index_select only reads the borrowed indices and returns a fresh tensor, so from_blob is
    // safe; .to() copies them over when t lives on a GPU.
    const torch::Tensor sel =
        torch::from_blob(const_cast<int64_t*>(idx.data()) + begin, {end - begin}, torch::kInt64)
            .to(t.device());
    return t.index_select(0, sel);
}

}  // namespace trit::data
