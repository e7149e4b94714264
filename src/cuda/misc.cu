// Small kernels: embedding lookup, exact dequantisation, random fills, the IQ tables.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/gemv_core.cuh"
#include "cuda/launch.cuh"
#include "cuda/layout.h"
#include "quant/iq_tables.h"

namespace rl::cuda {

namespace {

using gguf::TensorType;

// One thread per granule of the row.
template <TensorType T>
__global__ void dequantize_kernel(Matrix m, const int32_t* row_ptr, int64_t row0, float* y,
                                  DeviceTables tables_g) {
  using F = fmt::Format<T>;
  pdl_launch_dependents();
  const fmt::IqTables tables = stage_tables<T>(tables_g);
  __syncthreads();
  pdl_wait();
  const int64_t row = row_ptr ? *row_ptr : row0 + blockIdx.y;
  float* out = y + (row_ptr ? 0 : static_cast<int64_t>(blockIdx.y) * m.cols);
  const int64_t n_gran = m.cols / F::kGranuleValues;
  const RowLocator<T> loc = locate_row<T>(m, 0, row);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_gran;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t* b;
    const uint8_t* t;
    int g;
    loc(static_cast<int>(i), b, t, g);
    float* o = out + i * F::kGranuleValues;
    F::decode(b, t, g, tables, [&](int j, float v0, float v1, float v2, float v3) {
      o[j] = v0, o[j + 1] = v1, o[j + 2] = v2, o[j + 3] = v3;
    });
  }
}

template <TensorType T>
void launch_dequantize(const Matrix& m, const int32_t* row_ptr, int64_t row0, int64_t n_rows,
                       float* y, cudaStream_t stream) {
  using F = fmt::Format<T>;
  const int64_t n_gran = m.cols / F::kGranuleValues;
  const unsigned bx = static_cast<unsigned>(std::min<int64_t>((n_gran + 127) / 128, 64));
  launch(dequantize_kernel<T>, dim3(bx, static_cast<unsigned>(n_rows)), dim3(128), 0, stream, m,
         row_ptr, row0, y, device_tables());
}

// SplitMix64 of (seed, index): independent draws without state.
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename Elem>
__global__ void fill_random_kernel(Elem* dst, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t r = mix(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
    // Box-Muller from two 24-bit uniforms in (0, 1].
    const float u1 = (static_cast<float>(r & 0xffffffu) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((r >> 24) & 0xffffffu) * (1.0f / 16777216.0f);
    const float x = stddev * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if constexpr (sizeof(Elem) == 4)
      dst[i] = x;
    else if constexpr (std::is_same_v<Elem, __half>)
      dst[i] = __float2half_rn(x);
    else
      dst[i] = __float2bfloat16_rn(x);
  }
}

__global__ void fill_nan_kernel(float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __int_as_float(0x7fc00000);
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
}

}  // namespace

const DeviceTables& device_tables() {
  static std::mutex mutex;
  static std::map<int, std::pair<DeviceBuffer, DeviceTables>> per_device;
  int dev = 0;
  RL_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = per_device.find(dev);
  if (it != per_device.end()) return it->second.second;
  namespace qt = quant::tables;
  const TcIqTables tc = tc_iq_tables();
  // Each table at an 8-byte aligned offset of one buffer.
  const std::pair<const void*, size_t> tables[] = {
      {qt::iq2xxs_grid.data(), sizeof(qt::iq2xxs_grid)},
      {qt::iq3xxs_grid.data(), sizeof(qt::iq3xxs_grid)},
      {qt::kvalues_iq4nl.data(), sizeof(qt::kvalues_iq4nl)},
      {qt::iq2xs_grid.data(), sizeof(qt::iq2xs_grid)},
      {tc.iq2xxs_codes.data(), sizeof(tc.iq2xxs_codes)},
      {tc.iq2xs_codes.data(), sizeof(tc.iq2xs_codes)},
      {tc.iq2xxs_sign_nibbles.data(), sizeof(tc.iq2xxs_sign_nibbles)},
      {tc.sign_bytes.data(), sizeof(tc.sign_bytes)}};
  size_t at[std::size(tables)], total = 0;
  for (size_t i = 0; i < std::size(tables); ++i) {
    at[i] = total;
    total += (tables[i].second + 7) / 8 * 8;
  }
  std::vector<uint8_t> host(total, 0);
  for (size_t i = 0; i < std::size(tables); ++i)
    std::memcpy(host.data() + at[i], tables[i].first, tables[i].second);
  DeviceBuffer buf(host.size());
  auto* base = buf.as<uint8_t>();
  RL_CUDA(cudaMemcpy(base, host.data(), host.size(), cudaMemcpyHostToDevice));
  DeviceTables t;
  t.iq2xxs_grid = reinterpret_cast<const uint64_t*>(base + at[0]);
  t.iq3xxs_grid = reinterpret_cast<const uint32_t*>(base + at[1]);
  t.iq4nl_values = reinterpret_cast<const int8_t*>(base + at[2]);
  t.iq2xs_grid = reinterpret_cast<const uint64_t*>(base + at[3]);
  t.iq2xxs_codes = reinterpret_cast<const uint32_t*>(base + at[4]);
  t.iq2xs_codes = reinterpret_cast<const uint32_t*>(base + at[5]);
  t.iq2xxs_sign_nibbles = reinterpret_cast<const uint32_t*>(base + at[6]);
  t.sign_bytes = reinterpret_cast<const uint2*>(base + at[7]);
  return per_device.emplace(dev, std::make_pair(std::move(buf), t)).first->second.second;
}

void embed(const Matrix& table, const int32_t* token, float* x, cudaStream_t stream) {
  const bool ok = fmt::dispatch(
      table.type, [&]<TensorType T>() { launch_dequantize<T>(table, token, 0, 1, x, stream); });
  if (!ok) fail("embedding: the CUDA kernels do not decode ", gguf::type_name(table.type));
}

void dequantize_rows(const Matrix& m, int64_t row0, int64_t n_rows, float* y, cudaStream_t stream) {
  if (n_rows <= 0) return;
  const bool ok = fmt::dispatch(
      m.type, [&]<TensorType T>() { launch_dequantize<T>(m, nullptr, row0, n_rows, y, stream); });
  if (!ok) fail("dequantize: the CUDA kernels do not decode ", gguf::type_name(m.type));
}

void fill_random(void* dst, engine::KvType type, int64_t n, uint64_t seed, float stddev,
                 cudaStream_t stream) {
  if (n <= 0) return;
  switch (type) {
    case engine::KvType::F32:
      fill_random_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(dst), n, seed,
                                                          stddev);
      break;
    case engine::KvType::F16:
      fill_random_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dst), n, seed,
                                                          stddev);
      break;
    case engine::KvType::BF16:
      fill_random_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed,
                                                          stddev);
      break;
  }
  RL_CUDA_LAUNCHED();
}

void fill_nan(float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  fill_nan_kernel<<<grid_for(n), 256, 0, stream>>>(dst, n);
  RL_CUDA_LAUNCHED();
}

}  // namespace rl::cuda
