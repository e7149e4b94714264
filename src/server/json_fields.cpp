#include "server/json_fields.h"

#include <cmath>
#include <string>

#include "server/api_error.h"
#include "util/error.h"

namespace rl::server {

Json parse_request_body(std::string_view body) {
  if (body.empty()) bad_request("the request body is empty; a JSON object was expected");
  // The callback sees every value with its depth; refusing deep nesting here keeps later
  // recursive walks (template rendering, serialisation) within a small, fixed stack depth.
  Json::parser_callback_t depth_guard = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth)
      bad_request(str("the request JSON is nested deeper than ", kMaxJsonDepth, " levels"));
    return true;
  };
  Json parsed;
  try {
    parsed = Json::parse(body.begin(), body.end(), depth_guard);
  } catch (const Json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    bad_request("invalid JSON in the request body: " + what);
  } catch (const Json::exception& e) {
    bad_request(str("invalid JSON in the request body: ", e.what()));
  }
  if (!parsed.is_object())
    bad_request("the request body must be a JSON object, not " + json_type_name(parsed));
  return parsed;
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string brief_json(const Json& value) {
  std::string s = dump_json(value);
  if (s.size() <= 60) return s;
  size_t cut = 57;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole chars
  return s.substr(0, cut) + "...";
}

std::string json_type_name(const Json& value) {
  if (value.is_number_float()) return "number";
  if (value.is_number()) return "integer";
  return value.type_name();
}

std::string field_path(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return str(path, ".", key);
}

std::string index_path(std::string_view path, size_t index) {
  return str(path, "[", index, "]");
}

const Json* find_field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

[[noreturn]] void wrong_type(const Json& value, std::string_view path, std::string_view key,
                             std::string_view expected) {
  const std::string name = field_path(path, key);
  bad_request(str("'", name, "' must be ", expected, ", not ", json_type_name(value)), name);
}

std::string format_number(double v) {
  return str(v);
}

}  // namespace

std::optional<double> read_number(const Json& object, std::string_view key, double min, double max,
                                  std::string_view path) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(*v, path, key, "a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    const std::string name = field_path(path, key);
    bad_request(str("'", name, "' must be between ", format_number(min), " and ",
                    format_number(max), ", got ", brief_json(*v)),
                name);
  }
  return x;
}

std::optional<int64_t> read_integer(const Json& object, std::string_view key, int64_t min,
                                    int64_t max, std::string_view path) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  const std::string name = field_path(path, key);
  auto out_of_range = [&]() {
    bad_request(str("'", name, "' must be an integer between ", min, " and ", max, ", got ",
                    brief_json(*v)),
                name);
  };
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(max) || (min > 0 && u < static_cast<uint64_t>(min)))
      out_of_range();
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < min || i > max) out_of_range();
    return i;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d))
      bad_request(str("'", name, "' must be an integer, got ", brief_json(*v)), name);
    if (d < static_cast<double>(min) || d > static_cast<double>(max)) out_of_range();
    return static_cast<int64_t>(d);
  }
  wrong_type(*v, path, key, "an integer");
}

std::optional<bool> read_bool(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(*v, path, key, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> read_string(const Json& object, std::string_view key,
                                       std::string_view path) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(*v, path, key, "a string");
  return v->get<std::string>();
}

std::string require_string(const Json& object, std::string_view key, std::string_view path) {
  auto s = read_string(object, key, path);
  if (!s) {
    const std::string name = field_path(path, key);
    bad_request(str("missing required parameter '", name, "' (a string)"), name);
  }
  return *s;
}

const Json& require_array(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = read_array(object, key, path);
  if (!v) {
    const std::string name = field_path(path, key);
    bad_request(str("missing required parameter '", name, "' (an array)"), name);
  }
  return *v;
}

const Json* read_object(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = find_field(object, key);
  if (v && !v->is_object()) wrong_type(*v, path, key, "an object");
  return v;
}

const Json* read_array(const Json& object, std::string_view key, std::string_view path) {
  const Json* v = find_field(object, key);
  if (v && !v->is_array()) wrong_type(*v, path, key, "an array");
  return v;
}

}  // namespace rl::server
