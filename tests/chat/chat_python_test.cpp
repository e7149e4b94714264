// The Python formatting the chat templates depend on. Every expected string here was printed by
// CPython 3 (repr(), str(), json.dumps(ensure_ascii=False), str.strip()).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/chat_python.h"

namespace rl::chat::py {
namespace {

TEST(ChatPython, FloatRepr) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {1.5, "1.5"},
      {100.0, "100.0"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {123456789012345.6, "123456789012345.6"},
      {1234567890123456.7, "1234567890123456.8"},
      {0.0001, "0.0001"},
      {0.00012, "0.00012"},
      {1e-05, "1e-05"},
      {1.5e-07, "1.5e-07"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-2.5e-10, "-2.5e-10"},
      {0.1, "0.1"},
      {1.0 / 3.0, "0.3333333333333333"},
      {9007199254740992.0, "9007199254740992.0"},
      {1e22, "1e+22"},
      {123.456, "123.456"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(float_repr(value), expected);
}

TEST(ChatPython, StringRepr) {
  EXPECT_EQ(string_repr("it's"), "\"it's\"");
  EXPECT_EQ(string_repr("say \"hi\""), "'say \"hi\"'");
  EXPECT_EQ(string_repr("both ' \""), "'both \\' \"'");
  EXPECT_EQ(string_repr("a\\b\n\t\r\x01\x7f\u0085\u00a0\u00e9\u6771\u200b\U0001F600\ue000"),
            "'a\\\\b\\n\\t\\r\\x01\\x7f\\x85\\xa0\u00e9\u6771\\u200b\U0001F600\\ue000'");
}

TEST(ChatPython, StrOfJsonValues) {
  EXPECT_EQ(str(Json::parse(R"(["integer", null, true, 1.0, {"k": "it's"}])")),
            "['integer', None, True, 1.0, {'k': \"it's\"}]");
  EXPECT_EQ(str(Json::parse("false")), "False");
  EXPECT_EQ(str(Json::parse("null")), "None");
  EXPECT_EQ(str(Json::parse("1e-07")), "1e-07");
  EXPECT_EQ(str(Json::parse("-12")), "-12");
  EXPECT_EQ(str(Json::parse("18446744073709551615")), "18446744073709551615");
  EXPECT_EQ(str(Json("plain 'text'")), "plain 'text'");
}

TEST(ChatPython, JsonDumps) {
  const Json value = Json::parse(
      "{\"a\": \"x\\\"\\\\\\n\\u0001\\u007f</tag>&\u00e9\", \"b\": [1, 2.5, null, true, {}], "
      "\"c\": []}");
  EXPECT_EQ(json_dumps(value),
            "{\"a\": \"x\\\"\\\\\\n\\u0001\x7f</tag>&\u00e9\", \"b\": [1, 2.5, null, true, {}], "
            "\"c\": []}");
  // Key order is the order written, not sorted.
  EXPECT_EQ(json_dumps(Json::parse(R"({"z": 1, "a": 1e-07, "m": 4.0})")),
            R"({"z": 1, "a": 1e-07, "m": 4.0})");
}

TEST(ChatPython, StripUnicodeWhitespace) {
  EXPECT_EQ(strip(" \u3000\u0085 x \u2029\u200b"), "x \u2029\u200b");
  EXPECT_EQ(strip("\t\n\v\f\r\x1c\x1f y\u00a0\u2000\u200a\u202f\u205f"), "y");
  EXPECT_EQ(strip(" \n "), "");
  EXPECT_EQ(strip(""), "");
  EXPECT_EQ(strip(" \xff "), "\xff");         // invalid UTF-8 is not space
  EXPECT_EQ(strip("\xe3\x80 "), "\xe3\x80");  // truncated U+3000 is not space
  EXPECT_EQ(strip_chars("\n\na\n\n", "\n"), "a");
  EXPECT_EQ(lstrip_chars("\n a\n", "\n"), " a\n");
  EXPECT_EQ(rstrip_chars("\n a\n", "\n"), "\n a");
}

}  // namespace
}  // namespace rl::chat::py
