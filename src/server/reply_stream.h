// Turns generated tokens into what an API returns: text that never splits a UTF-8 character,
// cut before the first stop string, then split into reasoning, content and tool calls.
// Streaming and non-streaming responses both come from this one path, so the concatenated
// deltas of a stream are exactly the non-streamed answer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/output_parser.h"
#include "tokenizer/tokenizer.h"

namespace rl::server {

// Finds the first of several stop strings in a stream of text, holding back only text that
// could still be the start of one.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // The text now known to come before any stop string. After a match only the text before it
  // is returned and later input is ignored.
  std::string push(std::string_view text);
  std::string flush();  // at the end: whatever was held back
  bool matched() const { return matched_; }
  const std::string& which() const { return which_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
  std::string which_;
};

void append_delta(chat::OutputDelta& into, chat::OutputDelta&& from);

struct ReplyOptions {
  std::vector<std::string> stop;
  bool parse = true;  // false: all text is content (raw completions)
  chat::OutputParserOptions parser;
  // Text the prompt already wrote on the model's behalf (a forced "<tool_call>" opening); it
  // goes through the parser as if generated.
  std::string forced_prefix;
};

class ReplyStream {
 public:
  ReplyStream(const tokenizer::Tokenizer& tokenizer, ReplyOptions options);

  // One generated token (not an end-of-generation token: those have no visible text).
  chat::OutputDelta push(int32_t token);
  // End of generation: everything held is released.
  chat::OutputDelta finish();
  // A stop string was found; the generator should stop.
  bool stopped() const { return stops_.matched(); }
  const std::string& stop_string() const { return stops_.which(); }
  int64_t tokens() const { return tokens_; }

 private:
  chat::OutputDelta parse(const std::string& text, bool at_end);

  tokenizer::StreamDecoder decoder_;
  StopMatcher stops_;
  bool parse_;
  chat::OutputParser parser_;
  chat::OutputDelta pending_;  // from the forced prefix, returned with the first push
  int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace rl::server
