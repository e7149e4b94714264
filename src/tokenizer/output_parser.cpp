#include "tokenizer/output_parser.h"

#include <utility>

namespace rl::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`: the part that must be
// held back because more text could complete the tag.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (tag.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

}  // namespace

OutputParser::OutputParser(OutputParserOptions options) : options_(std::move(options)) {
  if (!options_.parse_reasoning) {
    mode_ = Mode::Content;
  } else if (options_.starts_in_reasoning) {
    mode_ = Mode::Reasoning;
  } else {
    mode_ = Mode::Start;
  }
}

OutputDelta OutputParser::push(std::string_view text) {
  OutputDelta out;
  held_ += text;
  run(out, /*at_end=*/false);
  return out;
}

OutputDelta OutputParser::finish() {
  OutputDelta out;
  run(out, /*at_end=*/true);
  return out;
}

void OutputParser::run(OutputDelta& out, bool at_end) {
  for (;;) {
    bool progressed = false;
    switch (mode_) {
      case Mode::Start:
        progressed = step_start(at_end);
        break;
      case Mode::Reasoning:
        progressed = step_reasoning(out, at_end);
        break;
      case Mode::Content:
        progressed = step_content(out, at_end);
        break;
      case Mode::ToolCall:
        progressed = step_tool_call(out, at_end);
        break;
    }
    if (!progressed) return;
  }
}

// Each step_* returns true when it changed mode (so the next mode should look at held_).

bool OutputParser::step_start(bool at_end) {
  size_t first = 0;
  while (first < held_.size() && is_space(held_[first])) ++first;
  const std::string_view rest = std::string_view(held_).substr(first);
  if (rest.starts_with(kThinkOpen)) {
    held_.erase(0, first + kThinkOpen.size());
    mode_ = Mode::Reasoning;
    return true;
  }
  if (kThinkOpen.starts_with(rest) && !at_end) return false;  // may still open <think>
  mode_ = Mode::Content;
  return true;
}

bool OutputParser::step_reasoning(OutputDelta& out, bool at_end) {
  const size_t close = held_.find(kThinkClose);
  if (close != std::string::npos) {
    emit_reasoning(out, std::string_view(held_).substr(0, close));
    held_newlines_.clear();  // the newlines before </think> belong to the format
    held_.erase(0, close + kThinkClose.size());
    mode_ = Mode::Content;
    after_reasoning_ = true;
    return true;
  }
  const size_t keep = at_end ? 0 : partial_tag_suffix(held_, kThinkClose);
  emit_reasoning(out, std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
  // An unclosed think block at the end is still reasoning; its trailing newlines are dropped.
  return false;
}

bool OutputParser::step_content(OutputDelta& out, bool at_end) {
  if (after_reasoning_) {
    const size_t text = held_.find_first_not_of('\n');
    held_.erase(0, text == std::string::npos ? held_.size() : text);
    if (!held_.empty()) after_reasoning_ = false;
  }
  if (!options_.parse_tool_calls) {
    emit_content(out, held_);
    held_.clear();
    return false;
  }
  const size_t open = held_.find(detail::kToolCallOpen);
  if (open != std::string::npos) {
    emit_content(out, std::string_view(held_).substr(0, open));
    held_.erase(0, open + detail::kToolCallOpen.size());
    space_before_call_ = std::exchange(held_space_, {});
    scanner_ = detail::ToolCallScanner();
    mode_ = Mode::ToolCall;
    return true;
  }
  const size_t keep = at_end ? 0 : partial_tag_suffix(held_, detail::kToolCallOpen);
  emit_content(out, std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
  if (at_end && !after_tool_call_) out.content += held_space_;
  if (at_end) held_space_.clear();
  return false;
}

bool OutputParser::step_tool_call(OutputDelta& out, bool at_end) {
  const detail::ToolCallScanner::State state = scanner_.scan(held_);
  if (state == detail::ToolCallScanner::State::Open && !at_end) return false;

  if (state == detail::ToolCallScanner::State::Closed) {
    auto calls = detail::parse_tool_call_body(
        std::string_view(held_).substr(0, scanner_.body_end()), options_.tools);
    if (calls) {
      for (ToolCall& call : *calls) out.tool_calls.push_back(std::move(call));
      held_.erase(0, scanner_.end());
      space_before_call_.clear();
      after_tool_call_ = true;
      mode_ = Mode::Content;
      return true;
    }
    // Malformed: the whole block, tags included, is plain text.
    held_space_ = std::exchange(space_before_call_, {});
    emit_content(out, std::string(detail::kToolCallOpen) + held_.substr(0, scanner_.end()));
    held_.erase(0, scanner_.end());
    mode_ = Mode::Content;
    return true;
  }
  // Not a call (the body starts like neither dialect) or unclosed at the end: the opening tag
  // was plain text, and what follows it is read again as content.
  held_space_ = std::exchange(space_before_call_, {});
  emit_content(out, detail::kToolCallOpen);
  mode_ = Mode::Content;
  return true;
}

void OutputParser::emit_reasoning(OutputDelta& out, std::string_view text) {
  if (!reasoning_started_) {
    const size_t first = text.find_first_not_of('\n');
    text.remove_prefix(first == std::string_view::npos ? text.size() : first);
    if (text.empty()) return;
    reasoning_started_ = true;
  }
  const size_t last = text.find_last_not_of('\n');
  if (last == std::string_view::npos) {
    held_newlines_ += text;
    return;
  }
  out.reasoning += held_newlines_;
  out.reasoning += text.substr(0, last + 1);
  held_newlines_ = std::string(text.substr(last + 1));
}

void OutputParser::emit_content(OutputDelta& out, std::string_view text) {
  if (!options_.parse_tool_calls) {
    out.content += text;
    return;
  }
  size_t first = 0;
  while (first < text.size() && is_space(text[first])) ++first;
  if (first == text.size()) {
    held_space_ += text;
    return;
  }
  size_t end = text.size();
  while (is_space(text[end - 1])) --end;
  // Whitespace after a tool call is dropped unless it separates text on both sides of the call.
  if (!after_tool_call_ || content_started_) {
    out.content += held_space_;
    out.content += text.substr(0, first);
  }
  out.content += text.substr(first, end - first);
  held_space_ = std::string(text.substr(end));
  after_tool_call_ = false;
  content_started_ = true;
}

}  // namespace rl::chat
