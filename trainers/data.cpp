// Training and evaluation data by task: see data.h.
#include "trainers/data.h"

#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "core/fashion_mnist.h"
#include "core/fortunes.h"
#include "core/sampler.h"

namespace trit::trainers {
namespace {

// Fashion-MNIST training-split pixel statistics (pixel / 255), fixed so that a model's expected
// input does not depend on data.train_limit.
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

namespace F = torch::nn::functional;

class ImageTrainData : public TrainData {
  public:
    ImageTrainData(const Recipe& r, torch::Device device)
        : seed_(r.seed), batch_size_(r.training.batch_size) {
        std::tie(x_, y_) = load_split(r.data, /*train=*/true, device);
    }
    int64_t batches_per_epoch() const override {
        return (x_.size(0) + batch_size_ - 1) / batch_size_;
    }
    Batch batch(int64_t epoch, int64_t b) override {
        if (epoch != order_epoch_) {
            order_ = data::epoch_permutation(x_.size(0), seed_, epoch);
            order_epoch_ = epoch;
        }
        const int64_t begin = b * batch_size_, end = std::min(x_.size(0), begin + batch_size_);
        return {data::gather_rows(x_, order_, begin, end), data::gather_rows(y_, order_, begin, end)};
    }
    int64_t items_per_batch() const override { return batch_size_; }
    const char* item_name() const override { return "samples"; }
    std::string describe() const override {
        return std::to_string(x_.size(0)) + " training examples";
    }

  private:
    uint64_t seed_;
    int64_t batch_size_;
    torch::Tensor x_, y_;
    std::vector<int64_t> order_;
    int64_t order_epoch_ = -1;
};

class ImageEvalData : public EvalData {
  public:
    ImageEvalData(const Recipe& r, torch::Device device) : batch_size_(r.training.eval_batch_size) {
        std::tie(x_, y_) = load_split(r.data, /*train=*/false, device);
    }
    EvalResult evaluate(Model& model) override { return trainers::evaluate(model, x_, y_, batch_size_); }
    std::string describe() const override { return std::to_string(x_.size(0)) + " test examples"; }

  private:
    int64_t batch_size_;
    torch::Tensor x_, y_;
};

class TextTrainData : public TrainData {
  public:
    TextTrainData(const Recipe& r, const data::TextCorpus& corpus, torch::Device device)
        : device_(device),
          batch_size_(r.training.batch_size),
          bytes_(static_cast<int64_t>(corpus.train.size())),
          entries_(corpus.train_entries),
          sampler_(corpus.train, r.model.context, r.seed) {}
    int64_t batches_per_epoch() const override {
        return std::max<int64_t>(1, bytes_ / items_per_batch());
    }
    Batch batch(int64_t epoch, int64_t b) override {
        const data::LmBatch lb = sampler_.at(epoch * batches_per_epoch() + b, batch_size_);
        return {lb.input.to(device_), lb.target.to(device_)};
    }
    int64_t items_per_batch() const override { return batch_size_ * sampler_.context(); }
    const char* item_name() const override { return "tokens"; }
    std::string describe() const override {
        return std::to_string(bytes_) + " training bytes (" + std::to_string(entries_) +
               " entries), windows of " + std::to_string(sampler_.context());
    }

  private:
    torch::Device device_;
    int64_t batch_size_, bytes_, entries_;
    data::LmWindowSampler sampler_;
};

class TextEvalData : public EvalData {
  public:
    TextEvalData(const Recipe& r, const data::TextCorpus& corpus, torch::Device device)
        : device_(device),
          entries_(corpus.valid_entries),
          batches_(corpus.valid, r.model.context, r.training.eval_batch_size) {}
    EvalResult evaluate(Model& model) override {
        torch::NoGradGuard no_grad;
        const bool was_training = model.is_training();
        model.eval();
        double nll = 0;
        int64_t correct = 0;
        for (int64_t i = 0; i < batches_.size(); ++i) {
            const data::LmBatch b = batches_.at(i);
            const torch::Tensor y = b.target.to(device_);
            const torch::Tensor logits = model.forward(b.input.to(device_));
            const int64_t v = logits.size(-1);
            nll += F::cross_entropy(logits.reshape({-1, v}).to(torch::kFloat32), y.reshape({-1}),
                                    F::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .item<double>();
            correct += logits.argmax(-1).eq(y).sum().item<int64_t>();
        }
        model.train(was_training);
        EvalResult r;
        r.language_model = true;
        r.examples = batches_.targets();
        r.loss = nll / static_cast<double>(r.examples);
        r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
        return r;
    }
    std::string describe() const override {
        return std::to_string(batches_.targets() + 1) + " validation bytes (" + std::to_string(entries_) +
               " entries)";
    }

  private:
    torch::Device device_;
    int64_t entries_;
    data::LmEvalBatches batches_;
};

data::TextCorpus load_corpus(const DataConfig& d) {
    TRIT_CHECK(d.dataset == "fortunes", "data.dataset: '", d.dataset, "' is not a text corpus");
    return data::load_fortunes(d.path, d.valid_fraction);
}

}  // namespace

double EvalResult::bits_per_byte() const { return data::bits_per_byte(loss); }
double EvalResult::perplexity() const { return std::exp(loss); }

std::string describe_eval(const EvalResult& r) {
    std::ostringstream os;
    os << std::fixed;
    if (r.language_model) {
        os << "validation " << std::setprecision(4) << r.bits_per_byte() << " bits/byte (loss "
           << r.loss << ", perplexity " << std::setprecision(3) << r.perplexity()
           << "), next-byte accuracy " << std::setprecision(2) << 100.0 * r.accuracy << "%";
    } else {
        os << "test accuracy " << std::setprecision(2) << 100.0 * r.accuracy << "%, loss "
           << std::setprecision(4) << r.loss;
    }
    return os.str();
}

torch::Tensor task_loss(Task task, const torch::Tensor& logits, const torch::Tensor& y) {
    if (task == Task::kLanguageModel)
        return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    return F::cross_entropy(logits, y);
}

EvalResult evaluate(Model& model, const torch::Tensor& x, const torch::Tensor& y, int64_t batch_size) {
    torch::NoGradGuard no_grad;
    const bool was_training = model.is_training();
    model.eval();
    double loss_sum = 0;
    int64_t correct = 0;
    const int64_t n = x.size(0);
    for (int64_t b = 0; b < n; b += batch_size) {
        const int64_t e = std::min(n, b + batch_size);
        torch::Tensor logits = model.forward(x.slice(0, b, e)).to(torch::kFloat32);
        torch::Tensor yb = y.slice(0, b, e);
        loss_sum += F::cross_entropy(logits, yb, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                        .item<double>();
        correct += logits.argmax(1).eq(yb).sum().item<int64_t>();
    }
    model.train(was_training);
    EvalResult r;
    r.examples = n;
    r.loss = n ? loss_sum / static_cast<double>(n) : 0.0;
    r.accuracy = n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
    return r;
}

std::pair<torch::Tensor, torch::Tensor> load_split(const DataConfig& data, bool train,
                                                   torch::Device device) {
    TRIT_CHECK(data.dataset == "fashion_mnist", "data.dataset: '", data.dataset,
               "' is not an image dataset; known: fashion_mnist");
    data::Dataset ds = data::load_fashion_mnist(
        data.path, train ? data::Split::kTrain : data::Split::kTest,
        train ? data.train_limit : data.test_limit);
    torch::Tensor x = ds.images;
    if (data.normalize) x = (x - kFashionMnistMean) / kFashionMnistStd;
    return {x.to(device), ds.labels.to(device)};
}

std::unique_ptr<TrainData> make_train_data(const Recipe& r, torch::Device device) {
    if (r.data.dataset == "fortunes") return std::make_unique<TextTrainData>(r, load_corpus(r.data), device);
    return std::make_unique<ImageTrainData>(r, device);
}

std::unique_ptr<EvalData> make_eval_data(const Recipe& r, torch::Device device) {
    if (r.data.dataset == "fortunes") return std::make_unique<TextEvalData>(r, load_corpus(r.data), device);
    return std::make_unique<ImageEvalData>(r, device);
}

RecipeData make_data(const Recipe& r, torch::Device device) {
    if (r.data.dataset == "fortunes") {
        const data::TextCorpus corpus = load_corpus(r.data);
        return {std::make_unique<TextTrainData>(r, corpus, device), std::make_unique<TextEvalData>(r, corpus, device)};
    }
    return {make_train_data(r, device), make_eval_data(r, device)};
}

}  // namespace trit::trainers
