// Byte-pair encoding of one pre-tokenized piece: start from one token per byte, then apply the
// merge of lowest rank anywhere in the piece (the leftmost one among equals) until no adjacent
// pair has a merge. A min-heap of candidate pairs over a linked list of symbols makes that
// O(n log n) in the piece length, so a megabyte-long word or run of spaces stays cheap.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace rl::tokenizer {

class BpeModel {
 public:
  BpeModel();

  void set_byte_token(uint8_t byte, int32_t id);
  int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }  // -1 if none
  // Adds the merge left+right -> merged with the next rank. Returns false (and changes nothing)
  // if the pair already has a merge of lower rank.
  bool add_merge(int32_t left, int32_t right, int32_t merged);
  size_t n_merges() const { return n_merges_; }

  // Scratch space reused across pieces of one encode call.
  struct Workspace {
    struct Symbol {
      int32_t id;    // -1 once merged into its left neighbour
      int32_t prev;  // -1 at the start
      int32_t next;  // -1 at the end
    };
    struct Candidate {
      int32_t rank, left, left_id, right_id;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  // Appends the tokens of piece to out. Throws rl::Error if a byte has no token.
  void encode(std::string_view piece, std::vector<int32_t>& out, Workspace& ws) const;

 private:
  struct Merge {
    int32_t rank, merged;
  };
  const Merge* find(int32_t left, int32_t right) const;
  void grow();

  std::array<int32_t, 256> byte_tokens_;
  // Open-addressing hash table keyed by (left << 32 | right); kEmpty marks a free slot.
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t n_merges_ = 0;
};

}  // namespace rl::tokenizer
