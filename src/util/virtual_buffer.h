// A large zero-initialised buffer whose pages are committed only when first written: a KV cache
// sized for 256K positions costs memory only for the positions actually used.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rl {

class VirtualBuffer {
 public:
  VirtualBuffer() = default;
  explicit VirtualBuffer(size_t bytes);  // throws rl::Error if the address space is refused
  ~VirtualBuffer();
  VirtualBuffer(VirtualBuffer&& other) noexcept;
  VirtualBuffer& operator=(VirtualBuffer&& other) noexcept;
  VirtualBuffer(const VirtualBuffer&) = delete;
  VirtualBuffer& operator=(const VirtualBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rl
