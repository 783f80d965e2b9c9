// Metrics as JSON lines (one object per line, numbers only) in the run directory, and the
// progress display: a bar with rate and ETA on a terminal, plain lines every N steps otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace trit::trainers {

using Fields = std::vector<std::pair<std::string, double>>;

class MetricsLog {
public:
    // Opens `path` for appending. When resuming, lines with "step" > keep_until_step (written by
    // the interrupted run after its last checkpoint) are dropped first, and so are lines for which
    // `written_after_checkpoint` is true (lines of step keep_until_step written after its
    // checkpoint, which the resumed run writes again).
    MetricsLog(const std::string& path, int64_t keep_until_step, bool resume,
               const std::function<bool(const std::string& line)>& written_after_checkpoint = {});
    void write(const Fields& fields);

private:
    std::ofstream out_;
};

// Formats one JSON object from numeric fields (integers without a fraction).
std::string json_line(const Fields& fields);
// The number under "key" in a line written by json_line (null reads as NaN); `what` names the
// source in the error when the key is missing.
double json_number(const std::string& line, const std::string& key, const std::string& what);
// Whether a line written by json_line has an entry "key".
bool json_has(const std::string& line, const std::string& key);

class Progress {
public:
    // items_per_step: what one step trains on, counted in `item_name` ("samples", "tokens").
    Progress(int64_t total_steps, int64_t first_step, int64_t items_per_step, std::string item_name,
             int64_t log_every, bool enabled);
    // Called after every optimizer step.
    void step(int64_t step, double loss, double lr);
    // Text appended to the progress line from now on (e.g. the 2:4 masks' figures); "" = none.
    void set_note(std::string note) { note_ = std::move(note); }
    // A line of its own (clears the bar first).
    void message(const std::string& line);
    void finish();
    double items_per_second() const;

private:
    void draw(int64_t step, bool final);
    int64_t total_, first_, batch_, log_every_;
    std::string item_name_;
    std::string note_;
    bool enabled_, tty_;
    double loss_ = 0, lr_ = 0;
    int64_t last_step_ = 0;
    std::chrono::steady_clock::time_point start_, last_step_time_, last_render_;
};

}  // namespace trit::trainers
