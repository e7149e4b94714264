#include "server/reply_stream.h"

#include <algorithm>

namespace rl::server {

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  held_.append(text);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at != std::string::npos && (first == std::string::npos || at < first)) {
      first = at;
      which_ = stop;
    }
  }
  if (first != std::string::npos) {
    matched_ = true;
    std::string before = held_.substr(0, first);
    held_.clear();
    return before;
  }
  // Hold back the longest tail that is the start of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string ready = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return ready;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  std::string rest;
  rest.swap(held_);
  return rest;
}

void append_delta(chat::OutputDelta& into, chat::OutputDelta&& from) {
  into.reasoning += from.reasoning;
  into.content += from.content;
  for (auto& call : from.tool_calls) into.tool_calls.push_back(std::move(call));
}

ReplyStream::ReplyStream(const tokenizer::Tokenizer& tokenizer, ReplyOptions options)
    : decoder_(tokenizer),
      stops_(std::move(options.stop)),
      parse_(options.parse),
      parser_(options.parser) {
  if (parse_ && !options.forced_prefix.empty()) pending_ = parser_.push(options.forced_prefix);
}

chat::OutputDelta ReplyStream::parse(const std::string& text, bool at_end) {
  chat::OutputDelta out;
  if (!parse_) {
    out.content = text;
    return out;
  }
  if (!text.empty()) out = parser_.push(text);
  if (at_end) append_delta(out, parser_.finish());
  return out;
}

chat::OutputDelta ReplyStream::push(int32_t token) {
  chat::OutputDelta out = std::move(pending_);
  pending_ = {};
  if (finished_ || stops_.matched()) return out;
  ++tokens_;
  const std::string text = stops_.push(decoder_.push(token));
  // A matched stop string ends the reply here: flush the parser too.
  append_delta(out, parse(text, stops_.matched()));
  if (stops_.matched()) finished_ = true;
  return out;
}

chat::OutputDelta ReplyStream::finish() {
  chat::OutputDelta out = std::move(pending_);
  pending_ = {};
  if (finished_) return out;
  finished_ = true;
  std::string text = stops_.push(decoder_.flush());
  text += stops_.flush();
  append_delta(out, parse(text, true));
  return out;
}

}  // namespace rl::server
