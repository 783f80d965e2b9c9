// Export, container and CPU reference runtime for the transformer models (vit, gpt) on tiny
// seeded models: every packed format round-trips through the file bit for bit, tensors included;
// the packed module (packed_module_cpu) gives the configured training forward's logits (bit for
// bit with int8 activations, within float rounding without), also from float16 tensors and with a
// KV cache; files missing a tensor, holding a wrongly shaped or an unexpected one are rejected
// with the path and the expected shape; and `trit validate` runs on a tiny gpt checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/gpt.h"
#include "core/model.h"
#include "core/recipe.h"
#include "exporters/h5.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "quantizers/layer_selection.h"
#include "tests/support/process.h"
#include "trainers/checkpoint.h"
#include "tests/support/model_files.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::damaged;
using trit::testing::expect_same_model;
using trit::testing::load_error;

// Without activation quantization the packed product sums floats in another order than the
// training forward's BLAS (as for the mlp in test_export.cpp): a few ulps, far below this.
constexpr double kLogitRtol = 1e-4;
// KV-cache decoding multiplies matrices of other shapes than the full forward: float sums in
// another order (a few ulps, see test_transformer.cpp), which can move an int8 activation code at
// a rounding tie by one step: about 1/127 of one activation's contribution, far below this.
constexpr double kCacheRtol = 1e-3;

struct FormatCase {
    std::string format;
    std::string weight;  // the quantization the model is trained with
};

const std::vector<FormatCase> kFormats = {
    {"tern2", "{method: absmean, granularity: channel}"},
    {"tern24", "{method: absmean, granularity: channel}"},
    {"bin1", "{method: binary, granularity: channel}"},
    {"bt2", "{method: balanced, granularity: group, group_size: 64, depth: 2}"},
};

std::string model_yaml(const std::string& type) {
    // vit: 16 patches of 7x7 = 49 inputs (not a multiple of any format's block) + the class token.
    if (type == "vit") return "{type: vit, dim: 32, depth: 1, heads: 2, patch: 7}";
    return "{type: gpt, dim: 32, depth: 2, heads: 2, context: 16}";
}

std::string recipe_yaml(const std::string& type, const std::string& weight,
                        const std::string& activation,
                        const std::string& data_path = "/nonexistent") {
    return "name: xf\nseed: 5\nmodel: " + model_yaml(type) + "\ndata: {path: '" + data_path +
           "'}\nquantization:\n  weight: " + weight + "\n  activation: {method: " + activation +
           "}\n";
}

// A seeded model of `recipe` with its quantization applied, standing in for a trained one. Its
// tensors are perturbed away from their initial values (RMSNorm weights start at 1): a runtime
// that forgot to load them would not reproduce its logits.
std::shared_ptr<Model> seeded_model(const Recipe& recipe) {
    torch::manual_seed(11);
    auto model = make_model(recipe.model);
    quantizers::apply_quantization(*model, model->output_layer(), recipe.quantization);
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : exporters::model_tensors(*model))
        t.mul_(1 + 0.5 * torch::rand_like(t));
    model->eval();
    return model;
}

// The same model again (its parameters copied), as `trit validate` loads it from a checkpoint.
std::shared_ptr<Model> copy_of(Model& model, const Recipe& recipe) {
    auto copy = make_model(recipe.model);
    quantizers::apply_quantization(*copy, copy->output_layer(), recipe.quantization);
    torch::NoGradGuard no_grad;
    auto from = model.named_parameters();
    for (auto& p : copy->named_parameters())
        p.value().copy_(from[p.key()]);
    copy->eval();
    return copy;
}

exporters::ExportResult export_model(
    const Recipe& recipe, Model& model, const std::string& format,
    exporters::FloatDType float_dtype = exporters::FloatDType::kF32) {
    exporters::ExportOptions o;
    o.format = exporters::parse_format(format);
    o.layers = quantizers::selected_layers(model, model.output_layer(), recipe.quantization);
    o.float_dtype = float_dtype;
    return exporters::pack_model(recipe, recipe_to_yaml(recipe), model, o);
}

// The model's input: images (N, 784) or bytes (B, T), and labels: classes (N) or next bytes (B, T).
std::pair<torch::Tensor, torch::Tensor> inputs(const std::string& type) {
    torch::manual_seed(23);
    if (type == "vit") return {torch::randn({24, 784}), torch::randint(10, {24}, torch::kLong)};
    return {torch::randint(256, {3, 16}, torch::kLong), torch::randint(256, {3, 16}, torch::kLong)};
}


class ExportTransformerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { dir_ = new std::string(fs::make_temp_dir("trit-export-xf")); }
    static void TearDownTestSuite() {
        fs::remove_tree(*dir_);
        delete dir_;
    }
    static std::string* dir_;
};
std::string* ExportTransformerTest::dir_ = nullptr;

TEST_F(ExportTransformerTest, FileHoldsTheTensorsOutsideTheLinearLayers) {
    const Recipe gpt =
        parse_recipe(recipe_yaml("gpt", kFormats[0].weight, "int8_per_token"), "gpt.yaml");
    auto g = export_model(gpt, *seeded_model(gpt), "tern2").model;
    std::vector<std::string> names;
    for (const auto& t : g.tensors)
        names.push_back(t.name);
    EXPECT_EQ(names, (std::vector<std::string>{"embed.weight", "blocks.0.norm1.weight",
                                               "blocks.0.norm2.weight", "blocks.1.norm1.weight",
                                               "blocks.1.norm2.weight", "norm.weight"}));
    EXPECT_EQ(g.tensor("embed.weight").shape, (std::vector<int64_t>{256, 32}));

    const Recipe vit =
        parse_recipe(recipe_yaml("vit", kFormats[0].weight, "int8_per_token"), "vit.yaml");
    auto v = export_model(vit, *seeded_model(vit), "tern2").model;
    EXPECT_EQ(v.tensor("cls").shape, (std::vector<int64_t>{1, 1, 32}));
    EXPECT_EQ(v.tensor("pos").shape, (std::vector<int64_t>{1, 17, 32}));
    EXPECT_EQ(v.tensor("norm.weight").shape, (std::vector<int64_t>{32}));
    EXPECT_EQ(v.tensors.size(), 5u);  // cls, pos, blocks.0.norm1, blocks.0.norm2, norm
    EXPECT_EQ(v.layer("patch").format.name(), "tern2");
    EXPECT_EQ(v.layer("head").format.name(), "float");
}

// For each model and format: write -> read is bit-exact, and the packed module gives the
// configured training forward's logits, bit for bit since every packed layer quantizes its input
// to int8 (both sides then compute the same integers, epilogue and float ops).
TEST_F(ExportTransformerTest, EveryFormatRoundTripsAndRunsBitExactly) {
    for (const std::string type : {"vit", "gpt"}) {
        const auto [x, y] = inputs(type);
        for (const auto& f : kFormats) {
            SCOPED_TRACE(type + " " + f.format);
            const Recipe recipe =
                parse_recipe(recipe_yaml(type, f.weight, "int8_per_token"), "r.yaml");
            auto trained = seeded_model(recipe);
            auto r = export_model(recipe, *trained, f.format);
            const std::string path = *dir_ + "/" + type + "-" + f.format + ".h5";
            exporters::write_model(path, r.model);
            const exporters::PackedModel back = exporters::read_model(path);
            expect_same_model(r.model, back);

            auto reference = copy_of(*trained, recipe);
            exporters::configure_reference(*reference, back);
            torch::NoGradGuard no_grad;
            const torch::Tensor want = reference->forward(x);
            const torch::Tensor got = exporters::packed_module_cpu(back)->forward(x);
            ASSERT_EQ(got.sizes(), want.sizes());
            const exporters::Comparison c = exporters::compare_logits(got, want, y);
            EXPECT_EQ(c.max_abs_error, 0.0);
            EXPECT_EQ(c.top1_agreement, 1.0) << "first disagreement " << c.first_disagreement;
            EXPECT_GT(c.max_abs_logit, 0.0);
            // forward_cpu runs the same module.
            EXPECT_TRUE(torch::equal(exporters::forward_cpu(back, x), got));
            // The reference with the file's own codes (what a GPU validation uses) is the same
            // forward on the CPU, where re-quantizing the latent weights gives those codes.
            auto frozen = copy_of(*trained, recipe);
            exporters::configure_reference(*frozen, back, /*use_file_codes=*/true);
            EXPECT_TRUE(torch::equal(frozen->forward(x), want));
        }
    }
}

TEST_F(ExportTransformerTest, FloatActivationsMatchWithinRounding) {
    for (const std::string type : {"vit", "gpt"}) {
        for (const std::string format : {"tern2", "bt2"}) {
            SCOPED_TRACE(type + " " + format);
            const std::string weight = format == "bt2" ? kFormats[3].weight : kFormats[0].weight;
            const Recipe recipe = parse_recipe(recipe_yaml(type, weight, "none"), "r.yaml");
            auto trained = seeded_model(recipe);
            auto packed = export_model(recipe, *trained, format).model;
            exporters::configure_reference(*trained, packed);
            const auto [x, y] = inputs(type);
            torch::NoGradGuard no_grad;
            const exporters::Comparison c = exporters::compare_logits(
                exporters::packed_module_cpu(packed)->forward(x), trained->forward(x), y);
            EXPECT_LE(c.relative_error, kLogitRtol);
            EXPECT_EQ(c.top1_agreement, 1.0) << "first disagreement " << c.first_disagreement;
        }
    }
}

// Tensors and float layers stored in float16 (or bfloat16): the reference takes the same rounded
// values from the file, so the logits still agree bit for bit; the file says the dtype.
TEST_F(ExportTransformerTest, HalfPrecisionTensorsRoundTripAndValidate) {
    for (const std::string type : {"vit", "gpt"}) {
        for (auto d : {exporters::FloatDType::kF16, exporters::FloatDType::kBF16}) {
            SCOPED_TRACE(type + " " + exporters::float_dtype_name(d));
            const Recipe recipe =
                parse_recipe(recipe_yaml(type, kFormats[0].weight, "int8_per_token"), "r.yaml");
            auto trained = seeded_model(recipe);
            auto r = export_model(recipe, *trained, "tern2", d);
            const std::string path = *dir_ + "/half-" + type + ".h5";
            exporters::write_model(path, r.model);
            const exporters::PackedModel back = exporters::read_model(path);
            expect_same_model(r.model, back);
            for (const auto& t : back.tensors)
                EXPECT_EQ(t.dtype, d) << t.name;
            EXPECT_EQ(back.layer("head").weight_dtype, d);
            // The rounding is real: some stored value differs from the trained float32 one.
            const auto& norm = back.tensor("norm.weight");
            const torch::Tensor trained_norm = trained->named_parameters()["norm.weight"];
            EXPECT_FALSE(torch::equal(torch::tensor(norm.values), trained_norm));

            exporters::configure_reference(*trained, back);
            const auto [x, y] = inputs(type);
            torch::NoGradGuard no_grad;
            const exporters::Comparison c = exporters::compare_logits(
                exporters::packed_module_cpu(back)->forward(x), trained->forward(x), y);
            EXPECT_EQ(c.max_abs_error, 0.0);
        }
    }
}

// The packed gpt decodes through its KV cache as `trit generate` does: prefill, then one byte at a
// time, with the logits of the full forward.
TEST_F(ExportTransformerTest, PackedGptDecodesWithAKvCache) {
    for (const auto& f : {kFormats[0], kFormats[3]}) {
        SCOPED_TRACE(f.format);
        const Recipe recipe =
            parse_recipe(recipe_yaml("gpt", f.weight, "int8_per_token"), "r.yaml");
        auto module = exporters::packed_module_cpu(
            export_model(recipe, *seeded_model(recipe), f.format).model);
        auto* gpt = dynamic_cast<Gpt*>(module.get());
        ASSERT_NE(gpt, nullptr);
        const torch::Tensor tokens = inputs("gpt").first;  // (3, 16)
        torch::NoGradGuard no_grad;
        const torch::Tensor full = gpt->forward(tokens);
        KvCache cache = gpt->make_cache(tokens.size(0));
        std::vector<torch::Tensor> parts = {gpt->forward_cached(tokens.slice(1, 0, 7), cache)};
        for (int64_t t = 7; t < tokens.size(1); ++t)
            parts.push_back(gpt->forward_cached(tokens.slice(1, t, t + 1), cache));
        const torch::Tensor cached = torch::cat(parts, 1);
        ASSERT_EQ(cached.sizes(), full.sizes());
        const double err = (cached - full).abs().max().item<double>();
        EXPECT_LE(err, kCacheRtol * full.abs().max().item<double>());
        EXPECT_TRUE(torch::equal(cached.argmax(-1), full.argmax(-1)));
        EXPECT_EQ(cache.length, tokens.size(1));
    }
}

// compare_logits on a language model's (B, T, V) logits: rows are positions, in row-major order.
TEST(CompareLogits, LanguageModelLogitsCountEveryPosition) {
    torch::manual_seed(2);
    const torch::Tensor ref = torch::randn({2, 5, 7});
    torch::Tensor packed = ref.clone();
    packed[1][2] = torch::zeros({7});
    packed[1][2][(ref[1][2].argmax().item<int64_t>() + 1) % 7] = 100;  // one position disagrees
    const torch::Tensor labels = ref.argmax(-1);
    const exporters::Comparison c = exporters::compare_logits(packed, ref, labels);
    EXPECT_EQ(c.examples, 10);
    EXPECT_EQ(c.agreements, 9);
    EXPECT_DOUBLE_EQ(c.top1_agreement, 0.9);
    EXPECT_EQ(c.first_disagreement, 7);  // row 1 * 5 + 2
    EXPECT_DOUBLE_EQ(c.reference_accuracy, 1.0);
    // Batch by batch gives the same figures.
    const exporters::Comparison b =
        exporters::combine(exporters::compare_logits(packed[0].unsqueeze(0), ref[0].unsqueeze(0),
                                                     labels[0].unsqueeze(0)),
                           exporters::compare_logits(packed[1].unsqueeze(0), ref[1].unsqueeze(0),
                                                     labels[1].unsqueeze(0)));
    EXPECT_EQ(b.examples, c.examples);
    EXPECT_EQ(b.first_disagreement, c.first_disagreement);
    EXPECT_EQ(b.top1_agreement, c.top1_agreement);
    EXPECT_EQ(b.max_abs_error, c.max_abs_error);
    EXPECT_EQ(b.packed_accuracy, c.packed_accuracy);
    EXPECT_THROW(exporters::compare_logits(packed, ref, labels.reshape({-1})), Error);
}



exporters::PackedTensor& tensor_of(exporters::PackedModel& m, const std::string& name) {
    for (auto& t : m.tensors)
        if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
}

TEST_F(ExportTransformerTest, BadTensorsAreRejectedWithThePathAndTheExpectedShape) {
    const Recipe vit =
        parse_recipe(recipe_yaml("vit", kFormats[0].weight, "int8_per_token"), "vit.yaml");
    const auto base = export_model(vit, *seeded_model(vit), "tern2").model;
    auto drop = [](const std::string& name) {
        return [name](exporters::PackedModel& m) {
            m.tensors.erase(std::find_if(m.tensors.begin(), m.tensors.end(),
                                         [&](const auto& t) { return t.name == name; }));
        };
    };
    std::string e = load_error(damaged(*dir_, "no-pos", base, drop("pos")));
    EXPECT_THAT(e, HasSubstr("no-pos.h5:/tensors/pos: missing"));
    EXPECT_THAT(e, HasSubstr("of shape (1, 17, 32)"));
    e = load_error(damaged(*dir_, "no-norm", base, drop("blocks.0.norm2.weight")));
    EXPECT_THAT(e, HasSubstr(":/tensors/blocks.0.norm2.weight: missing"));
    EXPECT_THAT(e, HasSubstr("of shape (32)"));

    e = load_error(damaged(*dir_, "pos-shape", base, [](auto& m) {
        auto& t = tensor_of(m, "pos");
        t.shape = {1, 16, 32};
        t.values.resize(16 * 32);
    }));
    EXPECT_THAT(e, HasSubstr("pos-shape.h5:/tensors/pos: shape (1, 16, 32) does not match the "
                             "recipe's model (1, 17, 32)"));

    e = load_error(damaged(*dir_, "extra", base, [](auto& m) {
        exporters::PackedTensor t;
        t.name = "blocks.1.norm1.weight";
        t.shape = {32};
        t.values.assign(32, 1.0f);
        m.tensors.push_back(t);
    }));
    EXPECT_THAT(
        e,
        HasSubstr(
            "extra.h5:/tensors/blocks.1.norm1.weight: not a tensor of the recipe's model (vit)"));

    e = load_error(damaged(*dir_, "nan", base, [](auto& m) {
        tensor_of(m, "cls").values[3] = std::numeric_limits<float>::quiet_NaN();
    }));
    EXPECT_THAT(e, HasSubstr("nan.h5:/tensors/cls: value 3 is not finite"));

    // The in-memory loader refuses a model whose tensors do not fit.
    auto wrong = base;
    tensor_of(wrong, "pos").shape = {1, 16, 32};
    auto model = make_model(vit.model);
    try {
        exporters::load_float_values(*model, wrong);
        ADD_FAILURE() << "expected trit::Error";
    } catch (const Error& err) {
        EXPECT_THAT(err.what(),
                    HasSubstr("tensor pos has shape [1, 16, 32], the model expects [1, 17, 32]"));
    }
}

// An mlp has no tensors besides its layers: a file without the /tensors group (as written before
// the group existed) still loads and runs.
TEST_F(ExportTransformerTest, MlpFileWithoutTensorsGroupLoads) {
    const Recipe recipe =
        parse_recipe("name: old\nmodel: {hidden: []}\ndata: {path: /nonexistent}\n", "old.yaml");
    const std::string path = *dir_ + "/old-mlp.h5";
    torch::manual_seed(4);
    const torch::Tensor weight = torch::randn({10, 784}), bias = torch::randn({10});
    {
        auto f = h5::File::create(path);
        auto root = f.root();
        root.set_attr("format", exporters::kModelFileFormat);
        root.set_attr("format_version", exporters::kModelFileVersion);
        root.set_attr("producer", "trit 0.1.0");
        root.set_attr("recipe", recipe_to_yaml(recipe));
        auto head = root.create_group("layers").create_group("head");
        head.set_attr("format", "float");
        head.set_attr("out_features", int64_t{10});
        head.set_attr("in_features", int64_t{784});
        head.write("weight", h5::DType::kF32, {10, 784}, weight.data_ptr<float>());
        head.write("bias", h5::DType::kF32, {10}, bias.data_ptr<float>());
        f.close();
    }
    const exporters::PackedModel m = exporters::read_model(path);
    EXPECT_TRUE(m.tensors.empty());
    const torch::Tensor x = torch::randn({2, 784});
    EXPECT_TRUE(torch::equal(exporters::forward_cpu(m, x), torch::linear(x, weight, bias)));
}

// A fortune file of `entries` deterministic pseudo-random entries in `dir`.
void write_fortunes(const std::string& dir, int64_t entries) {
    uint64_t s = 12345;
    auto next = [&] { return (s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
    std::string text;
    const std::string words[] = {"the", "cat", "sat",  "on",  "a",
                                 "mat", "of",  "bits", "and", "trits"};
    for (int64_t e = 0; e < entries; ++e) {
        const int64_t n = 5 + static_cast<int64_t>(next() % 12);
        for (int64_t w = 0; w < n; ++w)
            text += words[next() % 10] + (w + 1 < n ? " " : ".\n");
        text += "%\n";
    }
    trit::testing::write_text(dir + "/cookie", text);
}

// `trit export`, `inspect` and `validate` on a tiny gpt checkpoint (its seeded weights saved as a
// run would save them) and a synthetic fortunes directory.
TEST_F(ExportTransformerTest, CliExportInspectValidateGpt) {
    const std::string fortunes = *dir_ + "/fortunes", run = *dir_ + "/gpt-run",
                      model = *dir_ + "/gpt-cli.h5";
    fs::make_dirs(fortunes);
    write_fortunes(fortunes, 400);
    fs::make_dirs(run);
    const Recipe recipe = parse_recipe(
        recipe_yaml("gpt", kFormats[0].weight, "int8_per_token", fortunes), "gpt.yaml");
    auto trained = seeded_model(recipe);
    torch::optim::AdamW optimizer(trained->parameters());
    trainers::save_checkpoint(run + "/" + trainers::kCheckpointFile, *trained, optimizer,
                              trainers::TrainPosition{}, recipe_to_yaml(recipe));

    auto e = trit::testing::run_trit(
        "export '" + run + "' --format tern2 --float-dtype float16 --out '" + model + "'");
    ASSERT_EQ(e.exit_code, 0) << e.output;
    EXPECT_THAT(e.output, HasSubstr("blocks.1.mlp.down: tern2"));
    auto i = trit::testing::run_trit("inspect '" + model + "'");
    ASSERT_EQ(i.exit_code, 0) << i.output;
    EXPECT_THAT(i.output, HasSubstr("embed.weight"));
    EXPECT_THAT(i.output, HasSubstr("(256, 32)"));
    EXPECT_THAT(i.output, HasSubstr("16384"));  // 256 x 32 float16 values
    EXPECT_THAT(i.output, HasSubstr("and 6 other tensors"));

    auto v = trit::testing::run_trit("validate '" + model + "' --against '" + run +
                                     "' --limit 5 --batch 2");
    ASSERT_EQ(v.exit_code, 0) << v.output;
    EXPECT_THAT(v.output, HasSubstr("on 80 predicted bytes (5 windows of the validation text)"));
    EXPECT_THAT(v.output, HasSubstr("max |logit error| 0.000e+00"));
    EXPECT_THAT(v.output, HasSubstr("top-1 agreement 100.00%"));
    EXPECT_THAT(v.output, HasSubstr("next-byte accuracy"));
    EXPECT_THAT(v.output, HasSubstr("PASS"));

    // The whole validation text, and a --data directory that does not hold it.
    auto all = trit::testing::run_trit("validate '" + model + "' --against '" + run + "'");
    EXPECT_EQ(all.exit_code, 0) << all.output;
    auto bad = trit::testing::run_trit("validate '" + model + "' --against '" + run + "' --data '" +
                                       *dir_ + "/nowhere'");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_THAT(bad.output, HasSubstr("nowhere"));
}

}  // namespace
}  // namespace trit
