#include "cuda/check.h"

namespace rl::cuda {

void throw_cuda_error(cudaError_t error, const char* what, const char* file, int line) {
  fail("CUDA error ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ") in ", what,
       " at ", file, ":", line);
}

}  // namespace rl::cuda
