// Runs the built `trit` binary (or any shell command) from tests and captures what it prints.
#pragma once

#include <string>

namespace trit::testing {

struct CommandResult {
    int exit_code = -1;  // the process's exit status, or 128 + signal when killed
    std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr merged into stdout.
CommandResult run_command(const std::string& command);

// Runs the trit binary built alongside the tests with `args` (already shell-quoted as needed).
CommandResult run_trit(const std::string& args);

// Path of a file or directory inside the source tree.
std::string source_path(const std::string& relative);

// Writes `text` to `path`.
void write_text(const std::string& path, const std::string& text);

}  // namespace trit::testing
