// The qwen2 pre-tokenizer against splits of the Qwen2 regex computed by an independent engine
// (Python's `regex` module, whose \s is Unicode White_Space like Oniguruma's), and its defined
// behaviour on ill-formed UTF-8.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace rl::tokenizer {
namespace {

std::vector<std::string> split(std::string_view text) {
  static const Qwen2PreTokenizer pre;
  std::vector<std::string_view> pieces;
  pre.split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(Qwen2PreTokenizer, SplitsLikeTheReferenceRegex) {
  const std::vector<std::pair<std::string, Pieces>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"I'm here, you're THERE'S 'LL 'Ve",
       {"I", "'m", " here", ",", " you", "'re", " THERE", "'S", " '", "LL", " '", "Ve"}},
      {"a   b", {"a", "  ", " b"}},
      {"a \n\n b", {"a", " \n\n", " b"}},
      {"   ", {"   "}},
      {"x  \n", {"x", "  \n"}},
      {"tab\t\tx", {"tab", "\t", "\tx"}},
      {"123 4567", {"1", "2", "3", " ", "4", "5", "6", "7"}},
      {"\u0663\u0664 \u0661\u0662", {"\u0663", "\u0664", " ", "\u0661", "\u0662"}},
      {"\u01c5emo", {"\u01c5emo"}},
      {"\u00a0x", {"\u00a0x"}},
      {"a\u3000b", {"a", "\u3000b"}},
      {"a\u180eb", {"a", "\u180eb"}},
      {"a\u0085b", {"a", "\u0085b"}},
      {"'\u017f x", {"'\u017f", " x"}},  // case-insensitive 's also takes the long s
      {"...!!?\n\n\nz", {"...!!?\n\n\n", "z"}},
      {" ?!", {" ?!"}},
      {"e\u0301tude", {"e", "\u0301tude"}},
      {"\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
       {"\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8"}},
      {"\U0001F999\U0001F999 x\U0001F999", {"\U0001F999\U0001F999", " x", "\U0001F999"}},
      {"\r\n\r\n", {"\r\n\r\n"}},
      {"  \n  x", {"  \n", " ", " x"}},
      {"$abc", {"$abc"}},
      {"--x", {"--", "x"}},
      {"a\u2028b", {"a", "\u2028b"}},
      {"\u2000\u2000a", {"\u2000", "\u2000a"}},
      // U+180E is not White_Space (PCRE2's \s would take it, Oniguruma's does not).
      {"x\u180e\u180e ", {"x", "\u180e\u180e", " "}},
      {"\u180e  y", {"\u180e", " ", " y"}},
      {std::string("a\0b", 3), {"a", std::string("\0b", 2)}},
      {"", {}},
  };
  for (const auto& [text, expected] : cases) EXPECT_EQ(split(text), expected) << text;
}

TEST(Qwen2PreTokenizer, IllFormedBytesArePiecesOfTheirOwn) {
  EXPECT_EQ(split("ab\xff"
                  "cd"),
            (Pieces{"ab", "\xff", "cd"}));
  EXPECT_EQ(split(" \xff"), (Pieces{" ", "\xff"}));
  EXPECT_EQ(split("a\xe4\xb8"), (Pieces{"a", "\xe4\xb8"}));  // truncated 世
  EXPECT_EQ(split("\xe4\xb8\xe4\xb8\x96"), (Pieces{"\xe4\xb8", "\xe4\xb8\x96"}));
  EXPECT_EQ(split("\xed\xa0\x80!"), (Pieces{"\xed\xa0\x80", "!"}));    // a surrogate
  EXPECT_EQ(split("\xc0\xaf\xfe\xff"), (Pieces{"\xc0\xaf\xfe\xff"}));  // overlong, junk
  EXPECT_EQ(split("\x80"), (Pieces{"\x80"}));
}

// Pieces always tile the input, whatever the bytes.
TEST(Qwen2PreTokenizer, PiecesCoverRandomBytes) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const size_t n = rng() % 64;
    for (size_t i = 0; i < n; ++i) {
      // Bias towards bytes that matter: ASCII space/newline/letters and UTF-8 lead bytes.
      static const char interesting[] = " \n\r\t'aZ09\x80\xbf\xc3\xe4\xf0\xff";
      text += rng() % 2 ? static_cast<char>(rng()) : interesting[rng() % (sizeof interesting - 1)];
    }
    std::string joined;
    for (const auto& p : split(text)) {
      ASSERT_FALSE(p.empty());
      joined += p;
    }
    ASSERT_EQ(joined, text);
  }
}

// Long runs of one character class take time linear in their length.
TEST(Qwen2PreTokenizer, LongRunsAreLinear) {
  const auto cpu_seconds = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  for (const std::string unit : {" ", "\n", " \n", "a", "1", "!", "\xff", "\t "}) {
    const auto time = [&](size_t bytes) {
      std::string text;
      while (text.size() < bytes) text += unit;
      text += "x";
      const double start = cpu_seconds();
      const auto pieces = split(text);
      const double seconds = cpu_seconds() - start;
      std::string joined;
      for (const auto& p : pieces) joined += p;
      EXPECT_EQ(joined, text);
      return seconds;
    };
    const double small = time(1 << 16), large = time(1 << 20);
    // 16 times the input: about 16x the time when linear, 256x when quadratic.
    EXPECT_LT(large, 64 * small + 0.05)
        << testing::PrintToString(unit) << ": " << small << " s vs " << large;
  }
}

}  // namespace
}  // namespace rl::tokenizer
