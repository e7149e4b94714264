// UTF-8 decoding with the Unicode "maximal subpart" rule for invalid input (each maximal subpart
// of an ill-formed sequence counts as one error, as in the Unicode standard §3.9 and WHATWG).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace rl::tokenizer::utf8 {

enum class Status {
  Ok,         // a complete, well-formed character
  Invalid,    // an ill-formed sequence of `length` bytes (one replacement character)
  Truncated,  // a well-formed prefix of a character cut off by the end of the input
};

struct Step {
  Status status;
  size_t length;  // bytes consumed (>= 1)
  char32_t code;  // the character when status == Ok
};

// Decodes the character starting at text[pos] (pos < text.size()).
Step decode(std::string_view text, size_t pos);

void append(std::string& out, char32_t code);  // code must be a Unicode scalar value

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_valid(std::string_view text);

}  // namespace rl::tokenizer::utf8
