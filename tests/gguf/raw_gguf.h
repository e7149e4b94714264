// Test helpers: a byte-level GGUF assembler that follows the format spec directly (so tests do
// not depend on the writer under test to build their inputs), and a deep Value comparison.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace rl::gguf::testing {

// Appends little-endian fields; any value can be written, valid or not.
class RawGguf {
 public:
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u16(uint16_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& i64(int64_t v) { return put(v); }
  RawGguf& f32(float v) { return put(v); }
  RawGguf& f64(double v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& raw(const std::vector<uint8_t>& b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, uint8_t{0});
    return *this;
  }
  RawGguf& pad_to(size_t alignment) { return zeros((alignment - size() % alignment) % alignment); }

  // Header: magic, version, tensor count, metadata count.
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key with a uint32 value (type 4).
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info.
  RawGguf& tensor(std::string_view name, const std::vector<int64_t>& ne, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) i64(n);
    return u32(type).u64(offset);
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <typename T>
  RawGguf& put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

// Equal types and payloads; floating-point payloads compare bit for bit (NaN, -0.0).
inline bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<double>(&a.data)) {
    const double y = std::get<double>(b.data);
    return std::memcmp(x, &y, sizeof(double)) == 0;
  }
  if (const auto* x = std::get_if<Array>(&a.data)) {
    const Array& y = std::get<Array>(b.data);
    if (x->element_type != y.element_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i) {
      if (!same_value(x->items[i], y.items[i])) return false;
    }
    return true;
  }
  if (const auto* x = std::get_if<uint64_t>(&a.data)) return *x == std::get<uint64_t>(b.data);
  if (const auto* x = std::get_if<int64_t>(&a.data)) return *x == std::get<int64_t>(b.data);
  if (const auto* x = std::get_if<bool>(&a.data)) return *x == std::get<bool>(b.data);
  return std::get<std::string>(a.data) == std::get<std::string>(b.data);
}

}  // namespace rl::gguf::testing
