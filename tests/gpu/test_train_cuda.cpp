// Training on the GPU (LibTorch CUDA): the tiny ternary gpt and vit train with --device cuda in
// float32 and under bf16 autocast (finite, falling losses; the int8 layers' gradients come back
// in float32), and the first float32 step on the GPU gives the CPU's loss within rounding.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/fs.h"
#include "core/recipe.h"
#include "kernels/train_quant_torch.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

class TrainCuda : public gputest::RequiresGpu<::testing::Test> {
  protected:
    void SetUp() override {
        gputest::RequiresGpu<::testing::Test>::SetUp();
        kernels::register_training_quantizers();  // as trit's CLI does
    }
};

const char* kTernary =
    "quantization:\n"
    "  weight: {method: absmean}\n"
    "  activation: {method: int8_per_token}\n"
    "  targets: ['re:blocks\\..*']\n";

Recipe tiny_gpt() {
    return parse_recipe(trit::testing::tiny_gpt_recipe_yaml(std::string(kTernary) +
                                                            "optimizer: {lr: 0.01}\n"
                                                            "training: {steps: 40, batch_size: 16}\n"),
                        "tiny_gpt.yaml");
}

// Mean training loss of the first and the last `window` of `steps` steps.
std::pair<double, double> loss_trend(const Recipe& r, trainers::Precision p, int64_t steps, int64_t window) {
    trainers::TrainingSetup s = trainers::make_training_setup(r, torch::Device(torch::kCUDA), p);
    auto data = trainers::make_train_data(r, torch::Device(torch::kCUDA));
    double first = 0, last = 0;
    for (int64_t i = 0; i < steps; ++i) {
        const trainers::Batch b = data->batch(0, i % data->batches_per_epoch());
        const double loss = trainers::train_step(s, b.x, b.y, 0.01, 1.0).item<double>();
        EXPECT_TRUE(std::isfinite(loss)) << "step " << i;
        if (i < window) first += loss / static_cast<double>(window);
        if (i >= steps - window) last += loss / static_cast<double>(window);
    }
    for (const auto& p : s.model->parameters())
        if (p.grad().defined()) {
            EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
        }
    return {first, last};
}

TEST_F(TrainCuda, TernaryGptTrainsInFloat32AndBf16) {
    const Recipe r = tiny_gpt();
    for (auto p : {trainers::Precision::kFp32, trainers::Precision::kBf16}) {
        SCOPED_TRACE(trainers::precision_name(p));
        const auto [first, last] = loss_trend(r, p, 60, 10);
        EXPECT_LT(last, first - 0.5);
    }
}

TEST_F(TrainCuda, TernaryVitTrainsInBf16) {
    const Recipe r = parse_recipe("name: tiny_vit\nseed: 3\nmodel: {type: vit, dim: 32, depth: 1, heads: 2}\n"
                                  "data: {path: '" + trit::testing::tiny_data_dir() + "'}\n" + kTernary +
                                  "training: {batch_size: 32}\n",
                                  "tiny_vit.yaml");
    const auto [first, last] = loss_trend(r, trainers::Precision::kBf16, 60, 10);
    EXPECT_LT(last, first - 0.2);
}

TEST_F(TrainCuda, FirstFloat32StepMatchesTheCpu) {
    const Recipe r = tiny_gpt();
    double loss[2];
    int i = 0;
    for (auto device : {torch::Device(torch::kCPU), torch::Device(torch::kCUDA)}) {
        trainers::TrainingSetup s = trainers::make_training_setup(r, device);
        auto data = trainers::make_train_data(r, device);
        const trainers::Batch b = data->batch(0, 0);
        loss[i++] = trainers::train_step(s, b.x, b.y, 0.01, 1.0).item<double>();
    }
    EXPECT_NEAR(loss[0], loss[1], 1e-3 * std::abs(loss[0]));
}

}  // namespace
}  // namespace trit
