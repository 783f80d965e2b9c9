// GPU tests of the GPU runtime (kernels/runtime_cuda.h): an MLP exported to every packed format
// runs on the GPU with the same logits as the CPU reference runtime, bit for bit where the layers
// quantize their input to int8 (the kernels and the epilogue are exact), within float rounding
// where they do not; the vit and gpt run as modules on the GPU within rounding of the CPU
// reference runtime's packed module, and the gpt decodes with a KV cache there; and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/gpt.h"
#include "core/model.h"
#include "core/recipe.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "kernels/runtime_cuda.h"
#include "quantizers/layer_selection.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

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
    // fc1 (k = 784) runs the fast kernels on rows padded to 832, fc2 (k = 512) and head (k = 256)
    // as they are; bin1 as tern2 codes.
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
        for (int64_t m : {1, 3, 16, 37}) {  // bt at 16 rows: the GEMM with k split on sm_90
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
    EXPECT_THAT(lines[0], HasSubstr("fc1 (1 row) tern2 gemv"));
    EXPECT_THAT(lines[0], HasSubstr("(k padded from 784 to 832 with zero weights)"));
    EXPECT_THAT(lines[1], HasSubstr("head (1 row) float"));
    EXPECT_THAT(lines[1], Not(HasSubstr("padded")));  // a float layer keeps its rows

    // bt2 with groups of 64: the bt GEMM from 9 rows, on (16, 32) tiles where the grid is small,
    // their k split over a cluster on sm_90 (8 tiles of 32 weight rows; bt_gemm_plan); on (64,
    // 64) tiles unsplit at 2048 rows.
    const auto bt2 =
        exported(recipe("{method: balanced, granularity: group, group_size: 64, depth: 2}",
                        "int8_per_token", "{input: 784, hidden: [256], classes: 10}"),
                 "bt2");
    trit::kernels::CudaModel bt2_gpu(bt2);
    int device = 0, major = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
              cudaSuccess);
    const std::string at16 = bt2_gpu.describe(16).at(0), at2048 = bt2_gpu.describe(2048).at(0);
    EXPECT_THAT(at16, HasSubstr("fc1 (16 rows) bt2 gemm"));
    EXPECT_THAT(at16, HasSubstr("(tiles of 16 x 32"));
    EXPECT_EQ(at16.find(", k split over ") != std::string::npos, major >= 9) << at16;
    EXPECT_THAT(at2048, HasSubstr("fc1 (2048 rows) bt2 gemm"));
    // 256 outputs: 32 tiles of the wgmma kernel, too few for it (bt_gemm_wgmma_pays).
    EXPECT_THAT(at2048, HasSubstr("(tiles of 64 x 64)")) << at2048;
}

TEST_F(CudaRuntime, PadsRowsWhereTheScaleGroupsAllowItAndRunsBin1AsTern2) {
    const std::string mlp = "{input: 784, hidden: [64], classes: 10}";
    struct Case {
        std::string format, weight, fc1;  // what describe(64) says of fc1 (in = 784)
        bool padded;
    };
    const std::vector<Case> cases = {
        {"tern2", "{method: absmean, granularity: channel}", "fc1 (64 rows) tern2 gemm", true},
        {"tern2", "{method: absmean, granularity: tensor}", "fc1 (64 rows) tern2 gemm", true},
        // 13 groups of 64, the last one 16 columns wide: padded, it is a whole group of 64.
        {"tern2", "{method: absmean, granularity: group, group_size: 64}",
         "fc1 (64 rows) tern2 gemm", true},
        // Groups of 49 would not survive the padding: the generic kernel, rows as they are.
        {"tern2", "{method: absmean, granularity: group, group_size: 49}",
         "fc1 (64 rows) tern2 generic", false},
        {"bin1", "{method: binary, granularity: channel}", "fc1 (64 rows) bin1 gemm", true},
        {"bin1", "{method: binary, granularity: group, group_size: 49}",
         "fc1 (64 rows) bin1 generic", false},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.format + " " + c.weight);
        const auto packed =
            exported(recipe(c.weight, "int8_per_token", mlp, "[fc1, head]"), c.format);
        trit::kernels::CudaModel gpu(packed);
        const std::string fc1 = gpu.describe(64).at(0);
        EXPECT_THAT(fc1, HasSubstr(c.fc1));
        EXPECT_EQ(fc1.find("(k padded from 784 to 832 with zero weights)") != std::string::npos,
                  c.padded)
            << fc1;
        EXPECT_EQ(fc1.find("(the bin1 codes as tern2)") != std::string::npos, c.format == "bin1")
            << fc1;
        for (int64_t m : {1, 16, 64, 300}) {
            torch::manual_seed(static_cast<uint64_t>(m));
            const torch::Tensor x = torch::randn({m, 784});
            const torch::Tensor want = trit::exporters::forward_cpu(packed, x);
            const torch::Tensor got = gpu.forward(x).cpu();
            EXPECT_TRUE(torch::equal(got, want))
                << "m=" << m << " max |diff| " << (got - want).abs().max().item<float>();
            // One layer alone takes the unpadded width and gives the unpadded layer's rows.
            const torch::Tensor h = gpu.forward_layer("fc1", x).cpu();
            EXPECT_EQ(h.sizes(), (std::vector<int64_t>{m, 64}));
        }
    }
}

// Tiny transformers: vit on 7x7 patches (k = 49 for `patch`: a partial group everywhere), gpt
// with 2 blocks over 16 bytes.
const std::string kVit = "{type: vit, dim: 32, depth: 1, heads: 2, patch: 7}";
const std::string kGpt = "{type: gpt, dim: 32, depth: 2, heads: 2, context: 16}";

// The model's input: images (64, 784) or bytes (4, 16), and labels of the matching shape.
std::pair<torch::Tensor, torch::Tensor> transformer_inputs(bool gpt) {
    torch::manual_seed(29);
    if (gpt)
        return {torch::randint(256, {4, 16}, torch::kLong),
                torch::randint(256, {4, 16}, torch::kLong)};
    return {torch::randn({64, 784}), torch::randint(10, {64}, torch::kLong)};
}

// Norms, softmax and activations run in LibTorch CUDA, whose reductions round differently from
// the CPU's: the layers' int8 codes can then differ by one at a rounding tie, a change of about
// 1/127 of one activation, so the logits agree within rounding and rare code flips, not bitwise.
constexpr double kTransformerInt8Rtol = 1e-2;
constexpr double kTransformerMinAgreement = 0.9;
// Without activation quantization only float rounding differs (sums of <= 128 terms in float).
constexpr double kTransformerFloatRtol = 1e-4;

TEST_F(CudaRuntime, TransformersMatchTheCpuReferenceModule) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"tern2", "{method: absmean, granularity: channel}"},
        {"tern24", "{method: absmean, granularity: channel}"},
        {"bin1", "{method: binary, granularity: channel}"},
        {"bt2", "{method: balanced, granularity: group, group_size: 64, depth: 2}"},
    };
    for (const bool gpt : {false, true}) {
        const auto [x, y] = transformer_inputs(gpt);
        for (const auto& [format, weight] : cases) {
            SCOPED_TRACE(std::string(gpt ? "gpt " : "vit ") + format);
            const auto packed =
                exported(recipe(weight, "int8_per_token", gpt ? kGpt : kVit), format);
            trit::kernels::CudaModel runtime(packed);
            ASSERT_NE(runtime.module(), nullptr);
            torch::NoGradGuard no_grad;
            const torch::Tensor want = trit::exporters::packed_module_cpu(packed)->forward(x);
            const torch::Tensor got = runtime.forward(x).cpu();
            ASSERT_EQ(got.sizes(), want.sizes());
            const auto c = trit::exporters::compare_logits(got, want, y);
            EXPECT_LE(c.relative_error, kTransformerInt8Rtol);
            EXPECT_GE(c.top1_agreement, kTransformerMinAgreement)
                << "first disagreement " << c.first_disagreement;
        }
    }
}

// describe(examples) names the rows each layer's input has: kVit's 28x28 images in 7x7 patches
// are 16 patches and 17 tokens an image; kGpt's windows 16 positions.
TEST_F(CudaRuntime, DescribesTheRowsEachTransformerLayerSees) {
    const std::string weight = "{method: absmean, granularity: channel}";
    const auto vit = exported(recipe(weight, "int8_per_token", kVit), "tern2");
    trit::kernels::CudaModel v(vit);
    EXPECT_EQ(v.layer_rows("patch", 4), 64);
    EXPECT_EQ(v.layer_rows("blocks.0.attn.q", 4), 68);
    EXPECT_EQ(v.layer_rows("head", 4), 4);
    const std::vector<std::string> lines = v.describe(4);
    ASSERT_FALSE(lines.empty());
    for (const std::string& line : lines) {
        const std::string rows = line.rfind("patch ", 0) == 0  ? "(64 rows)"
                                 : line.rfind("head ", 0) == 0 ? "(4 rows)"
                                                               : "(68 rows)";
        EXPECT_THAT(line, HasSubstr(rows)) << line;
    }
    // q at 68 rows: above the tern2 GEMV's 48, the GEMM (k = 32 padded to 64).
    EXPECT_THAT(lines, Contains(HasSubstr("blocks.0.attn.q (68 rows) tern2 gemm")));
    const auto gpt = exported(recipe(weight, "int8_per_token", kGpt), "tern2");
    trit::kernels::CudaModel g(gpt);
    for (const std::string& line : g.describe(2))
        EXPECT_THAT(line, HasSubstr("(32 rows)")) << line;
}

TEST_F(CudaRuntime, FloatActivationTransformersMatchWithinRounding) {
    for (const bool gpt : {false, true}) {
        SCOPED_TRACE(gpt ? "gpt" : "vit");
        const auto packed = exported(
            recipe("{method: absmean, granularity: channel}", "none", gpt ? kGpt : kVit), "tern2");
        trit::kernels::CudaModel runtime(packed);
        const auto [x, y] = transformer_inputs(gpt);
        torch::NoGradGuard no_grad;
        const auto c = trit::exporters::compare_logits(
            runtime.forward(x).cpu(), trit::exporters::packed_module_cpu(packed)->forward(x), y);
        EXPECT_LE(c.relative_error, kTransformerFloatRtol);
        EXPECT_EQ(c.top1_agreement, 1.0) << "first disagreement " << c.first_disagreement;
    }
}

// The gpt module on the GPU decodes through its KV cache (what `trit generate --device cuda` would
// use): prefill, then one byte at a time, with the full forward's logits up to rounding.
TEST_F(CudaRuntime, GptModuleDecodesWithAKvCache) {
    const auto packed = exported(
        recipe("{method: absmean, granularity: channel}", "int8_per_token", kGpt), "tern2");
    trit::kernels::CudaModel runtime(packed);
    auto* gpt = dynamic_cast<trit::Gpt*>(runtime.module().get());
    ASSERT_NE(gpt, nullptr);
    const torch::Tensor tokens = transformer_inputs(true).first.to(runtime.device());
    torch::NoGradGuard no_grad;
    const torch::Tensor full = gpt->forward(tokens).cpu();
    trit::KvCache cache = gpt->make_cache(tokens.size(0));
    std::vector<torch::Tensor> parts = {gpt->forward_cached(tokens.slice(1, 0, 5), cache).cpu()};
    for (int64_t t = 5; t < tokens.size(1); ++t)
        parts.push_back(gpt->forward_cached(tokens.slice(1, t, t + 1), cache).cpu());
    const torch::Tensor cached = torch::cat(parts, 1);
    ASSERT_EQ(cached.sizes(), full.sizes());
    EXPECT_LE((cached - full).abs().max().item<double>(),
              kTransformerInt8Rtol * full.abs().max().item<double>());
    EXPECT_TRUE(torch::equal(runtime.forward(tokens).cpu(), full));  // forward() is the module's
}

TEST_F(CudaRuntime, MlpHasNoModule) {
    const auto packed = exported(recipe("{method: absmean, granularity: channel}", "int8_per_token",
                                        "{input: 784, hidden: [64], classes: 10}"),
                                 "tern2");
    EXPECT_EQ(trit::kernels::CudaModel(packed).module(), nullptr);
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
