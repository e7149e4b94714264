// Metadata values: type names and range-checked conversions.
#include <cstdint>
#include <limits>

#include "gguf/gguf.h"

namespace rl::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "uint8";
    case ValueType::INT8:
      return "int8";
    case ValueType::UINT16:
      return "uint16";
    case ValueType::INT16:
      return "int16";
    case ValueType::UINT32:
      return "uint32";
    case ValueType::INT32:
      return "int32";
    case ValueType::FLOAT32:
      return "float32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "uint64";
    case ValueType::INT64:
      return "int64";
    case ValueType::FLOAT64:
      return "float64";
  }
  return "?";
}

std::optional<int64_t> Value::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  return std::nullopt;
}

std::optional<uint64_t> Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const {
  return std::get_if<std::string>(&data);
}

const Array* Value::as_array() const {
  return std::get_if<Array>(&data);
}

}  // namespace rl::gguf
