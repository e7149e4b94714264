// Shared helpers of the tokenizer tests: the golden vocab files and small synthetic GGUFs.
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace rl::tokenizer::test {

inline std::string shared_path(const std::string& relative) {
  return std::string(RL_SHARED_DIR) + "/" + relative;
}
inline const std::string kQwen2Vocab = shared_path("testdata/tokenizer/ggml-vocab-qwen2.gguf");
inline const std::string kTinyModel = shared_path("testdata/tiny/tiny-f32.gguf");

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The qwen2 vocab, loaded once for the whole test program.
inline const Tokenizer& qwen2() {
  static const gguf::File file = gguf::File::open(kQwen2Vocab);
  static const Tokenizer tokenizer = Tokenizer::from_gguf(file);
  return tokenizer;
}

// llama.cpp's tokenizer test vectors: strings of the .inp file and token lines of the .out file.
struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids;
};
inline std::vector<GoldenCase> golden_cases() {
  const std::string inp = read_file(kQwen2Vocab + ".inp");
  const std::string out = read_file(kQwen2Vocab + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<GoldenCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(separator, pos);
    if (end == std::string::npos) throw std::runtime_error(".inp does not end with a separator");
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) throw std::runtime_error(".out has fewer lines than .inp");
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// Random text mixing ASCII, Latin, Cyrillic, CJK, emoji (with ZWJ and variation selectors),
// combining marks, digits of several scripts and every kind of white space.
inline std::string random_unicode(std::mt19937& rng, size_t n_chars) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},       {0x20, 0x7E},        {0x20, 0x7E},     {'\t', '\r'},
      {0xA0, 0xFF},       {0x100, 0x17F},      {0x300, 0x36F},   {0x400, 0x4FF},
      {0x660, 0x669},     {0x900, 0x97F},      {0x1680, 0x1680}, {0x180E, 0x180E},
      {0x2000, 0x200D},   {0x2028, 0x202F},    {0x3000, 0x3000}, {0x3040, 0x30FF},
      {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},    {0xFE00, 0xFE0F}, {0x1F300, 0x1F6FF},
      {0x1F900, 0x1F9FF}, {0x10000, 0x10FFFF}, {'\'', '\''},     {0x85, 0x85},
      {0x0, 0x1F}};
  std::string out;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& [lo, hi] = ranges[rng() % ranges.size()];
    char32_t c = lo + static_cast<char32_t>(rng() % (hi - lo + 1));
    if (c >= 0xD800 && c <= 0xDFFF) c = 'x';  // not a scalar value
    utf8::append(out, c);
  }
  return out;
}

// Builds an in-memory GGUF holding the given metadata.
inline gguf::File make_gguf(const std::vector<std::pair<std::string, gguf::Value>>& metadata) {
  return gguf::File::from_bytes(gguf::write_to_memory(metadata, {}), "synthetic.gguf");
}

inline gguf::Value string_array(const std::vector<std::string>& items) {
  std::vector<gguf::Value> values;
  for (const auto& s : items) values.push_back(gguf::Value::string(s));
  return gguf::Value::array(gguf::ValueType::STRING, std::move(values));
}

inline gguf::Value int_array(const std::vector<int32_t>& items) {
  std::vector<gguf::Value> values;
  for (int32_t v : items) values.push_back(gguf::Value::i32(v));
  return gguf::Value::array(gguf::ValueType::INT32, std::move(values));
}

// A small byte-level vocab: the 256 byte tokens (ids 0..255 in byte order), the merges given
// as "a b" (byte-level spelling) with their results appended as tokens, then the special
// tokens (text, type).
struct SyntheticVocab {
  std::vector<std::string> merges;
  std::vector<std::pair<std::string, int32_t>> specials;

  std::vector<std::pair<std::string, gguf::Value>> metadata() const {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(byte_level::encode(std::string(1, static_cast<char>(b))));
      types.push_back(1);
    }
    for (const auto& m : merges) {
      const size_t space = m.find(' ');
      tokens.push_back(m.substr(0, space) + m.substr(space + 1));
      types.push_back(1);
    }
    for (const auto& [text, type] : specials) {
      tokens.push_back(text);
      types.push_back(type);
    }
    return {{"general.architecture", gguf::Value::string("qwen3next")},
            {"tokenizer.ggml.model", gguf::Value::string("gpt2")},
            {"tokenizer.ggml.pre", gguf::Value::string("qwen2")},
            {"tokenizer.ggml.tokens", string_array(tokens)},
            {"tokenizer.ggml.token_type", int_array(types)},
            {"tokenizer.ggml.merges", string_array(merges)}};
  }
};

}  // namespace rl::tokenizer::test
