// y = W · in(x): the projections of the forward pass and the output head.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_core.cuh"
#include "cuda/launch.cuh"
#include "cuda/router_fold.cuh"
#include "cuda/tc_gemv.cuh"

namespace rl::cuda {

namespace {

using gguf::TensorType;

// The shape of work, picked per matrix on the host (bandwidth reasoning): one row per lane group
// (L lanes, 32 / L rows per warp) with the granule loop unrolled by 4; when there are too few
// rows to give every SM two blocks (the F32 router: 513 rows of 256 granules), W = 2-8 warps
// share a row (split K) and add their partial sums in shared memory in a fixed order. The grid
// is one resident wave (resident_blocks). Measured (CUDA_DECODE.md): split K took the router
// from 584 to 432 µs per step; R = 4 or 2 rows per lane group for short rows took up to 214
// registers (one block per SM) and, once the grids were one wave, was 8.5 % slower over the
// whole step at 4K than R = 1 (241.5 against 261.9 tok/s), so rows_dot's R is 1 everywhere.
struct GemvParams {
  GemvArgs a;
  DeviceTables tables;
  int lanes;           // lanes per row within a warp
  int warps_per_row;   // W: > 1 only with lanes == 32
  int rows_per_block;  // consecutive rows handled by one block
  // Rows of its block that a block prefetches into L2 before waiting for the previous kernel
  // (prefetch_rows_for): 0 with RL_CUDA_PREFETCH=0.
  int64_t prefetch_rows;
};

template <TensorType T, int R, int U>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvParams p) {
  using F = fmt::Format<T>;
  extern __shared__ float4 smem[];
  __shared__ float partial[kGemvThreads / 32][R];
  float* xs = reinterpret_cast<float*>(smem);
  const GemvArgs& a = p.a;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * p.rows_per_block;
  const int64_t end = min(first + p.rows_per_block, a.w.rows);
  const FoldSmem fold =
      fold_carve(xs + padded_size<F::kGranuleValues>(a.w.cols), a.fold, p.rows_per_block);
  // While the previous kernel finishes: this block's weights into L2, the tables and the router
  // fold's rows into smem.
  prefetch_weight_rows<T>(a.w, first, end, p.prefetch_rows);
  const fmt::IqTables tables = stage_tables<T>(p.tables);
  if (a.fold.n_logits > 0) fold_stage(a.fold, first, end, fold);
  pdl_wait();
  stage_input<F::kGranuleValues>(a.in, a.x, static_cast<int>(a.w.cols), a.norm, a.sumsq, a.group,
                                 a.eps, xs);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int L = p.lanes, W = p.warps_per_row, groups = 32 / L;
  const int row_group = warp / W, part = warp - row_group * W;  // which rows, which K slice
  const int sub = (lane & (L - 1)) + part * 32, stride = L * W;
  const int rows_per_pass = groups * R;  // per row group
  const int64_t block_pass = static_cast<int64_t>(kGemvThreads / 32 / W) * rows_per_pass;
  const int n_gran = static_cast<int>(a.w.cols / F::kGranuleValues);
  // Every warp runs the same number of passes (W > 1 synchronises the block in each).
  for (int64_t base = first; base < end; base += block_pass) {
    const int64_t r0 = base + row_group * rows_per_pass;
    if (W == 1 && r0 >= end) break;
    if (base + block_pass >= end) pdl_launch_dependents();  // this warp's last pass
    int64_t row[R];
    RowLocator<T> loc[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
      row[k] = r0 + lane / L + k * groups;
      loc[k] = locate_row<T>(a.w, 0, min(row[k], end - 1));  // clamped: no branch around loads
    }
    float v[R];
    rows_dot<T, R, U>(n_gran, sub, stride, xs, tables, loc, v);
#pragma unroll
    for (int k = 0; k < R; ++k) v[k] = group_sum(v[k], L);
    if (W > 1) {
      if (lane == 0) {
#pragma unroll
        for (int k = 0; k < R; ++k) partial[warp][k] = v[k];
      }
      __syncthreads();
      if (part == 0 && lane == 0) {
#pragma unroll
        for (int k = 0; k < R; ++k) {
          float s = partial[warp][k];
          for (int w = 1; w < W; ++w) s += partial[warp + w][k];
          v[k] = s;
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
      if (part == 0 && (lane & (L - 1)) == 0 && row[k] < end) {
        const float y = a.out == GemvOut::Add ? a.y[row[k]] + v[k] : v[k];
        a.y[row[k]] = y;
        if (a.fold.n_logits > 0) fold.y[row[k] - first] = y;
      }
    }
  }
  if (a.fold.n_logits > 0) fold_finish(a.fold, fold, static_cast<int>(end - first));
}

template <TensorType T, int R, int U>
void launch_shape(const GemvArgs& a, int L, cudaStream_t stream) {
  using F = fmt::Format<T>;
  const int64_t n_gran = a.w.cols / F::kGranuleValues;
  const int64_t sms = current_device().sm_count;
  // Split K over W warps while the row count leaves SMs without two blocks and each lane keeps
  // at least two granules.
  int W = 1;
  while (R == 1 && L == 32 && W < 8 && n_gran >= 32 * W * 4 &&
         (a.w.rows * W + 8 * R - 1) / (8 * R) < 2 * sms)
    W *= 2;
  const int rows_per_pass = (8 / W) * (32 / L) * R;
  // The staged input, then the router fold's rows (a fold keeps a block within 96 KiB).
  const int64_t in_bytes = padded_size<F::kGranuleValues>(a.w.cols) * sizeof(float);
  auto smem_for = [&](int64_t rows) { return in_bytes + fold_smem_bytes(a.fold, rows); };
  int64_t most_passes = 64;
  if (a.fold.n_logits > 0)
    while (most_passes > 1 && smem_for(rows_per_pass * most_passes) > 96 * 1024) --most_passes;
  allow_smem(gemv_kernel<T, R, U>, smem_for(rows_per_pass * most_passes));
  // As many blocks as are resident at once, each covering whole passes of its 8 warps: tall
  // matrices give each block several passes (the first rows prefetched into L2 at the start), so
  // the input is staged once per block and there is no second wave.
  const int64_t target_blocks = resident_blocks(gemv_kernel<T, R, U>, smem_for(rows_per_pass));
  int64_t passes = (a.w.rows + rows_per_pass * target_blocks - 1) / (rows_per_pass * target_blocks);
  passes = std::clamp<int64_t>(passes, 1, most_passes);
  const size_t smem = smem_for(rows_per_pass * passes);
  GemvParams p{a, device_tables(), L, W, static_cast<int>(rows_per_pass * passes), 0};
  p.prefetch_rows = prefetch_rows_for<T>(a.w, p.rows_per_block);
  const int64_t blocks = (a.w.rows + p.rows_per_block - 1) / p.rows_per_block;
  launch(gemv_kernel<T, R, U>, dim3(static_cast<unsigned>(blocks)), dim3(kGemvThreads), smem,
         stream, p);
}

// ---- On the tensor cores (tc_gemv.cuh): Q2_K to Q6_K, Q8_0, IQ2_XXS and IQ3_XXS. ------------
// A CTA takes rows_per_block rows (whole tiles of 16) with a warp per kb (tc::warps_for); each
// warp stages its kbs of the input and takes the (tile, kb) items at them, leaving each item's 16
// sums in shared memory, which are added per row in kb order.
constexpr int kTcMostWarps = 16;  // 128 registers per thread at most

template <TensorType T>
__global__ void __launch_bounds__(32 * kTcMostWarps) gemv_tc_kernel(GemvParams p) {
  // The grid is planned as one resident wave (tc::plan), so the next kernel's CTAs, let in from
  // the start, can only take room that this grid leaves or frees. With the down's the same way,
  // +0.9 % at 4K against the trigger after the items (CUDA_DECODE.md, forty-fifth pass).
  pdl_launch_dependents();
  extern __shared__ float4 smem[];
  const GemvArgs& a = p.a;
  const int n = static_cast<int>(a.w.cols), n_kb = n / tc::kBlock;
  const tc::Staged st = tc::carve(smem, n);
  float* partial = tc::after(st, n);  // [tile][kb][16]
  const FoldSmem fold = fold_carve(partial + p.rows_per_block * n_kb, a.fold, p.rows_per_block);
  const tc::CtaRows rows = tc::cta_rows(p.rows_per_block, a.w.rows, n_kb);
  const int lane = threadIdx.x & 31;
  const tc::CtaBase base = tc::cta_base<T>(a.w, 0, rows);
  auto load = [&](tc::Item it) { return tc::load_item<T>(base, rows, it, lane); };
  typename tc::Tc<T>::Raw raw{};
  if (rows.items.n > 0) raw = load(rows.items.first());  // weights are constant: before the wait
  prefetch_weight_rows<T>(a.w, rows.first, rows.end, p.prefetch_rows);
  tc::stage_tables<T>(p.tables);
  __syncthreads();  // the tables
  const tc::Input in{a.in, a.x, a.norm, a.sumsq, a.group, a.eps, n};
  pdl_wait();
  tc::stage_own_blocks<T>(in, st);
  // The router's rows behind the input, not ahead of it (router_fold.cuh).
  if (a.fold.n_logits > 0) fold_stage(a.fold, rows.first, rows.end, fold);
  tc::sum_items<T>(rows, raw, load, st, partial);
  const float factor = tc::input_factor(in, st);
  for (int64_t j = threadIdx.x; j < rows.end - rows.first; j += blockDim.x) {
    const float sum = tc::row_total(partial, j, n_kb, tc::kTileRows) * factor;
    float& y = a.y[rows.first + j];
    y = a.out == GemvOut::Add ? y + sum : sum;
    if (a.fold.n_logits > 0) fold.y[j] = y;
  }
  if (a.fold.n_logits > 0) fold_finish(a.fold, fold, static_cast<int>(rows.end - rows.first));
}

template <TensorType T>
void launch_gemv(const GemvArgs& a, cudaStream_t stream) {
  using F = fmt::Format<T>;
  if constexpr (tc::supported<T>()) {
    if (tc::usable(a.w.rows, a.w.cols, 1)) {
      const tc::Plan plan = tc::plan(gemv_tc_kernel<T>, kTcMostWarps, a.w.rows, a.w.cols, 1, 1,
                                     [&](int64_t rows) { return fold_smem_bytes(a.fold, rows); });
      GemvParams p{a, device_tables(), 0, 0, plan.rows_per_block, 0};
      p.prefetch_rows = prefetch_rows_for<T>(a.w, p.rows_per_block);
      const int64_t blocks = (a.w.rows + plan.rows_per_block - 1) / plan.rows_per_block;
      launch(gemv_tc_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(plan.threads), plan.smem,
             stream, p);
      return;
    }
  }
  const int64_t n_gran = a.w.cols / F::kGranuleValues;
  launch_shape<T, 1, 4>(a, lanes_for(n_gran), stream);
}

}  // namespace

bool gemv_supports(TensorType type) {
  return fmt::dispatch(type, [&]<TensorType T>() {});
}

void gemv(const GemvArgs& a, cudaStream_t stream) {
  if (a.w.rows <= 0) return;
  if (a.fold.n_logits > 0 && (a.out != GemvOut::Add || !a.fold.w_t || !a.fold.norm || !a.fold.acc))
    fail("GEMV: a router fold needs GemvOut::Add and its weights, norm and sums");
  if (a.in == GemvIn::GroupRms && (a.group <= 0 || a.group % 8 != 0 || a.w.cols % a.group != 0))
    fail("GEMV: groups of ", a.group, " values over ", a.w.cols, " (a multiple of 8 dividing it)");
  const bool ok = fmt::dispatch(a.w.type, [&]<TensorType T>() { launch_gemv<T>(a, stream); });
  if (!ok) fail("GEMV: the CUDA kernels do not decode ", gguf::type_name(a.w.type));
}

}  // namespace rl::cuda
