// The Python behaviours the chat templates rely on, reproduced byte for byte: the templates are
// Jinja run by Python, so what they print is json.dumps(..., ensure_ascii=False), str() and
// str.strip() of the values, and the chat renderer must print the same bytes.
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/chat.h"

namespace rl::chat::py {

// json.dumps(value, ensure_ascii=False): one line, ", " and ": " separators, non-ASCII written
// raw, only '"', '\\' and characters below U+0020 escaped. Object keys keep their order.
std::string json_dumps(const Json& value);

// str(value) of the Python object that json.loads would have produced: strings as they are,
// True/False/None, floats as repr ("1.0", "1e-07"), lists and dicts as their repr
// ("['integer', 'null']", "{'a': 1}").
std::string str(const Json& value);

// repr(float): the shortest digits that round-trip, fixed notation for exponents -4..15 (always
// with a fractional part), else d.ddde+XX.
std::string float_repr(double value);

// repr(str): quoted with ' (or " when the text holds ' but no "), escapes as Python writes them.
std::string string_repr(std::string_view text);

// str.strip() with no argument: removes leading and trailing Unicode whitespace
// (str.isspace()). Bytes that are not valid UTF-8 count as non-space.
std::string_view strip(std::string_view text);

// str.strip(chars) / lstrip / rstrip with an explicit set of ASCII characters.
std::string_view strip_chars(std::string_view text, std::string_view chars);
std::string_view lstrip_chars(std::string_view text, std::string_view chars);
std::string_view rstrip_chars(std::string_view text, std::string_view chars);

}  // namespace rl::chat::py
