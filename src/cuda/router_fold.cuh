// The router folded into the projection that completes the residual (kernels.h, RouterFold):
// the projection's CTAs add their rows' shares of the logits, the MoE kernels read the sums.
// Internal; .cu only.
//
// A CTA copies its rows' weights (one contiguous slice of the transposed matrix) and norm into
// shared memory asynchronously, early, and sums them when its rows of y are final. Measured
// (CUDA_DECODE.md, fifteenth pass): the same sums with the weights loaded from global memory at
// the end (prefetched into L2 at the start) cost ~3 µs per projection, more than the router
// launch they replace; the copies right after the wait instead of before it were 0.7 % slower at
// 4K. The tensor-core GEMV issues them once its input is staged (+0.4 % at 4K, twenty-seventh
// pass): its 33 KB per CTA no longer queue ahead of the input's loads.
#pragma once
#include "cuda/device_utils.cuh"
#include "cuda/kernels.h"

namespace rl::cuda {

// Shared memory of a fold over `rows` rows: the rows' weights, their norm and y values.
struct FoldSmem {
  float* w;     // [rows][fold_row_floats(n_logits)]
  float* norm;  // [rows]
  float* y;     // [rows]: the projection's final outputs, written by the kernel
};
// Bytes of shared memory a fold over `rows` rows takes, with room to align its start.
inline int64_t fold_smem_bytes(const RouterFold& f, int64_t rows) {
  return f.n_logits > 0 ? rows * (fold_row_floats(f.n_logits) + 2) * 4 + 16 : 0;
}
// The fold's shared memory, from the first 16-byte boundary at or after `at`.
__device__ __forceinline__ FoldSmem fold_carve(void* at, const RouterFold& f, int rows) {
  float* w = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(at) + 15) & ~uintptr_t{15});
  const int ld = fold_row_floats(f.n_logits);
  return {w, w + rows * ld, w + rows * (ld + 1)};
}

// Starts the copies of rows [first, end): their weights (16-byte pieces, as the rows are padded
// to 16 bytes) and norm.
__device__ __forceinline__ void fold_stage(const RouterFold& f, int64_t first, int64_t end,
                                           const FoldSmem& s) {
  const int ld = fold_row_floats(f.n_logits);
  const int rows = static_cast<int>(end - first);
  const float* w = f.w_t + first * ld;
  for (int i = threadIdx.x; i < rows * ld / 4; i += blockDim.x)
    cp_async16(s.w + 4 * i, w + 4 * i, 16);
  for (int r = threadIdx.x; r < rows; r += blockDim.x) cp_async4(s.norm + r, f.norm + first + r);
  cp_async_commit();
}

// Once the kernel has written s.y[0..rows) (any thread): adds the rows' shares to f.acc. Thread t
// takes logits t, t + blockDim.x, ..., each summed over the rows in order, so a CTA's share is
// the same every time.
__device__ __forceinline__ void fold_finish(const RouterFold& f, const FoldSmem& s, int rows) {
  cp_async_wait<0>();
  __syncthreads();  // every thread's copies, and s.y
  const int ld = fold_row_floats(f.n_logits);
  for (int e = threadIdx.x; e < f.n_logits; e += blockDim.x) {
    // 8 rows' loads before their sums: with one load per FMA, each FMA waited on its own
    // shared-memory round trip, 1.3 µs per fold instead of 1.0 at 4K (CUDA_DECODE.md,
    // twenty-first pass).
    float sum = 0.f;
    int r = 0;
    for (; r + 8 <= rows; r += 8) {
      float w[8], ny[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) w[k] = s.w[(r + k) * ld + e], ny[k] = s.norm[r + k] * s.y[r + k];
#pragma unroll
      for (int k = 0; k < 8; ++k) sum = fmaf(w[k], ny[k], sum);
    }
    for (; r < rows; ++r) sum = fmaf(s.w[r * ld + e], s.norm[r] * s.y[r], sum);
    // ±2^55 units (kernels.h, RouterFold). NaN lands on a bound (fmaxf drops it).
    constexpr float kBound = 36028797018963968.f;  // 2^55
    const float units = fminf(fmaxf(sum * static_cast<float>(kFoldUnits), -kBound), kBound);
    atomicAdd(reinterpret_cast<unsigned long long*>(f.acc + e),
              static_cast<unsigned long long>(__float2ll_rn(units)));
  }
}

// A folded logit before the factor 1 / rms.
__device__ __forceinline__ float folded_value(long long v) {
  return __ll2float_rn(v) * static_cast<float>(1.0 / kFoldUnits);
}

}  // namespace rl::cuda
