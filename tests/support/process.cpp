// Command runner for end-to-end tests: see process.h.
#include "tests/support/process.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace trit::testing {

CommandResult run_command(const std::string& command) {
    CommandResult r;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) throw std::runtime_error("popen failed for: " + command);
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
    return r;
}

CommandResult run_trit(const std::string& args) {
    return run_command(std::string("'") + TRIT_BINARY + "' " + args);
}

std::string source_path(const std::string& relative) {
    return std::string(TRIT_SOURCE_DIR) + "/" + relative;
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << text;
}

}  // namespace trit::testing
