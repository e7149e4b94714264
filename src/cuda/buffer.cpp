#include "cuda/buffer.h"

#include "cuda/check.h"

namespace rl::cuda {

namespace {
double gib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    ptr_ = nullptr;
    fail("cannot allocate ", bytes, " bytes (", gib(bytes),
         " GiB) of GPU memory: ", cudaGetErrorString(e));
  }
}

void DeviceBuffer::release() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMallocHost(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    ptr_ = nullptr;
    fail("cannot allocate ", bytes, " bytes of page-locked host memory: ", cudaGetErrorString(e));
  }
}

void PinnedBuffer::release() {
  if (ptr_) cudaFreeHost(ptr_);
  ptr_ = nullptr;
}

}  // namespace rl::cuda
