// StreamDecoder: complete characters only, U+FFFD for ill-formed input, and the same text as
// decode() when the whole stream is well-formed.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "util/error.h"

namespace rl::tokenizer {
namespace {

using test::qwen2;

std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids,
                   std::vector<std::string>* chunks = nullptr) {
  StreamDecoder decoder(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = decoder.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk)) << testing::PrintToString(chunk);
    if (chunks) chunks->push_back(chunk);
    out += chunk;
  }
  const std::string tail = decoder.flush();
  EXPECT_TRUE(utf8::is_valid(tail));
  if (chunks) chunks->push_back(tail);
  return out + tail;
}

// The byte token of each byte, so tests can split characters anywhere.
std::vector<int32_t> byte_tokens(std::string_view bytes) {
  std::vector<int32_t> ids;
  for (char c : bytes) {
    ids.push_back(*qwen2().find_token(byte_level::encode(std::string(1, c))));
  }
  return ids;
}

TEST(StreamDecoder, HoldsCharactersSplitAcrossTokens) {
  // " this is 🦙.cpp": 🦙 (F0 9F A6 99) is spread over tokens 11162 (" \xf0\x9f"), 99, 247.
  const std::vector<int32_t> ids = {419, 374, 11162, 99, 247, 13, 10821};
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(qwen2(), ids, &chunks), " this is \U0001F999.cpp");
  const std::vector<std::string> expected = {" this", " is", " ", "", "\U0001F999", ".", "cpp", ""};
  EXPECT_EQ(chunks, expected);
}

TEST(StreamDecoder, EveryByteSplitOfMultibyteText) {
  const std::string text = "\xc3\xa9\xe4\xb8\x96\xf0\x9f\x98\x81 a\xd0\xb1";  // é世😁 aб
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(qwen2(), byte_tokens(text), &chunks), text);
  const std::vector<std::string> expected = {
      "",  "\xc3\xa9", "",         "", "\xe4\xb8\x96", "", "", "", "\xf0\x9f\x98\x81", " ",
      "a", "",         "\xd0\xb1", ""};
  EXPECT_EQ(chunks, expected);
}

TEST(StreamDecoder, MatchesDecodeForGoldenAndRandomText) {
  for (const auto& c : test::golden_cases()) {
    EXPECT_EQ(stream(qwen2(), c.ids), qwen2().decode(c.ids));
  }
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const std::string text = test::random_unicode(rng, rng() % 100);
    const auto ids = qwen2().encode(text, true);
    ASSERT_EQ(stream(qwen2(), ids), text);
  }
}

TEST(StreamDecoder, IllFormedBytesBecomeReplacementCharacters) {
  const std::string fffd = "\xef\xbf\xbd";
  std::vector<std::string> chunks;
  // A stray byte is replaced at once.
  EXPECT_EQ(stream(qwen2(),
                   byte_tokens("a\xff"
                               "b"),
                   &chunks),
            "a" + fffd + "b");
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", fffd, "b", ""}));
  // An unfinished character is held, then replaced (once) when a non-continuation arrives.
  chunks.clear();
  EXPECT_EQ(stream(qwen2(), byte_tokens("\xe4\xb8!"), &chunks), fffd + "!");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", fffd + "!", ""}));
  // ... or at flush.
  chunks.clear();
  EXPECT_EQ(stream(qwen2(), byte_tokens("x\xf0\x9f\x98"), &chunks), "x" + fffd);
  EXPECT_EQ(chunks, (std::vector<std::string>{"x", "", "", "", fffd}));
  // A surrogate (ED A0 80) is three maximal subparts.
  EXPECT_EQ(stream(qwen2(), byte_tokens("\xed\xa0\x80")), fffd + fffd + fffd);
  // Random bytes never produce broken output.
  std::mt19937 rng(2);
  for (int round = 0; round < 300; ++round) {
    std::string bytes;
    for (size_t i = rng() % 30; i > 0; --i) bytes += static_cast<char>(rng());
    stream(qwen2(), qwen2().encode(bytes, false));  // checks validity of every chunk
  }
}

TEST(StreamDecoder, OutOfRangeTokenThrows) {
  StreamDecoder decoder(qwen2());
  EXPECT_THROW(decoder.push(1 << 30), Error);
}

}  // namespace
}  // namespace rl::tokenizer
