// Facts about the current GPU, read once. Internal to src/cuda.
#pragma once
#include <cstddef>
#include <string>

namespace rl::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;
  size_t l2_bytes = 0;
};

// Makes `index` the current device (throws rl::Error naming the count if it does not exist) and
// returns its facts.
const DeviceInfo& use_device(int index);
// The facts of the current device.
const DeviceInfo& current_device();

// Whether kernels are launched with programmatic dependent launch (launch.cuh): compute
// capability 9.0 or later, unless the environment sets RL_CUDA_PDL=0.
bool pdl_enabled();
// Whether GEMV blocks prefetch their first weight rows into L2 before waiting for the previous
// kernel (on unless RL_CUDA_PREFETCH=0). With at most 1/16 of L2 per grid (gemv.cu) the 80B's
// step at 4K is ~1.1 % faster than with none and ~1.9 % faster than with all rows.
bool prefetch_enabled();
// Whether the Q4_K / IQ2_XXS matrix-vector kernels use the tensor cores (tc_gemv.cuh): compute
// capability 8.0 or later, unless RL_CUDA_TC=0 (then the float decoders of the other formats).
bool tensor_core_gemv_enabled();
// Concurrent launches on a second stream (StepStreams); off with RL_CUDA_SIDE=0.
bool side_stream_enabled();

// The value of one of the switches above: unset or empty means the default (on), "1" on, "0"
// off; anything else throws rl::Error naming the variable.
bool switch_on(const char* variable, const char* value);
// Reads every switch once (they are cached), so that a bad value fails with its message before
// the first step, not inside a graph capture.
void read_switches();

}  // namespace rl::cuda
