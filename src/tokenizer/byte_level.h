// The GPT-2 byte-level mapping: every byte gets a printable Unicode character so that byte
// strings can be stored as text in the vocab and merges. Printable Latin-1 bytes ('!'..'~',
// U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes take U+0100.. in
// byte order (so ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ').
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace rl::tokenizer::byte_level {

char32_t byte_to_char(uint8_t byte);
int char_to_byte(char32_t c);  // -1 when c stands for no byte

// The vocab spelling of raw bytes (each byte's character, UTF-8 encoded).
std::string encode(std::string_view bytes);

// Undoes encode(). Characters that stand for no byte, and ill-formed UTF-8, are kept as they
// are, so any vocab text decodes to something.
std::string decode(std::string_view text);

}  // namespace rl::tokenizer::byte_level
