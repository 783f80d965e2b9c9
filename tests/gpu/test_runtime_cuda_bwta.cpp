// GPU tests of the GPU runtime on BWTA files (binary weights, ternary / bool activations, ternary
// attention): a bin1 mlp runs the fused quantize + b1 GEMM (bin_tern for the signed input, bool_bin
// for the ReLU outputs) with the CPU reference runtime's logits bit for bit, m = 1 and odd shapes
// included, and so do the int8-code fallbacks (per-group scales, tern2); NaN input rows give NaN
// output rows as on the CPU; vit and gpt with ternary attention match the training forward on the
// same GPU bit for bit (the same LibTorch ops around exact integer layers) and the CPU reference
// within rounding of the float parts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/recipe.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "kernels/runtime_cuda.h"
#include "quantizers/layer_selection.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using ::testing::HasSubstr;

// A seeded model of `recipe_yaml` with BWTA quantization, its activation scales initialised from
// one batch (eq. 6, as a first training step would), exported to `format`. `model` receives it.
trit::exporters::PackedModel bwta_exported(const std::string& recipe_yaml,
                                           const std::string& format,
                                           std::shared_ptr<trit::Model>* model_out = nullptr) {
    const trit::Recipe recipe = trit::parse_recipe(recipe_yaml, "test recipe");
    torch::manual_seed(13);
    auto model = trit::make_model(recipe.model);
    trit::quantizers::apply_quantization(*model, model->output_layer(), recipe.quantization);
    model->eval();
    {
        torch::NoGradGuard no_grad;
        model->forward(recipe.model.type == "gpt" ? torch::randint(256, {4, 16}, torch::kLong)
                                                  : torch::randn({64, 784}));
    }
    trit::exporters::ExportOptions o;
    o.format = trit::exporters::parse_format(format);
    o.layers =
        trit::quantizers::selected_layers(*model, model->output_layer(), recipe.quantization);
    auto packed =
        trit::exporters::pack_model(recipe, trit::recipe_to_yaml(recipe), *model, o).model;
    if (model_out) *model_out = model;
    return packed;
}

std::string recipe(const std::string& model, const std::string& weight, const std::string& targets,
                   bool attention = false) {
    return "name: bwta\nmodel: " + model +
           "\ndata: {path: /nonexistent}\nquantization:\n  weight: " + weight +
           "\n  activation: {method: ternary}\n" + (attention ? "  attention: ternary\n" : "") +
           "  targets: " + targets + "\n";
}

class CudaRuntimeBwta : public trit::gputest::RequiresGpu<::testing::Test> {};

// fc1 (k = 784, not a multiple of 256) takes signed inputs: bin_tern; fc2 and head take ReLU
// outputs: bool_bin. Exact integer sums and the same epilogue as the CPU: bit for bit.
TEST_F(CudaRuntimeBwta, MlpGivesTheCpuReferenceLogitsBitForBit) {
    struct Case {
        std::string mlp, weight, format, kernel;
    };
    const std::vector<Case> cases = {
        {"{input: 784, hidden: [512, 256], classes: 10}", "{method: binary, granularity: channel}",
         "bin1", "bin1_gemm"},
        {"{input: 784, hidden: [512, 256], classes: 10}", "{method: binary, granularity: tensor}",
         "bin1", "bin1_gemm"},
        // Odd widths: n and k off every tile and block.
        {"{input: 784, hidden: [100, 33], classes: 10}", "{method: binary, granularity: channel}",
         "bin1", "bin1_gemm"},
        // Fallbacks: per-group scales, other formats (int8 codes, kernels::product).
        {"{input: 784, hidden: [512, 256], classes: 10}",
         "{method: binary, granularity: group, group_size: 256}", "bin1",
         "per-group weight scales"},
        {"{input: 784, hidden: [512, 256], classes: 10}", "{method: absmean, granularity: channel}",
         "tern2", "not bin1 weights"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.mlp + " " + c.weight + " " + c.format);
        const auto packed = bwta_exported(recipe(c.mlp, c.weight, "[fc1, fc2, head]"), c.format);
        ASSERT_EQ(packed.layer("fc2").act.mode, trit::ActLevelMode::kBool);
        trit::kernels::CudaModel gpu(packed);
        const auto lines = gpu.describe(1);
        ASSERT_EQ(lines.size(), 3u);
        EXPECT_THAT(lines[0], HasSubstr(c.kernel));
        if (c.kernel == "bin1_gemm") {
            EXPECT_THAT(lines[0], HasSubstr("bin_tern"));
            EXPECT_THAT(lines[1], HasSubstr("bool_bin"));
        }
        for (int64_t m : {1, 3, 37, 300}) {
            torch::manual_seed(static_cast<uint64_t>(m));
            const torch::Tensor x = torch::randn({m, 784});
            const torch::Tensor want = trit::exporters::forward_cpu(packed, x);
            const torch::Tensor got = gpu.forward(x).cpu();
            EXPECT_TRUE(torch::equal(got, want))
                << "m=" << m << " max |diff| " << (got - want).abs().max().item<float>();
        }
    }
}

TEST_F(CudaRuntimeBwta, NanInputRowsGiveNanOutputRows) {
    for (const std::string weight : {"{method: binary, granularity: channel}",
                                     "{method: binary, granularity: group, group_size: 256}"}) {
        SCOPED_TRACE(weight);
        const auto packed = bwta_exported(
            recipe("{input: 784, hidden: [64], classes: 10}", weight, "[fc1, head]"), "bin1");
        trit::kernels::CudaModel gpu(packed);
        torch::manual_seed(8);
        torch::Tensor x = torch::randn({5, 784});
        x[2][100] = std::numeric_limits<float>::quiet_NaN();
        const torch::Tensor got = gpu.forward(x).cpu();
        const torch::Tensor want = trit::exporters::forward_cpu(packed, x);
        EXPECT_TRUE(torch::isnan(got[2]).all().item<bool>());
        EXPECT_TRUE(torch::isnan(want[2]).all().item<bool>());
        for (int64_t i : {0, 1, 3, 4})
            EXPECT_TRUE(torch::equal(got[i], want[i])) << i;
    }
}

// The GPU runtime against the training forward on the same GPU (what `trit validate --device
// cuda` compares): the same LibTorch CUDA ops around layers whose integer sums and epilogue are
// exact on both sides, so the logits agree bit for bit; against the CPU reference, LibTorch's CUDA
// and CPU norms, softmax and GELU round differently, which can flip a ternary code at a rounding
// tie (rare: x / s_A must sit within an ulp of +-0.5), so within a tolerance.
constexpr double kAcrossDevicesRtol = 2e-2;
constexpr double kAcrossDevicesMinAgreement = 0.9;

TEST_F(CudaRuntimeBwta, TransformersMatchTheGpuTrainingForwardAndTheCpuReference) {
    struct Case {
        std::string model, weight;
        bool gpt;
    };
    const std::vector<Case> cases = {
        {"{type: vit, dim: 32, depth: 1, heads: 2, patch: 7}",
         "{method: binary, granularity: tensor}", false},
        {"{type: vit, dim: 32, depth: 1, heads: 2, patch: 7, activation: relu2}",
         "{method: binary, granularity: channel}", false},
        {"{type: gpt, dim: 32, depth: 2, heads: 2, context: 16, bias: true}",
         "{method: binary, granularity: channel}", true},
        {"{type: gpt, dim: 32, depth: 2, heads: 2, context: 16, activation: relu2}",
         "{method: binary, granularity: tensor}", true},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.model + " " + c.weight);
        std::shared_ptr<trit::Model> model;
        const auto packed =
            bwta_exported(recipe(c.model, c.weight, "['re:blocks\\..*']", true), "bin1", &model);
        ASSERT_EQ(packed.act_quantizers.size(), c.gpt ? 8u : 4u);
        trit::kernels::CudaModel runtime(packed);
        torch::manual_seed(29);
        const torch::Tensor x =
            c.gpt ? torch::randint(256, {4, 16}, torch::kLong) : torch::randn({64, 784});
        const torch::Tensor y = c.gpt ? torch::randint(256, {4, 16}, torch::kLong)
                                      : torch::randint(10, {64}, torch::kLong);
        torch::NoGradGuard no_grad;
        const torch::Tensor got = runtime.forward(x).cpu();

        trit::exporters::configure_reference(*model, packed, /*use_file_codes=*/true);
        model->to(runtime.device());
        const torch::Tensor ref = model->forward(x.to(runtime.device())).cpu();
        const auto g = trit::exporters::compare_logits(got, ref, y);
        EXPECT_EQ(g.max_abs_error, 0.0);
        EXPECT_EQ(g.top1_agreement, 1.0) << "first disagreement " << g.first_disagreement;

        const auto cpu = trit::exporters::compare_logits(
            got, trit::exporters::packed_module_cpu(packed)->forward(x), y);
        EXPECT_LE(cpu.relative_error, kAcrossDevicesRtol);
        EXPECT_GE(cpu.top1_agreement, kAcrossDevicesMinAgreement)
            << "first disagreement " << cpu.first_disagreement;
    }
}

}  // namespace
