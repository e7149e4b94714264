// Qwen3-Coder.jinja, hard-coded. Tool definitions are written as XML and tool-call arguments as
// <parameter=...> blocks; non-object values go through Python str().
#include <initializer_list>
#include <string>
#include <string_view>

#include "tokenizer/chat_python.h"
#include "tokenizer/chat_templates.h"
#include "util/error.h"

namespace rl::chat::detail {
namespace {

constexpr Family kFamily = Family::Qwen3Coder;

constexpr std::string_view kDefaultSystem =
    "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.";
constexpr std::string_view kToolsHeader =
    "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>";
constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n"
    "</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: "
    "the tool calling block MUST begin with an opening <tool_call> tag and end with a closing "
    "</tool_call> tag.\n- Required parameters MUST be specified\n- You may provide optional "
    "reasoning for your function call in natural language BEFORE the function call, but NOT "
    "after\n- If there is no function call available, answer the question like normal with your "
    "current knowledge and do not tell the user about function calls\n</IMPORTANT>";

// The template's render_extra_keys macro: every key not handled elsewhere as <key>value</key>,
// objects and arrays as JSON, anything else through str().
void render_extra_keys(std::string& out, const Json* object,
                       std::initializer_list<std::string_view> handled) {
  if (object == nullptr || !object->is_object()) return;
  for (const auto& [key, value] : object->items()) {
    bool is_handled = false;
    for (std::string_view h : handled) is_handled = is_handled || key == h;
    if (is_handled) continue;
    out += "\n<" + key + '>';
    out += value.is_object() || value.is_array() ? py::json_dumps(value) : py::str(value);
    out += "</" + key + '>';
  }
}

void render_description(std::string& out, const Json& object) {
  if (const Json* description = field(object, "description")) {
    out += "\n<description>";
    out += py::strip(py::str(*description));
    out += "</description>";
  }
}

void render_tool(std::string& out, const Json& entry) {
  const Json* function = field(entry, "function");
  const Json& tool = function != nullptr ? *function : entry;
  out += "\n<function>\n<name>";
  out += print(field(tool, "name"));
  out += "</name>";
  render_description(out, tool);
  out += "\n<parameters>";
  const Json* parameters = field(tool, "parameters");
  const Json* properties = parameters != nullptr ? field(*parameters, "properties") : nullptr;
  if (properties != nullptr && properties->is_object()) {
    for (const auto& [name, fields] : properties->items()) {
      out += "\n<parameter>\n<name>" + name + "</name>";
      if (const Json* type = field(fields, "type")) {
        out += "\n<type>" + py::str(*type) + "</type>";
      }
      render_description(out, fields);
      render_extra_keys(out, &fields, {"name", "type", "description"});
      out += "\n</parameter>";
    }
  }
  render_extra_keys(out, parameters, {"type", "properties"});
  out += "\n</parameters>";
  render_extra_keys(out, &tool, {"type", "name", "description", "parameters"});
  out += "\n</function>";
}

void render_tool_call(std::string& out, const Json& messages, size_t index, size_t call_index,
                      const Json& call) {
  const Json* function = field(call, "function");
  const Json& fn = function != nullptr ? *function : call;
  const Json* name = field(fn, "name");
  if (name == nullptr || !name->is_string()) {
    fail(where(kFamily, messages, index), ": tool_calls[", call_index,
         "] needs a string function name");
  }
  out += "\n<tool_call>\n<function=" + name->get<std::string>() + ">\n";
  if (const Json* arguments = field(fn, "arguments")) {
    if (!arguments->is_object()) {
      fail(where(kFamily, messages, index), ": tool_calls[", call_index,
           "] arguments must be a JSON object for the Qwen3-Coder template, got ",
           arguments->type_name());
    }
    for (const auto& [key, value] : arguments->items()) {
      out += "<parameter=" + key + ">\n";
      out += value.is_object() || value.is_array() ? py::json_dumps(value) : py::str(value);
      out += "\n</parameter>\n";
    }
  }
  out += "</function>\n</tool_call>";
}

void render_assistant_with_calls(std::string& out, const Json& messages, size_t index) {
  const Json& message = messages[index];
  out += "<|im_start|>assistant";
  const Json* content = field(message, "content");
  if (content != nullptr && content->is_string()) {
    const std::string_view trimmed = py::strip(content->get_ref<const std::string&>());
    if (!trimmed.empty()) {
      out += '\n';
      out += trimmed;
      out += '\n';
    }
  }
  const Json& calls = message["tool_calls"];
  for (size_t j = 0; j < calls.size(); ++j) render_tool_call(out, messages, index, j, calls[j]);
  out += "<|im_end|>\n";
}

// `message.tool_calls is defined and is iterable and length > 0`. A non-empty string or object
// would be iterated as characters or keys, which fails in the template too.
bool has_tool_calls(const Json& messages, size_t index) {
  const Json* calls = field(messages[index], "tool_calls");
  if (calls == nullptr) return false;
  if (calls->is_array()) return !calls->empty();
  const bool iterable_non_empty = (calls->is_object() && !calls->empty()) ||
                                  (calls->is_string() && !calls->get<std::string>().empty());
  if (iterable_non_empty) {
    fail(where(kFamily, messages, index), ": tool_calls must be an array, got ",
         calls->type_name());
  }
  return false;  // null, numbers, booleans and empty values: rendered as a plain message
}

void render_plain(std::string& out, const Json& messages, size_t index) {
  const Json* role = field(messages[index], "role");
  if (role == nullptr || !role->is_string()) fail(where(kFamily, messages, index), ": no role");
  out += "<|im_start|>" + role->get<std::string>() + '\n';
  out += string_field(kFamily, messages, index, "content");
  out += "<|im_end|>\n";
}

}  // namespace

std::string render_qwen3_coder(const Json& messages, const Json& tools,
                               const RenderOptions& options) {
  std::string out;
  const bool has_system = role_of(messages[0]) == "system";
  const size_t first = has_system ? 1 : 0;  // the template's loop_messages
  const bool has_tools = tools.is_array() && !tools.empty();

  if (has_system) {
    out += "<|im_start|>system\n";
    out += string_field(kFamily, messages, 0, "content");
  } else if (has_tools) {
    out += "<|im_start|>system\n";
    out += kDefaultSystem;
  }
  if (has_tools) {
    out += kToolsHeader;
    for (const Json& tool : tools) render_tool(out, tool);
    out += kToolsFooter;
  }
  if (has_system || has_tools) out += "<|im_end|>\n";

  for (size_t i = first; i < messages.size(); ++i) {
    const std::string_view role = role_of(messages[i]);
    const bool is_last = i + 1 == messages.size();
    if (role == "assistant" && has_tool_calls(messages, i)) {
      render_assistant_with_calls(out, messages, i);
    } else if (role == "tool") {
      // A tool result opens a user turn after a non-tool message (but not as the first message
      // of the loop: there is no previous item then) and closes it before a non-tool message.
      if (i > first && role_of(messages[i - 1]) != "tool") out += "<|im_start|>user\n";
      out += "<tool_response>\n";
      out += print(field(messages[i], "content"));
      out += "\n</tool_response>\n";
      if (is_last || role_of(messages[i + 1]) != "tool") out += "<|im_end|>\n";
    } else {
      render_plain(out, messages, i);  // user, system, assistant and any other role
    }
  }

  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace rl::chat::detail
