// Chat rendering for the two template families of the Qwen3-Next line, byte-identical to their
// Jinja templates, and parsing of the tool calls the models write.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rl::chat {

using Json = nlohmann::ordered_json;

enum class Family {
  Qwen3,       // ChatML, JSON tool definitions, <tool_call>{json}</tool_call>, <think> handling
  Qwen3Coder,  // ChatML, XML tool definitions, <tool_call><function=..><parameter=..>
};

// Chooses the family from tokenizer.chat_template (Qwen3 when absent or unrecognised).
Family detect_family(std::string_view chat_template);
const char* family_name(Family f);

struct RenderOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // nullopt: not passed to the template
};

// messages: OpenAI-style [{role, content, tool_calls?, tool_call_id?, reasoning_content?}].
// tools: OpenAI tool definitions, or null. Throws rl::Error where the template would raise.
std::string render(Family family, const Json& messages, const Json& tools,
                   const RenderOptions& options);

}  // namespace rl::chat
