#include "tokenizer/bpe.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace rl::tokenizer {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

size_t slot_of(uint64_t key, size_t mask) {
  // Fibonacci hashing spreads the structured keys over the table.
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

// std::push_heap/pop_heap build a max-heap; this order puts the lowest rank, then the leftmost
// pair, on top.
bool lower_priority(const BpeModel::Workspace::Candidate& a,
                    const BpeModel::Workspace::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

BpeModel::BpeModel() {
  byte_tokens_.fill(-1);
  keys_.assign(1024, kEmpty);
  values_.resize(keys_.size());
}

void BpeModel::set_byte_token(uint8_t byte, int32_t id) {
  byte_tokens_[byte] = id;
}

const BpeModel::Merge* BpeModel::find(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = keys_.size() - 1;
  for (size_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
    if (keys_[slot] == key) return &values_[slot];
    if (keys_[slot] == kEmpty) return nullptr;
  }
}

void BpeModel::grow() {
  std::vector<uint64_t> old_keys(keys_.size() * 2, kEmpty);
  std::vector<Merge> old_values(old_keys.size());
  old_keys.swap(keys_);
  old_values.swap(values_);
  const size_t mask = keys_.size() - 1;
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    size_t slot = slot_of(old_keys[i], mask);
    while (keys_[slot] != kEmpty) slot = (slot + 1) & mask;
    keys_[slot] = old_keys[i];
    values_[slot] = old_values[i];
  }
}

bool BpeModel::add_merge(int32_t left, int32_t right, int32_t merged) {
  if (find(left, right) != nullptr) return false;
  if ((n_merges_ + 1) * 2 > keys_.size()) grow();  // load factor at most 1/2
  const uint64_t key = pair_key(left, right);
  const size_t mask = keys_.size() - 1;
  size_t slot = slot_of(key, mask);
  while (keys_[slot] != kEmpty) slot = (slot + 1) & mask;
  keys_[slot] = key;
  values_[slot] = {static_cast<int32_t>(n_merges_), merged};
  ++n_merges_;
  return true;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out, Workspace& ws) const {
  if (piece.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("tokenizer: a pre-tokenized piece of ", piece.size(), " bytes is too long for BPE");
  }
  const int32_t n = static_cast<int32_t>(piece.size());
  if (n == 0) return;
  auto& symbols = ws.symbols;
  symbols.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const uint8_t byte = static_cast<uint8_t>(piece[i]);
    const int32_t id = byte_tokens_[byte];
    if (id < 0) fail("tokenizer: the vocab has no token for byte 0x", std::hex, int{byte});
    symbols[i] = {id, i - 1, i + 1 < n ? i + 1 : -1};
  }

  auto& heap = ws.heap;
  heap.clear();
  // Queues the pair starting at symbol `left`, if it has a merge.
  const auto consider = [&](int32_t left) {
    if (left < 0) return false;
    const int32_t right = symbols[left].next;
    if (right < 0) return false;
    const Merge* m = find(symbols[left].id, symbols[right].id);
    if (m != nullptr) heap.push_back({m->rank, left, symbols[left].id, symbols[right].id});
    return m != nullptr;
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  std::make_heap(heap.begin(), heap.end(), lower_priority);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const auto c = heap.back();
    heap.pop_back();
    auto& left = symbols[c.left];
    // Stale when either side has changed since the candidate was queued: a symbol's id changes
    // whenever it absorbs its right neighbour, and a merged-away symbol gets id -1.
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    auto& right = symbols[left.next];
    left.id = find(c.left_id, c.right_id)->merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = -1;
    if (consider(left.prev)) std::push_heap(heap.begin(), heap.end(), lower_priority);
    if (consider(c.left)) std::push_heap(heap.begin(), heap.end(), lower_priority);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace rl::tokenizer
