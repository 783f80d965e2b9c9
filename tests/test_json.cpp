// trit::json: every kind of value, exact integers, escapes and surrogate pairs, UTF-8 checks,
// insertion order, accessors, and each parse error with its byte offset, line and column.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "tests/support/error_of.h"

namespace trit::json {
namespace {

using ::testing::HasSubstr;
using trit::testing::error_of;

TEST(JsonTest, Scalars) {
    EXPECT_TRUE(parse("null").is_null());
    EXPECT_TRUE(parse("true").as_bool());
    EXPECT_FALSE(parse(" \t\r\nfalse \n").as_bool());
    EXPECT_EQ(parse("\"hi\"").as_string(), "hi");
    EXPECT_EQ(parse("\"\"").as_string(), "");
    EXPECT_EQ(parse("0").as_int64(), 0);
    EXPECT_EQ(parse("-12").as_int64(), -12);
    EXPECT_EQ(parse("1.5").as_double(), 1.5);
    EXPECT_EQ(parse("-1.25E-2").as_double(), -0.0125);
    EXPECT_EQ(parse("1e3").as_double(), 1000.0);
    EXPECT_EQ(parse("2E+2").as_double(), 200.0);
    EXPECT_EQ(parse("0.5").type(), Type::Number);
    EXPECT_FALSE(parse("1.0").is_integer());
    EXPECT_FALSE(parse("1e0").is_integer());
    EXPECT_TRUE(parse("-0").is_integer());
    EXPECT_EQ(parse("-0").as_uint64(), 0u);
    EXPECT_EQ(parse("1e-400").as_double(), 0.0);  // underflow rounds to zero
    EXPECT_EQ(parse("12").describe(), "12");
}

TEST(JsonTest, IntegersAreExact) {
    // 2^53 + 1 is not a double; the integer keeps it.
    const Value big = parse("9007199254740993");
    EXPECT_EQ(big.as_int64(), int64_t{9007199254740993});
    EXPECT_EQ(big.as_double(), 9007199254740992.0);
    EXPECT_EQ(parse("9223372036854775807").as_int64(), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(parse("-9223372036854775808").as_int64(), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(parse("18446744073709551615").as_uint64(), std::numeric_limits<uint64_t>::max());

    const Value past_int64 = parse("9223372036854775808");
    EXPECT_TRUE(past_int64.is_uint64());
    EXPECT_FALSE(past_int64.is_int64());
    EXPECT_EQ(error_of([&] { past_int64.as_int64(); }),
              "JSON value at byte 0: expected an integer in [-2^63, 2^63 - 1], got "
              "9223372036854775808");
    const Value past_uint64 = parse("[18446744073709551616]").as_array()[0];
    EXPECT_FALSE(past_uint64.is_uint64());
    EXPECT_EQ(past_uint64.as_double(), 18446744073709551616.0);
    EXPECT_EQ(error_of([&] { past_uint64.as_uint64(); }),
              "JSON value at byte 1: expected an integer in [0, 2^64 - 1], got "
              "18446744073709551616");
    EXPECT_THAT(error_of([] { parse("-1").as_uint64(); }), HasSubstr("got -1"));
    EXPECT_THAT(error_of([] { parse("1.5").as_int64(); }), HasSubstr("got 1.5"));
    EXPECT_THAT(error_of([] { parse("2e0").as_int64(); }), HasSubstr("got 2e0"));
}

TEST(JsonTest, ArraysAndObjects) {
    const Value v = parse(R"( {"b": [1, [], {}, "x"], "a": {"c": null}, "": true} )");
    ASSERT_TRUE(v.is_object());
    const auto& members = v.as_object();
    ASSERT_EQ(members.size(), 3u);
    EXPECT_EQ(members[0].key, "b");  // document order, not sorted
    EXPECT_EQ(members[1].key, "a");
    EXPECT_EQ(members[2].key, "");
    const auto& b = v.at("b").as_array();
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(b[0].as_int64(), 1);
    EXPECT_TRUE(b[1].as_array().empty());
    EXPECT_TRUE(b[2].as_object().empty());
    EXPECT_EQ(b[3].as_string(), "x");
    EXPECT_EQ(b[3].offset(), 19u);
    EXPECT_TRUE(v.at("a").at("c").is_null());
    EXPECT_EQ(v.find("zzz"), nullptr);
    EXPECT_EQ(error_of([&] { v.at("zzz"); }), "JSON object at byte 1: missing key \"zzz\"");
    EXPECT_EQ(error_of([&] { v.as_array(); }),
              "JSON value at byte 1: expected an array, got an object");
    EXPECT_EQ(error_of([&] { b[3].as_int64(); }),
              "JSON value at byte 19: expected an integer in [-2^63, 2^63 - 1], got \"x\"");
    EXPECT_EQ(error_of([&] { b[0].as_string(); }),
              "JSON value at byte 8: expected a string, got 1");
}

TEST(JsonTest, EscapesAndUtf8) {
    EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")").as_string(), "\"\\/\b\f\n\r\t");
    EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");
    EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
    // Surrogate pair -> one 4-byte code point (U+1F600).
    EXPECT_EQ(parse(R"("\uD83D\uDE00")").as_string(), "\xF0\x9F\x98\x80");
    EXPECT_EQ(parse(R"("\udbff\udfff")").as_string(), "\xF4\x8F\xBF\xBF");  // U+10FFFF
    // Raw UTF-8 is kept as is.
    EXPECT_EQ(parse("\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"").as_string(),
              "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(JsonTest, QuoteRoundTrips) {
    const std::string s = std::string("a\"b\\c\n\x01\x1f/\xC3\xA9") + '\0';
    EXPECT_EQ(quote(s), "\"a\\\"b\\\\c\\n\\u0001\\u001F/\xC3\xA9\\u0000\"");
    EXPECT_EQ(parse(quote(s)).as_string(), s);
    EXPECT_THAT(error_of([] { quote("\xFF"); }), HasSubstr("expected valid UTF-8"));
    EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));
    EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
    EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong
    EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
    EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
}

TEST(JsonTest, DepthLimit) {
    const std::string ok = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
    EXPECT_NO_THROW(parse(ok));
    const std::string deep = std::string(kMaxDepth + 1, '[') + std::string(kMaxDepth + 1, ']');
    EXPECT_EQ(error_of([&] { parse(deep); }),
              "JSON: byte 64 (line 1, column 65): expected at most 64 levels of nesting, got a "
              "deeper array or object");
    // Hostile input: a million brackets fail cleanly instead of overflowing the stack.
    EXPECT_THAT(error_of([] { parse(std::string(1000000, '[')); }), HasSubstr("at most 64 levels"));
}

struct BadCase {
    const char* text;
    const char* error;  // the message after "doc: "
};

TEST(JsonTest, ErrorsNameOffsetAndExpectation) {
    const BadCase cases[] = {
        {"", "byte 0 (line 1, column 1): expected a JSON value, got the end of the input"},
        {"  ", "byte 2 (line 1, column 3): expected a JSON value, got the end of the input"},
        {"[1,]", "byte 3 (line 1, column 4): expected a JSON value, got ']'"},
        {"{\"a\":1,}", "byte 7 (line 1, column 8): expected a string key in an object, got '}'"},
        {"{a:1}", "byte 1 (line 1, column 2): expected a string key in an object, got 'a'"},
        {"{\"a\" 1}", "byte 5 (line 1, column 6): expected ':' after an object key, got '1'"},
        {"[1 2]", "byte 3 (line 1, column 4): expected ',' or ']' in an array, got '2'"},
        {"{\"a\":1 \"b\":2}",
         "byte 7 (line 1, column 8): expected ',' or '}' in an object, got '\"'"},
        {"[1",
         "byte 2 (line 1, column 3): expected ',' or ']' in an array, got the end of the input"},
        {"1 2",
         "byte 2 (line 1, column 3): expected the end of the document after the top-level "
         "value, got '2'"},
        {"01",
         "byte 1 (line 1, column 2): expected '.', 'e' or the end of the number after a "
         "leading 0 (no leading zeros), got '1'"},
        {"1.", "byte 2 (line 1, column 3): expected a digit after '.', got the end of the input"},
        {"1.e5", "byte 2 (line 1, column 3): expected a digit after '.', got 'e'"},
        {"1e",
         "byte 2 (line 1, column 3): expected a digit in the exponent, got the end of the input"},
        {"-", "byte 1 (line 1, column 2): expected a digit in a number, got the end of the input"},
        {"-a", "byte 1 (line 1, column 2): expected a digit in a number, got 'a'"},
        {"+1", "byte 0 (line 1, column 1): expected a JSON value, got '+'"},
        {".5", "byte 0 (line 1, column 1): expected a JSON value, got '.'"},
        {"1e400",
         "byte 0 (line 1, column 1): expected a number within the range of a double, got 1e400"},
        {"tru", "byte 3 (line 1, column 4): expected 'true', got the end of the input"},
        {"nulL", "byte 3 (line 1, column 4): expected 'null', got 'L'"},
        {"True", "byte 0 (line 1, column 1): expected a JSON value, got 'T'"},
        {"\"abc",
         "byte 4 (line 1, column 5): expected '\"' to close the string, got the end of the input"},
        {"\"a\x01\"",
         "byte 2 (line 1, column 3): expected an escape (\\n, \\t, \\u00XX) for a control "
         "character, got byte 0x01"},
        {"\"a\tb\"",
         "byte 2 (line 1, column 3): expected an escape (\\n, \\t, \\u00XX) for a control "
         "character, got byte 0x09"},
        {"\"\\x\"",
         "byte 2 (line 1, column 3): expected an escape character (one of \" \\ / b f n r t "
         "u), got 'x'"},
        {"\"\\",
         "byte 2 (line 1, column 3): expected an escape character after '\\', got the end of "
         "the input"},
        {"\"\\u12G4\"", "byte 5 (line 1, column 6): expected 4 hex digits after \\u, got 'G'"},
        {"\"\\u12",
         "byte 5 (line 1, column 6): expected 4 hex digits after \\u, got the end of the input"},
        {"\"\\uDE00\"",
         "byte 1 (line 1, column 2): expected a high surrogate \\uD800-\\uDBFF before a "
         "low one, got an unpaired low surrogate \\uDE00"},
        {"\"\\uD83D\"",
         "byte 7 (line 1, column 8): expected a low surrogate \\uDC00-\\uDFFF after the "
         "high surrogate \\uD83D, got '\"'"},
        {"\"\\uD83D\\u0041\"",
         "byte 7 (line 1, column 8): expected a low surrogate \\uDC00-\\uDFFF "
         "after the high surrogate \\uD83D, got \\u0041"},
        {"\"\xC3\x28\"",
         "byte 1 (line 1, column 2): expected valid UTF-8 in a string, got byte 0xC3"},
        {"\"\xC0\xAF\"",
         "byte 1 (line 1, column 2): expected valid UTF-8 in a string, got byte 0xC0"},
        {"\"\xED\xA0\x80\"",
         "byte 1 (line 1, column 2): expected valid UTF-8 in a string, got byte 0xED"},
        {"\"\xF4\x90\x80\x80\"",
         "byte 1 (line 1, column 2): expected valid UTF-8 in a string, got byte "
         "0xF4"},
        {"\"ab\xE2\x82\"",
         "byte 3 (line 1, column 4): expected valid UTF-8 in a string, got byte 0xE2"},
        {"\xC3\xA9", "byte 0 (line 1, column 1): expected a JSON value, got byte 0xC3"},
        {"{\"a\":1,\"a\":2}",
         "byte 7 (line 1, column 8): expected unique keys in an object, got \"a\" "
         "again (first at byte 1)"},
        {"{\n  \"a\": x\n}", "byte 9 (line 2, column 8): expected a JSON value, got 'x'"},
        {"[\r\n1,\n\n ]", "byte 8 (line 4, column 2): expected a JSON value, got ']'"},
    };
    for (const BadCase& c : cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(error_of([&] { parse(c.text, "doc"); }), std::string("doc: ") + c.error);
    }
}

TEST(JsonTest, EveryTruncationFails) {
    // Each proper prefix of a document is an error (a trit::Error with an offset), never a crash.
    const std::string doc =
        R"({"a": [1, -2.5e3, true, false, null, "x\u00e9\uD83D\uDE00"], "b": {}})";
    ASSERT_NO_THROW(parse(doc));
    for (size_t n = 0; n < doc.size(); ++n) {
        SCOPED_TRACE(doc.substr(0, n));
        EXPECT_THAT(error_of([&] { parse(doc.substr(0, n)); }), HasSubstr("JSON: byte "));
    }
}

}  // namespace
}  // namespace trit::json
