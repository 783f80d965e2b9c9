// GPU tests of the GPU runtime (kernels/runtime_cuda.h): an MLP exported to every packed format
// runs on the GPU with the same logits as the CPU reference runtime, bit for bit where the layers
// quantize their input to int8 (the kernels and the epilogue are exact), within float rounding
// where they do not; and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/model.h"
#include "core/recipe.h"
#include "exporters/pack.h"
#include "exporters/runtime_cpu.h"
#include "kernels/runtime_cuda.h"
#include "quantizers/layer_selection.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using ::testing::HasSubstr;

// An untrained MLP of `recipe_yaml` exported to `format` (its weights: the seeded init).
trit::exporters::PackedModel exported(const std::string& recipe_yaml, const std::string& format) {
    const trit::Recipe recipe = trit::parse_recipe(recipe_yaml, "test recipe");
    torch::manual_seed(7);
    auto model = trit::make_model(recipe.model);
    trit::quantizers::apply_quantization(*model, model->output_layer(), recipe.quantization);
    trit::exporters::ExportOptions o;
    o.format = trit::exporters::parse_format(format);
    o.layers = trit::quantizers::selected_layers(*model, model->output_layer(), recipe.quantization);
    return trit::exporters::pack_model(recipe, trit::recipe_to_yaml(recipe), *model, o).model;
}

// `targets` may name the output layer too: a float head runs on cuBLAS on the GPU and on the CPU
// BLAS in the reference, whose float sums differ in the last bits.
std::string recipe(const std::string& weight, const std::string& activation, const std::string& model,
                   const std::string& targets = "") {
    return "name: runtime\nmodel: " + model + "\ndata: {path: /nonexistent}\nquantization:\n  weight: " + weight +
           "\n  activation: {method: " + activation + "}\n" + (targets.empty() ? "" : "  targets: " + targets + "\n");
}

class CudaRuntime : public trit::gputest::RequiresGpu<::testing::Test> {};

TEST_F(CudaRuntime, Int8LayersGiveTheCpuReferenceLogitsBitForBit) {
    // fc1 (k = 784) runs the generic kernel, fc2 (k = 512) and head (k = 256) the fast ones.
    const std::string mlp = "{input: 784, hidden: [512, 256], classes: 10}";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"tern2", "{method: absmean, granularity: channel}"},
        {"tern2", "{method: absmean, granularity: tensor}"},
        {"tern2", "{method: absmean, granularity: group, group_size: 256}"},
        {"tern24", "{method: absmean, granularity: channel}"},
        {"bin1", "{method: binary, granularity: channel}"},
        {"bt2", "{method: balanced, granularity: group, group_size: 64, depth: 2}"},
        {"bt4", "{method: balanced, granularity: group, group_size: 64, depth: 4}"},
    };
    for (const auto& [format, weight] : cases) {
        SCOPED_TRACE(format + " " + weight);
        const auto packed = exported(recipe(weight, "int8_per_token", mlp, "[fc1, fc2, head]"), format);
        trit::kernels::CudaModel gpu(packed);
        for (int64_t m : {1, 3, 37}) {
            torch::manual_seed(static_cast<uint64_t>(m));
            const torch::Tensor x = torch::randn({m, 784});
            const torch::Tensor want = trit::exporters::forward_cpu(packed, x);
            const torch::Tensor got = gpu.forward(x).cpu();
            EXPECT_TRUE(torch::equal(got, want)) << "m=" << m << " max |diff| "
                                                 << (got - want).abs().max().item<float>();
        }
    }
}

TEST_F(CudaRuntime, FloatActivationLayersMatchWithinRounding) {
    const std::string mlp = "{input: 784, hidden: [96], classes: 10}";
    for (const std::string weight : {"{method: absmean, granularity: channel}",
                                     "{method: absmean, granularity: group, group_size: 64}"}) {
        SCOPED_TRACE(weight);
        const auto packed = exported(recipe(weight, "none", mlp), "tern2");
        trit::kernels::CudaModel gpu(packed);
        torch::manual_seed(3);
        const torch::Tensor x = torch::randn({9, 784});
        const torch::Tensor want = trit::exporters::forward_cpu(packed, x);
        // Float sums of up to 784 terms in another order: a few ulps of the largest partial sums.
        EXPECT_TRUE(torch::allclose(gpu.forward(x).cpu(), want, /*rtol=*/1e-5, /*atol=*/1e-5));
    }
}

TEST_F(CudaRuntime, DescribesTheKernelOfEachLayer) {
    const auto packed = exported(recipe("{method: absmean, granularity: channel}", "int8_per_token",
                                        "{input: 784, hidden: [256], classes: 10}"),
                                 "tern2");
    trit::kernels::CudaModel gpu(packed);
    const std::vector<std::string> lines = gpu.describe(1);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_THAT(lines[0], HasSubstr("fc1 tern2 generic"));
    EXPECT_THAT(lines[0], HasSubstr("k must be a multiple of 64"));
    EXPECT_THAT(lines[1], HasSubstr("head float"));
}

TEST(CudaRuntimeErrors, NamesTheDeviceProblem) {
    const auto packed = exported(recipe("{method: absmean, granularity: channel}", "int8_per_token",
                                        "{input: 784, hidden: [16], classes: 10}"),
                                 "tern2");
    try {
        trit::kernels::CudaModel gpu(packed, 99);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const trit::Error& e) {
        EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("device index 99 is out of range"),
                                               HasSubstr("no CUDA device is available")));
    }
}

}  // namespace
