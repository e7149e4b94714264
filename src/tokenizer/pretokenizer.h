// The qwen2 pre-tokenizer: splits text into the pieces that BPE then encodes separately, with
// the same splits as Hugging Face tokenizers for the Qwen2 regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// run by PCRE2 (UTF + UCP). \s is spelled out as the Unicode White_Space property, which is what
// Oniguruma (used by Hugging Face) means by it; PCRE2's own \s adds U+180E.
//
// Ill-formed UTF-8: the regex never matches an ill-formed byte, so every maximal run of bytes
// that are not part of a well-formed character becomes one piece of its own (a regex item
// next to it behaves as at the end of the text). The pieces always cover the text exactly.
#pragma once
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace rl::tokenizer {

class Qwen2PreTokenizer {
 public:
  Qwen2PreTokenizer();  // throws rl::Error if PCRE2 rejects the pattern (a build problem)
  ~Qwen2PreTokenizer();
  Qwen2PreTokenizer(const Qwen2PreTokenizer&) = delete;
  Qwen2PreTokenizer& operator=(const Qwen2PreTokenizer&) = delete;

  // Appends the pieces of text, in order, to pieces (views into text). Thread-safe.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace rl::tokenizer
