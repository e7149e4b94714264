#include "tokenizer/chat_tool_call.h"

#include "tokenizer/output_parser.h"

namespace rl::chat::detail {
namespace {

constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// True when text[pos..] is a proper prefix of `tag` (the tag may still be completing).
bool partial_tag_at(std::string_view text, size_t pos, std::string_view tag) {
  const std::string_view rest = text.substr(pos);
  return rest.size() < tag.size() && tag.starts_with(rest);
}

std::string dump_compact(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Parses JSON without throwing; nullopt when `text` is not one valid JSON value.
std::optional<Json> try_parse(std::string_view text) {
  Json value = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::optional<ToolCall> parse_json_call(std::string_view body) {
  const std::optional<Json> call = try_parse(body);
  if (!call || !call->is_object()) return std::nullopt;
  const auto name = call->find("name");
  if (name == call->end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  const auto arguments = call->find("arguments");
  std::string arguments_text = "{}";  // a call without arguments takes none
  if (arguments != call->end()) {
    if (arguments->is_object()) {
      arguments_text = dump_compact(*arguments);
    } else if (arguments->is_string()) {
      // Some models write the arguments as a JSON string, OpenAI style; accept it when it holds
      // an object.
      const std::optional<Json> inner = try_parse(arguments->get<std::string>());
      if (!inner || !inner->is_object()) return std::nullopt;
      arguments_text = dump_compact(*inner);
    } else {
      return std::nullopt;
    }
  }
  return ToolCall{name->get<std::string>(), std::move(arguments_text)};
}

// The JSON schema of parameter `key` of tool `name`, or nullptr.
const Json* parameter_schema(const Json& tools, const std::string& name, const std::string& key) {
  if (!tools.is_array()) return nullptr;
  for (const Json& entry : tools) {
    if (!entry.is_object()) continue;
    const auto function = entry.find("function");
    const Json& tool = function != entry.end() ? *function : entry;
    if (!tool.is_object() || tool.value("name", Json()) != Json(name)) continue;
    const auto parameters = tool.find("parameters");
    if (parameters == tool.end() || !parameters->is_object()) return nullptr;
    const auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) return nullptr;
    const auto schema = properties->find(key);
    return schema == properties->end() ? nullptr : &*schema;
  }
  return nullptr;
}

// Reads `<NAME>` after an opening tag such as "<function=" at text[pos]; advances pos past '>'.
std::optional<std::string> read_tag_name(std::string_view text, size_t& pos,
                                         std::string_view open) {
  if (!text.substr(pos).starts_with(open)) return std::nullopt;
  const size_t close = text.find('>', pos + open.size());
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view name = trim(text.substr(pos + open.size(), close - pos - open.size()));
  if (name.empty()) return std::nullopt;
  pos = close + 1;
  return std::string(name);
}

void skip_space(std::string_view text, size_t& pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
}

// <function=NAME> (<parameter=KEY>\nVALUE\n</parameter>)* </function>, from text[pos].
std::optional<ToolCall> parse_xml_function(std::string_view text, size_t& pos, const Json& tools) {
  const std::optional<std::string> name = read_tag_name(text, pos, kFunctionOpen);
  if (!name) return std::nullopt;
  Json arguments = Json::object();
  for (;;) {
    skip_space(text, pos);
    if (text.substr(pos).starts_with(kFunctionClose)) {
      pos += kFunctionClose.size();
      return ToolCall{*name, dump_compact(arguments)};
    }
    const std::optional<std::string> key = read_tag_name(text, pos, kParameterOpen);
    if (!key) return std::nullopt;
    const size_t value_end = text.find(kParameterClose, pos);
    if (value_end == std::string_view::npos) return std::nullopt;
    std::string_view value = text.substr(pos, value_end - pos);
    // The format puts the value on its own lines: drop exactly one newline on each side.
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    arguments[*key] = coder_parameter_value(value, parameter_schema(tools, *name, *key));
    pos = value_end + kParameterClose.size();
  }
}

// The "type" of a JSON schema as a list of names (empty when absent or not names).
std::vector<std::string> schema_types(const Json* schema) {
  std::vector<std::string> types;
  if (schema == nullptr || !schema->is_object()) return types;
  const auto type = schema->find("type");
  if (type == schema->end()) return types;
  if (type->is_string()) types.push_back(type->get<std::string>());
  if (type->is_array()) {
    for (const Json& t : *type) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  return types;
}

bool has_json_type(const Json& value, const std::string& type) {
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "null") return value.is_null();
  return false;
}

}  // namespace

ToolCallScanner::State ToolCallScanner::scan(std::string_view text) {
  if (dialect_ == Dialect::Unknown) {
    while (pos_ < text.size() && is_space(text[pos_])) ++pos_;
    if (pos_ == text.size()) return State::Open;
    if (text[pos_] == '{') {
      dialect_ = Dialect::Json;
    } else if (text.substr(pos_).starts_with(kFunctionOpen)) {
      dialect_ = Dialect::Xml;
    } else if (partial_tag_at(text, pos_, kFunctionOpen)) {
      return State::Open;
    } else {
      return State::NotACall;
    }
  }
  return dialect_ == Dialect::Json ? scan_json(text) : scan_xml(text);
}

ToolCallScanner::State ToolCallScanner::scan_json(std::string_view text) {
  for (; pos_ < text.size(); ++pos_) {
    const char c = text[pos_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '<') {
      if (text.substr(pos_).starts_with(kToolCallClose)) {
        body_end_ = pos_;
        return State::Closed;
      }
      if (partial_tag_at(text, pos_, kToolCallClose)) return State::Open;
    }
  }
  return State::Open;
}

ToolCallScanner::State ToolCallScanner::scan_xml(std::string_view text) {
  while (pos_ < text.size()) {
    const size_t lt = text.find('<', pos_);
    if (lt == std::string_view::npos) {
      pos_ = text.size();
      break;
    }
    pos_ = lt;
    if (in_value_) {
      if (text.substr(pos_).starts_with(kParameterClose)) {
        in_value_ = false;
        pos_ += kParameterClose.size();
        continue;
      }
      if (partial_tag_at(text, pos_, kParameterClose)) return State::Open;
    } else {
      if (text.substr(pos_).starts_with(kToolCallClose)) {
        body_end_ = pos_;
        return State::Closed;
      }
      if (text.substr(pos_).starts_with(kParameterOpen)) {
        const size_t gt = text.find('>', pos_ + kParameterOpen.size());
        if (gt == std::string_view::npos) return State::Open;  // the name is still coming
        in_value_ = true;
        pos_ = gt + 1;
        continue;
      }
      if (partial_tag_at(text, pos_, kToolCallClose) ||
          partial_tag_at(text, pos_, kParameterOpen)) {
        return State::Open;
      }
    }
    ++pos_;
  }
  return State::Open;
}

std::optional<std::vector<ToolCall>> parse_tool_call_body(std::string_view body,
                                                          const Json& tools) {
  body = trim(body);
  std::vector<ToolCall> calls;
  if (body.starts_with('{')) {
    std::optional<ToolCall> call = parse_json_call(body);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    return calls;
  }
  // XML: one or more <function=..> blocks separated by whitespace.
  size_t pos = 0;
  while (pos < body.size()) {
    std::optional<ToolCall> call = parse_xml_function(body, pos, tools);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    skip_space(body, pos);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

Json coder_parameter_value(std::string_view value, const Json* schema) {
  const std::vector<std::string> types = schema_types(schema);
  const std::optional<Json> parsed = try_parse(value);
  if (types.empty()) {  // no schema to go by: JSON unless it is a string literal
    return parsed && !parsed->is_string() ? *parsed : Json(value);
  }
  bool allows_string = false;
  for (const std::string& type : types) allows_string = allows_string || type == "string";
  if (parsed) {
    // With "string" among the types the text is a string unless it parses as one of the others
    // (["string", "null"] and "null" gives null); without it, any valid JSON is taken.
    if (!allows_string) return *parsed;
    for (const std::string& type : types) {
      if (has_json_type(*parsed, type)) return *parsed;
    }
    return Json(value);
  }
  if (!allows_string) {
    const std::string_view word = trim(value);
    for (const std::string& type : types) {
      if (type == "boolean" && (word == "True" || word == "False")) return Json(word == "True");
      if (type == "null" && word == "None") return Json(nullptr);
    }
  }
  return Json(value);
}

}  // namespace rl::chat::detail
