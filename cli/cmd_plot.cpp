// `trit plot RUN_DIR...`: training curves of one or more runs (their metrics.jsonl) as an SVG or
// PNG image: loss above, evaluation accuracy or bits per byte below, dashed lines where a stage
// of a multi-stage schedule starts. One run writes RUN_DIR/curves.svg unless -o says otherwise.
#include <algorithm>
#include <cctype>
#include <iostream>

#include "cli/commands.h"
#include "cli/plot.h"
#include "core/error.h"
#include "core/fs.h"

namespace trit::cli {
namespace {

// "svg" / "png" from a file name's extension, or "" for any other.
std::string format_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    const auto dot = path.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
    std::string ext = path.substr(dot + 1);
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return ext == "svg" || ext == "png" ? ext : "";
}

}  // namespace

Command add_plot(CLI::App& app) {
    struct Args {
        std::vector<std::string> runs;
        std::string out, format;
        int width = 960, height = 720;
    };
    auto a = std::make_shared<Args>();
    CLI::App* sub =
        app.add_subcommand("plot", "Draw training curves of runs (metrics.jsonl) as SVG or PNG");
    sub->add_option("runs", a->runs, "Run directories holding metrics.jsonl")->required();
    sub->add_option("-o,--out", a->out,
                    "Output file, .svg or .png (default for one run: RUN_DIR/curves.svg or .png)");
    sub->add_option("--format", a->format,
                    "svg or png (default: from --out's extension, else svg)");
    sub->add_option("--width", a->width, "Image width in pixels, 200 to 8000")
        ->capture_default_str();
    sub->add_option("--height", a->height, "Image height in pixels, 200 to 8000")
        ->capture_default_str();
    sub->footer(
        "Examples:\n  trit plot runs/fashion_mnist_ternary\n"
        "  trit plot runs/fashion_mnist_fp32 runs/fashion_mnist_ternary -o curves.png");
    return {
        sub, [a]() {
            TRIT_CHECK(a->format.empty() || a->format == "svg" || a->format == "png", "--format '",
                       a->format, "': expected svg or png");
            TRIT_CHECK(a->width >= kPlotMinSize && a->width <= kPlotMaxSize, "--width ", a->width,
                       ": expected ", kPlotMinSize, " to ", kPlotMaxSize, " pixels");
            TRIT_CHECK(a->height >= kPlotMinSize && a->height <= kPlotMaxSize, "--height ",
                       a->height, ": expected ", kPlotMinSize, " to ", kPlotMaxSize, " pixels");
            std::string format = a->format, out = a->out;
            if (!out.empty()) {
                const std::string from_name = format_of(out);
                if (format.empty()) {
                    TRIT_CHECK(
                        !from_name.empty(), "-o '", out,
                        "': cannot tell the format from the extension; expected .svg or .png, or "
                        "give --format svg|png");
                    format = from_name;
                }
                TRIT_CHECK(from_name.empty() || from_name == format, "-o '", out,
                           "': the extension .", from_name, " contradicts --format ", format);
            } else {
                TRIT_CHECK(
                    a->runs.size() == 1, "plotting ", a->runs.size(),
                    " runs needs -o FILE (.svg or .png): there is no single run directory to write "
                    "into");
                if (format.empty()) format = "svg";
                out = fs::join(a->runs[0], "curves." + format);
            }

            std::vector<RunCurves> runs;
            for (const auto& dir : a->runs)
                runs.push_back(read_run_curves(dir));
            PlotOptions options;
            options.width = a->width;
            options.height = a->height;
            for (size_t i = 0; i < runs.size(); ++i)
                options.title += (i ? ", " : "") + runs[i].name;
            if (runs.size() > 3) options.title = std::to_string(runs.size()) + " runs";
            const std::string bytes = format == "png" ? encode_png(render_image(runs, options))
                                                      : render_svg(runs, options);
            fs::write_file_atomic(out, bytes);
            std::cout << "wrote " << out << " (" << format << ", " << a->width << "x" << a->height
                      << ", " << runs.size() << (runs.size() == 1 ? " run" : " runs") << ")\n";
            return 0;
        }};
}

}  // namespace trit::cli
