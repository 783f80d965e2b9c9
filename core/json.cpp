// Strict JSON reader: see json.h. Recursive descent over the bytes; every error names the byte
// offset, line and column, what was expected and what was found.
#include "core/json.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <system_error>
#include <unordered_map>

#include "core/error.h"

namespace trit::json {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], 0 when it is not one (RFC 3629:
// no overlong forms, no surrogates D800..DFFF, nothing past U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
        if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;  // overlong below U+10000
        if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    return n;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string hex_byte(unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02X", c);
    return buf;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

}  // namespace

const char* type_name(Type type) {
    switch (type) {
        case Type::Null:
            return "null";
        case Type::Bool:
            return "a boolean";
        case Type::Number:
            return "a number";
        case Type::String:
            return "a string";
        case Type::Array:
            return "an array";
        case Type::Object:
            return "an object";
    }
    return "?";
}

bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_sequence(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string quote(std::string_view s) {
    TRIT_CHECK(is_valid_utf8(s),
               "cannot write a JSON string: expected valid UTF-8, got invalid bytes");
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04X", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    return out + "\"";
}

// ---- Value accessors ----

std::string Value::describe() const {
    switch (type_) {
        case Type::Null:
            return "null";
        case Type::Bool:
            return bool_ ? "true" : "false";
        case Type::Number:
            return text_;
        case Type::String:
            return text_.size() <= 40 ? quote(text_)
                                      : "a string of " + std::to_string(text_.size()) + " bytes";
        case Type::Array:
            return "an array of " + std::to_string(array_.size());
        case Type::Object:
            return "an object";
    }
    return "?";
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* expected) {
    TRIT_FAIL("JSON value at byte ", v.offset(), ": expected ", expected, ", got ", v.describe());
}
}  // namespace

bool Value::as_bool() const {
    if (type_ != Type::Bool) wrong_kind(*this, "a boolean");
    return bool_;
}

double Value::as_double() const {
    if (type_ != Type::Number) wrong_kind(*this, "a number");
    return number_;
}

int64_t Value::as_int64() const {
    if (!is_integer() || !fits_int64_) wrong_kind(*this, "an integer in [-2^63, 2^63 - 1]");
    return int_;
}

uint64_t Value::as_uint64() const {
    if (!is_integer() || !fits_uint64_) wrong_kind(*this, "an integer in [0, 2^64 - 1]");
    return uint_;
}

const std::string& Value::as_string() const {
    if (type_ != Type::String) wrong_kind(*this, "a string");
    return text_;
}

const Value::Array& Value::as_array() const {
    if (type_ != Type::Array) wrong_kind(*this, "an array");
    return array_;
}

const Value::Object& Value::as_object() const {
    if (type_ != Type::Object) wrong_kind(*this, "an object");
    return object_;
}

const Value* Value::find(std::string_view key) const {
    for (const Member& m : as_object())
        if (m.key == key) return &m.value;
    return nullptr;
}

const Value& Value::at(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) TRIT_FAIL("JSON object at byte ", offset_, ": missing key ", quote(key));
    return *v;
}

// ---- Parser ----

class Parser {
  public:
    Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

    Value document() {
        skip_ws();
        Value v = value(/*depth=*/0);
        skip_ws();
        if (pos_ != s_.size()) fail(pos_, "the end of the document after the top-level value");
        return v;
    }

  private:
    [[noreturn]] void fail(size_t at, const std::string& expected) {
        fail(at, expected, found(at));
    }

    [[noreturn]] void fail(size_t at, const std::string& expected, const std::string& got) {
        size_t line = 1, line_start = 0;
        for (size_t i = 0; i < at && i < s_.size(); ++i) {
            if (s_[i] == '\n') {
                ++line;
                line_start = i + 1;
            }
        }
        TRIT_FAIL(source_, ": byte ", at, " (line ", line, ", column ", at - line_start + 1,
                  "): expected ", expected, ", got ", got);
    }

    // What is at byte `at`, for "got ...".
    std::string found(size_t at) const {
        if (at >= s_.size()) return "the end of the input";
        const auto c = static_cast<unsigned char>(s_[at]);
        if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
        return "byte " + hex_byte(c);
    }

    void skip_ws() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }

    bool at_char(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

    Value value(int depth) {
        if (pos_ >= s_.size()) fail(pos_, "a JSON value");
        const char c = s_[pos_];
        switch (c) {
            case '{':
                return object(depth + 1);
            case '[':
                return array(depth + 1);
            case '"': {
                Value v;
                v.type_ = Type::String;
                v.offset_ = pos_;
                v.text_ = string();
                return v;
            }
            case 't':
                return literal("true", Type::Bool, true);
            case 'f':
                return literal("false", Type::Bool, false);
            case 'n':
                return literal("null", Type::Null, false);
            default:
                if (c == '-' || is_digit(c)) return number();
                fail(pos_, "a JSON value");
        }
    }

    Value literal(std::string_view word, Type type, bool b) {
        const size_t start = pos_;
        for (size_t i = 0; i < word.size(); ++i)
            if (pos_ + i >= s_.size() || s_[pos_ + i] != word[i])
                fail(pos_ + i, "'" + std::string(word) + "'");
        pos_ += word.size();
        Value v;
        v.type_ = type;
        v.bool_ = b;
        v.offset_ = start;
        return v;
    }

    void enter(size_t at, int depth) {
        if (depth > kMaxDepth)
            fail(at, "at most " + std::to_string(kMaxDepth) + " levels of nesting",
                 "a deeper array or object");
    }

    Value array(int depth) {
        enter(pos_, depth);
        Value v;
        v.type_ = Type::Array;
        v.offset_ = pos_++;
        skip_ws();
        if (at_char(']')) {
            ++pos_;
            return v;
        }
        for (;;) {
            skip_ws();
            v.array_.push_back(value(depth));
            skip_ws();
            if (at_char(',')) {
                ++pos_;
            } else if (at_char(']')) {
                ++pos_;
                return v;
            } else {
                fail(pos_, "',' or ']' in an array");
            }
        }
    }

    Value object(int depth) {
        enter(pos_, depth);
        Value v;
        v.type_ = Type::Object;
        v.offset_ = pos_++;
        std::unordered_map<std::string, size_t> first;  // key -> its byte offset
        skip_ws();
        if (at_char('}')) {
            ++pos_;
            return v;
        }
        for (;;) {
            skip_ws();
            if (!at_char('"')) fail(pos_, "a string key in an object");
            const size_t key_at = pos_;
            std::string key = string();
            const auto [it, fresh] = first.emplace(key, key_at);
            if (!fresh)
                fail(key_at, "unique keys in an object",
                     quote(key) + " again (first at byte " + std::to_string(it->second) + ")");
            skip_ws();
            if (!at_char(':')) fail(pos_, "':' after an object key");
            ++pos_;
            skip_ws();
            Value member = value(depth);
            v.object_.push_back(Member{std::move(key), std::move(member)});
            skip_ws();
            if (at_char(',')) {
                ++pos_;
            } else if (at_char('}')) {
                ++pos_;
                return v;
            } else {
                fail(pos_, "',' or '}' in an object");
            }
        }
    }

    uint32_t hex4(size_t at) {
        uint32_t cp = 0;
        for (size_t i = 0; i < 4; ++i) {
            if (at + i >= s_.size()) fail(at + i, "4 hex digits after \\u");
            const char c = s_[at + i];
            uint32_t d;
            if (is_digit(c)) {
                d = static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                d = static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                d = static_cast<uint32_t>(c - 'A' + 10);
            } else {
                fail(at + i, "4 hex digits after \\u");
            }
            cp = cp * 16 + d;
        }
        return cp;
    }

    // A string starting at the '"' at pos_; returns its decoded UTF-8.
    std::string string() {
        ++pos_;
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail(pos_, "'\"' to close the string");
            const auto c = static_cast<unsigned char>(s_[pos_]);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) fail(pos_, "an escape (\\n, \\t, \\u00XX) for a control character");
            if (c >= 0x80) {
                const size_t n = utf8_sequence(s_, pos_);
                if (n == 0) fail(pos_, "valid UTF-8 in a string");
                out.append(s_.substr(pos_, n));
                pos_ += n;
                continue;
            }
            if (c != '\\') {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            const size_t esc = pos_;
            if (pos_ + 1 >= s_.size()) fail(pos_ + 1, "an escape character after '\\'");
            const char e = s_[pos_ + 1];
            pos_ += 2;
            switch (e) {
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '/':
                    out += '/';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'u': {
                    uint32_t cp = hex4(pos_);
                    pos_ += 4;
                    if (cp >= 0xDC00 && cp <= 0xDFFF)
                        fail(esc, "a high surrogate \\uD800-\\uDBFF before a low one",
                             "an unpaired low surrogate " + std::string(s_.substr(esc, 6)));
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        if (pos_ + 1 >= s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u')
                            fail(pos_, "a low surrogate \\uDC00-\\uDFFF after the high surrogate " +
                                           std::string(s_.substr(esc, 6)));
                        const uint32_t lo = hex4(pos_ + 2);
                        if (lo < 0xDC00 || lo > 0xDFFF)
                            fail(pos_,
                                 "a low surrogate \\uDC00-\\uDFFF after the high surrogate " +
                                     std::string(s_.substr(esc, 6)),
                                 std::string(s_.substr(pos_, 6)));
                        pos_ += 6;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    append_utf8(out, cp);
                    break;
                }
                default:
                    fail(esc + 1, "an escape character (one of \" \\ / b f n r t u)");
            }
        }
    }

    Value number() {
        const size_t start = pos_;
        const bool negative = at_char('-');
        if (negative) ++pos_;
        if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(pos_, "a digit in a number");
        // Integer part: "0" or [1-9][0-9]*, accumulated exactly while it fits 64 bits.
        uint64_t magnitude = 0;
        bool overflow = false;
        const size_t int_begin = pos_;
        if (s_[pos_] == '0') {
            ++pos_;
            if (pos_ < s_.size() && is_digit(s_[pos_]))
                fail(pos_,
                     "'.', 'e' or the end of the number after a leading 0 (no leading zeros)");
        } else {
            while (pos_ < s_.size() && is_digit(s_[pos_])) {
                const auto d = static_cast<uint64_t>(s_[pos_] - '0');
                if (magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10) overflow = true;
                if (!overflow) magnitude = magnitude * 10 + d;
                ++pos_;
            }
        }
        const size_t int_digits = pos_ - int_begin;
        bool integer = true;
        size_t frac_leading_zeros = 0;  // zeros right after '.' when the integer part is 0
        if (at_char('.')) {
            integer = false;
            ++pos_;
            if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(pos_, "a digit after '.'");
            bool leading = true;
            while (pos_ < s_.size() && is_digit(s_[pos_])) {
                if (leading && s_[pos_] == '0') {
                    ++frac_leading_zeros;
                } else {
                    leading = false;
                }
                ++pos_;
            }
        }
        int64_t exponent = 0;  // saturated: only its sign and rough size matter below
        if (at_char('e') || at_char('E')) {
            integer = false;
            ++pos_;
            bool exp_negative = false;
            if (at_char('+') || at_char('-')) exp_negative = s_[pos_++] == '-';
            if (pos_ >= s_.size() || !is_digit(s_[pos_])) fail(pos_, "a digit in the exponent");
            while (pos_ < s_.size() && is_digit(s_[pos_])) {
                if (exponent < 1000000000) exponent = exponent * 10 + (s_[pos_] - '0');
                ++pos_;
            }
            if (exp_negative) exponent = -exponent;
        }
        Value v;
        v.type_ = Type::Number;
        v.offset_ = start;
        v.text_ = std::string(s_.substr(start, pos_ - start));
        v.integer_ = integer;
        if (integer && !overflow) {
            constexpr uint64_t kInt64Limit = uint64_t{1} << 63;
            if (negative) {
                v.fits_int64_ = magnitude <= kInt64Limit;
                if (v.fits_int64_)
                    v.int_ = magnitude == kInt64Limit ? std::numeric_limits<int64_t>::min()
                                                      : -static_cast<int64_t>(magnitude);
                v.fits_uint64_ = magnitude == 0;  // "-0"
            } else {
                v.fits_uint64_ = true;
                v.uint_ = magnitude;
                v.fits_int64_ = magnitude < kInt64Limit;
                if (v.fits_int64_) v.int_ = static_cast<int64_t>(magnitude);
            }
        }
        // from_chars is locale-independent; it takes no leading '+' and we never give one.
        const char* first = v.text_.data();
        const char* last = first + v.text_.size();
        const auto [ptr, ec] = std::from_chars(first, last, v.number_);
        if (ec == std::errc::result_out_of_range) {
            // Decimal exponent of the leading digit, roughly: > 0 overflows, otherwise underflow.
            const bool int_zero = s_[int_begin] == '0';
            const int64_t lead = int_zero ? -static_cast<int64_t>(frac_leading_zeros)
                                          : static_cast<int64_t>(int_digits);
            if (lead + exponent > 0) fail(start, "a number within the range of a double", v.text_);
            v.number_ = negative ? -0.0 : 0.0;
        } else if (ec != std::errc() || ptr != last) {
            fail(start, "a number", v.text_);
        }
        return v;
    }

    std::string_view s_;
    const std::string& source_;
    size_t pos_ = 0;
};

Value parse(std::string_view text, const std::string& source) {
    return Parser(text, source).document();
}

}  // namespace trit::json
