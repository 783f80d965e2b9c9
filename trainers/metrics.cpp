// Metrics log and progress display: see metrics.h.
#include "trainers/metrics.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace trit::trainers {

std::string json_line(const Fields& fields) {
    std::ostringstream os;
    os << '{';
    for (size_t i = 0; i < fields.size(); ++i) {
        const double v = fields[i].second;
        os << (i ? "," : "") << '"' << fields[i].first << "\":";
        if (!std::isfinite(v)) {
            os << "null";  // JSON has no NaN/Inf
        } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
            os << static_cast<int64_t>(v);
        } else {
            os << std::setprecision(9) << v;
        }
    }
    os << '}';
    return os.str();
}

double json_number(const std::string& line, const std::string& key, const std::string& what) {
    const std::string k = "\"" + key + "\":";
    const auto p = line.find(k);
    TRIT_CHECK(p != std::string::npos, "'", what, "': no \"", key, "\" entry");
    const char* s = line.c_str() + p + k.size();
    if (std::string(s, 4) == "null") return std::nan("");
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    TRIT_CHECK(end != s, "'", what, "': \"", key, "\" is not a number");
    return v;
}

bool json_has(const std::string& line, const std::string& key) {
    return line.find("\"" + key + "\":") != std::string::npos;
}

MetricsLog::MetricsLog(const std::string& path, int64_t keep_until_step, bool resume,
                       const std::function<bool(const std::string&)>& written_after_checkpoint) {
    if (resume) {
        std::ifstream in(path);
        std::vector<std::string> kept;
        int line_no = 0;
        for (std::string line; std::getline(in, line);) {
            ++line_no;
            const double step = json_number(line, "step", path + ":" + std::to_string(line_no));
            if (step > static_cast<double>(keep_until_step)) continue;
            if (written_after_checkpoint && written_after_checkpoint(line)) continue;
            kept.push_back(line);
        }
        in.close();
        std::ofstream rewrite(path, std::ios::trunc);
        for (const auto& l : kept) rewrite << l << '\n';
    }
    out_.open(path, resume ? std::ios::app : std::ios::trunc);
    TRIT_CHECK(out_.good(), "cannot write metrics file '", path, "'");
}

void MetricsLog::write(const Fields& fields) {
    out_ << json_line(fields) << '\n';
    out_.flush();
}

Progress::Progress(int64_t total, int64_t first, int64_t batch, std::string item_name,
                   int64_t log_every, bool enabled)
    : total_(total), first_(first), batch_(batch), log_every_(log_every),
      item_name_(std::move(item_name)), enabled_(enabled),
      tty_(enabled && ::isatty(STDERR_FILENO)), last_step_(first),
      start_(std::chrono::steady_clock::now()), last_step_time_(start_), last_render_(start_) {}

double Progress::items_per_second() const {
    const double s = std::chrono::duration<double>(last_step_time_ - start_).count();
    return s > 0 ? static_cast<double>((last_step_ - first_) * batch_) / s : 0.0;
}

void Progress::step(int64_t step, double loss, double lr) {
    loss_ = loss;
    lr_ = lr;
    last_step_ = step;
    last_step_time_ = std::chrono::steady_clock::now();
    if (!enabled_) return;
    // A terminal gets at most 10 redraws a second; a log file a line every log_every steps.
    const bool due = tty_ ? std::chrono::duration<double>(last_step_time_ - last_render_).count() >= 0.1
                          : step % log_every_ == 0;
    if (due || step == total_) {
        last_render_ = last_step_time_;
        draw(step, false);
    }
}

void Progress::draw(int64_t step, bool final) {
    const double rate = items_per_second();
    const double steps_per_s = rate / static_cast<double>(batch_);
    const double eta = steps_per_s > 0 ? static_cast<double>(total_ - step) / steps_per_s : 0.0;
    std::ostringstream os;
    if (tty_) {
        const int width = 30;
        const int filled = static_cast<int>(width * step / std::max<int64_t>(1, total_));
        os << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] ";
    }
    os << "step " << step << "/" << total_ << "  loss " << std::fixed << std::setprecision(4)
       << loss_ << "  lr " << std::scientific << std::setprecision(2) << lr_ << std::fixed
       << std::setprecision(0) << "  " << rate << " " << item_name_ << "/s  ETA " << eta << " s";
    if (!note_.empty()) os << "  " << note_;
    if (tty_) {
        std::cerr << os.str() << "\x1b[K" << (final ? "\n" : "") << std::flush;
    } else {
        std::cerr << os.str() << '\n';
    }
}

void Progress::message(const std::string& line) {
    if (!enabled_) return;
    if (tty_) std::cerr << "\r\x1b[K";
    std::cerr << line << '\n';
    if (tty_ && last_step_ > first_) draw(last_step_, false);  // no bar before the first step
}

void Progress::finish() {
    if (tty_) draw(last_step_, true);
}

}  // namespace trit::trainers
