#include "tokenizer/chat_python.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace rl::chat::py {
namespace {

// One decoded character: its code point (or -1 for a byte that does not start valid UTF-8) and
// its length in bytes.
struct Char {
  int32_t code;
  size_t length;
};

Char decode_at(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  size_t length = 0;
  int32_t code = 0;
  int32_t min_code = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2, code = b0 & 0x1F, min_code = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3, code = b0 & 0x0F, min_code = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4, code = b0 & 0x07, min_code = 0x10000;
  } else {
    return {-1, 1};
  }
  if (pos + length > s.size()) return {-1, 1};
  for (size_t i = 1; i < length; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return {-1, 1};
    code = (code << 6) | (b & 0x3F);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {-1, 1};
  return {code, length};
}

// Start of the character that ends just before `end` (end > 0).
size_t previous_char_start(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
    --start;
  }
  if (decode_at(s, start).length == end - start) return start;
  return end - 1;  // not a whole character: step back one byte
}

bool is_space(int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// str.isprintable() for non-ASCII characters: false for the categories Cc, Cf, Zs, Zl, Zp, Co
// and the noncharacters. Unassigned code points (Cn) count as printable here: their set depends
// on the Python version's Unicode database, and they do not occur in tool schemas in practice.
bool is_printable_non_ascii(int32_t c) {
  if (c <= 0xA0 || c == 0xAD) return false;  // C1 controls, NBSP, soft hyphen
  if (is_space(c)) return false;
  static constexpr int32_t kFormatRanges[][2] = {
      {0x600, 0x605},     {0x61C, 0x61C},      {0x6DD, 0x6DD},     {0x70F, 0x70F},
      {0x890, 0x891},     {0x8E2, 0x8E2},      {0x180E, 0x180E},   {0x200B, 0x200F},
      {0x202A, 0x202E},   {0x2060, 0x2064},    {0x2066, 0x206F},   {0xFEFF, 0xFEFF},
      {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},  {0x110CD, 0x110CD}, {0x13430, 0x1343F},
      {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},  {0xE0001, 0xE0001}, {0xE0020, 0xE007F},
      {0xE000, 0xF8FF},   {0xF0000, 0x10FFFF}, {0xFDD0, 0xFDEF}};
  for (const auto& range : kFormatRanges) {
    if (c >= range[0] && c <= range[1]) return false;
  }
  return (c & 0xFFFE) != 0xFFFE;
}

void append_hex(std::string& out, char prefix, uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\%c%0*x", prefix, digits, value);
  out += buf;
}

void dump_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          append_hex(out, 'u', c, 4);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// json.dumps writes non-finite floats as JavaScript literals.
std::string json_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return float_repr(value);
}

// Python's layout of a list or a dict, "[a, b]" or "{k: v, ...}"; json.dumps and repr differ only
// in how they print the items and keys.
template <class PrintItem, class PrintKey>
void append_container(std::string& out, const Json& value, PrintItem&& print_item,
                      PrintKey&& print_key) {
  const bool dict = value.is_object();
  out += dict ? '{' : '[';
  bool first = true;
  for (const auto& [key, item] : value.items()) {
    if (!first) out += ", ";
    first = false;
    if (dict) {
      print_key(out, key);
      out += ": ";
    }
    print_item(out, item);
  }
  out += dict ? '}' : ']';
}

void dump(std::string& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      out += "null";
      break;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      break;
    case Json::value_t::number_integer:
      out += std::to_string(value.get<int64_t>());
      break;
    case Json::value_t::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      break;
    case Json::value_t::number_float:
      out += json_float(value.get<double>());
      break;
    case Json::value_t::string:
      dump_string(out, value.get_ref<const std::string&>());
      break;
    case Json::value_t::array:
    case Json::value_t::object:
      append_container(
          out, value, [](std::string& o, const Json& item) { dump(o, item); },
          [](std::string& o, const std::string& key) { dump_string(o, key); });
      break;
    default:
      fail("chat template: a JSON value of type ", value.type_name(), " cannot be printed");
  }
}

std::string python_float_str(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return float_repr(value);
}

void append_repr(std::string& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::string:
      out += string_repr(value.get_ref<const std::string&>());
      break;
    case Json::value_t::array:
    case Json::value_t::object:
      append_container(
          out, value, [](std::string& o, const Json& item) { append_repr(o, item); },
          [](std::string& o, const std::string& key) { o += string_repr(key); });
      break;
    case Json::value_t::number_float:
      out += python_float_str(value.get<double>());
      break;
    default:
      out += str(value);
  }
}

bool in_set(char c, std::string_view chars) {
  return chars.find(c) != std::string_view::npos;
}

}  // namespace

std::string json_dumps(const Json& value) {
  std::string out;
  dump(out, value);
  return out;
}

std::string str(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer:
      return std::to_string(value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<uint64_t>());
    case Json::value_t::number_float:
      return python_float_str(value.get<double>());
    case Json::value_t::string:
      return value.get<std::string>();
    case Json::value_t::array:
    case Json::value_t::object: {
      std::string out;
      append_repr(out, value);
      return out;
    }
    default:
      fail("chat template: a JSON value of type ", value.type_name(), " cannot be printed");
  }
}

std::string float_repr(double value) {
  if (!std::isfinite(value)) return python_float_str(value);
  // Shortest round-trip digits in scientific form, e.g. "-1.25e+00", "1e-07".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  const size_t e_pos = sci.find('e');
  std::string_view mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string out;
  if (!mantissa.empty() && mantissa[0] == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  const int n_digits = static_cast<int>(digits.size());
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else if (exponent + 1 >= n_digits) {
      out += digits;
      out.append(static_cast<size_t>(exponent + 1 - n_digits), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent + 1));
      out += '.';
      out += digits.substr(static_cast<size_t>(exponent + 1));
    }
    return out;
  }
  out += digits[0];
  if (n_digits > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp_buf;
  return out;
}

std::string string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < text.size();) {
    const Char ch = decode_at(text, pos);
    const std::string_view bytes = text.substr(pos, ch.length);
    pos += ch.length;
    const int32_t c = ch.code;
    if (c < 0) {
      // Python strings cannot hold invalid UTF-8; show the byte the way a surrogate escape would.
      append_hex(out, 'x', static_cast<unsigned char>(bytes[0]), 2);
    } else if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_hex(out, 'x', static_cast<uint32_t>(c), 2);
    } else if (c < 0x7F || is_printable_non_ascii(c)) {
      out += bytes;
    } else if (c <= 0xFF) {
      append_hex(out, 'x', static_cast<uint32_t>(c), 2);
    } else if (c <= 0xFFFF) {
      append_hex(out, 'u', static_cast<uint32_t>(c), 4);
    } else {
      append_hex(out, 'U', static_cast<uint32_t>(c), 8);
    }
  }
  out += quote;
  return out;
}

std::string_view strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const Char ch = decode_at(text, begin);
    if (ch.code < 0 || !is_space(ch.code)) break;
    begin += ch.length;
  }
  size_t end = text.size();
  while (end > begin) {
    const size_t start = previous_char_start(text, end);
    const Char ch = decode_at(text, start);
    if (ch.code < 0 || ch.length != end - start || !is_space(ch.code)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string_view lstrip_chars(std::string_view text, std::string_view chars) {
  while (!text.empty() && in_set(text.front(), chars)) text.remove_prefix(1);
  return text;
}

std::string_view rstrip_chars(std::string_view text, std::string_view chars) {
  while (!text.empty() && in_set(text.back(), chars)) text.remove_suffix(1);
  return text;
}

std::string_view strip_chars(std::string_view text, std::string_view chars) {
  return rstrip_chars(lstrip_chars(text, chars), chars);
}

}  // namespace rl::chat::py
