// Generation (core/generate.h): the KV-cache decoder against the full forward across sliding-window
// re-prefills, greedy decoding against the full forward's argmax, seeded sampling, the pinned
// sampler, options and model errors; and `trit generate` end to end on a checkpoint of a tiny gpt.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/generate.h"
#include "core/gpt.h"
#include "core/model.h"
#include "core/recipe.h"
#include "exporters/format_table.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "quantizers/layer_selection.h"
#include "tests/support/process.h"
#include "trainers/checkpoint.h"
#include "tests/support/error_of.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::error_of;
using ::testing::Not;

// KV-cache decoding multiplies matrices of other shapes than the full forward, so float sums run
// in another order: a few ulps on logits of magnitude ~1, far below 1e-5 (as in
// test_transformer.cpp).
constexpr double kCacheTol = 1e-5;
constexpr int64_t kContext = 16;

ModelConfig tiny_gpt_config() {
    ModelConfig c = model_defaults("gpt");
    c.dim = 32;
    c.depth = 1;
    c.heads = 2;
    c.context = kContext;
    return c;
}

std::shared_ptr<Gpt> tiny_gpt(uint64_t seed = 7) {
    torch::manual_seed(seed);
    auto model = std::dynamic_pointer_cast<Gpt>(make_model(tiny_gpt_config()));
    model->eval();
    return model;
}

// The full forward's logits for the byte after `window`, as floats.
std::vector<float> full_logits(Gpt& model, const std::vector<uint8_t>& window) {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> ids(window.begin(), window.end());
    torch::Tensor tokens = torch::tensor(ids, torch::kLong).view({1, -1});
    torch::Tensor row = model.forward(tokens)[0][-1].contiguous();
    return std::vector<float>(row.data_ptr<float>(), row.data_ptr<float>() + kByteVocab);
}

uint8_t argmax(const std::vector<float>& v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[best]) best = i;  // strict: ties keep the lower byte
    return static_cast<uint8_t>(best);
}

// The documented sliding window: append, or when the window already holds the context, keep the
// last context / 2 bytes of window + byte. Returns whether it re-prefilled.
bool slide(std::vector<uint8_t>& window, uint8_t byte) {
    const bool full = static_cast<int64_t>(window.size()) == kContext;
    window.push_back(byte);
    if (full) window.erase(window.begin(), window.end() - kContext / 2);
    return full;
}

std::vector<uint8_t> bytes_of(const std::string& s) {
    return {s.begin(), s.end()};
}


GenerateOptions sampled(uint64_t seed, int64_t max_tokens = 40) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.temperature = 1.0;
    o.seed = seed;
    return o;
}

GenerateOptions greedy(int64_t max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.temperature = 0;
    return o;
}

TEST(Generate, DecoderLogitsEqualTheFullForwardAcrossReprefills) {
    auto model = tiny_gpt();
    Decoder decoder(*model, "ab");
    std::vector<uint8_t> window = bytes_of("ab");
    int64_t refills = 0;
    for (int step = 0; step <= 50; ++step) {  // 50 bytes: three re-prefills at context 16
        ASSERT_EQ(decoder.window(), window) << "step " << step;
        const std::vector<float> want = full_logits(*model, window);
        const std::vector<float>& got = decoder.logits();
        ASSERT_EQ(got.size(), static_cast<size_t>(kByteVocab));
        for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], kCacheTol) << "step " << step << ", byte " << i;
        const auto byte = static_cast<uint8_t>((step * 37 + 11) % 256);
        refills += slide(window, byte) ? 1 : 0;
        decoder.push(byte);
    }
    EXPECT_EQ(decoder.refills(), refills);
    EXPECT_GE(refills, 3);
}

TEST(Generate, GreedyIsTheFullForwardArgmaxAtEveryStep) {
    auto model = tiny_gpt();
    const std::string prompt = "Hello";
    const GenerateResult r = generate(*model, prompt, greedy(45));
    ASSERT_EQ(r.bytes.size(), 45u);
    std::vector<uint8_t> window = bytes_of(prompt);
    int64_t refills = 0;
    for (size_t i = 0; i < r.bytes.size(); ++i) {
        const auto got = static_cast<uint8_t>(r.bytes[i]);
        ASSERT_EQ(got, argmax(full_logits(*model, window))) << "byte " << i;
        // The last byte is not pushed: no logits are needed after it.
        if (i + 1 < r.bytes.size()) refills += slide(window, got) ? 1 : 0;
    }
    EXPECT_EQ(r.stats.refills, refills);
    EXPECT_GE(refills, 2);
    EXPECT_EQ(r.stats.prompt_tokens, 5);
    EXPECT_EQ(r.stats.tokens, 45);
}

TEST(Generate, SameSeedSameBytesOtherSeedOtherBytes) {
    auto model = tiny_gpt();
    const std::string a = generate(*model, "The ", sampled(1)).bytes;
    EXPECT_EQ(a.size(), 40u);
    EXPECT_EQ(generate(*model, "The ", sampled(1)).bytes, a);
    EXPECT_NE(generate(*model, "The ", sampled(2)).bytes, a);
    GenerateOptions k = sampled(3);
    k.top_k = 40;
    k.temperature = 0.8;
    EXPECT_EQ(generate(*model, "The ", k).bytes, generate(*model, "The ", k).bytes);
}

TEST(Generate, TopKOneIsGreedy) {
    auto model = tiny_gpt();
    GenerateOptions k1 = sampled(5, 30);
    k1.top_k = 1;
    k1.temperature = 1.7;
    EXPECT_EQ(generate(*model, "xyz", k1).bytes, generate(*model, "xyz", greedy(30)).bytes);
}

TEST(Generate, OnByteGetsEachByteOnceInOrder) {
    auto model = tiny_gpt();
    std::string seen;
    const GenerateResult r = generate(*model, "q", sampled(9, 33),
                                      [&](uint8_t b) { seen.push_back(static_cast<char>(b)); });
    EXPECT_EQ(seen, r.bytes);
    EXPECT_EQ(seen.size(), 33u);
}

TEST(Generate, MaxTokensZeroGivesNothing) {
    auto model = tiny_gpt();
    int calls = 0;
    const GenerateResult r = generate(*model, "abc", sampled(1, 0), [&](uint8_t) { ++calls; });
    EXPECT_TRUE(r.bytes.empty());
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(r.stats.tokens, 0);
}

TEST(Generate, EmptyPromptStartsAfterTheSeparatorAndLongPromptKeepsItsTail) {
    auto model = tiny_gpt();
    const GenerateResult empty = generate(*model, "", greedy(20));
    EXPECT_EQ(empty.bytes, generate(*model, "%\n", greedy(20)).bytes);
    EXPECT_EQ(empty.stats.prompt_tokens, 2);

    std::string prompt;
    for (int i = 0; i < 40; ++i)
        prompt.push_back(static_cast<char>('a' + i % 26));
    const GenerateResult longer = generate(*model, prompt, greedy(20));
    EXPECT_EQ(longer.stats.prompt_tokens, kContext);
    EXPECT_EQ(longer.bytes, generate(*model, prompt.substr(40 - kContext), greedy(20)).bytes);
    EXPECT_EQ(Decoder(*model, prompt).window(), bytes_of(prompt.substr(40 - kContext)));
}

TEST(Generate, LeavesATrainingModelInTrainingMode) {
    auto model = tiny_gpt();
    model->train();
    generate(*model, "a", sampled(1, 3));
    EXPECT_TRUE(model->is_training());
    model->eval();
    generate(*model, "a", sampled(1, 3));
    EXPECT_FALSE(model->is_training());
}

TEST(Generate, BadOptionsAreErrorsNamingThem) {
    auto model = tiny_gpt();
    struct Case {
        std::function<void(GenerateOptions&)> set;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {[](GenerateOptions& o) { o.max_tokens = -1; }, "max_tokens (--max-tokens)"},
        {[](GenerateOptions& o) { o.temperature = -0.5; }, "temperature (--temperature)"},
        {[](GenerateOptions& o) { o.temperature = std::nan(""); }, "temperature"},
        {[](GenerateOptions& o) { o.temperature = std::numeric_limits<double>::infinity(); },
         "temperature"},
        {[](GenerateOptions& o) { o.top_k = -1; }, "top_k (--top-k) expected in [0, 256]"},
        {[](GenerateOptions& o) { o.top_k = 257; }, "got 257"},
    };
    for (const auto& c : cases) {
        GenerateOptions o;
        o.max_tokens = 4;
        c.set(o);
        EXPECT_THAT(error_of([&] { generate(*model, "a", o); }), HasSubstr(c.expected))
            << c.expected;
        std::mt19937_64 rng(1);
        EXPECT_THAT(error_of([&] { sample_byte(std::vector<float>(256), o, rng); }),
                    HasSubstr(c.expected));
    }
}

TEST(Generate, OtherModelsAreAClearError) {
    torch::manual_seed(1);
    auto mlp = make_model(model_defaults("mlp"));
    ModelConfig v = model_defaults("vit");
    v.dim = 32;
    v.depth = 1;
    v.heads = 2;
    auto vit = make_model(v);
    EXPECT_THAT(error_of([&] { generate(*mlp, "a", sampled(1)); }),
                HasSubstr("generate needs a gpt model; the model holds an mlp"));
    EXPECT_THAT(error_of([&] { generate(*vit, "a", sampled(1), {}, "runs/v"); }),
                HasSubstr("generate needs a gpt model; runs/v holds a vit"));
}

// The sampler is part of the output's contract: these draws pin it (a change here changes every
// seeded output). The values agree with an independent Python rendering of the documented
// algorithm (mt19937_64 written from its specification, float32 logits, double weights).
TEST(Generate, SamplerIsPinnedAndBreaksTiesByTheLowerByte) {
    std::vector<float> logits(kByteVocab);
    for (int i = 0; i < kByteVocab; ++i)
        logits[i] = static_cast<float>(3 * std::sin(0.7 * i));
    auto draws = [&](double temperature, int64_t top_k) {
        GenerateOptions o;
        o.temperature = temperature;
        o.top_k = top_k;
        std::mt19937_64 rng(42);
        std::vector<int> out;
        for (int i = 0; i < 8; ++i)
            out.push_back(sample_byte(logits, o, rng));
        return out;
    };
    EXPECT_EQ(draws(1.0, 0), (std::vector<int>{111, 48, 111, 56, 255, 119, 172, 218}));
    EXPECT_EQ(draws(0.5, 5), (std::vector<int>{110, 110, 110, 92, 74, 92, 83, 101}));

    GenerateOptions o;
    std::mt19937_64 rng(3);
    std::vector<float> ties(kByteVocab, -1.0f);
    ties[200] = ties[9] = ties[77] = 2.5f;
    o.temperature = 0;
    EXPECT_EQ(sample_byte(ties, o, rng), 9);
    o.temperature = 1;
    o.top_k = 1;
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(sample_byte(ties, o, rng), 9);
    o.top_k = 2;
    for (int i = 0; i < 50; ++i)
        EXPECT_THAT(sample_byte(ties, o, rng), ::testing::AnyOf(9, 77));
    // Tiny and huge temperatures neither overflow nor divide by zero.
    o.top_k = 0;
    o.temperature = 1e-300;
    EXPECT_EQ(sample_byte(logits, o, rng), argmax(logits));
    o.temperature = 1e300;
    sample_byte(logits, o, rng);

    ties[5] = std::nanf("");
    EXPECT_THAT(error_of([&] { sample_byte(ties, o, rng); }),
                HasSubstr("non-finite logit (nan) for byte 5"));
}

// `trit generate` on checkpoints written directly (a tiny ternary gpt, a tiny mlp).
class GenerateCliTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::make_temp_dir("trit-generate");
        write_run("gpt",
                  "name: tiny_gpt\nseed: 1\nmodel: {type: gpt, dim: 32, depth: 1, heads: 2, "
                  "context: 16}\nquantization:\n  weight: {method: absmean}\n"
                  "  activation: {method: int8_per_token}\n");
        write_run("mlp", "name: tiny_mlp\nseed: 1\nmodel: {hidden: [8]}\n");
    }
    void TearDown() override { fs::remove_tree(dir_); }

    void write_run(const std::string& name, const std::string& recipe_text) {
        const Recipe recipe = parse_recipe(recipe_text, name);
        torch::manual_seed(11);
        std::shared_ptr<Model> model = make_model(recipe.model);
        quantizers::apply_quantization(*model, model->output_layer(), recipe.quantization);
        torch::optim::AdamW optimizer(model->parameters());
        fs::make_dirs(fs::join(dir_, name));
        trainers::save_checkpoint(fs::join(fs::join(dir_, name), trainers::kCheckpointFile), *model,
                                  optimizer, {}, recipe_to_yaml(recipe));
        // The packed model file of the same weights, as `trit export --format tern2` writes it.
        model->eval();
        exporters::ExportOptions o;
        o.format = exporters::parse_format("tern2");
        o.layers = quantizers::selected_layers(*model, model->output_layer(), recipe.quantization);
        exporters::write_model(
            fs::join(dir_, name + ".h5"),
            exporters::pack_model(recipe, recipe_to_yaml(recipe), *model, o).model);
    }
    std::string run(const std::string& name) const { return "'" + fs::join(dir_, name) + "'"; }

    std::string dir_;
};

TEST_F(GenerateCliTest, SameSeedSameOutputStreamedAfterThePrompt) {
    const std::string args = "generate " + run("gpt") +
                             " --prompt 'Once ' --max-tokens 40 --temperature 0.9 --top-k 50 -q";
    auto a = testing::run_trit(args + " --seed 4");
    ASSERT_EQ(a.exit_code, 0) << a.output;
    EXPECT_EQ(a.output.size(), 5u + 40u);
    EXPECT_EQ(a.output.rfind("Once ", 0), 0u) << a.output;
    auto b = testing::run_trit(args + " --seed 4");
    EXPECT_EQ(b.output, a.output);
    auto c = testing::run_trit(args + " --seed 5");
    EXPECT_EQ(c.exit_code, 0) << c.output;
    EXPECT_NE(c.output, a.output);

    auto stats = testing::run_trit("generate " + run("gpt") + " --max-tokens 20 --seed 4");
    EXPECT_EQ(stats.exit_code, 0) << stats.output;
    EXPECT_THAT(stats.output, HasSubstr("generate: 20 bytes; prefill 2 tokens"));
    EXPECT_THAT(stats.output, HasSubstr("tokens/s); 1 window re-prefill (cpu)"));
}

// A packed model file runs on the CPU reference runtime (exporters::packed_module_cpu).
TEST_F(GenerateCliTest, PackedModelFileGeneratesOnTheCpuReferenceRuntime) {
    const std::string args = "generate " + run("gpt.h5") + " --prompt 'Once ' --max-tokens 40 -q";
    auto a = testing::run_trit(args + " --seed 4");
    ASSERT_EQ(a.exit_code, 0) << a.output;
    EXPECT_EQ(a.output.size(), 5u + 40u);
    EXPECT_EQ(a.output.rfind("Once ", 0), 0u) << a.output;
    EXPECT_EQ(testing::run_trit(args + " --seed 4").output, a.output);
    // Any other name: recognised by the HDF5 signature.
    ASSERT_EQ(testing::run_command("cp " + run("gpt.h5") + " " + run("packed")).exit_code, 0);
    EXPECT_EQ(testing::run_trit("generate " + run("packed") +
                                " --prompt 'Once ' --max-tokens 40 -q --seed 4")
                  .output,
              a.output);

    auto mlp = testing::run_trit("generate " + run("mlp.h5"));
    EXPECT_EQ(mlp.exit_code, 1) << mlp.output;
    EXPECT_THAT(mlp.output, HasSubstr("generate needs a gpt model; " + fs::join(dir_, "mlp.h5") +
                                      " holds an mlp"));
}

TEST_F(GenerateCliTest, HelpHasTheExampleAndBadInputsGiveClearErrors) {
    auto h = testing::run_trit("generate --help");
    EXPECT_EQ(h.exit_code, 0);
    EXPECT_THAT(h.output, HasSubstr("Example:\n  trit generate runs/gpt_ternary"));
    EXPECT_THAT(h.output, HasSubstr("\"%\\n\""));

    struct Case {
        std::string args, expected;
    };
    const std::vector<Case> cases = {
        {run("gpt") + " --max-tokens -1", "--max-tokens"},
        {run("gpt") + " --temperature -1", "--temperature"},
        {run("gpt") + " --temperature nan", "--temperature"},
        {run("gpt") + " --top-k 300", "--top-k"},
        {run("gpt") + " --device gpu", "--device 'gpu'"},
        {run("gpt") + " --seed -1", "--seed '-1': expected an integer in [0, "},
        {run("gpt") + " --seed 18446744073709551616", "--seed '18446744073709551616'"},
        {run("mlp"),
         "generate needs a gpt model; " + fs::join(dir_, "mlp/checkpoint.pt") + " holds an mlp"},
        {"/nonexistent/run", "'/nonexistent/run': expected a run directory"},
        {"/nonexistent/model.h5", "'/nonexistent/model.h5': no such model file"},
    };
    for (const auto& c : cases) {
        auto r = testing::run_trit("generate " + c.args);
        EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
        EXPECT_THAT(r.output, HasSubstr("trit: error")) << c.args;
        EXPECT_THAT(r.output, HasSubstr(c.expected)) << c.args << "\n" << r.output;
        EXPECT_THAT(r.output, Not(HasSubstr("Segmentation"))) << c.args;
    }
}

}  // namespace
}  // namespace trit
