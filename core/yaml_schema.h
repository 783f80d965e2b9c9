// Strict YAML reading for recipes: every read names its key path; an unknown key, a wrong type or
// an out-of-range value throws trit::Error with "<source>:<line>: <key.path>: expected ..., got ...".
// Values that came from `--set key.path=value` are reported as such instead of a line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace trit::yaml {

// Where values come from: the file name and the key paths that `--set` replaced.
struct Source {
    std::string name;                // file path or "<string>"
    std::set<std::string> overridden;  // key paths given with --set
};

// A YAML mapping being read. Reads mark keys as known; finish() rejects the rest.
class Object {
public:
    Object(YAML::Node node, std::string path, std::shared_ptr<const Source> source);

    bool has(const std::string& key) const;
    // Optional scalar/sequence reads; `out` keeps its default when the key is absent.
    void read(const std::string& key, std::string& out);
    void read(const std::string& key, bool& out);
    void read(const std::string& key, int64_t& out, int64_t min, int64_t max);
    void read(const std::string& key, uint64_t& out);
    void read(const std::string& key, double& out, double min, double max, bool min_open = false);
    void read(const std::string& key, std::vector<std::string>& out);
    void read(const std::string& key, std::vector<int64_t>& out, int64_t min, int64_t max);
    // A string that must be one of `allowed` (errors list them).
    void read_choice(const std::string& key, std::string& out, const std::vector<std::string>& allowed);
    // A nested mapping (absent or null: an empty object).
    Object object(const std::string& key);
    // Rejects keys that no read() asked for.
    void finish() const;

    // "<file>:<line>: <path>" (or "--set <path>") for messages about `key`.
    std::string where(const std::string& key) const;
    std::string key_path(const std::string& key) const;
    [[noreturn]] void fail(const std::string& key, const std::string& message) const;

private:
    // The key's scalar node, or nullopt when the key is absent or null.
    std::optional<YAML::Node> scalar(const std::string& key, const char* expected);
    YAML::Node node_;
    std::string path_;
    std::shared_ptr<const Source> source_;
    std::set<std::string> known_;
};

// Applies `key.path=value` (value parsed as YAML, so lists like [1,2] work) to `root`, creating
// mappings on the way. Returns the key path. Throws when the text has no '=' or walks into a scalar.
std::string apply_override(YAML::Node& root, const std::string& assignment);

// The YAML text of a scalar or flow node, for messages ("got '...'").
std::string describe(const YAML::Node& node);

}  // namespace trit::yaml
