// Error checking for CUDA runtime calls: every failure becomes one rl::Error naming the call,
// the file and the line. Internal to src/cuda (includes the CUDA runtime header).
#pragma once
#include <cuda_runtime.h>

#include "util/error.h"

namespace rl::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* what, const char* file, int line);

inline void check_cuda(cudaError_t error, const char* what, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, what, file, line);
}

}  // namespace rl::cuda

#define RL_CUDA(call) ::rl::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors show up here.
#define RL_CUDA_LAUNCHED() \
  ::rl::cuda::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
