// Export, container and CPU reference runtime on a tiny trained model: every format round-trips
// through the file bit for bit, the packed runtime matches the training forward set up as the file
// says (relative logit error <= 1e-4, 100% top-1), the int32 accumulators equal the exact integer
// product of the quantized operands, sizes are what the formats promise, and damaged files are
// rejected with the path of the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <functional>
#include <random>

#include "core/act_quant.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/quant_linear.h"
#include "exporters/format_table.h"
#include "exporters/h5.h"
#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "exporters/reference.h"
#include "exporters/runtime_cpu.h"
#include "quantizers/layer_selection.h"
#include "tests/support/model_files.h"
#include "tests/support/process.h"
#include "tests/support/tiny_run.h"
#include "trainers/checkpoint.h"
#include "trainers/trainer.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::damaged;
using trit::testing::expect_same_model;
using trit::testing::load_error;
using exporters::FormatId;

// Relative logit error tolerance of the acceptance criteria: float reassociation between the
// packed path (exact integer sums, then scales) and the training forward (BLAS over dequantized
// values) stays orders of magnitude below it.
constexpr double kLogitRtol = 1e-4;

const std::vector<std::string> kFormats = {"tern2", "tern24", "bin1", "bt1", "bt2", "bt3", "bt4"};

// One tiny ternary run (int8 activations) and one float run, trained once for all tests.
class ExportTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(fs::make_temp_dir("trit-export"));
        for (const char* kind : {"ternary", "float"}) {
            std::vector<std::string> sets = {"model.hidden=[36]"};  // 784 and 36: not multiples of 64, 8, 5
            if (std::string(kind) == "float")
                sets.insert(sets.end(), {"quantization.weight.method=none", "quantization.activation.method=none"});
            Recipe r = parse_recipe(trit::testing::tiny_recipe_yaml(
                                        "optimizer: {lr: 0.01}\ntraining: {steps: 60, batch_size: 32}\n"),
                                    "tiny.yaml", sets);
            trainers::TrainOptions o;
            o.out_dir = *dir_ + "/" + kind;
            o.progress = false;
            trainers::train(r, o);
        }
    }
    static void TearDownTestSuite() {
        fs::remove_tree(*dir_);
        delete dir_;
    }

    static exporters::ExportResult export_run(const std::string& kind, const std::string& format,
                                              trainers::LoadedRun* loaded = nullptr) {
        trainers::LoadedRun run = trainers::load_run(*dir_ + "/" + kind);
        exporters::ExportOptions o;
        o.format = exporters::parse_format(format);
        o.layers = quantizers::selected_layers(*run.model, run.model->output_layer(), run.recipe.quantization);
        auto r = exporters::pack_model(run.recipe, run.recipe_yaml, *run.model, o);
        if (loaded) *loaded = std::move(run);
        return r;
    }

    static std::string* dir_;
};
std::string* ExportTest::dir_ = nullptr;


TEST_F(ExportTest, EveryFormatRoundTripsThroughTheFileBitExactly) {
    for (const auto& f : kFormats) {
        auto r = export_run("ternary", f);
        const std::string path = *dir_ + "/rt-" + f + ".h5";
        exporters::write_model(path, r.model);
        expect_same_model(r.model, exporters::read_model(path));
    }
}

TEST_F(ExportTest, ExportSaysWhenItRequantizes) {
    EXPECT_TRUE(export_run("ternary", "tern2").notes.empty());  // trained ternary: stored as trained
    auto t24 = export_run("ternary", "tern24");
    ASSERT_EQ(t24.notes.size(), 1u);
    EXPECT_THAT(t24.notes[0], HasSubstr("2:4 pruning"));
    auto f = export_run("float", "tern2");
    ASSERT_EQ(f.notes.size(), 1u);
    EXPECT_THAT(f.notes[0], HasSubstr("round-to-nearest ternary"));
    EXPECT_THAT(export_run("ternary", "bt2").notes.at(0), HasSubstr("balanced"));
}

TEST_F(ExportTest, PackedRuntimeMatchesTrainingForwardForEveryFormat) {
    DataConfig data;
    data.path = trit::testing::tiny_data_dir();
    auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);
    for (const char* kind : {"ternary", "float"}) {
        for (const auto& f : kFormats) {
            trainers::LoadedRun run;
            auto r = export_run(kind, f, &run);
            exporters::configure_reference(*run.model, r.model);
            torch::NoGradGuard no_grad;
            auto c = exporters::compare_logits(exporters::forward_cpu(r.model, x), run.model->forward(x), y);
            EXPECT_LE(c.relative_error, kLogitRtol) << kind << " " << f;
            // With int8 activations both sides compute the same integers and the same epilogue.
            if (std::string(kind) == "ternary") {
                EXPECT_EQ(c.max_abs_error, 0.0) << f;
            }
            EXPECT_EQ(c.top1_agreement, 1.0) << kind << " " << f << " first disagreement " << c.first_disagreement;
        }
    }
}

// The packed product's int32 accumulators against torch's exact integer product of the same codes
// (the training path's own quantizers), per scale group.
TEST_F(ExportTest, AccumulatorsEqualExactIntegerProduct) {
    torch::manual_seed(21);
    auto x = torch::randn({5, 784});
    auto xq = act_int8_quantize(x).q.to(torch::kInt64);  // (5, 784) codes
    std::vector<int8_t> xcodes(5 * 784);
    for (int64_t i = 0; i < 5 * 784; ++i) xcodes[i] = static_cast<int8_t>(xq.view(-1)[i].item<int64_t>());
    for (const auto& f : kFormats) {
        trainers::LoadedRun run;
        auto r = export_run("ternary", f, &run);
        const auto& l = r.model.layer("fc1");
        auto w = quantize_weight(run.model->named_parameters()["fc1.weight"], l.spec).q.to(torch::kInt64);
        const int64_t group = l.spec.granularity == ScaleGranularity::kGroup ? l.spec.group_size : l.in;
        const int64_t G = (l.in + group - 1) / group;
        auto acc = exporters::layer_accumulators(l, xcodes.data(), 5);
        for (int64_t g = 0; g < G; ++g) {
            const int64_t b = g * group, e = std::min(l.in, b + group);
            auto exact = torch::matmul(xq.slice(1, b, e), w.slice(1, b, e).t());  // (5, out)
            for (int64_t i = 0; i < 5; ++i)
                for (int64_t j = 0; j < l.out; ++j)
                    ASSERT_EQ(acc[(i * l.out + j) * G + g], exact[i][j].item<int64_t>())
                        << f << " example " << i << " output " << j << " group " << g;
        }
    }
}

// What the GPU runtime relies on when it repacks a layer at load (kernels/runtime_cuda.h): rows
// padded with zero codes to a multiple of 64 columns, with x padded by zero columns, and bin1's
// +-1 codes packed as tern2, give the file's int32 accumulators group for group.
TEST(PackedRows, ZeroPaddedRowsAndBin1AsTern2KeepTheAccumulators) {
    std::mt19937 rng(5);
    for (const char* name : {"tern2", "tern24", "bin1", "bt1", "bt2", "bt3", "bt4"}) {
        const FormatId f = exporters::parse_format(name);
        const FormatId g =
            f.kind == exporters::WeightFormat::kBin1 ? exporters::parse_format("tern2") : f;
        const int max_code = static_cast<int>(exporters::format_max_code(f));
        for (const int64_t k : {49, 96, 100, 784}) {
            const int64_t n = 7, m = 3, kp = (k + 63) / 64 * 64;
            std::vector<int8_t> c(n * k), cp(n * kp, 0), x(m * k), xp(m * kp, 0);
            for (int64_t e = 0; e < n * k; ++e) {
                const int64_t j = e % k;
                int v = static_cast<int>(rng() % (2 * max_code + 1)) - max_code;
                if (f.kind == exporters::WeightFormat::kBin1) v = rng() % 2 != 0 ? 1 : -1;
                if (f.kind == exporters::WeightFormat::kTern24 && j % 4 < 2) v = 0;  // 2:4
                c[e] = static_cast<int8_t>(v);
                cp[e / k * kp + j] = c[e];
            }
            for (int64_t e = 0; e < m * k; ++e) {
                x[e] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
                xp[e / k * kp + e % k] = x[e];
            }
            // One group a row (the padded layer's group becomes kp), and groups of 64 (bt's).
            for (const int64_t group : {k, int64_t{64}}) {
                SCOPED_TRACE(std::string(name) + " k=" + std::to_string(k) +
                             " group=" + std::to_string(group));
                const int64_t G = (k + group - 1) / group;
                std::vector<int32_t> want(m * n * G), got(m * n * G);
                exporters::gemm_int8(f, exporters::pack_codes(f, c.data(), n, k), n, k, x.data(), m,
                                     group, want.data());
                exporters::gemm_int8(g, exporters::pack_codes(g, cp.data(), n, kp), n, kp,
                                     xp.data(), m, group == k ? kp : group, got.data());
                EXPECT_EQ(got, want);
            }
        }
    }
}

TEST_F(ExportTest, SizesAreWhatTheFormatsPromise) {
    auto t2 = export_run("ternary", "tern2");
    auto t24 = export_run("ternary", "tern24");
    const auto& a = t2.model.layer("fc1");
    const auto& b = t24.model.layer("fc1");
    EXPECT_EQ(a.packed[0].size(), static_cast<size_t>(36 * 784 / 4));  // 2 bits per weight
    EXPECT_EQ(b.packed[0].size() + b.packed[1].size(), a.packed[0].size() * 3 / 4);  // 1.5 bits
    auto bt2 = export_run("ternary", "bt2");
    const auto& c = bt2.model.layer("fc1");
    EXPECT_TRUE(c.spec.fp16_scales);
    EXPECT_LE(8.0 * c.weight_bytes() / (c.out * c.in), 3.47);  // the seed's figure, scales included
    EXPECT_EQ(t2.model.layer("head").format.name(), "float");
}

TEST_F(ExportTest, HalfPrecisionFloatLayersRoundTripAndValidate) {
    DataConfig data;
    data.path = trit::testing::tiny_data_dir();
    auto [x, y] = trainers::load_split(data, /*train=*/false, torch::kCPU);
    for (auto d : {exporters::FloatDType::kF16, exporters::FloatDType::kBF16}) {
        trainers::LoadedRun run = trainers::load_run(*dir_ + "/ternary");
        exporters::ExportOptions o;
        o.format = exporters::parse_format("tern2");
        o.layers = {"fc1"};  // fc1 packed; head stays float, stored in half precision
        o.float_dtype = d;
        auto r = exporters::pack_model(run.recipe, run.recipe_yaml, *run.model, o);
        const std::string path = *dir_ + "/half.h5";
        exporters::write_model(path, r.model);
        auto back = exporters::read_model(path);
        expect_same_model(r.model, back);
        EXPECT_EQ(back.layer("head").weight_dtype, d);
        exporters::configure_reference(*run.model, back);
        torch::NoGradGuard no_grad;
        auto c = exporters::compare_logits(exporters::forward_cpu(back, x), run.model->forward(x), y);
        EXPECT_EQ(c.max_abs_error, 0.0) << exporters::float_dtype_name(d);
    }
}



TEST_F(ExportTest, DamagedFilesAreRejectedWithThePath) {
    const auto base = export_run("ternary", "tern2").model;
    auto fc1 = [](exporters::PackedModel& m) -> exporters::PackedLayer& { return m.layers[0]; };
    EXPECT_THAT(load_error(damaged(*dir_, "code11", base, [&](auto& m) { fc1(m).packed[0][5] = 0xFF; })),
                HasSubstr("/layers/fc1: invalid packed codes"));
    EXPECT_THAT(load_error(damaged(*dir_, "negscale", base, [&](auto& m) { fc1(m).scale[3] = -1.0f; })),
                HasSubstr("/layers/fc1/scale: value 3"));
    EXPECT_THAT(load_error(damaged(*dir_, "missing", base, [&](auto& m) { m.layers.erase(m.layers.begin() + 1); })),
                HasSubstr("/layers/head: missing"));
    EXPECT_THAT(load_error(damaged(*dir_, "extra", base, [&](auto& m) {
                    m.layers.push_back(m.layers.back());
                    m.layers.back().name = "fc9";
                })),
                HasSubstr("/layers/fc9: not a layer of the recipe's model"));
    EXPECT_THAT(load_error(damaged(*dir_, "shape", base, [&](auto& m) {
                    auto& l = fc1(m);
                    l.out = 35;
                    l.packed[0].resize(35 * 196);
                    l.scale.resize(35);
                    l.scale_rows = 35;
                    l.bias.resize(35);
                })),
                HasSubstr("does not match the recipe's model"));
    EXPECT_THAT(load_error(damaged(*dir_, "recipe", base, [&](auto& m) { m.recipe_yaml = "model: {type: cnn}\n"; })),
                HasSubstr("/@recipe"));
    EXPECT_THAT(load_error(damaged(*dir_, "method", base,
                                   [&](auto& m) { fc1(m).spec.method = WeightQuantMethod::kBinary; })),
                HasSubstr("cannot hold codes of binary"));

    // Root attributes, written through the HDF5 layer.
    {
        auto f = h5::File::create(*dir_ + "/version.h5");
        auto root = f.root();
        root.set_attr("format", exporters::kModelFileFormat);
        root.set_attr("format_version", int64_t{4});
        f.close();
    }
    EXPECT_THAT(load_error(*dir_ + "/version.h5"), HasSubstr("@format_version: this trit reads versions 1 to 3"));
    {
        auto f = h5::File::create(*dir_ + "/foreign.h5");
        f.root().set_attr("format", "something-else");
        f.close();
    }
    EXPECT_THAT(load_error(*dir_ + "/foreign.h5"), HasSubstr("not a trit model file"));

    // Truncated and corrupted files.
    const std::string good = *dir_ + "/good.h5";
    exporters::write_model(good, base);
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t cut : {bytes.size() / 2, size_t{100}, size_t{0}}) {
        trit::testing::write_text(*dir_ + "/cut.h5", bytes.substr(0, cut));
        EXPECT_THAT(load_error(*dir_ + "/cut.h5"), HasSubstr("cut.h5")) << "cut at " << cut;
    }
    std::string flipped = bytes;
    flipped[1] ^= 0x40;  // the HDF5 signature
    trit::testing::write_text(*dir_ + "/flipped.h5", flipped);
    EXPECT_THAT(load_error(*dir_ + "/flipped.h5"), HasSubstr("flipped.h5"));
    EXPECT_THAT(load_error(*dir_ + "/none.h5"), HasSubstr("none.h5"));
}

}  // namespace
}  // namespace trit
