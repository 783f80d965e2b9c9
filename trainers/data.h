// A recipe's data as the trainer sees it, whatever the task: training batches addressed by
// (epoch, batch index) so that a run resumes exactly, and the evaluation split with its metrics.
//   - classification (mlp, vit on fashion_mnist): the training split shuffled per epoch by
//     data::epoch_permutation, the test split for evaluation (accuracy, mean cross-entropy);
//   - language model (gpt on fortunes): random windows of context bytes from the training text
//     (data::LmWindowSampler; batch b of epoch e is window batch e * batches_per_epoch() + b),
//     the validation text in one pass that predicts every byte once (data::LmEvalBatches) for
//     loss per byte, bits per byte, perplexity and next-byte accuracy.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "core/model.h"
#include "core/recipe.h"

namespace trit::trainers {

struct EvalResult {
    bool language_model = false;
    double loss = 0;       // mean cross-entropy in nats per example (language model: per byte)
    double accuracy = 0;   // top-1 fraction in [0, 1] (language model: next-byte argmax)
    int64_t examples = 0;  // examples (language model: predicted bytes)
    double bits_per_byte() const;  // language model: loss / ln 2
    double perplexity() const;     // language model: exp(loss), per byte
};

// "test accuracy 88.10%, loss 0.3321" or "validation 2.134 bits/byte (loss 1.4791, perplexity
// 4.39), next-byte accuracy 55.20%".
std::string describe_eval(const EvalResult& r);

// Accuracy and mean cross-entropy of a classifier over (x, y), in batches.
EvalResult evaluate(Model& model, const torch::Tensor& x, const torch::Tensor& y, int64_t batch_size);

// The mean cross-entropy of the model's logits against y: (B, C) vs (B) for a classifier,
// (B, T, V) vs (B, T) for a language model.
torch::Tensor task_loss(Task task, const torch::Tensor& logits, const torch::Tensor& y);

struct Batch {
    torch::Tensor x, y;  // on the data's device
};

class TrainData {
  public:
    virtual ~TrainData() = default;
    // Optimizer steps in one epoch: a pass over the training examples, or for a language model
    // as many windows as hold the training text once (at least 1).
    virtual int64_t batches_per_epoch() const = 0;
    // Batch b (0 <= b < batches_per_epoch()) of epoch `epoch`: a pure function of both and the
    // recipe's seed.
    virtual Batch batch(int64_t epoch, int64_t b) = 0;
    // What a batch counts: examples, or predicted bytes for a language model.
    virtual int64_t items_per_batch() const = 0;
    virtual const char* item_name() const = 0;  // "samples" | "tokens"
    // For the start-of-run line, e.g. "60000 training examples".
    virtual std::string describe() const = 0;
};

class EvalData {
  public:
    virtual ~EvalData() = default;
    virtual EvalResult evaluate(Model& model) = 0;
    virtual std::string describe() const = 0;  // e.g. "10000 test examples"
};

// The recipe's training data on `device`. Throws trit::Error for an unknown dataset, a dataset
// that does not fit the model's task, missing files, or a text shorter than one window.
std::unique_ptr<TrainData> make_train_data(const Recipe& recipe, torch::Device device);
// The recipe's evaluation data (classification: the test split, data.test_limit applies; language
// model: the validation text), evaluated in batches of training.eval_batch_size (examples, or
// windows of context bytes).
std::unique_ptr<EvalData> make_eval_data(const Recipe& recipe, torch::Device device);

// Both, reading the dataset's files once.
struct RecipeData {
    std::unique_ptr<TrainData> train;
    std::unique_ptr<EvalData> eval;
};
RecipeData make_data(const Recipe& recipe, torch::Device device);

// The recipe's Fashion-MNIST split on `device`, normalised as the recipe says: images (N, 784),
// labels (N).
std::pair<torch::Tensor, torch::Tensor> load_split(const DataConfig& data, bool train,
                                                   torch::Device device);

}  // namespace trit::trainers
