// `trit ptq` end to end (cli/ptq.h): the recipe and its errors, flags equal to the recipe, a BF16
// safetensors model through ptq and validate (and a tampered source failing), malformed safetensors
// files, a tiny gpt run through ptq with gptq, selection within a budget, validate and eval.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <fstream>
#include <set>

#include "cli/ptq.h"
#include "core/fs.h"
#include "core/safetensors.h"
#include "exporters/model_file.h"
#include "tests/support/error_of.h"
#include "tests/support/process.h"
#include "tests/support/tiny_run.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::expect_error;
using trit::testing::run_trit;

torch::Tensor randn(std::vector<int64_t> shape, uint64_t seed, double std = 0.05) {
    torch::Generator gen = at::detail::createCPUGenerator(seed);
    return torch::randn(shape, gen, torch::kFloat32) * std;
}

cli::PtqConfig parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
    return cli::parse_ptq_recipe(yaml, "test.yaml", overrides);
}

const std::string kBase = "model: m.safetensors\noutput: o.h5\n";

TEST(PtqRecipe, DefaultsAndRoundTrip) {
    const cli::PtqConfig c = parse(kBase + "methods: [bt, gptq, \"2:4\"]\nbt: {depth: 1}\nprune24: {criterion: saliency}\n");
    EXPECT_EQ(c.methods, (std::vector<std::string>{"bt", "gptq", "2:4"}));
    EXPECT_EQ(c.group_size, 64);
    EXPECT_EQ(c.scale_dtype, "float16");
    const std::string yaml = cli::ptq_recipe_to_yaml(c);
    EXPECT_EQ(cli::ptq_recipe_to_yaml(parse(yaml)), yaml);
}

TEST(PtqRecipe, ErrorsNameTheKey) {
    expect_error([] { parse("output: o.h5\n"); }, {"model", "required"});
    expect_error([] { parse("model: m\noutput: o.bin\n"); }, {"output", ".h5"});
    expect_error([] { parse(kBase + "methods: [bt, rtn]\n"); }, {"methods", "exactly one grid"});
    expect_error([] { parse(kBase + "methods: [gptq]\n"); }, {"methods", "exactly one grid"});
    expect_error([] { parse(kBase + "methods: [bt, awq]\n"); }, {"methods", "unknown method 'awq'", "rtn, bt"});
    expect_error([] { parse(kBase + "methods: [bt, bt]\n"); }, {"methods", "twice"});
    expect_error([] { parse(kBase + "methods: [binary, \"2:4\"]\n"); }, {"methods", "binary"});
    expect_error([] { parse(kBase + "bt: {depth: 5}\n"); }, {"bt.depth"});
    expect_error([] { parse(kBase + "bt: {scale: mean}\n"); }, {"bt.scale", "search"});
    expect_error([] { parse(kBase + "group_size: 0\n"); }, {"group_size"});
    expect_error([] { parse(kBase + "scale_dtype: bfloat16\n"); }, {"scale_dtype"});
    expect_error([] { parse(kBase + "prune24: {criterion: random}\n"); }, {"prune24.criterion", "saliency"});
    expect_error([] { parse(kBase + "select: {candidates: [bt1, bt2]}\n"); }, {"select.candidates", "bits_per_weight"});
    expect_error([] { parse(kBase + "methods: [bt]\nselect: {candidates: [bt1, bt2], bits_per_weight: 2}\n"); },
                 {"methods", "select.candidates"});
    expect_error([] { parse(kBase + "select: {candidates: [bt1, bt9], bits_per_weight: 2}\n"); },
                 {"select.candidates", "bt9"});
    expect_error([] { parse(kBase + "methods: []\nselect: {candidates: [bt1], bits_per_weight: 2}\n"); },
                 {"select.candidates", "at least 2"});
    expect_error([] { parse(kBase + "calibration: {text: a.txt, data: d}\n"); }, {"calibration.text", "not both"});
    expect_error([] { parse(kBase + "calibration: {samples: -1}\n"); }, {"calibration.samples"});
    expect_error([] { parse(kBase + "activation: int4\n"); }, {"activation", "int8_per_token"});
    expect_error([] { parse(kBase + "float_dtype: fp8\n"); }, {"float_dtype"});
    expect_error([] { parse(kBase + "depth: 2\n"); }, {"depth"});  // unknown top-level key (it is bt.depth)
    expect_error([] { parse(kBase, {"bt.depth=7"}); }, {"--set bt.depth"});
    expect_error([] { cli::load_ptq_recipe("/nonexistent/ptq.yaml"); }, {"/nonexistent/ptq.yaml", "cannot open"});
}

TEST(PtqRecipe, FlagsAreTheRecipeKeys) {
    const std::string dir = fs::make_temp_dir("trit-ptq-flags");
    const std::string recipe = dir + "/r.yaml";
    trit::testing::write_text(recipe,
                              "model: runs/x\noutput: x.h5\nmethods: [bt, gptq]\nbt: {depth: 3}\ngroup_size: 32\n"
                              "gptq: {damp: 0.1, act_order: true}\ntargets: [\"re:blocks\\\\..*\"]\n"
                              "calibration: {samples: 16, sequential: false}\n");
    auto flags = run_trit("ptq --model runs/x -o x.h5 --method bt,gptq --depth 3 --group-size 32 --damp 0.1 "
                          "--act-order --targets 're:blocks\\..*' --calibration-samples 16 --no-sequential --print-recipe");
    ASSERT_EQ(flags.exit_code, 0) << flags.output;
    auto file = run_trit("ptq '" + recipe + "' --print-recipe");
    ASSERT_EQ(file.exit_code, 0) << file.output;
    EXPECT_EQ(flags.output, file.output);
    EXPECT_EQ(flags.output, cli::ptq_recipe_to_yaml(cli::load_ptq_recipe(recipe)));
    auto bad = run_trit("ptq --model runs/x -o x.h5 --depth 9");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_THAT(bad.output, HasSubstr("bt.depth"));
    fs::remove_tree(dir);
}

// A BF16 model of a few linears with an embedding, a norm and an output head.
class PtqSafetensorsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::make_temp_dir("trit-ptq-st");
        model_ = dir_ + "/model.safetensors";
        tensors_ = {{"embed_tokens.weight", randn({100, 48}, 1, 1.0)},
                    {"layers.0.q_proj.weight", randn({64, 48}, 2)},
                    {"layers.0.q_proj.bias", randn({64}, 3)},
                    {"layers.0.down.weight", randn({48, 130}, 4)},  // partial group of 2, tail of 0 mod 5
                    {"layers.0.up.weight", randn({130, 48}, 5)},
                    {"norm.weight", torch::ones({48})},
                    {"lm_head.weight", randn({100, 48}, 6)}};
        write_safetensors(model_, tensors_, std::vector<SafetensorsDtype>(tensors_.size(), SafetensorsDtype::BF16),
                          {{"format", "pt"}});
    }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string dir_, model_;
    std::vector<std::pair<std::string, torch::Tensor>> tensors_;
};

TEST_F(PtqSafetensorsTest, Bf16ModelQuantizesAndValidates) {
    const std::string out = dir_ + "/bt2.h5";
    auto r = run_trit("ptq --model '" + model_ + "' --method bt --depth 2 -o '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("left float (embedding / output head; name them in targets to quantize): "
                                    "embed_tokens, lm_head"));
    EXPECT_THAT(r.output, HasSubstr("[3/3] layers.0.up (130x48): bt2+search+fp16 g64 -> bt2"));
    EXPECT_TRUE(fs::is_file(dir_ + "/bt2.report.txt"));

    const exporters::PackedModel m = exporters::read_model(out);
    EXPECT_EQ(m.architecture, exporters::ModelArchitecture::kLinears);
    ASSERT_EQ(m.layers.size(), 3u);
    for (const auto& l : m.layers) {
        EXPECT_EQ(l.format.name(), "bt2") << l.name;
        EXPECT_TRUE(l.spec.fp16_scales) << l.name;
    }
    EXPECT_EQ(m.layer("layers.0.q_proj").bias.size(), 64u);
    EXPECT_TRUE(m.layer("layers.0.down").bias.empty());
    ASSERT_EQ(m.tensors.size(), 3u);  // embed_tokens.weight, lm_head.weight, norm.weight
    EXPECT_EQ(m.tensor("embed_tokens.weight").dtype, exporters::FloatDType::kBF16);
    ASSERT_TRUE(m.ptq.present);
    ASSERT_EQ(m.ptq.layers.size(), 3u);
    EXPECT_EQ(m.ptq.layers[0].name, "layers.0.q_proj");  // file order
    EXPECT_EQ(m.ptq.layers[0].error_basis, "weight");
    EXPECT_GT(m.ptq.layers[0].relative_error, 0.0);
    EXPECT_LT(m.ptq.layers[0].relative_error, 0.05);  // bt2 with searched scales: ~1-2 % of the weights' energy

    auto v = run_trit("validate '" + out + "' --against '" + model_ + "'");
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_THAT(v.output, HasSubstr("codes and scales re-derived from the source: identical"));
    EXPECT_THAT(v.output, HasSubstr("3 layers, 3 float tensors checked"));
    EXPECT_THAT(v.output, HasSubstr("PASS"));

    auto i = run_trit("inspect '" + out + "'");
    EXPECT_EQ(i.exit_code, 0) << i.output;
    EXPECT_THAT(i.output, HasSubstr("the linear layers of a foreign model"));
    EXPECT_THAT(i.output, HasSubstr("trit ptq report"));

    auto e = run_trit("eval '" + out + "'");
    EXPECT_EQ(e.exit_code, 1);
    EXPECT_THAT(e.output, HasSubstr("without an architecture to run"));

    // A source that differs in one weight fails validation.
    auto changed = tensors_;
    changed[1].second = changed[1].second.clone();
    changed[1].second[0][0] += 0.5;
    const std::string other = dir_ + "/other.safetensors";
    write_safetensors(other, changed, std::vector<SafetensorsDtype>(changed.size(), SafetensorsDtype::BF16));
    auto bad = run_trit("validate '" + out + "' --against '" + other + "'");
    EXPECT_EQ(bad.exit_code, 1) << bad.output;
    EXPECT_THAT(bad.output, HasSubstr("codes or scales differ"));
}

TEST_F(PtqSafetensorsTest, TargetsNamesGptqWithRecordedInputsAndTern24) {
    // gptq needs calibration inputs: a safetensors model has no forward.
    auto no_inputs = run_trit("ptq --model '" + model_ + "' --method rtn,gptq -o '" + dir_ + "/x.h5'");
    EXPECT_EQ(no_inputs.exit_code, 1);
    EXPECT_THAT(no_inputs.output, HasSubstr("calibration.activations"));
    EXPECT_FALSE(fs::exists(dir_ + "/x.h5"));

    // Recorded inputs for every quantized layer (lm_head named exactly, so it is quantized too).
    const std::string acts = dir_ + "/acts.safetensors";
    write_safetensors(acts, {{"layers.0.q_proj", randn({200, 48}, 10, 1.0)},
                             {"layers.0.down", randn({200, 130}, 11, 1.0)},
                             {"layers.0.up", randn({3, 50, 48}, 12, 1.0)},
                             {"lm_head", randn({200, 48}, 13, 1.0)}});
    const std::string out = dir_ + "/t24.h5";
    auto r = run_trit("ptq --model '" + model_ + "' --method rtn,2:4,gptq --prune-criterion saliency --targets "
                      "'re:layers\\..*',lm_head --calibration-activations '" + acts + "' -o '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const exporters::PackedModel m = exporters::read_model(out);
    ASSERT_EQ(m.layers.size(), 4u);
    for (const auto& l : m.layers) EXPECT_EQ(l.format.name(), "tern24") << l.name;
    for (const auto& l : m.ptq.layers) EXPECT_EQ(l.error_basis, "output") << l.name;
    auto v = run_trit("validate '" + out + "' --against '" + model_ + "'");
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_THAT(v.output, HasSubstr("codes depend on calibration"));

    // A missing layer input and a target naming nothing are errors.
    write_safetensors(acts, {{"layers.0.q_proj", randn({20, 48}, 10)}});
    auto missing = run_trit("ptq --model '" + model_ + "' --method bt,gptq --calibration-activations '" + acts +
                            "' -o '" + dir_ + "/y.h5'");
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_THAT(missing.output, HasSubstr("no tensor 'layers.0.down'"));
    auto nothing = run_trit("ptq --model '" + model_ + "' --targets layers.9.q -o '" + dir_ + "/z.h5'");
    EXPECT_EQ(nothing.exit_code, 1);
    EXPECT_THAT(nothing.output, HasSubstr("targets: 'layers.9.q' selects no layer"));
}

TEST_F(PtqSafetensorsTest, MalformedFilesGiveClearErrors) {
    auto le64 = [](uint64_t n) {
        std::string s(8, '\0');
        std::memcpy(&s[0], &n, 8);
        return s;
    };
    auto file = [&](const std::string& name, const std::string& header, const std::string& data) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path, std::ios::binary) << le64(header.size()) << header << data;
        return path;
    };
    const std::string data(16, '\0');
    struct Case {
        std::string name, header, expected;
    };
    const std::vector<Case> cases = {
        {"header.safetensors", "{\"a.weight\": {\"dtype\": \"F32\", \"shape\": [2, 2], ", "header"},
        {"offsets.safetensors", "{\"a.weight\": {\"dtype\": \"F32\", \"shape\": [2, 4], \"data_offsets\": [0, 32]}}",
         "a.weight"},
        {"dtype.safetensors", "{\"a.weight\": {\"dtype\": \"F12\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}}",
         "F12"},
    };
    for (const Case& c : cases) {
        const std::string path = file(c.name, c.header, data);
        auto r = run_trit("ptq --model '" + path + "' -o '" + dir_ + "/out.h5'");
        EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.output;
        EXPECT_THAT(r.output, HasSubstr(path)) << c.name;
        EXPECT_THAT(r.output, HasSubstr(c.expected)) << c.name;
    }
    // A size past the end of the file.
    const std::string past = dir_ + "/past.safetensors";
    std::ofstream(past, std::ios::binary) << le64(1000) << "{}";
    auto r = run_trit("ptq --model '" + past + "' -o '" + dir_ + "/out.h5'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.output, HasSubstr(past));
    EXPECT_FALSE(fs::exists(dir_ + "/out.h5"));
}

// A tiny float gpt trained for a few steps, quantized with calibration on its own data.
class PtqTritTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(fs::make_temp_dir("trit-ptq-gpt"));
        const std::string recipe = *dir_ + "/gpt.yaml";
        trit::testing::write_text(recipe, trit::testing::tiny_gpt_recipe_yaml(
                                              "training: {steps: 60, batch_size: 16, log_every: 30}\n"));
        auto r = run_trit("train '" + recipe + "' --out '" + *dir_ + "/run' -q");
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        fs::remove_tree(*dir_);
        delete dir_;
    }
    static std::string* dir_;
};
std::string* PtqTritTest::dir_ = nullptr;

TEST_F(PtqTritTest, GptqSequentialValidatesAndEvaluates) {
    const std::string run = *dir_ + "/run", out = *dir_ + "/bt2.h5";
    auto r = run_trit("ptq --model '" + run + "' --method bt,gptq --depth 2 --calibration-samples 24 "
                      "--calibration-batch 8 -o '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("calibration: 24 windows of 32 bytes of the training split"));
    EXPECT_THAT(r.output, HasSubstr("left float (embedding / output head; name them in targets to quantize): head"));
    const exporters::PackedModel m = exporters::read_model(out);
    EXPECT_EQ(m.architecture, exporters::ModelArchitecture::kRecipe);
    ASSERT_EQ(m.ptq.layers.size(), 6u);  // q, k, v, o, up, down of the one block
    for (const auto& l : m.ptq.layers) {
        EXPECT_EQ(l.format, "bt2") << l.name;
        EXPECT_EQ(l.error_basis, "output") << l.name;
        EXPECT_LT(l.relative_error, 0.1) << l.name;
    }
    EXPECT_FALSE(m.layer("head").format.packed());
    auto v = run_trit("validate '" + out + "' --against '" + run + "' --limit 8");
    EXPECT_EQ(v.exit_code, 0) << v.output;
    EXPECT_THAT(v.output, HasSubstr("top-1 agreement 100.00%"));
    auto e = run_trit("eval '" + out + "'");
    EXPECT_EQ(e.exit_code, 0) << e.output;
    EXPECT_THAT(e.output, HasSubstr("bits/byte"));

    // The same without gptq: its output error is not smaller, layer by layer in total.
    const std::string rtn = *dir_ + "/bt2-rtn.h5";
    auto r2 = run_trit("ptq --model '" + run + "' --method bt --depth 2 --calibration-samples 24 "
                       "--calibration-batch 8 -o '" + rtn + "'");
    ASSERT_EQ(r2.exit_code, 0) << r2.output;
    double gptq_err = 0, rtn_err = 0;
    for (const auto& l : m.ptq.layers) gptq_err += l.relative_error;
    for (const auto& l : exporters::read_model(rtn).ptq.layers) rtn_err += l.relative_error;
    EXPECT_LT(gptq_err, rtn_err);
}

TEST_F(PtqTritTest, SelectionMeetsTheBudget) {
    const std::string run = *dir_ + "/run", out = *dir_ + "/mixed.h5";
    auto r = run_trit("ptq --model '" + run + "' --select bt1,bt2,bt3 --bits-per-weight 3.0 "
                      "--calibration-samples 16 --no-sequential -o '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("select: measuring 6 layers x 3 candidates"));
    const exporters::PackedModel m = exporters::read_model(out);
    double bits = 0, weights = 0;
    std::set<std::string> formats;
    for (const auto& l : m.ptq.layers) {
        const auto& p = m.layer(l.name);
        bits += l.bits_per_weight * static_cast<double>(p.out * p.in);
        weights += static_cast<double>(p.out * p.in);
        formats.insert(l.format);
    }
    EXPECT_LE(bits / weights, 3.0);
    EXPECT_GT(bits / weights, 2.0);  // the budget is used, not undershot to all-bt1
    EXPECT_GE(formats.size(), 2u);   // a mix
    auto infeasible = run_trit("ptq --model '" + run + "' --method gptq --select bt2,bt3 --bits-per-weight 1.0 "
                               "--calibration-samples 8 -o '" + *dir_ + "/no.h5'");
    EXPECT_EQ(infeasible.exit_code, 1);
    EXPECT_THAT(infeasible.output, HasSubstr("select.bits_per_weight 1 cannot be met"));
}

TEST_F(PtqTritTest, TritModelErrors) {
    const std::string run = *dir_ + "/run";
    auto text = run_trit("ptq --model '" + run + "' --calibration-text /nonexistent.txt -o '" + *dir_ + "/a.h5'");
    EXPECT_EQ(text.exit_code, 1);
    EXPECT_THAT(text.output, HasSubstr("calibration.text '/nonexistent.txt'"));
    auto gptq = run_trit("ptq --model '" + run + "' --method bt,gptq --calibration-samples 0 -o '" + *dir_ + "/b.h5'");
    EXPECT_EQ(gptq.exit_code, 1);
    EXPECT_THAT(gptq.output, HasSubstr("gptq needs calibration inputs"));
    auto missing = run_trit("ptq --model '" + *dir_ + "/nothing' -o '" + *dir_ + "/c.h5'");
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_THAT(missing.output, HasSubstr("nothing"));
}

}  // namespace
}  // namespace trit

namespace trit {
namespace {

TEST(PtqBench, SmallSyntheticDecoder) {
    auto r = run_trit("bench ptq --layers 2 --hidden 64 --kv-dim 32 --intermediate 160 --vocab 50");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // 50x64 + 2 x (64 + 64x64 + 2 x 32x64 + 64x64 + 64 + 2 x 160x64 + 64x160) + 64 parameters.
    EXPECT_THAT(r.output, HasSubstr("a synthetic BF16 decoder of 89536 parameters"));
    EXPECT_THAT(r.output, HasSubstr("[14/14] model.layers.1.mlp.down_proj (64x160): bt2+search+fp16 g64 -> bt2"));
    EXPECT_THAT(r.output, HasSubstr("x the model file"));
    auto bad = run_trit("bench ptq --layers 0");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_THAT(bad.output, HasSubstr("--layers"));
}

}  // namespace
}  // namespace trit
