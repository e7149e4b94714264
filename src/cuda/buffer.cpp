#include "cuda/buffer.h"

#include "cuda/check.h"

namespace rl::cuda {

namespace {
double gib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}
}  // namespace

void* DeviceAlloc::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    fail("cannot allocate ", bytes, " bytes (", gib(bytes),
         " GiB) of GPU memory: ", cudaGetErrorString(e));
  }
  return p;
}

void DeviceAlloc::release(void* p) {
  cudaFree(p);
}

void* PinnedAlloc::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cannot allocate ", bytes, " bytes of page-locked host memory: ", cudaGetErrorString(e));
  }
  return p;
}

void PinnedAlloc::release(void* p) {
  cudaFreeHost(p);
}

void* device_view(void* pinned) {
  void* d = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&d, pinned, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("page-locked host memory is not mapped for the GPU: ", cudaGetErrorString(e));
  }
  return d;
}

}  // namespace rl::cuda
