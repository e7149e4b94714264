// The inside of one <tool_call>...</tool_call> block: finding where it ends while text streams
// in, and turning its body into tool calls. Both dialects are accepted whatever the family, told
// apart by the body's first character ('{': Qwen3 JSON, '<': Qwen3-Coder XML).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"

namespace rl::chat {
struct ToolCall;
}

namespace rl::chat::detail {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// Finds the </tool_call> that closes a block, given the growing text after <tool_call>. Only a
// closing tag outside the call's data counts: in the JSON dialect one outside string literals,
// in the XML dialect one outside <parameter=..>...</parameter> values, so arguments may contain
// the text "</tool_call>" (code that talks about tool calls, for instance).
class ToolCallScanner {
 public:
  enum class State {
    Open,      // not closed yet: feed more text
    Closed,    // body() and end() are set
    NotACall,  // the body does not start like either dialect: the tag was plain text
  };
  // `text` is everything after <tool_call> so far; it only ever grows between calls.
  State scan(std::string_view text);
  size_t body_end() const { return body_end_; }  // where </tool_call> starts
  size_t end() const { return body_end_ + kToolCallClose.size(); }

 private:
  enum class Dialect { Unknown, Json, Xml } dialect_ = Dialect::Unknown;
  size_t pos_ = 0;  // text before pos_ has been scanned
  bool in_string_ = false;
  bool escaped_ = false;
  bool in_value_ = false;
  size_t body_end_ = 0;

  State scan_json(std::string_view text);
  State scan_xml(std::string_view text);
};

// The calls in a closed block's body (one for JSON; one per <function=..> block for XML), or
// nullopt when the body is malformed (bad JSON, no name, stray text, unclosed element).
// `tools` (OpenAI tool definitions or null) types the XML parameter values.
std::optional<std::vector<ToolCall>> parse_tool_call_body(std::string_view body, const Json& tools);

// One XML parameter value (its single leading and trailing newline already removed) as JSON.
// `schema` is the parameter's JSON schema (nullptr if unknown). A "string" type keeps the text;
// other types parse it as JSON when it is valid JSON (Python's True/False/None accepted for
// boolean/null, as the Coder template writes them that way); without a usable type, text that
// is valid JSON other than a string literal is parsed, anything else stays a string.
Json coder_parameter_value(std::string_view value, const Json* schema);

}  // namespace rl::chat::detail
