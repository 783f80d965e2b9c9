// Test helpers for model-file errors: write a valid PackedModel with one thing changed, and read a
// file back for its error. Header-only: only tests that link the exporters include it.
#pragma once

#include <functional>
#include <string>

#include "exporters/model_file.h"
#include "tests/support/error_of.h"

namespace trit::testing {

// A valid file with one thing changed in the PackedModel before writing; returns its path.
inline std::string damaged(const std::string& dir, const std::string& name, exporters::PackedModel m,
                           const std::function<void(exporters::PackedModel&)>& change) {
    change(m);
    const std::string path = dir + "/" + name + ".h5";
    exporters::write_model(path, m);
    return path;
}

// The error reading `path` gives, or "" when it loads.
inline std::string load_error(const std::string& path) {
    return error_of([&] { exporters::read_model(path); });
}

}  // namespace trit::testing
