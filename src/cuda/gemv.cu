// y = W · in(x): the projections of the forward pass and the output head.
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_core.cuh"
#include "cuda/launch.cuh"

namespace rl::cuda {

namespace {

using gguf::TensorType;

// Rows a lane works on at once. 2 doubles the loads in flight per lane but takes ~128 registers
// (two blocks per SM) against ~48 for 1 (five blocks per SM): measured, 1 is faster.
constexpr int kRowsPerLane = 1;

struct GemvParams {
  GemvArgs a;
  DeviceTables tables;
  int lanes;           // lanes per row
  int rows_per_block;  // consecutive rows handled by one block
  bool prefetch;       // weights into L2 before waiting for the previous kernel
};

template <TensorType T>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvParams p) {
  using F = fmt::Format<T>;
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  const GemvArgs& a = p.a;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * p.rows_per_block;
  const int64_t end = min(first + p.rows_per_block, a.w.rows);
  // While the previous kernel finishes: this block's weights into L2, the tables into smem.
  if (p.prefetch) prefetch_weight_rows<T>(a.w, first, end);
  const fmt::IqTables tables = stage_tables<T>(p.tables);
  pdl_wait();
  stage_input<F::kGranuleValues>(a.in, a.x, static_cast<int>(a.w.cols), a.norm, a.gate, a.group,
                                 a.eps, xs);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int L = p.lanes, sub = lane & (L - 1), groups = 32 / L;
  const int rows_per_pass = groups * kRowsPerLane;  // per warp
  const int n_gran = static_cast<int>(a.w.cols / F::kGranuleValues);
  for (int64_t r0 = first + warp * rows_per_pass; r0 < end; r0 += 8 * rows_per_pass) {
    if (r0 + 8 * rows_per_pass >= end) pdl_launch_dependents();  // this warp's last pass
    int64_t row[kRowsPerLane];
    RowLocator<T> loc[kRowsPerLane];
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      row[k] = r0 + lane / L + k * groups;
      loc[k] = locate_row<T>(a.w, 0, min(row[k], end - 1));  // clamped: no branch around loads
    }
    float v[kRowsPerLane];
    rows_dot<T, kRowsPerLane>(n_gran, sub, L, xs, tables, loc, v);
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      v[k] = group_sum(v[k], L);
      if (sub == 0 && row[k] < end) {
        if (a.out == GemvOut::Add)
          a.y[row[k]] += v[k];
        else
          a.y[row[k]] = v[k];
      }
    }
  }
}

template <TensorType T>
void launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  using F = fmt::Format<T>;
  const int64_t n_gran = a.w.cols / F::kGranuleValues;
  const int L = lanes_for(n_gran);
  const int rows_per_pass = 8 * (32 / L) * kRowsPerLane;
  // About eight blocks per SM (as many as fit at once), each covering whole passes of its 8
  // warps; tall matrices (the output head) give each block several passes, so the input is
  // staged fewer times.
  const int64_t target_blocks = 8LL * current_device().sm_count;
  int64_t passes = (a.w.rows + rows_per_pass * target_blocks - 1) / (rows_per_pass * target_blocks);
  passes = passes < 1 ? 1 : (passes > 64 ? 64 : passes);
  GemvParams p{a, device_tables(), L, static_cast<int>(rows_per_pass * passes), prefetch_enabled()};
  const int64_t blocks = (a.w.rows + p.rows_per_block - 1) / p.rows_per_block;
  const size_t smem = padded_size<F::kGranuleValues>(a.w.cols) * sizeof(float);
  if (smem > 48 * 1024)
    RL_CUDA(cudaFuncSetAttribute(gemv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
  launch(gemv_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kGemvThreads), smem, stream, p);
}

}  // namespace

bool gemv_supports(TensorType type) {
  return fmt::dispatch(type, [&]<TensorType T>() {});
}

void gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.w.rows <= 0) return;
  const bool ok = fmt::dispatch(a.w.type, [&]<TensorType T>() { launch_gemv<T>(a, stream); });
  if (!ok) fail("GEMV: the CUDA kernels do not decode ", gguf::type_name(a.w.type));
}

}  // namespace rl::cuda
