// Kernel launches with programmatic dependent launch: the next kernel of the stream (or CUDA
// graph) is scheduled while this one runs, so launch latency and the prologue (weight prefetch
// into L2, table staging) overlap the previous kernel. Kernels launched this way call
// pdl_launch_dependents() first and pdl_wait() before reading their inputs (device_utils.cuh).
// Off when RL_CUDA_PDL=0 or before compute capability 9.0. Internal; .cu only.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.h"
#include "cuda/device.h"

namespace rl::cuda {

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (pdl_enabled()) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  RL_CUDA(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Lets `kernel` launch with up to `bytes` of dynamic shared memory, never lowering what an earlier
// call allowed: a captured CUDA graph may hold launches of the same kernel that need more.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  cudaFuncAttributes attr;
  RL_CUDA(cudaFuncGetAttributes(&attr, kernel));
  if (bytes > static_cast<size_t>(attr.maxDynamicSharedSizeBytes))
    RL_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)));
}

}  // namespace rl::cuda
