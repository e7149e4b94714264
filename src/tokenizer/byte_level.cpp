#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace rl::tokenizer::byte_level {

namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every mapped character is below U+0200

  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) {
  return tables().to_char[byte];
}

int char_to_byte(char32_t c) {
  return c < 512 ? tables().to_byte[c] : -1;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) utf8::append(out, byte_to_char(static_cast<uint8_t>(b)));
  return out;
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Step step = utf8::decode(text, pos);
    const int b = step.status == utf8::Status::Ok ? char_to_byte(step.code) : -1;
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(pos, step.length));
    }
    pos += step.length;
  }
  return out;
}

}  // namespace rl::tokenizer::byte_level
