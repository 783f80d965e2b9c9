// A strict, small JSON reader (RFC 8259) for file headers such as safetensors': a Value tree with
// objects in insertion order, integers kept exact (int64 / uint64) beside their double, strings
// as validated UTF-8. Rejects what the RFC rejects plus duplicate keys; nesting is limited.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trit::json {

// Nesting deeper than this is an error, so hostile input cannot overflow the parser's stack.
inline constexpr int kMaxDepth = 64;

enum class Type { Null, Bool, Number, String, Array, Object };

// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* type_name(Type type);

struct Member;

class Value {
  public:
    using Array = std::vector<Value>;
    using Object = std::vector<Member>;  // in document order; keys are unique

    Value() = default;  // null

    Type type() const { return type_; }
    bool is_null() const { return type_ == Type::Null; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_number() const { return type_ == Type::Number; }
    bool is_string() const { return type_ == Type::String; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }
    // A number written without fraction or exponent ("12", "-0", "18446744073709551616").
    bool is_integer() const { return type_ == Type::Number && integer_; }
    // An integer literal whose exact value fits int64 (uint64): as_int64 (as_uint64) succeeds.
    bool is_int64() const { return is_integer() && fits_int64_; }
    bool is_uint64() const { return is_integer() && fits_uint64_; }
    // Byte offset of the value's first character in the parsed document.
    size_t offset() const { return offset_; }

    // The accessors throw trit::Error naming the byte offset, the expected kind and the value
    // found (its text for numbers) when the value is of another kind.
    bool as_bool() const;
    double as_double() const;    // nearest double (integers above 2^53 are rounded here)
    int64_t as_int64() const;    // an integer literal in [-2^63, 2^63 - 1], exact
    uint64_t as_uint64() const;  // an integer literal in [0, 2^64 - 1], exact
    const std::string& as_string() const;
    const Array& as_array() const;
    const Object& as_object() const;

    // Numbers: the literal as written. Other kinds: a short description ("an array of 3").
    std::string describe() const;

    // Object members by key: find gives nullptr when absent, at throws naming the missing key.
    const Value* find(std::string_view key) const;
    const Value& at(std::string_view key) const;

  private:
    friend class Parser;

    Type type_ = Type::Null;
    bool bool_ = false;
    bool integer_ = false;      // numbers: an integer literal
    bool fits_int64_ = false;   // integers: exact value fits int64
    bool fits_uint64_ = false;  // integers: exact value fits uint64
    double number_ = 0.0;
    int64_t int_ = 0;
    uint64_t uint_ = 0;
    size_t offset_ = 0;
    std::string text_;  // strings: the decoded UTF-8; numbers: the literal
    Array array_;
    Object object_;
};

struct Member {
    std::string key;
    Value value;
};

// Parses a whole document (surrounding whitespace allowed, nothing else after the value). Errors
// are trit::Error: "<source>: byte B (line L, column C): expected X, got Y".
Value parse(std::string_view text, const std::string& source = "JSON");

// `s` as a JSON string literal with quotes; control characters, '"' and '\' escaped, other
// UTF-8 kept as is. Throws trit::Error when `s` is not valid UTF-8.
std::string quote(std::string_view s);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace trit::json
