#include "tokenizer/special_tokens.h"

namespace rl::tokenizer {

SpecialTokenMatcher::SpecialTokenMatcher() : nodes_(1) {}

int32_t SpecialTokenMatcher::child(int32_t node, uint8_t byte) const {
  for (const auto& [b, next] : nodes_[node].children) {
    if (b == byte) return next;
  }
  return -1;
}

void SpecialTokenMatcher::add(std::string_view text, int32_t id) {
  if (text.empty()) return;
  int32_t node = 0;
  for (char c : text) {
    const uint8_t byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  if (nodes_[node].id < 0) nodes_[node].id = id;
  first_byte_[static_cast<uint8_t>(text[0])] = true;
}

SpecialTokenMatcher::Match SpecialTokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) continue;
    Match best;
    int32_t node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (nodes_[node].id >= 0) best = {pos, i + 1 - pos, nodes_[node].id};
    }
    if (best.id >= 0) return best;
  }
  return {};
}

}  // namespace rl::tokenizer
