// BWTA models (binary weights, ternary / bool activations, ternary attention) through export, the
// container and the CPU reference runtime (issue 6, item 8): act_levels' codes equal the training
// codes bit for bit (ties included; NaN is the documented exception, handled per row); tiny trained
// mlp (ReLU: bool inputs), vit (ternary attention) and gpt (bias and no bias, relu2) runs export to
// bin1, read back bit for bit with their activation scales exactly, and run with the training
// forward's logits bit for bit; other formats take ternary activations too; grids other than
// ternary / bool are refused, as are damaged attributes; files without ternary activations stay
// format_version 1; and `trit export / inspect / validate` on a BWTA run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/bwta_quant.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/model.h"
#include "core/quant_linear.h"
#include "core/recipe.h"
#include "core/transformer.h"
#include "exporters/formats/act_levels.h"
#include "exporters/h5.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "quantizers/layer_selection.h"
#include "tests/support/model_files.h"
#include "tests/support/process.h"
#include "tests/support/synthetic_idx.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/data.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::damaged;
using trit::testing::expect_error;
using trit::testing::expect_same_model;
using trit::testing::load_error;

uint32_t bits_of(float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

// ---- codes ----------------------------------------------------------------------------------

// act_levels_quantize_ref / act_bool_quantize_ref against the training forward's codes
// (act_grid_codes: torch's true division, round half to even, clamp) on the same float32 values.
void expect_codes_match(const std::vector<float>& x, float scale) {
    const int64_t n = static_cast<int64_t>(x.size());
    const torch::Tensor xt =
        torch::from_blob(const_cast<float*>(x.data()), {1, n}, torch::kFloat32);
    const torch::Tensor s = torch::scalar_tensor(scale, torch::kFloat32);
    for (const ActLevelMode mode : {ActLevelMode::kSigned, ActLevelMode::kBool}) {
        SCOPED_TRACE(std::string(act_level_mode_name(mode)) + " scale " + std::to_string(scale));
        std::vector<int8_t> q(x.size());
        if (mode == ActLevelMode::kBool)
            formats::act_bool_quantize_ref(x.data(), 1, n, scale, q.data());
        else
            formats::act_levels_quantize_ref(x.data(), 1, n, scale, 3, q.data());
        const torch::Tensor want = act_grid_codes(xt, s, exporters::exported_act_grid(mode));
        const float* w = want.data_ptr<float>();
        for (int64_t i = 0; i < n; ++i) {
            if (std::isnan(x[i])) {
                // The training code of a NaN is NaN (a NaN output row); act_levels gives 0.
                EXPECT_TRUE(std::isnan(w[i])) << i;
                EXPECT_EQ(q[i], 0) << i;
                continue;
            }
            EXPECT_EQ(static_cast<float>(q[i]), w[i]) << "x[" << i << "] = " << x[i];
        }
    }
}

TEST(ExportBwtaCodes, ActLevelsEqualTheTrainingCodes) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    // Exact ties at scale 0.25 (x / s = +-0.5, +-1.5), their neighbours, specials, subnormals.
    std::vector<float> x = {0.125f,
                            -0.125f,
                            0.375f,
                            -0.375f,
                            std::nextafter(0.125f, 0.0f),
                            std::nextafter(0.125f, 1.0f),
                            -std::nextafter(0.125f, 1.0f),
                            kNan,
                            kInf,
                            -kInf,
                            0.0f,
                            -0.0f,
                            1e-40f,
                            -1e-40f,
                            3e38f,
                            -3e38f,
                            0.25f,
                            -0.25f};
    expect_codes_match(x, 0.25f);
    // Random values and scales whose quotients land near +-0.5 after rounding.
    torch::manual_seed(5);
    for (const float scale : {0.1f, 0.37f, 1.3f, 0.0123f}) {
        std::vector<float> y;
        const torch::Tensor r = torch::randn({2000}) * scale;
        y.assign(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
        for (int i = -50; i <= 50; ++i) {
            y.push_back(0.5f * scale + static_cast<float>(i) * 1e-9f);
            y.push_back(-0.5f * scale + static_cast<float>(i) * 1e-9f);
        }
        expect_codes_match(y, scale);
    }
}

// ---- tiny trained runs ----------------------------------------------------------------------

std::string data_line() {
    return "data: {path: '" + trit::testing::tiny_data_dir() + "'}\n";
}

std::string bwta_quantization(const std::string& weight, const std::string& targets,
                              bool attention) {
    return "quantization:\n  weight: " + weight + "\n  activation: {method: ternary}\n" +
           (attention ? "  attention: ternary\n" : "") + "  targets: " + targets + "\n";
}

// mlp with ReLU: fc1 takes the (signed) images, fc2 and head ReLU outputs (bool grids). Two SMSQ
// stages, so the export sees the last stage's grid after a transition.
std::string mlp_recipe() {
    return "name: mlp\nseed: 3\nmodel: {hidden: [32, 16]}\n" + data_line() +
           bwta_quantization("{method: binary, granularity: channel}", "[fc1, fc2, head]", false) +
           "smsq: {stages: [5, 3], stage_steps: [10, 14]}\n"
           "optimizer: {lr: 0.01, scale_lr: 0.01}\n"
           "training: {steps: 24, batch_size: 32, log_every: 24, checkpoint_every: 5}\n";
}

std::string vit_recipe() {
    return "name: vit\nseed: 4\nmodel: {type: vit, dim: 16, depth: 1, heads: 2}\n" + data_line() +
           bwta_quantization("{method: binary, granularity: tensor}", "['re:blocks\\..*']", true) +
           "optimizer: {lr: 0.003}\ntraining: {steps: 12, batch_size: 32, log_every: 12}\n";
}

// gpt on the tiny fortunes: with biases (gelu), and without (relu2: mlp.down takes a bool grid).
std::string gpt_recipe(bool bias) {
    return std::string(
               "name: gpt\nseed: 5\nmodel: {type: gpt, dim: 32, depth: 1, heads: 2, context: 16, "
               "bias: ") +
           (bias ? "true, activation: gelu" : "false, activation: relu2") + "}\n" +
           "data: {dataset: fortunes, path: '" + trit::testing::tiny_text_dir() + "'}\n" +
           bwta_quantization(bias ? "{method: binary, granularity: channel}"
                                  : "{method: binary, granularity: tensor}",
                             "['re:blocks\\..*']", true) +
           "optimizer: {lr: 0.003}\ntraining: {steps: 8, batch_size: 8, log_every: 8}\n";
}

struct SimulatedKill {};

trainers::TrainOptions quiet(const std::string& out) {
    trainers::TrainOptions o;
    o.out_dir = out;
    o.progress = false;
    return o;
}

// ctest runs every test in its own process: each trains (once) only the runs it uses.
class ExportBwtaTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(trit::testing::make_temp_dir("trit-export-bwta"));
        trained_ = new std::set<std::string>;
    }
    static void TearDownTestSuite() {
        fs::remove_tree(*dir_);
        delete dir_;
        delete trained_;
    }
    // The run directory of tiny run `name` (mlp, vit, gpt_bias, gpt_nobias), trained on first use.
    static std::string run(const std::string& name) {
        const std::string dir = *dir_ + "/" + name;
        if (trained_->insert(name).second) {
            const std::string yaml = name == "mlp"        ? mlp_recipe()
                                     : name == "vit"      ? vit_recipe()
                                     : name == "gpt_bias" ? gpt_recipe(true)
                                                          : gpt_recipe(false);
            trainers::train(parse_recipe(yaml, name + ".yaml"), quiet(dir));
        }
        return dir;
    }

    static exporters::ExportResult export_run(
        trainers::LoadedRun& r, const std::string& format,
        exporters::FloatDType dtype = exporters::FloatDType::kF32) {
        exporters::ExportOptions o;
        o.format = exporters::parse_format(format);
        o.float_dtype = dtype;
        o.layers =
            quantizers::selected_layers(*r.model, r.model->output_layer(), r.recipe.quantization);
        return exporters::pack_model(r.recipe, r.recipe_yaml, *r.model, o);
    }

    // Inputs: test images and labels (mlp, vit), or random bytes (gpt: (4, 16) and next bytes).
    static std::pair<torch::Tensor, torch::Tensor> inputs(const Recipe& r) {
        if (r.model.type != "gpt")
            return trainers::load_split(r.data, /*train=*/false, torch::kCPU);
        torch::manual_seed(9);
        return {torch::randint(256, {4, 16}, torch::kLong),
                torch::randint(256, {4, 16}, torch::kLong)};
    }

    static std::string* dir_;
    static std::set<std::string>* trained_;
};
std::string* ExportBwtaTest::dir_ = nullptr;
std::set<std::string>* ExportBwtaTest::trained_ = nullptr;

// Every ActLevelQuantizer of a model by name ("fc2.act", "blocks.0.attn.q_act.quant").
std::vector<std::pair<std::string, ActLevelQuantizer>> quantizers_of(Model& m) {
    return quantizers::act_level_quantizers(m);
}

// The scales of a PackedModel by the model's quantizer names.
std::map<std::string, float> file_scales(const exporters::PackedModel& p) {
    std::map<std::string, float> out;
    for (const auto& l : p.layers)
        if (l.activation == ActQuantMethod::kTernary) out[l.name + ".act"] = l.act.scale;
    for (const auto& q : p.act_quantizers)
        out[q.name + ".quant"] = q.scale;
    return out;
}

TEST_F(ExportBwtaTest, EveryModelRoundTripsAndRunsBitExactly) {
    for (const std::string name : {"mlp", "vit", "gpt_bias", "gpt_nobias"}) {
        SCOPED_TRACE(name);
        trainers::LoadedRun trained = trainers::load_run(run(name));
        const exporters::ExportResult r = export_run(trained, "bin1");
        EXPECT_TRUE(r.notes.empty()) << r.notes.front();
        const std::string path = run(name) + "/model-bin1.h5";
        exporters::write_model(path, r.model);
        const exporters::PackedModel back = exporters::read_model(path);
        expect_same_model(r.model, back);

        // Every quantizer of the trained model is in the file with its grid, mode and scale,
        // bit for bit; and nothing else.
        const auto scales = file_scales(back);
        const auto trained_quantizers = quantizers_of(*trained.model);
        ASSERT_FALSE(trained_quantizers.empty());
        EXPECT_EQ(scales.size(), trained_quantizers.size());
        for (auto& [qname, q] : trained_quantizers) {
            ASSERT_EQ(scales.count(qname), 1u) << qname;
            EXPECT_EQ(bits_of(scales.at(qname)), bits_of(q->scale.item<float>())) << qname;
        }
        for (const auto& l : back.layers) {
            if (!l.format.packed()) continue;
            EXPECT_EQ(l.activation, ActQuantMethod::kTernary) << l.name;
            const bool boolean = trained.model->input_nonnegative(l.name);
            EXPECT_EQ(l.act.mode, boolean ? ActLevelMode::kBool : ActLevelMode::kSigned) << l.name;
            EXPECT_EQ(l.act.grid, exporters::exported_act_grid(l.act.mode)) << l.name;
        }
        if (name == "mlp") {
            EXPECT_EQ(back.layer("fc2").act.mode, ActLevelMode::kBool);
        }
        if (name == "gpt_nobias") {
            EXPECT_EQ(back.layer("blocks.0.mlp.down").act.mode, ActLevelMode::kBool);
        }
        EXPECT_EQ(back.act_quantizers.size(), name == "mlp" ? 0u : 4u);

        // The CPU reference runtime against the training forward set up from the file.
        trainers::LoadedRun reference = trainers::load_run(run(name));
        exporters::configure_reference(*reference.model, back);
        const auto [x, y] = inputs(back.recipe);
        torch::NoGradGuard no_grad;
        const torch::Tensor want = reference.model->forward(x);
        const torch::Tensor got = exporters::forward_cpu(back, x);
        ASSERT_EQ(got.sizes(), want.sizes());
        const exporters::Comparison c = exporters::compare_logits(got, want, y);
        EXPECT_EQ(c.max_abs_error, 0.0);
        EXPECT_EQ(c.top1_agreement, 1.0) << "first disagreement " << c.first_disagreement;
        EXPECT_GT(c.max_abs_logit, 0.0);
        // The trained model itself (its own quantizers, never reconfigured) gives the same logits.
        EXPECT_TRUE(torch::equal(trained.model->forward(x), want));
        // With the file's own codes (what a GPU validation uses): the same forward on the CPU.
        trainers::LoadedRun frozen = trainers::load_run(run(name));
        exporters::configure_reference(*frozen.model, back, /*use_file_codes=*/true);
        EXPECT_TRUE(torch::equal(frozen.model->forward(x), want));
    }
}

// A loaded model's quantizers are initialised with the file's scales: a forward on a new batch
// must not re-initialise them from it (eq. 6 runs only on a fresh quantizer).
TEST_F(ExportBwtaTest, LoadedQuantizersKeepTheFileScales) {
    trainers::LoadedRun trained = trainers::load_run(run("vit"));
    const exporters::PackedModel packed = export_run(trained, "bin1").model;
    auto module = exporters::packed_module_cpu(packed);
    const auto scales = file_scales(packed);
    auto qs = quantizers_of(*module);
    ASSERT_EQ(qs.size(), 4u);  // the attention's; the packed layers run from the file
    torch::NoGradGuard no_grad;
    module->forward(torch::randn({8, 784}) * 50);
    for (auto& [name, q] : qs) {
        EXPECT_TRUE(q->initialized()) << name;
        EXPECT_EQ(bits_of(q->scale.item<float>()), bits_of(scales.at(name))) << name;
    }
    // The reference too, though set_quant gave its layers fresh quantizers.
    trainers::LoadedRun reference = trainers::load_run(run("vit"));
    exporters::configure_reference(*reference.model, packed);
    reference.model->forward(torch::randn({8, 784}) * 50);
    for (auto& [name, q] : quantizers_of(*reference.model)) {
        EXPECT_TRUE(q->initialized()) << name;
        EXPECT_EQ(bits_of(q->scale.item<float>()), bits_of(scales.at(name))) << name;
    }
}

// --float-dtype float16 rounds the tensors, never the activation scales; the reference takes the
// rounded tensors, so the logits still match bit for bit.
TEST_F(ExportBwtaTest, Float16ExportKeepsTheScalesExactly) {
    trainers::LoadedRun trained = trainers::load_run(run("gpt_bias"));
    const exporters::ExportResult r = export_run(trained, "bin1", exporters::FloatDType::kF16);
    const std::string path = run("gpt_bias") + "/model-bin1-f16.h5";
    exporters::write_model(path, r.model);
    const exporters::PackedModel back = exporters::read_model(path);
    EXPECT_EQ(back.tensor("embed.weight").dtype, exporters::FloatDType::kF16);
    for (auto& [name, q] : quantizers_of(*trained.model))
        EXPECT_EQ(bits_of(file_scales(back).at(name)), bits_of(q->scale.item<float>())) << name;
    trainers::LoadedRun reference = trainers::load_run(run("gpt_bias"));
    exporters::configure_reference(*reference.model, back);
    const auto [x, y] = inputs(back.recipe);
    torch::NoGradGuard no_grad;
    const auto c =
        exporters::compare_logits(exporters::forward_cpu(back, x), reference.model->forward(x), y);
    EXPECT_EQ(c.max_abs_error, 0.0);
}

// Ternary activations with the other packed formats: the products take the codes as int8 x.
TEST_F(ExportBwtaTest, OtherFormatsTakeTernaryActivations) {
    for (const std::string format : {"tern2", "tern24", "bt2"}) {
        SCOPED_TRACE(format);
        trainers::LoadedRun trained = trainers::load_run(run("mlp"));
        const exporters::ExportResult r = export_run(trained, format);
        EXPECT_FALSE(r.notes.empty());  // round-to-nearest from the binary weights
        const std::string path = run("mlp") + "/model-" + format + ".h5";
        exporters::write_model(path, r.model);
        const exporters::PackedModel back = exporters::read_model(path);
        EXPECT_EQ(back.layer("fc2").activation, ActQuantMethod::kTernary);
        trainers::LoadedRun reference = trainers::load_run(run("mlp"));
        exporters::configure_reference(*reference.model, back);
        const auto [x, y] = inputs(back.recipe);
        torch::NoGradGuard no_grad;
        const auto c = exporters::compare_logits(exporters::forward_cpu(back, x),
                                                 reference.model->forward(x), y);
        EXPECT_EQ(c.max_abs_error, 0.0);
        EXPECT_EQ(c.top1_agreement, 1.0);
    }
}

// A NaN in a ternary layer's input row: the training forward's row is NaN, and so is the
// runtime's; the other rows are unchanged.
TEST_F(ExportBwtaTest, NanInputRowsGiveNanOutputRows) {
    trainers::LoadedRun trained = trainers::load_run(run("mlp"));
    const exporters::PackedModel packed = export_run(trained, "bin1").model;
    torch::manual_seed(2);
    torch::Tensor x = torch::randn({4, 784});
    x[1][17] = std::numeric_limits<float>::quiet_NaN();
    torch::NoGradGuard no_grad;
    const torch::Tensor got = exporters::layer_forward_cpu(packed.layer("fc1"), x);
    const torch::Tensor want = trained.model->named_modules()["fc1"]->as<QuantLinear>()->forward(x);
    EXPECT_TRUE(torch::isnan(got[1]).all().item<bool>());
    EXPECT_TRUE(torch::isnan(want[1]).all().item<bool>());
    for (int64_t i : {0, 2, 3})
        EXPECT_TRUE(torch::equal(got[i], want[i])) << i;
}

// ---- refusals ---------------------------------------------------------------------------------

TEST_F(ExportBwtaTest, OtherGridsAreRefused) {
    // A run killed in its first SMSQ stage (5 levels): its last checkpoint (step 5) is on [-2, 2].
    const std::string killed = *dir_ + "/killed";
    auto o = quiet(killed);
    o.after_step = [](int64_t step) {
        if (step == 7) throw SimulatedKill{};
    };
    EXPECT_THROW(trainers::train(parse_recipe(mlp_recipe(), "mlp.yaml"), o), SimulatedKill);
    trainers::LoadedRun mid = trainers::load_run(killed);
    EXPECT_EQ(mid.step, 5);
    EXPECT_EQ(mid.model->named_modules()["fc1.act"]->as<ActLevelQuantizer>()->grid(),
              (ActGrid{-2, 2, false}));
    expect_error(
        [&] { export_run(mid, "bin1"); },
        {"export: layer fc1", "signed activation quantizer is on the grid [-2, 2] (5 levels)",
         "expected [-1, 1]", "before its last SMSQ stage"});

    // Binary activations (the end of a bitwise schedule), and a bool grid wider than [0, 1].
    trainers::LoadedRun r = trainers::load_run(run("mlp"));
    r.model->named_modules()["fc1.act"]->as<ActLevelQuantizer>()->set_grid(
        act_grid(2, ActLevelMode::kSigned));
    expect_error([&] { export_run(r, "bin1"); },
                 {"layer fc1", "grid {-1, +1} (2 levels)", "expected [-1, 1]"});
    trainers::LoadedRun b = trainers::load_run(run("mlp"));
    b.model->named_modules()["fc2.act"]->as<ActLevelQuantizer>()->set_grid(
        act_grid(4, ActLevelMode::kBool));
    expect_error([&] { export_run(b, "bin1"); },
                 {"layer fc2", "bool activation quantizer", "[0, 3]", "expected [0, 1]"});

    // An attention quantizer on 5 levels.
    trainers::LoadedRun v = trainers::load_run(run("vit"));
    v.model->named_modules()["blocks.0.attn.k_act.quant"]->as<ActLevelQuantizer>()->set_grid(
        act_grid(5, ActLevelMode::kSigned));
    expect_error([&] { export_run(v, "bin1"); },
                 {"attention point blocks.0.attn.k_act", "[-2, 2]"});

    // A ternary-activation layer left float.
    trainers::LoadedRun f = trainers::load_run(run("mlp"));
    exporters::ExportOptions opt;
    opt.format = exporters::parse_format("bin1");
    opt.layers = {"fc1", "head"};
    expect_error([&] { exporters::pack_model(f.recipe, f.recipe_yaml, *f.model, opt); },
                 {"layer fc2 has ternary activations but is not packed"});
}

TEST_F(ExportBwtaTest, DamagedActivationAttributesAreNamed) {
    trainers::LoadedRun m = trainers::load_run(run("mlp"));
    const exporters::PackedModel mlp = export_run(m, "bin1").model;
    auto fc2 = [](exporters::PackedModel& p) -> exporters::PackedLayer& {
        for (auto& l : p.layers)
            if (l.name == "fc2") return l;
        throw Error("no fc2");
    };
    const std::string d = *dir_;
    EXPECT_THAT(load_error(damaged(d, "scale0", mlp, [&](auto& p) { fc2(p).act.scale = 0; })),
                HasSubstr("/layers/fc2/act_scale: 0; expected a finite positive activation scale"));
    EXPECT_THAT(load_error(damaged(
                    d, "scalenan", mlp,
                    [&](auto& p) { fc2(p).act.scale = std::numeric_limits<float>::quiet_NaN(); })),
                HasSubstr("/layers/fc2/act_scale: nan"));
    EXPECT_THAT(load_error(damaged(d, "scaleneg", mlp, [&](auto& p) { fc2(p).act.scale = -1; })),
                HasSubstr("/layers/fc2/act_scale: -1"));
    EXPECT_THAT(
        load_error(damaged(d, "grid5", mlp,
                           [&](auto& p) {
                               fc2(p).act.grid = {0, 2, false};
                           })),
        HasSubstr("/layers/fc2: activation grid (act_lo, act_hi) = [0, 2] for a bool quantizer; "
                  "expected [0, 1]"));
    EXPECT_THAT(load_error(damaged(d, "gridmode", mlp,
                                   [&](auto& p) { fc2(p).act.mode = ActLevelMode::kSigned; })),
                HasSubstr("[0, 1] for a signed quantizer; expected [-1, 1]"));
    EXPECT_THAT(
        load_error(damaged(d, "mlpattn", mlp,
                           [&](auto& p) { p.act_quantizers.push_back(p.layers[0].act); })),
        HasSubstr(
            "/act_quantizers/fc1: not expected: the recipe's quantization.attention is 'none'"));

    trainers::LoadedRun v = trainers::load_run(run("vit"));
    const exporters::PackedModel vit = export_run(v, "bin1").model;
    EXPECT_THAT(
        load_error(damaged(d, "nopoint", vit,
                           [&](auto& p) { p.act_quantizers.erase(p.act_quantizers.begin() + 2); })),
        HasSubstr("/act_quantizers/blocks.0.attn.probs_act: missing"));
    EXPECT_THAT(load_error(damaged(d, "noquant", vit, [&](auto& p) { p.act_quantizers.clear(); })),
                HasSubstr("/act_quantizers: missing (the recipe quantizes attention"));
    EXPECT_THAT(load_error(damaged(d, "extrapoint", vit,
                                   [&](auto& p) {
                                       p.act_quantizers.push_back(p.act_quantizers[0]);
                                       p.act_quantizers.back().name = "blocks.0.attn.x_act";
                                   })),
                HasSubstr("/act_quantizers/blocks.0.attn.x_act: not an attention point"));
    EXPECT_THAT(
        load_error(damaged(d, "probsgrid", vit,
                           [&](auto& p) {
                               p.act_quantizers[2].grid = {-1, 1, false};
                           })),
        HasSubstr(
            "/act_quantizers/blocks.0.attn.probs_act: activation grid (act_lo, act_hi) = [-1, 1] "
            "for a bool quantizer"));
    EXPECT_THAT(
        load_error(damaged(d, "qscale", vit, [&](auto& p) { p.act_quantizers[0].scale = -0.5f; })),
        HasSubstr("/act_quantizers/blocks.0.attn.q_act/act_scale: -0.5"));
}

// ---- versions -------------------------------------------------------------------------------

int64_t file_version(const std::string& path) {
    return h5::File::open(path).root().attr_int("format_version");
}

// A hand-written file of a one-layer mlp (head only, bin1 codes all +1) in `version`, its head's
// input quantized with ternary activations or none.
void write_head_only(const std::string& path, int64_t version, bool ternary) {
    const Recipe recipe = parse_recipe(
        std::string("name: old\nmodel: {hidden: []}\ndata: {path: /nonexistent}\nquantization:\n"
                    "  weight: {method: binary, granularity: tensor}\n  activation: {method: ") +
            (ternary ? "ternary" : "int8_per_token") + "}\n  targets: [head]\n",
        "old.yaml");
    auto f = h5::File::create(path);
    auto root = f.root();
    root.set_attr("format", exporters::kModelFileFormat);
    root.set_attr("format_version", version);
    root.set_attr("producer", "trit 0.1.0");
    root.set_attr("recipe", recipe_to_yaml(recipe));
    auto head = root.create_group("layers").create_group("head");
    head.set_attr("format", "bin1");
    head.set_attr("out_features", int64_t{10});
    head.set_attr("in_features", int64_t{784});
    head.set_attr("method", "binary");
    head.set_attr("granularity", "tensor");
    head.set_attr("group_size", int64_t{64});
    head.set_attr("threshold", 0.05);
    head.set_attr("depth", int64_t{2});
    head.set_attr("sparse24", int64_t{0});
    head.set_attr("activation", ternary ? "ternary" : "int8_per_token");
    if (ternary) {
        head.set_attr("act_mode", "signed");
        head.set_attr("act_lo", int64_t{-1});
        head.set_attr("act_hi", int64_t{1});
        const float s = 0.5f;
        head.write("act_scale", h5::DType::kF32, {}, &s);
    }
    const std::vector<uint8_t> codes(10 * 98, 0xFF);
    head.write("codes", h5::DType::kU8, {10, 98}, codes.data());
    const float scale = 0.25f;
    head.write("scale", h5::DType::kF32, {1, 1}, &scale);
    const std::vector<float> bias(10, 0.125f);
    head.write("bias", h5::DType::kF32, {10}, bias.data());
    f.close();
}

TEST_F(ExportBwtaTest, VersionsOldFilesStillRead) {
    // Without ternary activations a file is version 1, as before; with them version 2.
    trainers::LoadedRun m = trainers::load_run(run("mlp"));
    exporters::write_model(run("mlp") + "/v2.h5", export_run(m, "bin1").model);
    EXPECT_EQ(file_version(run("mlp") + "/v2.h5"), 2);
    const std::string int8_path = *dir_ + "/int8.h5";
    {
        const Recipe recipe = parse_recipe(trit::testing::tiny_recipe_yaml(), "int8.yaml");
        torch::manual_seed(1);
        auto model = make_model(recipe.model);
        quantizers::apply_quantization(*model, model->output_layer(), recipe.quantization);
        exporters::ExportOptions o;
        o.format = exporters::parse_format("tern2");
        o.layers = quantizers::selected_layers(*model, model->output_layer(), recipe.quantization);
        exporters::write_model(
            int8_path, exporters::pack_model(recipe, recipe_to_yaml(recipe), *model, o).model);
    }
    EXPECT_EQ(file_version(int8_path), 1);
    EXPECT_NO_THROW(exporters::read_model(int8_path));

    // Hand-written version-1 file (as older trits wrote it) reads and runs; a version-1 file
    // claiming ternary activations is refused, and so is a newer version.
    write_head_only(*dir_ + "/old-v1.h5", 1, false);
    const exporters::PackedModel old = exporters::read_model(*dir_ + "/old-v1.h5");
    EXPECT_EQ(old.layer("head").activation, ActQuantMethod::kInt8PerToken);
    EXPECT_EQ(exporters::forward_cpu(old, torch::randn({2, 784})).size(1), 10);
    write_head_only(*dir_ + "/v1-ternary.h5", 1, true);
    EXPECT_THAT(load_error(*dir_ + "/v1-ternary.h5"),
                HasSubstr("/layers/head@activation: ternary activations need format_version 2, the "
                          "file is version 1"));
    write_head_only(*dir_ + "/v2-ternary.h5", 2, true);
    const exporters::PackedModel v2 = exporters::read_model(*dir_ + "/v2-ternary.h5");
    EXPECT_EQ(v2.layer("head").act.scale, 0.5f);
    // x = 0.6 everywhere: codes +1 (0.6 / 0.5 = 1.2), acc = 784; y = (784 * 0.25) * 0.5 + 0.125.
    const torch::Tensor y = exporters::forward_cpu(v2, torch::full({1, 784}, 0.6f));
    EXPECT_TRUE(torch::equal(y, torch::full({1, 10}, 98.125f)));
    write_head_only(*dir_ + "/v4.h5", 4, true);
    EXPECT_THAT(
        load_error(*dir_ + "/v4.h5"),
        HasSubstr("@format_version: this trit reads versions 1 to 3, the file is version 4"));
}

// ---- the CLI --------------------------------------------------------------------------------

TEST_F(ExportBwtaTest, CliExportInspectValidate) {
    for (const std::string name : {"mlp", "vit"}) {
        SCOPED_TRACE(name);
        const std::string file = *dir_ + "/cli-" + name + ".h5";
        auto e = trit::testing::run_trit("export '" + run(name) + "' --format bin1 --out '" + file +
                                         "'");
        ASSERT_EQ(e.exit_code, 0) << e.output;
        auto i = trit::testing::run_trit("inspect '" + file + "'");
        ASSERT_EQ(i.exit_code, 0) << i.output;
        if (name == "mlp") {
            EXPECT_THAT(i.output, HasSubstr("ternary [-1, 1] s="));
            EXPECT_THAT(i.output, HasSubstr("bool [0, 1] s="));
        } else {
            EXPECT_THAT(i.output, HasSubstr("blocks.0.attn.probs_act  bool [0, 1] s="));
        }
        auto v = trit::testing::run_trit("validate '" + file + "' --against '" + run(name) + "'");
        EXPECT_EQ(v.exit_code, 0) << v.output;
        EXPECT_THAT(v.output, HasSubstr("max |logit error| 0.000e+00"));
        EXPECT_THAT(v.output, HasSubstr("top-1 agreement 100.00%"));
        EXPECT_THAT(v.output, HasSubstr("PASS"));
    }
}

}  // namespace
}  // namespace trit
