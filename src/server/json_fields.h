// Strict reading of request JSON: every accessor checks the type and range of one field and
// throws ApiError 400 naming the field (with its path, e.g. "messages[2].content") otherwise.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace rl::server {

using Json = nlohmann::ordered_json;

// Parses a request body. Rejects invalid JSON (naming the byte position), invalid UTF-8,
// nesting deeper than kMaxJsonDepth, and a top level that is not an object.
constexpr int kMaxJsonDepth = 64;
Json parse_request_body(std::string_view body);

// Serialises for a response; invalid UTF-8 (which the server never produces) becomes U+FFFD.
std::string dump_json(const Json& value);

// The value as JSON, cut to about 60 bytes, for error messages.
std::string brief_json(const Json& value);

// A short description of a value's type for messages: "string", "number", "null", ...
std::string json_type_name(const Json& value);

// The field, or nullptr when it is absent or null (OpenAI treats null as "not given").
const Json* find_field(const Json& object, std::string_view key);

// Each reader returns nullopt when the field is absent or null; `path` prefixes the field name
// in error messages ("" at top level, "messages[0]" inside a message).
std::optional<double> read_number(const Json& object, std::string_view key, double min, double max,
                                  std::string_view path = {});
// Integers: JSON integers, or floats with an integral value (OpenAI's SDKs send 100.0 at times).
std::optional<int64_t> read_integer(const Json& object, std::string_view key, int64_t min,
                                    int64_t max, std::string_view path = {});
std::optional<bool> read_bool(const Json& object, std::string_view key, std::string_view path = {});
std::optional<std::string> read_string(const Json& object, std::string_view key,
                                       std::string_view path = {});
// Required variants: a missing field is "missing required parameter".
std::string require_string(const Json& object, std::string_view key, std::string_view path = {});
const Json& require_array(const Json& object, std::string_view key, std::string_view path = {});
const Json* read_object(const Json& object, std::string_view key, std::string_view path = {});
const Json* read_array(const Json& object, std::string_view key, std::string_view path = {});

std::string field_path(std::string_view path, std::string_view key);
std::string index_path(std::string_view path, size_t index);

}  // namespace rl::server
