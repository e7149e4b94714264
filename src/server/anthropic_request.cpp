// Validation of Anthropic /v1/messages bodies, converted to the OpenAI-style messages the chat
// templates take: tool_result blocks become "tool" messages, tool_use blocks become tool_calls,
// thinking blocks become reasoning_content.
#include <limits>

#include "server/api_error.h"
#include "server/requests.h"
#include "util/error.h"

namespace rl::server {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

const Json& require_object_at(const Json& array, size_t i, const std::string& path) {
  const Json& v = array[i];
  if (!v.is_object())
    bad_request(str("'", path, "' must be an object, not ", json_type_name(v)), path);
  return v;
}

// A text-only block list (system prompt, tool_result content): strings joined by newlines.
std::string text_blocks(const Json& value, const std::string& path) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array())
    bad_request(str("'", path, "' must be a string or an array of text blocks, not ",
                    json_type_name(value)),
                path);
  std::string text;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string block_path = index_path(path, i);
    const Json& block = require_object_at(value, i, block_path);
    const std::string type = require_string(block, "type", block_path);
    if (type != "text")
      bad_request(
          str("'", block_path, "' has type '", type, "'; only text blocks are supported here"),
          block_path);
    if (i > 0) text += '\n';
    text += require_string(block, "text", block_path);
  }
  return text;
}

void append_line(std::string& to, const std::string& text) {
  if (!to.empty()) to += '\n';
  to += text;
}

// Adds the OpenAI-style messages for one Anthropic message.
void convert_message(const Json& m, const std::string& path, Json& out, bool is_last,
                     std::string& prefill) {
  const std::string role = require_string(m, "role", path);
  if (role != "user" && role != "assistant")
    bad_request(str("'", path, ".role' must be 'user' or 'assistant', got '", role, "'"),
                path + ".role");
  const Json* content = find_field(m, "content");
  if (!content)
    bad_request(str("missing required parameter '", path, ".content'"), path + ".content");
  const std::string content_path = path + ".content";

  std::string text, reasoning;
  Json tool_calls = Json::array();
  if (content->is_string()) {
    text = content->get<std::string>();
  } else if (content->is_array()) {
    for (size_t i = 0; i < content->size(); ++i) {
      const std::string bp = index_path(content_path, i);
      const Json& block = require_object_at(*content, i, bp);
      const std::string type = require_string(block, "type", bp);
      if (type == "text") {
        append_line(text, require_string(block, "text", bp));
      } else if (type == "tool_result" && role == "user") {
        Json tool = {{"role", "tool"}, {"content", ""}};
        tool["tool_call_id"] = require_string(block, "tool_use_id", bp);
        if (const Json* c = find_field(block, "content"))
          tool["content"] = text_blocks(*c, bp + ".content");
        read_bool(block, "is_error", bp);
        out.push_back(std::move(tool));
      } else if (type == "tool_use" && role == "assistant") {
        const Json* input = read_object(block, "input", bp);
        Json call = {{"id", require_string(block, "id", bp)},
                     {"type", "function"},
                     {"function",
                      {{"name", require_string(block, "name", bp)},
                       {"arguments", input ? *input : Json::object()}}}};
        tool_calls.push_back(std::move(call));
      } else if (type == "thinking" && role == "assistant") {
        append_line(reasoning, require_string(block, "thinking", bp));
      } else if (type == "redacted_thinking" && role == "assistant") {
        // Encrypted reasoning from another provider: nothing this model can read.
      } else {
        bad_request(str("'", bp, "' has type '", type, "', which is not supported in a ", role,
                        " message by this server"),
                    bp);
      }
    }
  } else {
    bad_request(str("'", content_path, "' must be a string or an array of content blocks, not ",
                    json_type_name(*content)),
                content_path);
  }

  if (role == "user") {
    if (!text.empty() || !content->is_array() || content->empty())
      out.push_back(Json{{"role", "user"}, {"content", text}});
    return;
  }
  if (is_last && tool_calls.empty() && reasoning.empty()) {
    // A final assistant turn is a prefill: the reply continues it.
    prefill = text;
    return;
  }
  Json assistant = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) assistant["reasoning_content"] = reasoning;
  if (!tool_calls.empty()) assistant["tool_calls"] = std::move(tool_calls);
  out.push_back(std::move(assistant));
}

Json convert_tools(const Json& body) {
  const Json* tools = read_array(body, "tools");
  if (!tools || tools->empty()) return nullptr;
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string path = index_path("tools", i);
    const Json& t = require_object_at(*tools, i, path);
    const std::string type = read_string(t, "type", path).value_or("custom");
    if (type != "custom")
      bad_request(str("'", path, "' is a '", type,
                      "' tool, which runs on Anthropic's servers; only custom tools (name, "
                      "description, input_schema) are supported"),
                  path);
    const std::string name = require_string(t, "name", path);
    if (name.empty() || name.size() > 128)
      bad_request(str("'", path, ".name' must be 1 to 128 characters"), path + ".name");
    Json fn = {{"name", name}};
    if (auto d = read_string(t, "description", path)) fn["description"] = *d;
    const Json* schema = read_object(t, "input_schema", path);
    if (!schema)
      bad_request(str("missing required parameter '", path, ".input_schema'"),
                  path + ".input_schema");
    fn["parameters"] = *schema;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

void parse_tool_choice(const Json& body, ChatRequest& r) {
  const Json* tc = read_object(body, "tool_choice");
  if (!tc) return;
  const std::string type = require_string(*tc, "type", "tool_choice");
  if (type == "auto") {
    r.tool_choice.mode = ToolChoiceMode::Auto;
  } else if (type == "any") {
    r.tool_choice.mode = ToolChoiceMode::Required;
  } else if (type == "none") {
    r.tool_choice.mode = ToolChoiceMode::None;
  } else if (type == "tool") {
    r.tool_choice.mode = ToolChoiceMode::Named;
    r.tool_choice.name = require_string(*tc, "name", "tool_choice");
  } else {
    bad_request(str("'tool_choice.type' must be auto, any, tool or none; got '", type, "'"),
                "tool_choice.type");
  }
  if (auto d = read_bool(*tc, "disable_parallel_tool_use", "tool_choice"))
    r.parallel_tool_calls = !*d;
  const bool needs_tool =
      r.tool_choice.mode == ToolChoiceMode::Required || r.tool_choice.mode == ToolChoiceMode::Named;
  if (needs_tool && !r.tools.is_array())
    bad_request("'tool_choice' requires a tool but the request has no 'tools'", "tool_choice");
  if (r.tool_choice.mode == ToolChoiceMode::Named) {
    bool found = false;
    for (const Json& t : r.tools) found = found || t["function"]["name"] == r.tool_choice.name;
    if (!found)
      bad_request(
          str("'tool_choice' names tool '", r.tool_choice.name, "', which is not in 'tools'"),
          "tool_choice");
  }
}

ChatRequest parse_common(const Json& body) {
  ChatRequest r;
  r.model = require_string(body, "model");
  const Json& messages = require_array(body, "messages");
  if (messages.empty()) bad_request("'messages' must contain at least one message", "messages");
  if (const Json* system = find_field(body, "system"))
    r.messages.push_back(Json{{"role", "system"}, {"content", text_blocks(*system, "system")}});
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string path = index_path("messages", i);
    convert_message(require_object_at(messages, i, path), path, r.messages,
                    i + 1 == messages.size(), r.assistant_prefill);
  }
  if (r.messages.empty()) bad_request("'messages' holds no content to answer", "messages");
  r.tools = convert_tools(body);
  parse_tool_choice(body, r);
  if (const Json* thinking = read_object(body, "thinking")) {
    const std::string type = require_string(*thinking, "type", "thinking");
    if (type == "enabled") {
      read_integer(*thinking, "budget_tokens", 1, kMaxInt32, "thinking");
      r.enable_thinking = true;
    } else if (type == "disabled") {
      r.enable_thinking = false;
    } else {
      bad_request(str("'thinking.type' must be 'enabled' or 'disabled', got '", type, "'"),
                  "thinking.type");
    }
  }
  if (const Json* mcp = read_array(body, "mcp_servers"); mcp && !mcp->empty())
    bad_request("'mcp_servers' is not supported", "mcp_servers");
  return r;
}

}  // namespace

ChatRequest parse_anthropic_messages(const Json& body) {
  ChatRequest r = parse_common(body);
  const auto max_tokens = read_integer(body, "max_tokens", 1, kMaxInt32);
  if (!max_tokens) bad_request("missing required parameter 'max_tokens'", "max_tokens");
  auto& s = r.sampling;
  s.max_tokens = *max_tokens;
  auto& p = s.sampler;
  if (auto v = read_number(body, "temperature", 0.0, 1.0)) p.temperature = float(*v);
  if (auto v = read_integer(body, "top_k", 0, kMaxInt32)) p.top_k = int(*v);
  if (auto v = read_number(body, "top_p", 0.0, 1.0)) {
    p.top_p = *v == 0.0 ? 1.0f : float(*v);
    if (*v == 0.0) p.top_k = 1;
  }
  p.seed = random_seed();
  s.stop = parse_stop(body, "stop_sequences", 16, /*allow_string=*/false);
  r.stream = read_bool(body, "stream").value_or(false);
  return r;
}

ChatRequest parse_anthropic_count_tokens(const Json& body) {
  return parse_common(body);
}

}  // namespace rl::server
