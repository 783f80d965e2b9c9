// Tests for the Fashion-MNIST loader and the epoch sampler: a synthetic round trip, every error
// case of the loader, permutation properties with frozen golden values, and (when installed) the
// real dataset in /usr/share/datasets/fashion-mnist.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/fashion_mnist.h"
#include "core/fs.h"
#include "core/sampler.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/error_of.h"

namespace {

using trit::data::Dataset;
using trit::data::load_fashion_mnist;
using trit::data::Split;
using trit::testing::make_idx_bytes;
using trit::testing::write_idx_gz;
using trit::testing::write_raw_file;

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
const char* const kTrainImages = "train-images-idx3-ubyte.gz";
const char* const kTrainLabels = "train-labels-idx1-ubyte.gz";

using trit::testing::expect_error;

// Pixel p of image i: covers 0 and 255 and differs between images and positions.
std::vector<uint8_t> pattern_pixels(int64_t n) {
    std::vector<uint8_t> px(static_cast<size_t>(n) * 784);
    for (size_t k = 0; k < px.size(); ++k)
        px[k] = static_cast<uint8_t>((k * 7 + k / 784) % 256);
    return px;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

class FashionMnistTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-fashion-mnist"); }
    void TearDown() override { trit::fs::remove_tree(dir_); }
    std::string path(const std::string& name) const { return dir_ + "/" + name; }

    // A valid train split of n pattern images with labels (3 i) % 10.
    void write_train(int64_t n) {
        const auto count = static_cast<uint32_t>(n);
        write_idx_gz(path(kTrainImages), kImagesMagic, {count, 28, 28}, pattern_pixels(n));
        std::vector<uint8_t> labels(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            labels[i] = static_cast<uint8_t>(3 * i % 10);
        write_idx_gz(path(kTrainLabels), kLabelsMagic, {count}, labels);
    }
    Dataset load(int64_t limit = 0) const { return load_fashion_mnist(dir_, Split::kTrain, limit); }

    std::string dir_;
};

TEST_F(FashionMnistTest, RoundTripKeepsValuesShapesAndDtypes) {
    write_train(5);
    const Dataset d = load();
    ASSERT_EQ(d.size(), 5);
    EXPECT_EQ(d.images.dtype(), torch::kFloat32);
    EXPECT_EQ(d.images.sizes(), (std::vector<int64_t>{5, 784}));
    EXPECT_EQ(d.labels.dtype(), torch::kInt64);
    EXPECT_EQ(d.labels.sizes(), (std::vector<int64_t>{5}));
    std::vector<uint8_t> px = pattern_pixels(5);
    // pixel / 255 exactly, as a float division: the same op the loader documents.
    const torch::Tensor want =
        torch::from_blob(px.data(), {5, 784}, torch::kUInt8).to(torch::kFloat32) / 255.0;
    EXPECT_TRUE(torch::equal(d.images, want));
    EXPECT_EQ(d.images.min().item<float>(), 0.0f);
    EXPECT_EQ(d.images.max().item<float>(), 1.0f);
    EXPECT_TRUE(torch::equal(d.labels, torch::tensor({0, 3, 6, 9, 2}, torch::kInt64)));
}

TEST_F(FashionMnistTest, TestSplitAndUncompressedFiles) {
    // t10k files without .gz: the loader falls back to the raw names.
    write_raw_file(path("t10k-images-idx3-ubyte"),
                   make_idx_bytes(kImagesMagic, {2, 28, 28}, pattern_pixels(2)));
    write_raw_file(path("t10k-labels-idx1-ubyte"), make_idx_bytes(kLabelsMagic, {2}, {7, 1}));
    const Dataset d = load_fashion_mnist(dir_, Split::kTest);
    ASSERT_EQ(d.size(), 2);
    EXPECT_TRUE(torch::equal(d.labels, torch::tensor({7, 1}, torch::kInt64)));
    EXPECT_EQ(d.images[1][0].item<float>(), pattern_pixels(2)[784] / 255.0f);
}

TEST_F(FashionMnistTest, LimitKeepsFirstExamples) {
    write_train(4);
    const Dataset all = load();
    const Dataset two = load(2);
    ASSERT_EQ(two.size(), 2);
    EXPECT_TRUE(torch::equal(two.images, all.images.narrow(0, 0, 2)));
    EXPECT_TRUE(torch::equal(two.labels, all.labels.narrow(0, 0, 2)));
    EXPECT_EQ(load(4).size(), 4);
    expect_error([&] { load(5); }, {"limit 5", "4 examples", kTrainImages});
    expect_error([&] { load(-1); }, {"limit", "-1"});
}

TEST_F(FashionMnistTest, SyntheticDatasetIsDeterministicAndLearnable) {
    trit::testing::write_synthetic_fashion_mnist(dir_, 500, 200, /*seed=*/7);
    const Dataset train = load();
    const Dataset test = load_fashion_mnist(dir_, Split::kTest);
    ASSERT_EQ(train.size(), 500);
    ASSERT_EQ(test.size(), 200);
    for (int64_t c = 0; c < 10; ++c)
        EXPECT_GT(train.labels.eq(c).sum().item<int64_t>(), 0);

    const std::string other = trit::testing::make_temp_dir("trit-fashion-mnist");
    trit::testing::write_synthetic_fashion_mnist(other, 500, 200, /*seed=*/7);
    EXPECT_EQ(read_bytes(path(kTrainImages)), read_bytes(other + "/" + kTrainImages));
    trit::testing::write_synthetic_fashion_mnist(other, 500, 200, /*seed=*/8);
    EXPECT_NE(read_bytes(path(kTrainImages)), read_bytes(other + "/" + kTrainImages));
    trit::fs::remove_tree(other);

    // Learnable: nearest class mean, the simplest classifier, already separates the classes.
    std::vector<torch::Tensor> means;
    for (int64_t c = 0; c < 10; ++c)
        means.push_back(train.images.index({train.labels == c}).mean(0));
    const torch::Tensor pred = torch::cdist(test.images, torch::stack(means)).argmin(1);
    EXPECT_GT(pred.eq(test.labels).to(torch::kFloat32).mean().item<float>(), 0.9f);
}

TEST_F(FashionMnistTest, MissingDirectory) {
    const std::string gone = path("nowhere");
    expect_error([&] { load_fashion_mnist(gone, Split::kTrain); },
                 {gone, "directory missing", "apt-get install dataset-fashion-mnist", "data.path"});
}

TEST_F(FashionMnistTest, MissingFile) {
    write_train(2);
    trit::fs::remove_file(path(kTrainLabels));
    expect_error([&] { load(); }, {path(kTrainLabels), "missing"});
}

TEST_F(FashionMnistTest, NotGzip) {
    write_train(2);
    write_raw_file(path(kTrainImages),
                   make_idx_bytes(kImagesMagic, {2, 28, 28}, pattern_pixels(2)));
    expect_error([&] { load(); }, {path(kTrainImages), "not a gzip file"});
}

TEST_F(FashionMnistTest, CorruptGzipChecksum) {
    write_train(2);
    std::string gz = read_bytes(path(kTrainImages));
    gz[gz.size() - 8] ^= 0x5a;  // first byte of the CRC32 trailer
    write_raw_file(path(kTrainImages), gz);
    expect_error([&] { load(); }, {path(kTrainImages), "corrupt gzip stream", "zlib:"});
}

TEST_F(FashionMnistTest, CutOffGzipStream) {
    write_train(2);
    const std::string gz = read_bytes(path(kTrainImages));
    write_raw_file(path(kTrainImages), gz.substr(0, gz.size() / 2));
    expect_error([&] { load(); }, {path(kTrainImages), "corrupt gzip stream", "zlib:"});
}

TEST_F(FashionMnistTest, WrongImagesMagic) {
    write_train(2);
    write_idx_gz(path(kTrainImages), 0x00000802, {2, 28, 28}, pattern_pixels(2));
    expect_error([&] { load(); }, {path(kTrainImages), "magic", "0x00000803", "0x00000802"});
    // A labels file where the images belong is shorter than an images header: still "magic".
    write_idx_gz(path(kTrainImages), kLabelsMagic, {2}, {0, 1});
    expect_error([&] { load(); }, {path(kTrainImages), "magic", "0x00000803", "0x00000801"});
}

TEST_F(FashionMnistTest, WrongLabelsMagic) {
    write_train(2);
    write_idx_gz(path(kTrainLabels), kImagesMagic, {2}, {0, 1});
    expect_error([&] { load(); }, {path(kTrainLabels), "magic", "0x00000801", "0x00000803"});
}

TEST_F(FashionMnistTest, ImagesNot28x28) {
    write_train(2);
    write_idx_gz(path(kTrainImages), kImagesMagic, {2, 32, 32}, std::vector<uint8_t>(2048));
    expect_error([&] { load(); }, {path(kTrainImages), "28x28", "32x32"});
}

TEST_F(FashionMnistTest, TruncatedHeader) {
    write_train(2);
    write_idx_gz(path(kTrainImages), kImagesMagic, {2}, {});  // 8 of the 16 header bytes
    expect_error([&] { load(); }, {path(kTrainImages), "truncated header", "16", "found 8"});
}

TEST_F(FashionMnistTest, TruncatedImages) {
    write_train(3);
    write_idx_gz(path(kTrainImages), kImagesMagic, {3, 28, 28}, pattern_pixels(2));
    expect_error([&] { load(); }, {path(kTrainImages), "truncated", "3 images", "found only 1568"});
}

TEST_F(FashionMnistTest, TrailingBytes) {
    write_train(2);
    write_idx_gz(path(kTrainLabels), kLabelsMagic, {2}, {1, 2, 3});
    expect_error([&] { load(); }, {path(kTrainLabels), "1 trailing bytes", "2 labels"});
}

TEST_F(FashionMnistTest, LabelOutOfRange) {
    write_train(3);
    write_idx_gz(path(kTrainLabels), kLabelsMagic, {3}, {0, 10, 2});
    expect_error([&] { load(); }, {path(kTrainLabels), "label 10", "index 1", "0..9"});
}

TEST_F(FashionMnistTest, CountMismatch) {
    write_train(3);
    write_idx_gz(path(kTrainLabels), kLabelsMagic, {2}, {0, 1});
    expect_error([&] { load(); },
                 {path(kTrainImages), "3 images", path(kTrainLabels), "2 labels", "count"});
}

TEST(EpochPermutation, IsAPermutation) {
    for (int64_t n : {0, 1, 2, 7, 1000}) {
        std::vector<int64_t> p = trit::data::epoch_permutation(n, /*seed=*/3, /*epoch=*/1);
        ASSERT_EQ(static_cast<int64_t>(p.size()), n);
        std::sort(p.begin(), p.end());
        std::vector<int64_t> iota(static_cast<size_t>(n));
        std::iota(iota.begin(), iota.end(), int64_t{0});
        EXPECT_EQ(p, iota) << "n=" << n;
    }
}

TEST(EpochPermutation, DeterministicAndKeyedBySeedAndEpoch) {
    using trit::data::epoch_permutation;
    const auto base = epoch_permutation(100, 1, 0);
    EXPECT_EQ(base, epoch_permutation(100, 1, 0));
    EXPECT_NE(base, epoch_permutation(100, 1, 1));
    EXPECT_NE(base, epoch_permutation(100, 2, 0));
    EXPECT_NE(epoch_permutation(100, 1, 1), epoch_permutation(100, 2, 0));
    expect_error([] { epoch_permutation(-1, 0, 0); }, {"n must be >= 0"});
    expect_error([] { epoch_permutation(3, 0, -2); }, {"epoch must be >= 0"});
}

// Frozen from this implementation (and cross-checked once against an independent Python
// transcription): a change means every training run's batch order changed.
TEST(EpochPermutation, GoldenValues) {
    using trit::data::epoch_permutation;
    EXPECT_EQ(epoch_permutation(10, 42, 0), (std::vector<int64_t>{9, 3, 6, 4, 0, 7, 5, 2, 8, 1}));
    EXPECT_EQ(epoch_permutation(10, 42, 1), (std::vector<int64_t>{5, 4, 3, 6, 8, 1, 9, 7, 2, 0}));
    EXPECT_EQ(epoch_permutation(10, 0, 0), (std::vector<int64_t>{1, 3, 9, 2, 4, 5, 7, 6, 0, 8}));
}

TEST(EpochPermutation, AllOrdersOfThreeEquallyLikely) {
    std::map<std::vector<int64_t>, int> counts;
    for (int64_t e = 0; e < 6000; ++e)
        ++counts[trit::data::epoch_permutation(3, 9, e)];
    ASSERT_EQ(counts.size(), 6u);
    // Each count is Binomial(6000, 1/6): mean 1000, sd ~29; 150 is > 5 sd.
    for (const auto& [perm, count] : counts)
        EXPECT_NEAR(count, 1000, 150);
}

TEST(GatherRows, SelectsSliceInOrder) {
    const torch::Tensor t = torch::arange(30, torch::kFloat32).view({10, 3});
    const std::vector<int64_t> idx = {4, 9, 0, 2, 7};
    const torch::Tensor g = trit::data::gather_rows(t, idx, 1, 4);
    EXPECT_TRUE(torch::equal(g, torch::stack({t[9], t[0], t[2]})));
    EXPECT_EQ(trit::data::gather_rows(t, idx, 5, 5).sizes(), (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(trit::data::gather_rows(t, {}, 0, 0).size(0), 0);
    expect_error([&] { trit::data::gather_rows(t, idx, 3, 6); }, {"[3, 6)", "5 indices"});
    expect_error([&] { trit::data::gather_rows(t, {1, 10}, 0, 2); }, {"index 10", "< 10"});
}

TEST(RealFashionMnist, LoadsBothSplits) {
    if (!trit::fs::is_dir(trit::data::kFashionMnistDir)) {
        GTEST_SKIP() << trit::data::kFashionMnistDir << " not installed";
    }
    const Dataset train = load_fashion_mnist(trit::data::kFashionMnistDir, Split::kTrain);
    const Dataset test = load_fashion_mnist(trit::data::kFashionMnistDir, Split::kTest);
    ASSERT_EQ(train.size(), 60000);
    ASSERT_EQ(test.size(), 10000);
    EXPECT_EQ(train.images.sizes(), (std::vector<int64_t>{60000, 784}));
    // First labels and first image's pixel sum, checked once against Python's gzip module.
    EXPECT_TRUE(torch::equal(train.labels.narrow(0, 0, 10),
                             torch::tensor({9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, torch::kInt64)));
    EXPECT_TRUE(torch::equal(test.labels.narrow(0, 0, 10),
                             torch::tensor({9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, torch::kInt64)));
    EXPECT_NEAR(train.images[0].sum().item<double>() * 255.0, 76247.0, 0.05);
    EXPECT_NEAR(test.images[0].sum().item<double>() * 255.0, 33456.0, 0.05);
    for (int64_t c = 0; c < 10; ++c)
        EXPECT_EQ(train.labels.eq(c).sum().item<int64_t>(), 6000);
}

}  // namespace
