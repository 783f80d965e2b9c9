// Strict YAML reading: see yaml_schema.h.
#include "core/yaml_schema.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace trit::yaml {

std::string describe(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "nothing";
    if (node.IsScalar()) return "'" + node.Scalar() + "'";
    YAML::Emitter out;
    out << YAML::Flow << node;
    return std::string(node.IsSequence() ? "a list " : "a mapping ") + out.c_str();
}

Object::Object(YAML::Node node, std::string path, std::shared_ptr<const Source> source)
    : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
        std::string at = path_.empty() ? std::string("the recipe") : path_;
        std::string line = node_.Mark().is_null() ? std::string()
                                                  : ":" + std::to_string(node_.Mark().line + 1);
        TRIT_FAIL(source_->name, line, ": ", at, ": expected a mapping of keys, got ",
                  describe(node_));
    }
    // yaml-cpp keeps the first of two equal keys without a word: refuse them instead.
    if (node_.IsMap()) {
        std::map<std::string, int> first_line;
        for (const auto& kv : node_) {
            const std::string key = kv.first.Scalar();
            const int line = kv.first.Mark().is_null() ? 0 : kv.first.Mark().line + 1;
            auto [it, fresh] = first_line.emplace(key, line);
            if (!fresh)
                TRIT_FAIL(source_->name, ":", line, ": ", key_path(key), ": duplicate key (first at line ",
                          it->second, ")");
        }
    }
}

std::string Object::key_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
}

std::string Object::where(const std::string& key) const {
    const std::string kp = key_path(key);
    for (const auto& o : source_->overridden) {
        // The value, or a mapping above it, came from --set.
        if (kp == o || kp.rfind(o + ".", 0) == 0) return "--set " + kp;
    }
    YAML::Node n = (node_.IsMap() && node_[key]) ? node_[key] : node_;
    std::string line = n.Mark().is_null() ? std::string() : ":" + std::to_string(n.Mark().line + 1);
    return source_->name + line + ": " + kp;
}

void Object::fail(const std::string& key, const std::string& message) const {
    TRIT_FAIL(where(key), ": ", message);
}

bool Object::has(const std::string& key) const {
    return node_.IsMap() && node_[key] && !node_[key].IsNull();
}

std::optional<YAML::Node> Object::scalar(const std::string& key, const char* expected) {
    known_.insert(key);
    if (!has(key)) return std::nullopt;
    YAML::Node n = node_[key];
    if (!n.IsScalar()) fail(key, std::string("expected ") + expected + ", got " + describe(n));
    return n;
}

void Object::read(const std::string& key, std::string& out) {
    auto found = scalar(key, "a string");
    if (found) out = found->Scalar();
}

void Object::read(const std::string& key, bool& out) {
    auto found = scalar(key, "true or false");
    if (!found) return;
    const YAML::Node& n = *found;
    bool v = false;
    if (!YAML::convert<bool>::decode(n, v))
        fail(key, "expected true or false, got " + describe(n));
    out = v;
}

void Object::read(const std::string& key, int64_t& out, int64_t min, int64_t max) {
    std::ostringstream expected;
    expected << "an integer in [" << min << ", " << max << "]";
    auto found = scalar(key, expected.str().c_str());
    if (!found) return;
    const YAML::Node& n = *found;
    int64_t v = 0;
    if (!YAML::convert<int64_t>::decode(n, v)) {
        // Accept integral floats such as 1e4 (people write step counts that way).
        double d = 0;
        if (!YAML::convert<double>::decode(n, d) || d != std::floor(d) || std::fabs(d) > 9e15)
            fail(key, "expected " + expected.str() + ", got " + describe(n));
        v = static_cast<int64_t>(d);
    }
    if (v < min || v > max) fail(key, "expected " + expected.str() + ", got " + describe(n));
    out = v;
}

void Object::read(const std::string& key, uint64_t& out) {
    auto found = scalar(key, "a non-negative integer");
    if (!found) return;
    const YAML::Node& n = *found;
    uint64_t v = 0;
    if (n.Scalar().find('-') != std::string::npos || !YAML::convert<uint64_t>::decode(n, v))
        fail(key, "expected a non-negative integer, got " + describe(n));
    out = v;
}

void Object::read(const std::string& key, double& out, double min, double max, bool min_open) {
    std::ostringstream expected;
    expected << "a number in " << (min_open ? "(" : "[") << min << ", " << max << "]";
    auto found = scalar(key, expected.str().c_str());
    if (!found) return;
    const YAML::Node& n = *found;
    double v = 0;
    if (!YAML::convert<double>::decode(n, v) || !std::isfinite(v) || v < min || v > max ||
        (min_open && v == min))
        fail(key, "expected " + expected.str() + ", got " + describe(n));
    out = v;
}

void Object::read(const std::string& key, std::vector<std::string>& out) {
    known_.insert(key);
    if (!has(key)) return;
    YAML::Node n = node_[key];
    if (n.IsScalar()) {  // a single name is a list of one
        out = {n.Scalar()};
        return;
    }
    if (!n.IsSequence()) fail(key, "expected a list of strings, got " + describe(n));
    std::vector<std::string> v;
    for (const auto& item : n) {
        if (!item.IsScalar()) fail(key, "expected a list of strings, got " + describe(n));
        v.push_back(item.Scalar());
    }
    out = std::move(v);
}

void Object::read(const std::string& key, std::vector<int64_t>& out, int64_t min, int64_t max) {
    known_.insert(key);
    if (!has(key)) return;
    YAML::Node n = node_[key];
    std::ostringstream expected;
    expected << "a list of integers in [" << min << ", " << max << "]";
    if (!n.IsSequence()) fail(key, "expected " + expected.str() + ", got " + describe(n));
    std::vector<int64_t> v;
    for (const auto& item : n) {
        int64_t x = 0;
        if (!item.IsScalar() || !YAML::convert<int64_t>::decode(item, x) || x < min || x > max)
            fail(key, "expected " + expected.str() + ", got " + describe(n));
        v.push_back(x);
    }
    out = std::move(v);
}

void Object::read_choice(const std::string& key, std::string& out,
                         const std::vector<std::string>& allowed) {
    std::string v = out;
    read(key, v);
    for (const auto& a : allowed)
        if (a == v) {
            out = v;
            return;
        }
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(key, "expected one of {" + list + "}, got '" + v + "'");
}

Object Object::object(const std::string& key) {
    known_.insert(key);
    YAML::Node n = has(key) ? node_[key] : YAML::Node();
    if (n.IsDefined() && !n.IsNull() && !n.IsMap())
        fail(key, "expected a mapping of keys, got " + describe(n));
    return Object(n, key_path(key), source_);
}

void Object::finish() const {
    if (!node_.IsMap()) return;
    for (const auto& kv : node_) {
        const std::string key = kv.first.Scalar();
        if (known_.count(key)) continue;
        std::string list;
        for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
        fail(key, "unknown key '" + key + "'" + (path_.empty() ? "" : " in '" + path_ + "'") +
                      "; known keys: " + list);
    }
}

std::string apply_override(YAML::Node& root, const std::string& assignment) {
    const auto eq = assignment.find('=');
    TRIT_CHECK(eq != std::string::npos && eq > 0,
               "--set '", assignment, "': expected key.path=value (e.g. --set optimizer.lr=3e-4)");
    const std::string path = assignment.substr(0, eq);
    const std::string text = assignment.substr(eq + 1);
    std::vector<std::string> keys;
    std::stringstream ss(path);
    for (std::string k; std::getline(ss, k, '.');) {
        TRIT_CHECK(!k.empty(), "--set '", assignment, "': empty key in path '", path, "'");
        keys.push_back(k);
    }
    YAML::Node value;
    try {
        value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        TRIT_FAIL("--set '", assignment, "': cannot parse the value as YAML: ", e.msg);
    }
    if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    YAML::Node cur = root;
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
        YAML::Node next = cur[keys[i]];
        if (!next || next.IsNull()) cur[keys[i]] = YAML::Node(YAML::NodeType::Map);
        TRIT_CHECK(cur[keys[i]].IsMap(), "--set '", assignment, "': '", keys[i],
                   "' holds a value, not a mapping, so '", path, "' cannot be set");
        cur.reset(cur[keys[i]]);  // reset, not '=': assignment would overwrite the node's content
    }
    TRIT_CHECK(cur.IsMap(), "--set '", assignment, "': the parent of '", keys.back(),
               "' is not a mapping");
    cur[keys.back()] = value;
    return path;
}

}  // namespace trit::yaml
