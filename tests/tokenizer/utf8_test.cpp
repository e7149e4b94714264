// UTF-8 decoding: well-formed characters, each class of ill-formed sequence with the
// maximal-subpart rule (Unicode §3.9, Table 3-8 example), and truncation.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace rl::tokenizer::utf8 {
namespace {

TEST(Utf8, DecodesWellFormedCharacters) {
  const std::pair<std::string, char32_t> cases[] = {
      {"A", 0x41},
      {std::string(1, '\0'), 0},
      {"\xc2\x80", 0x80},
      {"\xdf\xbf", 0x7FF},
      {"\xe0\xa0\x80", 0x800},
      {"\xed\x9f\xbf", 0xD7FF},
      {"\xee\x80\x80", 0xE000},
      {"\xef\xbf\xbf", 0xFFFF},
      {"\xf0\x90\x80\x80", 0x10000},
      {"\xf4\x8f\xbf\xbf", 0x10FFFF},
      {"\xf0\x9f\xa6\x99", 0x1F999},
  };
  for (const auto& [text, code] : cases) {
    const Step s = decode(text, 0);
    EXPECT_EQ(s.status, Status::Ok) << text;
    EXPECT_EQ(s.length, text.size()) << text;
    EXPECT_EQ(s.code, code) << text;
    std::string encoded;
    append(encoded, code);
    EXPECT_EQ(encoded, text);
  }
}

TEST(Utf8, IllFormedSequencesFollowTheMaximalSubpartRule) {
  // Table 3-8 of the Unicode standard: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 decodes to
  // a, FFFD (F1 80 80), FFFD (E1 80), FFFD (C2), b, FFFD, c, FFFD, FFFD, d.
  const std::string text = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  std::vector<std::pair<Status, size_t>> steps;
  for (size_t pos = 0; pos < text.size();) {
    const Step s = decode(text, pos);
    steps.emplace_back(s.status, s.length);
    pos += s.length;
  }
  const std::vector<std::pair<Status, size_t>> expected = {
      {Status::Ok, 1},      {Status::Invalid, 3}, {Status::Invalid, 2}, {Status::Invalid, 1},
      {Status::Ok, 1},      {Status::Invalid, 1}, {Status::Ok, 1},      {Status::Invalid, 1},
      {Status::Invalid, 1}, {Status::Ok, 1}};
  EXPECT_EQ(steps, expected);
}

TEST(Utf8, RejectsOverlongsSurrogatesAndTooLarge) {
  for (const std::string bad :
       {"\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
        "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff",
        "\xfe", "\x80"}) {
    const Step s = decode(bad, 0);
    EXPECT_EQ(s.status, Status::Invalid) << testing::PrintToString(bad);
    EXPECT_EQ(s.length, 1u) << testing::PrintToString(bad);  // the lead byte alone
    EXPECT_FALSE(is_valid(bad));
  }
}

TEST(Utf8, ReportsTruncation) {
  EXPECT_EQ(decode("\xe4\xb8", 0).status, Status::Truncated);
  EXPECT_EQ(decode("\xe4\xb8", 0).length, 2u);
  EXPECT_EQ(decode("\xf0", 0).status, Status::Truncated);
  EXPECT_EQ(decode("\xf0\x9f\xa6", 0).length, 3u);
  EXPECT_EQ(decode("\xe4\x41", 0).status, Status::Invalid);  // not a continuation
  EXPECT_TRUE(is_valid("h\xc3\xa9llo \xe4\xb8\x96"));
  EXPECT_FALSE(is_valid("h\xc3"));
}

}  // namespace
}  // namespace rl::tokenizer::utf8
