// Small device helpers shared by the kernels: reductions, activations, lookup-table staging.
// Internal to src/cuda; include only from .cu files.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/formats.cuh"
#include "cuda/kernels.h"

namespace rl::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// Programmatic dependent launch (sm_90+, see launch.cuh): a kernel may start while its
// predecessor in the stream is still running. Everything before pdl_wait() may only touch
// constant data (weights, tables); pdl_wait() returns once the predecessor has finished and its
// writes are visible (which, as it waited for its own predecessor, covers all earlier kernels).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel's blocks be scheduled (they still wait in pdl_wait()).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Asks L2 to fetch [p, p + bytes) (one 128-byte line per thread and step); no data returns.
__device__ __forceinline__ void prefetch_l2(const uint8_t* p, int64_t bytes) {
  for (int64_t off = static_cast<int64_t>(threadIdx.x) * 128; off < bytes;
       off += static_cast<int64_t>(blockDim.x) * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

// d += A · B on the tensor cores: one mma.sync m16n8k16 with float32 accumulators. A is the
// row-major fragment {a.x, a.y, a.z, a.w}, B the column fragment {b0, b1}, each register a pair
// of bf16 (Bf16) or f16 values. Shared by the decode attention and the quantised GEMVs.
template <bool Bf16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint4& a, uint32_t b0,
                                             uint32_t b1) {
  if constexpr (Bf16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes from global to shared memory, asynchronously (sm_80+); only the first src_bytes are
// read, the rest of the 16 are zero-filled.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
// 4 bytes, the same way (4-byte aligned).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). Every thread gets the
// result. `scratch` holds 32 values; the call ends with the block synchronised.
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < n_warps; ++w) total += scratch[w];  // same order in every thread
  return total;
}

__device__ __forceinline__ float sigmoidf_exact(float x) {
  return 1.0f / (1.0f + expf(-x));
}
__device__ __forceinline__ float siluf(float x) {
  return x / (1.0f + expf(-x));
}
__device__ __forceinline__ float softplusf(float x) {
  return x > 20.0f ? x : log1pf(expf(x));
}

// Copies the lookup tables a format needs into shared memory (the grids are indexed by data, and
// shared memory serves scattered 8-byte reads far better than the L1 path does). The caller
// synchronises before use.
template <gguf::TensorType T>
__device__ fmt::IqTables stage_tables(const DeviceTables& g) {
  fmt::IqTables t{nullptr, nullptr, nullptr, nullptr};
  if constexpr (T == gguf::TensorType::IQ2_XXS) {
    __shared__ uint64_t grid[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = g.iq2xxs_grid[i];
    t.iq2xxs_grid = grid;
  } else if constexpr (T == gguf::TensorType::IQ3_XXS) {
    __shared__ uint32_t grid[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = g.iq3xxs_grid[i];
    t.iq3xxs_grid = grid;
  } else if constexpr (T == gguf::TensorType::IQ2_XS) {
    __shared__ uint64_t grid[512];
    for (int i = threadIdx.x; i < 512; i += blockDim.x) grid[i] = g.iq2xs_grid[i];
    t.iq2xs_grid = grid;
  } else if constexpr (T == gguf::TensorType::IQ4_XS || T == gguf::TensorType::IQ4_NL) {
    __shared__ int8_t values[16];
    for (int i = threadIdx.x; i < 16; i += blockDim.x) values[i] = g.iq4nl_values[i];
    t.iq4nl_values = values;
  }
  return t;
}

}  // namespace rl::cuda
