// Training curves of run directories as an image: the curves read from metrics.jsonl, a two-panel
// layout (loss vs step above; eval accuracy in %, or validation bits per byte, below), rendered to
// SVG text or to an RGB raster encoded as PNG (zlib, an embedded 5x7 font). No other dependency.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace trit::cli {

struct Point {
    double x, y;
};

// A stage of a multi-stage schedule: from `step` on, activations have `levels` levels.
struct StageMark {
    double step;
    int64_t levels;
};

// One run's curves; non-finite values are already dropped.
struct RunCurves {
    std::string name;                // legend label (the run directory's basename)
    std::vector<Point> train_loss;   // (step, loss) from the training lines
    std::vector<Point> eval_loss;    // (step, eval_loss)
    std::vector<Point> eval_metric;  // (step, accuracy in %) or (step, bits per byte)
    bool language_model = false;     // eval_metric holds eval_bits_per_byte
    std::vector<StageMark> stages;   // in file order
};

// The curves in metrics.jsonl text; `what` names the source in errors ("dir/metrics.jsonl"), which
// give the line number. Lines that are neither training, evaluation nor stage lines are skipped;
// a line that is not a {...} object or has no "step" throws trit::Error.
RunCurves parse_metrics(const std::string& text, const std::string& what, const std::string& name);
// parse_metrics of RUN_DIR/metrics.jsonl, named after the directory; throws trit::Error for a
// missing directory or file, an empty file, or a bad line.
RunCurves read_run_curves(const std::string& run_dir);

constexpr int kPlotMinSize = 200;  // pixels, either side
constexpr int kPlotMaxSize = 8000;

struct PlotOptions {
    int width = 960, height = 720;  // pixels, each in [kPlotMinSize, kPlotMaxSize]
    std::string title;              // empty: none
    // Shown data ranges; NaN: from the data, widened to whole ticks.
    double x_min = std::numeric_limits<double>::quiet_NaN();
    double x_max = std::numeric_limits<double>::quiet_NaN();
    double loss_min = std::numeric_limits<double>::quiet_NaN();
    double loss_max = std::numeric_limits<double>::quiet_NaN();
    double metric_min = std::numeric_limits<double>::quiet_NaN();
    double metric_max = std::numeric_limits<double>::quiet_NaN();
};

// A plot area: its pixel rectangle and the data range it shows (x: step).
struct Panel {
    double left = 0, top = 0, right = 1, bottom = 1;  // pixels, y down
    double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;    // data
    std::vector<double> x_ticks, y_ticks;
    std::string label;  // shown above the panel
    double px(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); }
    double py(double y) const { return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top); }
};

// Where everything goes; the SVG and the raster share it, so a data point lands on the same pixel.
struct ChartLayout {
    int width = 0, height = 0;
    int text_scale = 1;  // pixels per font dot; a character cell is 6x10 dots
    Panel loss, metric;
    double title_y = 0, legend_y = 0, x_label_y = 0;  // tops of those text lines, pixels
};

// Throws trit::Error when the size is out of range, runs mix language models and classifiers, or
// a given range is empty.
ChartLayout layout_chart(const std::vector<RunCurves>& runs, const PlotOptions& options);

struct Rgb {
    uint8_t r, g, b;
    bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};
// The colour of run i (ten distinct colours, then repeating).
Rgb series_color(size_t i);

struct Image {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb;  // (height, width, 3), rows top to bottom
    Rgb at(int x, int y) const;
};

std::string render_svg(const std::vector<RunCurves>& runs, const PlotOptions& options);
Image render_image(const std::vector<RunCurves>& runs, const PlotOptions& options);
// An 8-bit RGB PNG: IHDR, one IDAT (filter 0 on every row), IEND.
std::string encode_png(const Image& image);

// "1-2-5" ticks in [lo, hi], about `target` intervals; with `widen`, lo and hi first move out to
// multiples of the tick step (what layout_chart does to ranges taken from the data).
std::vector<double> nice_ticks(double& lo, double& hi, int target, bool widen);

}  // namespace trit::cli
