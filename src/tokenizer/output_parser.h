// Splits what a model writes into the parts an API returns: reasoning (<think>...</think>),
// plain content, and tool calls in either dialect of the family:
//   Qwen3:      <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Qwen3Coder:
//   <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>\n</tool_call>
// It works on a stream of text deltas and never emits text that might still turn out to be the
// start of a tag; a tool call that cannot be parsed is returned as plain content.
//
// Decisions (tests/chat/output_parser_test.cpp pins them):
// - Both dialects are accepted whatever the family; the body's first character tells them apart.
// - A </tool_call> inside a JSON string literal or inside an XML parameter value does not close
//   the call, so arguments may contain that text.
// - <think> opens reasoning only at the start of the output (after optional whitespace).
//   Reasoning loses its leading and trailing newlines and the content after </think> its
//   leading newlines, the way the Qwen3 template writes a turn back.
// - Whitespace before a tool call, between tool calls and after the last one is dropped; text
//   after a call keeps the whitespace that follows the call when content came before it. A
//   malformed call keeps its whitespace along with its raw text.
// - The whole output is the same however it is split into push() calls.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"
#include "tokenizer/chat_tool_call.h"

namespace rl::chat {

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON object text (OpenAI's "arguments" string)
};

// What became certain after a push()/finish(); append these to the response in order.
struct OutputDelta {
  std::string reasoning;             // new reasoning text
  std::string content;               // new visible text
  std::vector<ToolCall> tool_calls;  // tool calls completed in this step
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct OutputParserOptions {
  Family family = Family::Qwen3;
  bool parse_tool_calls = true;  // false: <tool_call> text stays content
  bool parse_reasoning = true;   // false: <think> text stays content
  // The prompt already opened <think> (generation prompt ends inside a think block), so the
  // output starts as reasoning until </think>.
  bool starts_in_reasoning = false;
  // Tool definitions (OpenAI format) used to type Coder XML parameter values (string vs JSON).
  Json tools = nullptr;
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);
  OutputDelta push(std::string_view text);  // text must be whole UTF-8 characters
  OutputDelta finish();                     // end of generation: flush what is held

 private:
  enum class Mode {
    Start,      // nothing classified yet: waiting to see whether the output opens <think>
    Reasoning,  // inside <think>, until </think>
    Content,    // visible text, watching for <tool_call>
    ToolCall,   // inside <tool_call>, until its </tool_call>
  };
  void run(OutputDelta& out, bool at_end);  // classifies as much of held_ as is certain
  bool step_start(bool at_end);
  bool step_reasoning(OutputDelta& out, bool at_end);
  bool step_content(OutputDelta& out, bool at_end);
  bool step_tool_call(OutputDelta& out, bool at_end);
  void emit_reasoning(OutputDelta& out, std::string_view text);
  void emit_content(OutputDelta& out, std::string_view text);

  OutputParserOptions options_;
  Mode mode_ = Mode::Content;
  std::string held_;  // unclassified text: a possible tag prefix, or the body of an open call
  // Reasoning: newlines are dropped at the start and held at the end (dropped before </think>),
  // the way the template writes reasoning back as "<think>\n" + strip('\n') + "\n</think>".
  bool reasoning_started_ = false;
  std::string held_newlines_;
  // Content: whitespace next to a tool call is dropped, so trailing whitespace is held until
  // it is clear what follows; the text right after </think> loses its leading newlines.
  bool after_reasoning_ = false;
  bool after_tool_call_ = false;  // nothing but whitespace since the last tool call
  bool content_started_ = false;  // some non-whitespace content has been emitted
  std::string held_space_;
  std::string space_before_call_;  // restored if the open call turns out malformed
  detail::ToolCallScanner scanner_;
};

}  // namespace rl::chat
