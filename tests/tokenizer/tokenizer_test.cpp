// The tokenizer against llama.cpp's golden vectors for the Qwen2 vocab, an independent
// string-based BPE written here, round trips over hostile text, and special tokens.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <random>
#include <unordered_map>

#include "test_util.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define RL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_TEST_SANITIZED 1
#endif
#endif

namespace rl::tokenizer {
namespace {

using test::golden_cases;
using test::qwen2;

// Process CPU time: unlike wall time, hardly affected by other jobs on a busy machine.
double cpu_seconds() {
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

TEST(Tokenizer, LoadsTheQwen2VocabQuickly) {
  const double start = cpu_seconds();
  const gguf::File file = gguf::File::open(test::kQwen2Vocab);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  const double seconds = cpu_seconds() - start;
  std::printf("open + from_gguf of the 151936-token vocab: %.3f s\n", seconds);
#ifndef RL_TEST_SANITIZED
  EXPECT_LT(seconds, 1.0);
#endif
  EXPECT_EQ(tok.n_vocab(), 151936);
  EXPECT_EQ(tok.bos(), 151643);
  EXPECT_EQ(tok.eos(), 151643);
  EXPECT_FALSE(tok.add_bos());  // the file has no add_bos_token
  EXPECT_EQ(tok.find_token("<|im_start|>"), 151644);
  EXPECT_EQ(tok.find_token("<|im_end|>"), 151645);
  EXPECT_EQ(tok.find_token("\xc4\xa0Hello"), 21927);  // vocab spelling of " Hello"
  EXPECT_EQ(tok.find_token("no such token at all"), std::nullopt);
  EXPECT_TRUE(tok.is_control(151643));
  EXPECT_TRUE(tok.is_control(151645));
  EXPECT_FALSE(tok.is_control(151646));  // [PAD151646] is user-defined
  EXPECT_FALSE(tok.is_control(9707));
  EXPECT_FALSE(tok.is_control(-1));
  EXPECT_FALSE(tok.is_control(151936));
  EXPECT_TRUE(tok.is_end_of_generation(151643));
  EXPECT_TRUE(tok.is_end_of_generation(151645));
  EXPECT_FALSE(tok.is_end_of_generation(151644));
  EXPECT_FALSE(tok.is_end_of_generation(9707));
}

TEST(Tokenizer, MatchesLlamaCppGoldenVectors) {
  const auto cases = golden_cases();
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    EXPECT_EQ(qwen2().encode(c.text, /*parse_special=*/false), c.ids)
        << "case " << i << ": " << testing::PrintToString(c.text);
    EXPECT_EQ(qwen2().decode(c.ids), c.text) << "case " << i;
  }
}

TEST(Tokenizer, TokenBytesUndoTheByteLevelSpelling) {
  const Tokenizer& tok = qwen2();
  EXPECT_EQ(tok.token_bytes(21927), " Hello");
  EXPECT_EQ(tok.token_bytes(198), "\n");
  EXPECT_EQ(tok.token_bytes(220), " ");
  EXPECT_EQ(tok.token_bytes(151644), "<|im_start|>");  // control tokens as their text
  EXPECT_EQ(tok.token_bytes(151700), "[PAD151700]");
  // 11162 is " \xf0\x9f": a space and the first two bytes of U+1F999.
  EXPECT_EQ(tok.token_bytes(11162), " \xf0\x9f");
  EXPECT_THROW(tok.token_bytes(-1), Error);
  EXPECT_THROW(tok.token_bytes(151936), Error);
}

TEST(Tokenizer, OutOfRangeIdsAreNamedInTheError) {
  const std::vector<int32_t> ids = {9707, 151936};
  try {
    qwen2().decode(ids);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("151936"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> negative = {-3};
  EXPECT_THROW(qwen2().decode(negative), Error);
}

// ---- An independent reference: string-based BPE as the merges file describes it ----------

class ReferenceBpe {
 public:
  explicit ReferenceBpe(const gguf::File& file) {
    // GPT-2's byte-to-character table, written out from its definition.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      std::string s;
      utf8::append(s, printable ? b : next++);
      byte_chars_[b] = s;
    }
    const auto& tokens = file.get_array("tokenizer.ggml.tokens")->items;
    for (size_t i = 0; i < tokens.size(); ++i) ids_.emplace(*tokens[i].as_string(), i);
    const auto& merges = file.get_array("tokenizer.ggml.merges")->items;
    for (size_t i = 0; i < merges.size(); ++i) ranks_.emplace(*merges[i].as_string(), i);
  }

  // O(n^2) per piece: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<std::string_view> pieces;
    pre_.split(text, pieces);
    std::vector<int32_t> out;
    for (std::string_view piece : pieces) {
      std::vector<std::string> symbols;
      for (char c : piece) symbols.push_back(byte_chars_[static_cast<uint8_t>(c)]);
      while (symbols.size() > 1) {
        size_t best = 0, best_rank = SIZE_MAX;
        for (size_t i = 0; i + 1 < symbols.size(); ++i) {
          const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]);
          if (it != ranks_.end() && it->second < best_rank) best = i, best_rank = it->second;
        }
        if (best_rank == SIZE_MAX) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + best + 1);
      }
      for (const auto& s : symbols) out.push_back(ids_.at(s));
    }
    return out;
  }

 private:
  Qwen2PreTokenizer pre_;
  std::string byte_chars_[256];
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, size_t> ranks_;
};

const ReferenceBpe& reference() {
  static const gguf::File file = gguf::File::open(test::kQwen2Vocab);
  static const ReferenceBpe ref(file);
  return ref;
}

TEST(Tokenizer, ReferenceBpeReproducesTheGoldenVectors) {  // checks the reference itself
  for (const auto& c : golden_cases()) EXPECT_EQ(reference().encode(c.text), c.ids);
}

TEST(Tokenizer, MatchesReferenceBpeOnRandomText) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    const std::string text = test::random_unicode(rng, 1 + rng() % 80);
    ASSERT_EQ(qwen2().encode(text, false), reference().encode(text))
        << testing::PrintToString(text);
  }
}

TEST(Tokenizer, MatchesReferenceBpeOnRandomBytes) {
  std::mt19937 rng(99);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    for (size_t i = rng() % 40; i > 0; --i) text += static_cast<char>(rng());
    ASSERT_EQ(qwen2().encode(text, false), reference().encode(text))
        << testing::PrintToString(text);
  }
}

// Pieces where the same merge applies at overlapping places: the leftmost goes first.
TEST(Tokenizer, MatchesReferenceBpeOnRepetitiveText) {
  for (const std::string unit : {"a", "aa", "ab", " ", "\n", "3", "!", "\xe4\xb8\x96", "\xff",
                                 "ing", "\t ", "\xf0\x9f\x98\x81"}) {
    std::string text;
    for (int n = 1; n <= 40; ++n) {
      text += unit;
      ASSERT_EQ(qwen2().encode(text, false), reference().encode(text))
          << testing::PrintToString(text);
    }
  }
}

// ---- Round trips --------------------------------------------------------------------------

TEST(Tokenizer, RoundTripsRandomUnicode) {
  std::mt19937 rng(42);
  for (int round = 0; round < 500; ++round) {
    const std::string text = test::random_unicode(rng, rng() % 200);
    for (bool special : {false, true}) {
      const auto ids = qwen2().encode(text, special);
      ASSERT_EQ(qwen2().decode(ids), text) << testing::PrintToString(text);
    }
  }
}

TEST(Tokenizer, RoundTripsIllFormedUtf8) {
  std::mt19937 rng(5);
  for (int round = 0; round < 500; ++round) {
    std::string text;
    static const std::string pieces = "a \n\xe4\xb8\x96<|im_end|>";
    for (size_t i = rng() % 100; i > 0; --i) {
      text += rng() % 3 ? static_cast<char>(rng()) : pieces[rng() % pieces.size()];
    }
    for (bool special : {false, true}) {
      ASSERT_EQ(qwen2().decode(qwen2().encode(text, special)), text)
          << testing::PrintToString(text);
    }
  }
  // Every single byte, alone and after a letter.
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    EXPECT_EQ(qwen2().decode(qwen2().encode(one, false)), one);
    EXPECT_EQ(qwen2().decode(qwen2().encode("x" + one + "y", false)), "x" + one + "y");
  }
}

TEST(Tokenizer, EmptyTextHasNoTokens) {
  EXPECT_TRUE(qwen2().encode("", false).empty());
  EXPECT_TRUE(qwen2().encode("", true, /*add_bos=*/true).empty());  // add_bos_token is absent
  EXPECT_EQ(qwen2().decode({}), "");
}

// ---- Large inputs -------------------------------------------------------------------------

std::string english_text(size_t min_bytes) {
  std::string prose;
  for (const char* f : {"DESIGN.md", "MODEL.md", "testdata/README.md"}) {
    prose += test::read_file(test::shared_path(f));
  }
  std::string text;
  while (text.size() < min_bytes) text += prose;
  return text;
}

TEST(Tokenizer, EncodesEnglishFast) {
  const std::string text = english_text(1'200'000);
  const double start = cpu_seconds();
  const auto ids = qwen2().encode(text, false);
  const double seconds = cpu_seconds() - start;
  std::printf("encoded %zu bytes into %zu tokens in %.3f s (%.0f tokens/s)\n", text.size(),
              ids.size(), seconds, ids.size() / seconds);
  EXPECT_GE(ids.size(), 250'000u);
#ifndef RL_TEST_SANITIZED
  EXPECT_LT(seconds, 3.0);  // target: about a second for 250K tokens on one core
#endif
  EXPECT_EQ(qwen2().decode(ids), text);
}

// One megabyte of a single piece (a word, white space, digits, punctuation, ill-formed bytes)
// takes time linear in its length: BPE works with a heap, not by rescanning.
TEST(Tokenizer, LongPiecesAreLinear) {
  for (const std::string unit : {"a", "ab", " ", "\n", " \n", "!", "\xff", "1", "\xe4\xb8\x96"}) {
    const auto time = [&](size_t bytes) {
      std::string text;
      while (text.size() < bytes) text += unit;
      const double start = cpu_seconds();
      const auto ids = qwen2().encode(text, false);
      const double seconds = cpu_seconds() - start;
      EXPECT_EQ(qwen2().decode(ids), text);
      return seconds;
    };
    const double small = time(1 << 16), large = time(1 << 20);
    std::printf("unit of %zu bytes starting 0x%02x: 64 KiB %.3f s, 1 MiB %.3f s\n", unit.size(),
                static_cast<uint8_t>(unit[0]), small, large);
    // 16 times the input: 16x the time when linear, 256x when quadratic. n log n and cache
    // misses (the 1 MiB heap no longer fits in cache) make it about 30x here.
    EXPECT_LT(large, 64 * small + 0.05) << testing::PrintToString(unit);
  }
}

// ---- Special tokens -----------------------------------------------------------------------

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  const Tokenizer& tok = qwen2();
  const std::string text = "<|im_start|>user\nHello<|im_end|>\n[PAD151700]";
  const auto plain = [&](std::string_view s) { return tok.encode(s, false); };
  EXPECT_EQ(tok.encode(text, true),
            concat({{151644}, plain("user\nHello"), {151645}, plain("\n"), {151700}}));
  const auto as_text = tok.encode(text, false);
  for (int32_t id : as_text) EXPECT_LT(id, 151643) << "special token without parse_special";
  EXPECT_EQ(tok.decode(as_text), text);
  EXPECT_EQ(tok.decode(tok.encode(text, true)), text);

  // Adjacent, repeated, and at both ends.
  EXPECT_EQ(tok.encode("<|im_end|><|im_end|>", true), (std::vector<int32_t>{151645, 151645}));
  // Broken ones stay text.
  const std::string broken = "<|im_end|<|im_end|>|>";
  EXPECT_EQ(tok.encode(broken, true), concat({plain("<|im_end|"), {151645}, plain("|>")}));
}

TEST(Tokenizer, SpecialTokensSplitPreTokenization) {
  // Text on each side of a special token is pre-tokenized on its own, as in llama.cpp/HF.
  const Tokenizer& tok = qwen2();
  EXPECT_EQ(tok.encode("a <|endoftext|> b", true),
            concat({tok.encode("a ", false), {151643}, tok.encode(" b", false)}));
}

// Leftmost match first, then the longest at that position.
TEST(Tokenizer, SpecialTokensLeftmostLongest) {
  test::SyntheticVocab vocab;
  vocab.specials = {{"<a>", 3}, {"<a><b>", 4}, {"b><c", 3}, {"<c>", 3}, {"\xe4\xb8", 4}};
  const gguf::File file = test::make_gguf(vocab.metadata());
  const Tokenizer tok = Tokenizer::from_gguf(file);
  const int32_t a = 256, ab = 257, bc = 258, c = 259, partial = 260;
  const auto bytes = [](std::string_view s) {  // byte tokens: id = byte (no merges)
    std::vector<int32_t> ids;
    for (char ch : s) ids.push_back(static_cast<uint8_t>(ch));
    return ids;
  };
  EXPECT_EQ(tok.encode("<a><b><c>", true), (std::vector<int32_t>{ab, c}));
  EXPECT_EQ(tok.encode("<a><b", true), concat({{a}, bytes("<b")}));
  EXPECT_EQ(tok.encode("x<b><c>", true), concat({bytes("x<"), {bc}, bytes(">")}));
  EXPECT_EQ(tok.encode("\xe4\xb8\x96", true), concat({{partial}, bytes("\x96")}));
  EXPECT_EQ(tok.encode("\xe4\xb8\x96", false), bytes("\xe4\xb8\x96"));
  EXPECT_TRUE(tok.is_control(a));
  EXPECT_FALSE(tok.is_control(ab));
}

TEST(Tokenizer, AddsBosOnlyWhenTheFileAsks) {
  test::SyntheticVocab vocab;
  vocab.specials = {{"<s>", 3}};
  auto metadata = vocab.metadata();
  metadata.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::u32(256));
  metadata.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  const gguf::File file = test::make_gguf(metadata);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.encode("hi", false, true), (std::vector<int32_t>{256, 'h', 'i'}));
  EXPECT_EQ(tok.encode("hi", false, false), (std::vector<int32_t>{'h', 'i'}));
  // Without add_bos_token, add_bos=true adds nothing.
  EXPECT_EQ(qwen2().encode("hi", false, true), qwen2().encode("hi", false, false));
}

TEST(Tokenizer, MergesApplyByRank) {
  test::SyntheticVocab vocab;
  // Token ids: 256 "ab", 257 "bc", 258 "abc". A merge's rank is its index, so in "abc" the
  // pair "a b" (rank 0) goes before "b c" (rank 1), and "ab c" finishes the word.
  vocab.merges = {"a b", "b c", "ab c"};
  const gguf::File file = test::make_gguf(vocab.metadata());
  const Tokenizer tok = Tokenizer::from_gguf(file);
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.encode("bcab", false), (std::vector<int32_t>{257, 256}));
  EXPECT_EQ(tok.encode("abbc", false), (std::vector<int32_t>{256, 257}));

  test::SyntheticVocab reversed;
  reversed.merges = {"b c", "a b", "a bc"};  // 256 "bc", 257 "ab", 258 "abc"
  const gguf::File file2 = test::make_gguf(reversed.metadata());
  const Tokenizer tok2 = Tokenizer::from_gguf(file2);
  EXPECT_EQ(tok2.encode("abc", false), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok2.encode("abab", false), (std::vector<int32_t>{257, 257}));
  // "aaa" with "a a": the leftmost pair merges first.
  test::SyntheticVocab triple;
  triple.merges = {"a a"};  // 256 "aa"
  const gguf::File file3 = test::make_gguf(triple.metadata());
  EXPECT_EQ(Tokenizer::from_gguf(file3).encode("aaa", false), (std::vector<int32_t>{256, 'a'}));
}

// ---- The tiny models' vocab ---------------------------------------------------------------

TEST(Tokenizer, LoadsTheTinyModelVocab) {
  const gguf::File file = gguf::File::open(test::kTinyModel);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos(), 509);
  EXPECT_EQ(tok.eos(), 511);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_TRUE(tok.is_end_of_generation(511));
  EXPECT_TRUE(tok.is_end_of_generation(509));  // <|endoftext|>
  EXPECT_FALSE(tok.is_end_of_generation(510));
  EXPECT_EQ(tok.encode("<|im_start|>hi<|im_end|>", true).front(), 510);
  EXPECT_EQ(tok.encode("<|im_start|>hi<|im_end|>", true).back(), 511);
  // Its 253 merges are the first 253 of the real vocab: same ids as the real vocab where the
  // real encoding only uses those tokens.
  std::mt19937 rng(3);
  for (int round = 0; round < 100; ++round) {
    const std::string text = test::random_unicode(rng, rng() % 60);
    const auto ids = tok.encode(text, false);
    ASSERT_EQ(tok.decode(ids), text);
    const auto real = qwen2().encode(text, false);
    if (std::all_of(real.begin(), real.end(), [](int32_t id) { return id < 509; })) {
      EXPECT_EQ(ids, real) << testing::PrintToString(text);
    }
  }
}

// ---- Errors -------------------------------------------------------------------------------

void expect_error_naming(const std::vector<std::pair<std::string, gguf::Value>>& metadata,
                         const std::string& needle) {
  const gguf::File file = test::make_gguf(metadata);
  try {
    Tokenizer::from_gguf(file);
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

auto without(std::vector<std::pair<std::string, gguf::Value>> metadata, const std::string& key) {
  std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
  return metadata;
}

auto with(std::vector<std::pair<std::string, gguf::Value>> metadata, const std::string& key,
          gguf::Value value) {
  metadata = without(std::move(metadata), key);
  metadata.emplace_back(key, std::move(value));
  return metadata;
}

TEST(Tokenizer, MissingOrBadKeysAreNamed) {
  test::SyntheticVocab vocab;
  vocab.merges = {"a b"};
  const auto good = vocab.metadata();
  ASSERT_NO_THROW(Tokenizer::from_gguf(test::make_gguf(good)));

  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                          "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}) {
    expect_error_naming(without(good, key), key);
  }
  using gguf::Value;
  expect_error_naming(with(good, "tokenizer.ggml.model", Value::string("llama")),
                      "tokenizer.ggml.model");
  expect_error_naming(with(good, "tokenizer.ggml.model", Value::u32(2)), "tokenizer.ggml.model");
  expect_error_naming(with(good, "tokenizer.ggml.pre", Value::string("llama3")),
                      "tokenizer.ggml.pre");
  expect_error_naming(with(good, "tokenizer.ggml.tokens", test::int_array({1, 2})),
                      "tokenizer.ggml.tokens");
  expect_error_naming(with(good, "tokenizer.ggml.tokens", test::string_array({})),
                      "tokenizer.ggml.tokens");
  expect_error_naming(with(good, "tokenizer.ggml.token_type", test::int_array({1, 1})),
                      "tokenizer.ggml.token_type");
  std::vector<int32_t> types(257, 1);
  types[5] = 9;
  expect_error_naming(with(good, "tokenizer.ggml.token_type", test::int_array(types)),
                      "tokenizer.ggml.token_type[5]");
  expect_error_naming(with(good, "tokenizer.ggml.token_type", test::string_array({"x"})),
                      "tokenizer.ggml.token_type");
  expect_error_naming(with(good, "tokenizer.ggml.merges", test::string_array({"ab"})),
                      "tokenizer.ggml.merges[0]");
  expect_error_naming(with(good, "tokenizer.ggml.bos_token_id", Value::u32(257)),
                      "tokenizer.ggml.bos_token_id");
  expect_error_naming(with(good, "tokenizer.ggml.eos_token_id", Value::i32(-1)),
                      "tokenizer.ggml.eos_token_id");
  expect_error_naming(with(good, "tokenizer.ggml.padding_token_id", Value::string("0")),
                      "tokenizer.ggml.padding_token_id");
  expect_error_naming(with(good, "tokenizer.ggml.add_bos_token", Value::string("yes")),
                      "tokenizer.ggml.add_bos_token");
  expect_error_naming(with(good, "tokenizer.ggml.add_bos_token", Value::boolean(true)),
                      "tokenizer.ggml.bos_token_id");
}

TEST(Tokenizer, MergesOutsideTheVocabAreIgnored) {
  test::SyntheticVocab vocab;
  vocab.merges = {"a b"};
  auto metadata = with(vocab.metadata(), "tokenizer.ggml.merges",
                       test::string_array({"x y", "a b", "\xc4\xa0 zz"}));
  const Tokenizer tok = Tokenizer::from_gguf(test::make_gguf(metadata));
  EXPECT_EQ(tok.encode("xyab", false), (std::vector<int32_t>{'x', 'y', 256}));
}

TEST(Tokenizer, MissingByteTokenIsAnErrorAtEncode) {
  test::SyntheticVocab vocab;
  auto metadata = vocab.metadata();
  // Respell byte 'q' so that no token stands for it.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level::encode(std::string(1, char(b))));
  tokens['q'] = "<not q>";
  metadata = with(metadata, "tokenizer.ggml.tokens", test::string_array(tokens));
  const Tokenizer tok = Tokenizer::from_gguf(test::make_gguf(metadata));
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{'a', 'b', 'c'}));
  try {
    tok.encode("aqa", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("71"), std::string::npos) << e.what();  // 'q' = 0x71
  }
}

TEST(Tokenizer, RefusesFilesWithoutATokenizer) {
  expect_error_naming({{"general.architecture", gguf::Value::string("qwen3next")}},
                      "tokenizer.ggml.model");
}

}  // namespace
}  // namespace rl::tokenizer
