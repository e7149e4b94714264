// Qwen-Qwen3-0.6B.jinja, hard-coded. Each block below names the part of the template it follows.
#include <string>
#include <string_view>

#include "tokenizer/chat_python.h"
#include "tokenizer/chat_templates.h"
#include "util/error.h"

namespace rl::chat::detail {
namespace {

constexpr Family kFamily = Family::Qwen3;

constexpr std::string_view kToolsHeader =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

// The template's `ns.last_query_index`: the last user message that is not a whole
// <tool_response>...</tool_response> (tool results sent back as user text); the last index when
// there is none.
size_t last_query_index(const Json& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (role_of(messages[i]) != "user") continue;
    const std::string& content = string_field(kFamily, messages, i, "content");
    const bool tool_response =
        content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
    if (!tool_response) return i;
  }
  return messages.size() - 1;
}

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  return s.substr(0, s.find(sep));
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t pos = s.rfind(sep);
  return pos == std::string_view::npos ? s : s.substr(pos + sep.size());
}

void render_tool_calls(std::string& out, const Json& messages, size_t index,
                       std::string_view content) {
  const Json* tool_calls = field(messages[index], "tool_calls");
  if (tool_calls == nullptr || tool_calls->is_null()) return;
  if (!tool_calls->is_array()) {
    fail(where(kFamily, messages, index), ": tool_calls must be an array, got ",
         tool_calls->type_name());
  }
  for (size_t j = 0; j < tool_calls->size(); ++j) {
    const Json& call = (*tool_calls)[j];
    if ((j == 0 && !content.empty()) || j > 0) out += '\n';
    // `{% if tool_call.function %}`: a truthy function field replaces the call.
    const Json* function = field(call, "function");
    const Json& fn = function != nullptr && truthy(*function) ? *function : call;
    const Json* arguments = field(fn, "arguments");
    if (arguments == nullptr) {
      fail(where(kFamily, messages, index), ": tool_calls[", j, "] has no arguments");
    }
    out += "<tool_call>\n{\"name\": \"";
    out += print(field(fn, "name"));
    out += "\", \"arguments\": ";
    out += arguments->is_string() ? arguments->get<std::string>() : py::json_dumps(*arguments);
    out += "}\n</tool_call>";
  }
}

void render_assistant(std::string& out, const Json& messages, size_t index, size_t last_query) {
  const Json& message = messages[index];
  const std::string& full_content = string_field(kFamily, messages, index, "content");
  std::string_view content = full_content;
  std::string_view reasoning;
  const Json* reasoning_field = field(message, "reasoning_content");
  if (reasoning_field != nullptr && !reasoning_field->is_null()) {
    if (!reasoning_field->is_string()) {
      fail(where(kFamily, messages, index), ": reasoning_content must be a string, got ",
           reasoning_field->type_name());
    }
    reasoning = reasoning_field->get_ref<const std::string&>();
  } else if (full_content.find("</think>") != std::string::npos) {
    content = py::lstrip_chars(after_last(full_content, "</think>"), "\n");
    reasoning = py::lstrip_chars(
        after_last(py::rstrip_chars(before_first(full_content, "</think>"), "\n"), "<think>"),
        "\n");
  }
  const bool is_last = index + 1 == messages.size();
  if (index > last_query && (is_last || !reasoning.empty())) {
    out += "<|im_start|>assistant\n<think>\n";
    out += py::strip_chars(reasoning, "\n");
    out += "\n</think>\n\n";
    out += py::lstrip_chars(content, "\n");
  } else {
    out += "<|im_start|>assistant\n";
    out += content;
  }
  render_tool_calls(out, messages, index, content);
  out += "<|im_end|>\n";
}

void render_tool_result(std::string& out, const Json& messages, size_t index) {
  // Consecutive tool results share one user turn.
  if (index == 0 || role_of(messages[index - 1]) != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += print(field(messages[index], "content"));
  out += "\n</tool_response>";
  if (index + 1 == messages.size() || role_of(messages[index + 1]) != "tool") {
    out += "<|im_end|>\n";
  }
}

}  // namespace

std::string render_qwen3(const Json& messages, const Json& tools, const RenderOptions& options) {
  std::string out;
  const bool first_is_system = role_of(messages[0]) == "system";
  if (tools.is_array() && !tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) {
      out += string_field(kFamily, messages, 0, "content");
      out += "\n\n";
    }
    out += kToolsHeader;
    for (const Json& tool : tools) {
      out += '\n';
      out += py::json_dumps(tool);
    }
    out += kToolsFooter;
  } else if (first_is_system) {
    out += "<|im_start|>system\n";
    out += string_field(kFamily, messages, 0, "content");
    out += "<|im_end|>\n";
  }

  const size_t last_query = last_query_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string_view role = role_of(messages[i]);
    if (role == "user" || (role == "system" && i != 0)) {
      out += "<|im_start|>";
      out += role;
      out += '\n';
      out += string_field(kFamily, messages, i, "content");
      out += "<|im_end|>\n";
    } else if (role == "assistant") {
      render_assistant(out, messages, i, last_query);
    } else if (role == "tool") {
      render_tool_result(out, messages, i);
    }
    // Any other role (e.g. "developer") is dropped by this template.
  }

  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (options.enable_thinking.has_value() && !*options.enable_thinking) {
      out += "<think>\n\n</think>\n\n";
    }
  }
  return out;
}

}  // namespace rl::chat::detail
