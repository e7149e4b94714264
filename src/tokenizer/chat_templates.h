// The two hard-coded chat templates and the small helpers they share. Internal to the tokenizer
// module: callers use chat::render().
#pragma once
#include <string>
#include <string_view>

#include "tokenizer/chat.h"

namespace rl::chat::detail {

// Qwen-Qwen3-0.6B.jinja: JSON tool list, <think> handling of the turns after the last query.
std::string render_qwen3(const Json& messages, const Json& tools, const RenderOptions& options);
// Qwen3-Coder.jinja: XML tool list and XML tool calls.
std::string render_qwen3_coder(const Json& messages, const Json& tools,
                               const RenderOptions& options);

// object[key], or nullptr when `object` is not an object or has no such key (Jinja: undefined).
const Json* field(const Json& object, std::string_view key);

// The message's role, or "" when it has none or it is not a string.
std::string_view role_of(const Json& message);

// Python truthiness: false for null, false, 0, "", [] and {}.
bool truthy(const Json& value);

// Jinja's {{ value }}: nothing for an undefined value, Python str() otherwise.
std::string print(const Json* value);

// Where a message sits, for error messages: "chat template Qwen3: messages[2] (tool)".
std::string where(Family family, const Json& messages, size_t index);

// message[key] as a string; throws rl::Error (naming the message) for anything else, which is
// where the template would fail to concatenate it.
const std::string& string_field(Family family, const Json& messages, size_t index,
                                std::string_view key);

}  // namespace rl::chat::detail
