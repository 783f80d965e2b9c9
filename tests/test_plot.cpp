// `trit plot` and cli/plot.h: metrics.jsonl parsing, the SVG's elements, the PNG's chunks and CRCs
// (decoded here with zlib), data points landing on their pixels in both formats, and the errors
// for bad input through the executable. Synthetic metrics only; the CLI runs go in parallel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

// cli/ builds only the trit executable, so the renderer under test is compiled in here.
#include "cli/plot.h"
#include "core/error.h"
#include "core/fs.h"
#include "tests/support/process.h"
#include "tests/support/synthetic_idx.h"

namespace trit {
namespace {

using ::testing::HasSubstr;
using trit::testing::run_trit;
using trit::testing::write_text;

// 60 training lines (step 20..1200), an evaluation every 200 steps, stages at 0, 400 and 800,
// and a line of another kind that must be skipped.
std::string staged_metrics(bool language_model) {
    std::ostringstream o;
    o << "{\"step\":0,\"stage\":0,\"levels\":255,\"stage_steps\":400}\n";
    for (int s = 20; s <= 1200; s += 20) {
        if (s == 400)
            o << "{\"step\":400,\"stage\":1,\"levels\":15,\"stage_steps\":400}\n"
              << "{\"step\":400,\"transition_loss_before\":2.1,\"transition_loss_after\":2.4}\n";
        if (s == 800) o << "{\"step\":800,\"stage\":2,\"levels\":3,\"stage_steps\":400}\n";
        o << "{\"step\":" << s << ",\"epoch\":0,\"loss\":" << 1 + 3 * std::exp(-s / 300.0)
          << ",\"lr\":0.001,\"samples_per_s\":1000,\"elapsed_s\":1}\n";
        if (s % 200 == 0) {
            o << "{\"step\":" << s
              << ",\"epoch\":0,\"eval_loss\":" << 1.1 + 3 * std::exp(-s / 300.0)
              << ",\"eval_accuracy\":" << 0.5 + s / 3000.0;
            if (language_model) o << ",\"eval_bits_per_byte\":" << 2 + 3 * std::exp(-s / 300.0);
            o << "}\n";
        }
    }
    return o.str();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream o;
    o << in.rdbuf();
    return o.str();
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1))
        ++n;
    return n;
}

uint32_t be32(const std::string& b, size_t at) {
    return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) |
           (uint32_t(uint8_t(b[at + 2])) << 8) | uint32_t(uint8_t(b[at + 3]));
}

// Checks the signature, every chunk's CRC, IHDR (8-bit RGB) and that the IDAT data inflates to
// height rows of filter byte 0 + RGB; returns the pixels (empty on failure).
cli::Image decode_png(const std::string& png) {
    cli::Image img;
    if (png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0) {
        ADD_FAILURE() << "no PNG signature";
        return img;
    }
    std::string idat, types;
    for (size_t at = 8; at + 12 <= png.size();) {
        const uint32_t len = be32(png, at);
        const std::string type = png.substr(at + 4, 4);
        types += type + " ";
        const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), 4 + len);
        EXPECT_EQ(be32(png, at + 8 + len), crc) << "CRC of chunk " << type;
        if (type == "IHDR") {
            EXPECT_EQ(len, 13u);
            img.width = static_cast<int>(be32(png, at + 8));
            img.height = static_cast<int>(be32(png, at + 12));
            EXPECT_EQ(png.substr(at + 16, 5), std::string("\x08\x02\x00\x00\x00", 5))
                << "8-bit RGB";
        }
        if (type == "IDAT") idat += png.substr(at + 8, len);
        at += 12 + len;
        if (type == "IEND") {
            EXPECT_EQ(at, png.size()) << "bytes after IEND";
        }
    }
    EXPECT_EQ(types.substr(0, 5), "IHDR ");
    EXPECT_EQ(types.substr(types.size() - 5), "IEND ");
    const size_t row = 1 + 3 * static_cast<size_t>(img.width);
    std::string raw(row * img.height + 1, '\0');  // one spare byte: too much data shows as a size
    uLongf raw_size = raw.size();
    EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(&raw[0]), &raw_size,
                         reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
              Z_OK);
    EXPECT_EQ(raw_size, row * img.height);
    if (raw_size != row * img.height) return cli::Image{};
    for (int y = 0; y < img.height; ++y) {
        EXPECT_EQ(raw[y * row], '\0') << "filter byte of row " << y;
        img.rgb.insert(img.rgb.end(), raw.begin() + y * row + 1, raw.begin() + (y + 1) * row);
    }
    return img;
}

class PlotTest : public ::testing::Test {
  protected:
    void SetUp() override { dir_ = trit::testing::make_temp_dir("trit-plot"); }
    void TearDown() override { fs::remove_tree(dir_); }
    std::string run_dir(const std::string& name, const std::string& metrics) {
        const std::string d = dir_ + "/" + name;
        fs::make_dirs(d);
        write_text(d + "/metrics.jsonl", metrics);
        return d;
    }
    std::string dir_;
};

TEST_F(PlotTest, ParsesTrainingEvaluationAndStageLines) {
    const std::string text =
        "{\"step\":0,\"stage\":0,\"levels\":7,\"stage_steps\":50}\n"
        "{\"step\":10,\"epoch\":0,\"loss\":2.5,\"lr\":0.1,\"samples_per_s\":9,\"elapsed_s\":1}\n"
        "\n"
        "{\"step\":20,\"epoch\":0,\"loss\":null,\"lr\":0.1,\"samples_per_s\":9,\"elapsed_s\":2}\n"
        "{\"step\":20,\"epoch\":0,\"eval_loss\":2.25,\"eval_accuracy\":0.875}\n"
        "{\"step\":50,\"transition_loss_before\":2,\"transition_loss_after\":3}\n"
        "{\"step\":50,\"stage\":1,\"levels\":3,\"stage_steps\":50}\n"
        "{\"step\":60,\"epoch\":1,\"loss\":inf,\"lr\":0.1,\"samples_per_s\":9,\"elapsed_s\":3}\n";
    const cli::RunCurves r = cli::parse_metrics(text, "m.jsonl", "run");
    EXPECT_EQ(r.name, "run");
    ASSERT_EQ(r.train_loss.size(), 1u);  // null and inf are skipped
    EXPECT_EQ(r.train_loss[0].x, 10);
    EXPECT_EQ(r.train_loss[0].y, 2.5);
    ASSERT_EQ(r.eval_loss.size(), 1u);
    EXPECT_EQ(r.eval_loss[0].y, 2.25);
    ASSERT_EQ(r.eval_metric.size(), 1u);
    EXPECT_EQ(r.eval_metric[0].y, 87.5);  // percent
    EXPECT_FALSE(r.language_model);
    ASSERT_EQ(r.stages.size(), 2u);
    EXPECT_EQ(r.stages[1].step, 50);
    EXPECT_EQ(r.stages[1].levels, 3);

    const cli::RunCurves lm = cli::parse_metrics(staged_metrics(true), "lm.jsonl", "lm");
    EXPECT_TRUE(lm.language_model);
    EXPECT_EQ(lm.eval_metric.size(), 6u);
    EXPECT_NEAR(lm.eval_metric[0].y, 2 + 3 * std::exp(-200 / 300.0), 1e-4);  // bits per byte

    // Errors name the file and line.
    auto error_of = [](const std::string& t) {
        try {
            cli::parse_metrics(t, "m.jsonl", "run");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_THAT(error_of("{\"step\":1,\"loss\":2}\n{\"loss\":2}\n"),
                HasSubstr("'m.jsonl:2': no \"step\""));
    EXPECT_THAT(error_of("{\"step\":1,\"loss\":2}\nstep 2 loss 3\n"),
                HasSubstr("'m.jsonl:2': expected one JSON"));
    EXPECT_THAT(error_of("\n\n"), HasSubstr("'m.jsonl': empty"));
}

TEST_F(PlotTest, SvgAndPngFromTheCommandLine) {
    const std::string a = run_dir("a_fp32", staged_metrics(false)),
                      b = run_dir("b_ternary", staged_metrics(false));
    const std::string lm = run_dir("lm", staged_metrics(true));
    // All in one shell, in parallel: every start of the executable costs about half a second.
    auto r = trit::testing::run_command(
        "'" TRIT_BINARY "' plot '" + a + "' & '" TRIT_BINARY "' plot '" + a + "' -o '" + dir_ +
        "/one.png' --width 640 --height 480 & '" TRIT_BINARY "' plot '" + a + "' '" + b + "' -o '" +
        dir_ + "/two.svg' & '" TRIT_BINARY "' plot '" + lm + "' --format svg & wait");
    EXPECT_THAT(r.output, HasSubstr("wrote " + a + "/curves.svg (svg, 960x720, 1 run)"));

    const std::string svg = read_file(a + "/curves.svg");
    ASSERT_FALSE(svg.empty()) << r.output;
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
    EXPECT_EQ(count(svg, "<svg"), 1u);
    for (const char* series : {"train-loss", "eval-loss", "eval-metric"})
        EXPECT_EQ(count(svg, std::string("<path class=\"") + series + "\""), 1u) << series;
    // Stages start at 400 (15 levels) and 800 (3 levels); the one at step 0 gets no line.
    EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);
    EXPECT_THAT(svg, HasSubstr(">levels 15</text>"));
    EXPECT_THAT(svg, HasSubstr(">levels 3</text>"));
    EXPECT_THAT(svg, ::testing::Not(HasSubstr("levels 255")));
    EXPECT_THAT(svg, HasSubstr("evaluation accuracy (%)"));
    EXPECT_THAT(svg, HasSubstr(">a_fp32</text>"));  // the title
    EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));

    const std::string png = read_file(dir_ + "/one.png");
    ASSERT_FALSE(png.empty()) << r.output;
    const cli::Image img = decode_png(png);
    EXPECT_EQ(img.width, 640);
    EXPECT_EQ(img.height, 480);

    const std::string two = read_file(dir_ + "/two.svg");
    ASSERT_FALSE(two.empty()) << r.output;
    EXPECT_EQ(count(two, "<path class=\"train-loss\""), 2u);
    EXPECT_THAT(two, HasSubstr(">a_fp32</text>"));  // the legend
    EXPECT_THAT(two, HasSubstr(">b_ternary</text>"));
    EXPECT_THAT(two, HasSubstr("stroke=\"#1f77b4\""));
    EXPECT_THAT(two, HasSubstr("stroke=\"#ff7f0e\""));
    EXPECT_EQ(count(two, "stroke-dasharray"), 2u);  // the same stages in both runs: drawn once

    EXPECT_THAT(read_file(lm + "/curves.svg"), HasSubstr("validation bits per byte"));
}

// Fixed axis ranges, then the pixel of a data point must hold its series' colour, in the PNG
// (decoded) and at the same coordinates in the SVG.
TEST_F(PlotTest, DataPointsLandOnTheirPixels) {
    std::vector<cli::RunCurves> runs(2);
    runs[0].name = "first";
    runs[0].train_loss = {{0, 3}, {500, 2}, {1000, 1}};
    runs[0].eval_metric = {{600, 80}};
    runs[0].stages = {{0, 7}, {700, 3}};
    runs[1].name = "second";
    runs[1].train_loss = {{0, 0.5}, {1000, 0.5}};
    cli::PlotOptions o;
    o.x_min = 0, o.x_max = 1000, o.loss_min = 0, o.loss_max = 4, o.metric_min = 0,
    o.metric_max = 100;
    const cli::ChartLayout L = cli::layout_chart(runs, o);
    EXPECT_EQ(L.loss.x_hi, 1000);
    EXPECT_EQ(L.loss.y_hi, 4);
    EXPECT_EQ(L.metric.y_ticks.front(), 0);
    EXPECT_EQ(L.metric.y_ticks.back(), 100);

    const cli::Image img = decode_png(cli::encode_png(cli::render_image(runs, o)));
    ASSERT_EQ(img.width, 960);
    ASSERT_EQ(img.height, 720);
    auto pixel = [&](const cli::Panel& p, double x, double y) {
        return img.at(static_cast<int>(std::floor(p.px(x))), static_cast<int>(std::floor(p.py(y))));
    };
    auto near = [&](const cli::Panel& p, double x, double y, cli::Rgb c) {  // within one pixel
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
                if (img.at(static_cast<int>(std::floor(p.px(x))) + dx,
                           static_cast<int>(std::floor(p.py(y))) + dy) == c)
                    return true;
        return false;
    };
    const cli::Rgb c0 = cli::series_color(0), c1 = cli::series_color(1), white{255, 255, 255};
    EXPECT_EQ(pixel(L.loss, 500, 2), c0);
    EXPECT_EQ(pixel(L.loss, 1000, 1), c0);
    EXPECT_TRUE(near(L.loss, 250, 2.5, c0));  // on the segment, not only at its ends
    EXPECT_EQ(pixel(L.loss, 250, 0.5), c1);
    EXPECT_EQ(pixel(L.metric, 600, 80), c0);
    EXPECT_EQ(pixel(L.loss, 750, 3.5), white);  // nothing drawn there
    EXPECT_EQ(pixel(L.metric, 300, 30), white);
    // The stage at step 700: a grey dash at the top of both panels.
    for (const cli::Panel* p : {&L.loss, &L.metric}) {
        const cli::Rgb g =
            img.at(static_cast<int>(std::floor(p->px(700))), static_cast<int>(p->top) + 1);
        EXPECT_TRUE(g.r == g.g && g.g == g.b && g.r < 200) << int(g.r);
    }

    const std::string svg = cli::render_svg(runs, o);
    char point[64];
    std::snprintf(point, sizeof point, " L%.1f %.1f", L.loss.px(500) + .5, L.loss.py(2) + .5);
    EXPECT_THAT(svg, HasSubstr(point));
    EXPECT_EQ(count(svg, "stroke-dasharray"), 1u);
    EXPECT_THAT(svg, HasSubstr(">levels 3</text>"));

    // A language model and a classifier do not share the lower panel.
    std::vector<cli::RunCurves> mixed = {cli::parse_metrics(staged_metrics(false), "c", "cls"),
                                         cli::parse_metrics(staged_metrics(true), "l", "gpt")};
    try {
        cli::layout_chart(mixed, cli::PlotOptions{});
        ADD_FAILURE() << "no error for a language model plotted with a classifier";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("'gpt' is a language model"));
        EXPECT_THAT(e.what(), HasSubstr("'cls' a classifier"));
    }
}

TEST_F(PlotTest, BadInputsGiveClearErrorsThroughTheCommandLine) {
    const std::string good = run_dir("good", staged_metrics(false));
    const std::string empty = run_dir("empty", "");
    const std::string nostep =
        run_dir("nostep", "{\"step\":1,\"loss\":2}\n{\"epoch\":0,\"loss\":2}\n");
    const std::string garbage = run_dir("garbage", "step=1 loss=2\n");
    fs::make_dirs(dir_ + "/bare");
    struct Case {
        std::string args;
        std::vector<std::string> expected;
    };
    const std::vector<Case> cases = {
        {"'" + dir_ + "/missing'", {dir_ + "/missing", "no such directory"}},
        {"'" + dir_ + "/bare'", {dir_ + "/bare/metrics.jsonl", "no such file"}},
        {"'" + empty + "'", {empty + "/metrics.jsonl", "empty"}},
        {"'" + nostep + "'", {nostep + "/metrics.jsonl:2", "\"step\""}},
        {"'" + garbage + "'", {garbage + "/metrics.jsonl:1", "JSON object"}},
        {"'" + good + "' --format jpg", {"--format 'jpg'", "svg or png"}},
        {"'" + good + "' --format svg -o '" + dir_ + "/x.png'",
         {dir_ + "/x.png", "contradicts --format svg"}},
        {"'" + good + "' --width 100", {"--width 100", "200 to 8000"}},
        {"'" + good + "' --height 9000", {"--height 9000", "200 to 8000"}},
        {"'" + good + "' '" + good + "'", {"2 runs needs -o"}},
    };
    // All at once (each start of the executable costs about half a second).
    std::string script;
    for (size_t i = 0; i < cases.size(); ++i)
        script += "('" TRIT_BINARY "' plot " + cases[i].args + " > '" + dir_ + "/case" +
                  std::to_string(i) + "' 2>&1; echo \"exit=$?\" >> '" + dir_ + "/case" +
                  std::to_string(i) + "') & ";
    trit::testing::run_command(script + "wait");
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::string out = read_file(dir_ + "/case" + std::to_string(i));
        EXPECT_THAT(out, HasSubstr("trit: error")) << cases[i].args << "\n" << out;
        EXPECT_THAT(out, HasSubstr("exit=1")) << cases[i].args;
        for (const auto& e : cases[i].expected)
            EXPECT_THAT(out, HasSubstr(e)) << cases[i].args;
    }
    EXPECT_FALSE(fs::exists(dir_ + "/x.png"));
    EXPECT_FALSE(fs::exists(good + "/curves.svg"));
}

}  // namespace
}  // namespace trit
