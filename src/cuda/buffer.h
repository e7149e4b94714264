// Owning handles for device memory and page-locked host memory. Internal to src/cuda.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace rl::cuda {

// Memory from one allocator, freed on destruction; move-only. Alloc provides
// `static void* allocate(size_t bytes)` (throws rl::Error naming the size on failure) and
// `static void release(void* p)`.
template <class Alloc>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  explicit OwnedBuffer(size_t bytes)
      : ptr_(bytes ? Alloc::allocate(bytes) : nullptr), bytes_(bytes) {}
  ~OwnedBuffer() { release(); }
  OwnedBuffer(OwnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_) Alloc::release(ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// cudaMalloc (never managed memory).
struct DeviceAlloc {
  static void* allocate(size_t bytes);
  static void release(void* p);
};
// cudaHostAlloc, mapped: page-locked, for asynchronous copies and graph memcpy nodes, and
// visible to kernels (device_view), which may write results there directly.
struct PinnedAlloc {
  static void* allocate(size_t bytes);
  static void release(void* p);
};

using DeviceBuffer = OwnedBuffer<DeviceAlloc>;
using PinnedBuffer = OwnedBuffer<PinnedAlloc>;

// The address under which kernels reach a PinnedBuffer's memory (the same one with unified
// addressing); throws if the current device cannot.
void* device_view(void* pinned);
template <typename T>
T* device_view(T* pinned) {
  return static_cast<T*>(device_view(static_cast<void*>(pinned)));
}

}  // namespace rl::cuda
