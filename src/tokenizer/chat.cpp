#include "tokenizer/chat.h"

#include "tokenizer/chat_python.h"
#include "tokenizer/chat_templates.h"
#include "util/error.h"

namespace rl::chat {

Family detect_family(std::string_view chat_template) {
  // Only the Coder template writes tool calls as XML; the Qwen3 one mentions <function-name>.
  const bool coder = chat_template.find("<function=") != std::string_view::npos ||
                     chat_template.find("<parameter=") != std::string_view::npos;
  return coder ? Family::Qwen3Coder : Family::Qwen3;
}

const char* family_name(Family f) {
  switch (f) {
    case Family::Qwen3:
      return "Qwen3";
    case Family::Qwen3Coder:
      return "Qwen3-Coder";
  }
  return "unknown";
}

std::string render(Family family, const Json& messages, const Json& tools,
                   const RenderOptions& options) {
  // Both templates start by reading messages[0].role, which fails on an empty list.
  if (!messages.is_array() || messages.empty()) {
    fail("chat template ", family_name(family), ": messages must be a non-empty array, got ",
         messages.is_array() ? "an empty array" : messages.type_name());
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].is_object()) {
      fail("chat template ", family_name(family), ": messages[", i, "] must be an object, got ",
           messages[i].type_name());
    }
  }
  // Objects and strings are iterable in Jinja too, but iterating a tool list that is not a list
  // renders nonsense; refuse it instead.
  if (!tools.is_null() && !tools.is_array()) {
    fail("chat template ", family_name(family), ": tools must be an array or null, got ",
         tools.type_name());
  }
  switch (family) {
    case Family::Qwen3:
      return detail::render_qwen3(messages, tools, options);
    case Family::Qwen3Coder:
      return detail::render_qwen3_coder(messages, tools, options);
  }
  fail("chat template: unknown family");
}

namespace detail {

const Json* field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string_view role_of(const Json& message) {
  const Json* role = field(message, "role");
  if (role == nullptr || !role->is_string()) return {};
  return role->get_ref<const std::string&>();
}

bool truthy(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return value.get<bool>();
    case Json::value_t::number_integer:
      return value.get<int64_t>() != 0;
    case Json::value_t::number_unsigned:
      return value.get<uint64_t>() != 0;
    case Json::value_t::number_float:
      return value.get<double>() != 0.0;
    case Json::value_t::string:
      return !value.get_ref<const std::string&>().empty();
    default:
      return !value.empty();  // array, object
  }
}

std::string print(const Json* value) {
  return value == nullptr ? std::string() : py::str(*value);
}

std::string where(Family family, const Json& messages, size_t index) {
  std::string role(role_of(messages[index]));
  return str("chat template ", family_name(family), ": messages[", index, "]",
             role.empty() ? "" : " (" + role + ")");
}

const std::string& string_field(Family family, const Json& messages, size_t index,
                                std::string_view key) {
  const Json* value = field(messages[index], key);
  if (value == nullptr) fail(where(family, messages, index), ": missing ", key);
  if (!value->is_string()) {
    fail(where(family, messages, index), ": ", key, " must be a string, got ", value->type_name());
  }
  return value->get_ref<const std::string&>();
}

}  // namespace detail
}  // namespace rl::chat
