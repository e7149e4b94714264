// `redlite bench kernel` and `redlite bench decode` on the GPU. Plain C++.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace rl::cuda {

// Decode attention alone (split-K kernel + merge) over 12 distinct KV buffer pairs, as the
// engine's 12 attention layers, at each position; µs per layer and GB/s of K/V read against the
// device-to-device copy bandwidth measured in the same run.
struct KernelBenchOptions {
  std::vector<int64_t> positions = {4096, 32768, 65536, 131072, 262144};
  std::vector<engine::KvType> kv_types = {engine::KvType::F32, engine::KvType::BF16};
  int repeats = 20;
  int gpu = 0;
};
void bench_kernel(const KernelBenchOptions& options, std::FILE* out);

// Full decode steps of a model at a position, with the KV cache and states filled with random
// values: tok/s (median, min, max of `tokens` steps) against the bandwidth limit.
struct DecodeBenchOptions {
  std::string model_path;
  std::vector<int64_t> positions = {4096};
  std::vector<engine::KvType> kv_types = {engine::KvType::F32};
  int tokens = 32;
  int gpu = 0;
  bool breakdown = false;  // also time every kernel of one step
  bool graphs = true;      // launch steps as CUDA graphs
};
void bench_decode(const DecodeBenchOptions& options, std::FILE* out);

// Device-to-device copy bandwidth (bytes read + written per second), median of `repeats`.
double measure_copy_bandwidth(int repeats = 10);

}  // namespace rl::cuda
