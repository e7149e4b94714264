// Finds special tokens (control and user-defined vocab entries) in text: leftmost match first,
// and the longest one where several start at the same byte (what Hugging Face's added-token
// splitter does).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace rl::tokenizer {

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher();
  void add(std::string_view text, int32_t id);  // ignores empty text; the first id of a text wins
  bool empty() const { return nodes_.size() == 1; }

  struct Match {
    size_t pos = 0, length = 0;
    int32_t id = -1;  // -1: no match at or after the starting position
  };
  Match find(std::string_view text, size_t from) const;

 private:
  // A byte trie; children are few per node, so a short list is searched linearly.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t id = -1;  // token ending here
  };
  int32_t child(int32_t node, uint8_t byte) const;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

}  // namespace rl::tokenizer
