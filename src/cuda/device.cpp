#include "cuda/device.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "cuda/check.h"
#include "cuda/cuda_engine.h"
#include "util/error.h"

namespace rl::cuda {

namespace {

std::mutex g_mutex;
std::map<int, DeviceInfo> g_devices;

const DeviceInfo& info_of(int index) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_devices.find(index);
  if (it != g_devices.end()) return it->second;
  cudaDeviceProp prop{};
  RL_CUDA(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.total_memory = prop.totalGlobalMem;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  return g_devices.emplace(index, std::move(info)).first->second;
}

bool switched_off(const char* variable) {
  return !switch_on(variable, std::getenv(variable));
}

}  // namespace

const DeviceInfo& use_device(int index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("no usable CUDA GPU: ", cudaGetErrorString(e));
  }
  if (index < 0 || index >= count)
    fail("GPU ", index, " does not exist (this machine has ", count, " CUDA GPU",
         count == 1 ? "" : "s", ")");
  RL_CUDA(cudaSetDevice(index));
  return info_of(index);
}

const DeviceInfo& current_device() {
  int index = 0;
  RL_CUDA(cudaGetDevice(&index));
  return info_of(index);
}

bool pdl_enabled() {
  static const bool off = switched_off("RL_CUDA_PDL");
  return !off && current_device().cc_major >= 9;
}

bool prefetch_enabled() {
  static const bool on = !switched_off("RL_CUDA_PREFETCH");
  return on;
}

bool tensor_core_gemv_enabled() {
  static const bool off = switched_off("RL_CUDA_TC");
  return !off && current_device().cc_major >= 8;
}

bool side_stream_enabled() {
  static const bool on = !switched_off("RL_CUDA_SIDE");
  return on;
}

bool switch_on(const char* variable, const char* value) {
  if (!value || !*value) return true;
  const std::string v = value;
  if (v == "1") return true;
  if (v == "0") return false;
  fail(variable, " must be 0 (off) or 1 (on), not '", v, "'");
}

void read_switches() {
  pdl_enabled();
  prefetch_enabled();
  tensor_core_gemv_enabled();
  side_stream_enabled();
}

bool gpu_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

}  // namespace rl::cuda
