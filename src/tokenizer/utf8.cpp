#include "tokenizer/utf8.h"

#include <cstdint>

namespace rl::tokenizer::utf8 {

namespace {

// Range of the second byte allowed after a lead byte (Unicode Table 3-7); the later
// continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  int length;  // 0: not a lead byte
  uint8_t second_lo, second_hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation byte, or overlong C0/C1
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlongs
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlongs
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

Step decode(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  const LeadInfo info = lead_info(lead);
  if (info.length == 1) return {Status::Ok, 1, lead};
  if (info.length == 0) return {Status::Invalid, 1, 0};

  char32_t code = lead & (0xFF >> (info.length + 1));
  for (int k = 1; k < info.length; ++k) {
    if (pos + k >= text.size()) return {Status::Truncated, static_cast<size_t>(k), 0};
    const uint8_t b = byte(pos + k);
    const uint8_t lo = k == 1 ? info.second_lo : 0x80;
    const uint8_t hi = k == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {Status::Invalid, static_cast<size_t>(k), 0};
    code = (code << 6) | (b & 0x3F);
  }
  return {Status::Ok, static_cast<size_t>(info.length), code};
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_valid(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Step s = decode(text, pos);
    if (s.status != Status::Ok) return false;
    pos += s.length;
  }
  return true;
}

}  // namespace rl::tokenizer::utf8
