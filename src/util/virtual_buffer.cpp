#include "util/virtual_buffer.h"

#include <sys/mman.h>

#include <utility>

#include "util/error.h"

namespace rl {

VirtualBuffer::VirtualBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("cannot reserve ", bytes, " bytes of address space");
  data_ = static_cast<uint8_t*>(p);
}

VirtualBuffer::~VirtualBuffer() {
  release();
}

VirtualBuffer::VirtualBuffer(VirtualBuffer&& other) noexcept {
  *this = std::move(other);
}

VirtualBuffer& VirtualBuffer::operator=(VirtualBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void VirtualBuffer::release() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace rl
