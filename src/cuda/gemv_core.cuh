// The building blocks of the matrix-vector kernels (gemv.cu, moe.cu). Internal; .cu only.
//
// Bandwidth reasoning. At batch 1 a GEMV reads every weight byte once and does two flops per
// weight, so it is bound by memory bandwidth if (a) the loads are wide and coalesced and (b)
// enough of them are in flight, and (c) decoding does not become the bottleneck. Here
//  (a) each lane decodes whole "granules" (formats.cuh) with 16-byte loads where the block body
//      allows; neighbouring lanes take neighbouring granules of a row, so a warp's loads cover
//      contiguous memory;
//  (b) 256-thread blocks, several resident per SM, each lane with 2-7 independent 16-byte loads
//      per granule; L lanes share a row (L = 32 for long rows, fewer for short ones so that no
//      lane idles) and a warp serves 32 / L rows at a time;
//  (c) the input vector is staged once per block in shared memory, padded by 4 floats after each
//      granule so that lanes reading the same offset of consecutive granules hit different banks,
//      and read as float4; four independent accumulators per lane hide the FMA latency.
// The scales of a granule are applied per value (decode then multiply) rather than factored out:
// that keeps one exact decoder per format, shared with the bit-exactness self-test. Q6_K is the
// exception (q6k_granule_dot): its decoder's instructions, not memory, bound the output head.
#pragma once
#include <algorithm>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/device_utils.cuh"
#include "cuda/formats.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

namespace rl::cuda {

constexpr int kGemvThreads = 256;

// Shared-memory index of value i for granules of GV values (4 floats of padding per granule).
template <int GV>
__device__ __forceinline__ int padded(int i) {
  return i + (i / GV) * 4;
}

// Floats of shared memory that n staged values take.
template <int GV>
constexpr int64_t padded_size(int64_t n) {
  return n + ((n + GV - 1) / GV) * 4;
}

// Bytes of one row's bodies / tails.
template <gguf::TensorType T>
__host__ __device__ __forceinline__ int64_t body_row_bytes(int64_t cols) {
  using F = fmt::Format<T>;
  return cols / F::kBlockValues * F::kBodyBytes;
}
template <gguf::TensorType T>
__host__ __device__ __forceinline__ int64_t tail_row_bytes(int64_t cols) {
  using F = fmt::Format<T>;
  return cols / F::kBlockValues * F::kTailBytes;
}

// Q6_K granule n (128 values) of one block dotted with its staged input xg, without a float per
// weight: per 16-value scale group the sum of (q - 32) · x, then times d · scale. Four 6-bit
// values are assembled in one word (nibbles | 2-bit fields), and each becomes the float q - 32
// with one byte permute into 0x4B0000qq (2^23 + q) and one subtraction of 2^23 + 32, both exact.
// By count of the operations about 4 instructions per weight against the decoder's 7 (and its
// product with the scale); with the decoder the output head (Q6_K, 255 MB) ran at 38 % of the
// copy bandwidth, with this dot at 54 % (CUDA_DECODE.md, eleventh pass). The value order is the
// decoder's: formats.cuh, Format<Q6_K>::decode.
__device__ __forceinline__ float q6k_granule_dot(const uint8_t* body, const uint8_t* tail, int n,
                                                 const float* xg) {
  const auto gr = fmt::Format<gguf::TensorType::Q6_K>::load(body, tail, n);
  const uint32_t(&ql)[16] = gr.ql;
  const uint32_t(&qh)[8] = gr.qh;
  float group[8] = {};  // sums of (q - 32) · x per scale group
#pragma unroll
  for (int i = 0; i < 8; ++i) {  // values l = 4i..4i+3 of each quarter
    // Quarter p holds values 32p + l: low nibbles of ql[i] (p = 0) and ql[8 + i] (p = 1), high
    // nibbles (p = 2, 3), with bits 2p, 2p + 1 of qh[i] on top.
    const uint32_t q[4] = {(ql[i] & 0x0F0F0F0Fu) | ((qh[i] << 4) & 0x30303030u),
                           (ql[8 + i] & 0x0F0F0F0Fu) | ((qh[i] << 2) & 0x30303030u),
                           ((ql[i] >> 4) & 0x0F0F0F0Fu) | (qh[i] & 0x30303030u),
                           ((ql[8 + i] >> 4) & 0x0F0F0F0Fu) | ((qh[i] >> 2) & 0x30303030u)};
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float4 xv = *reinterpret_cast<const float4*>(xg + 32 * p + 4 * i);
      const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
      float& acc = group[i / 4 + 2 * p];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float w = __int_as_float(__byte_perm(q[p], 0x4B000000u, 0x7540u + t)) - 8388640.0f;
        acc = fmaf(w, xs[t], acc);
      }
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) sum = fmaf(gr.ds[k], group[k], sum);
  return sum;
}

// Partial dot products of R rows with the staged input: the lane takes granules
// {sub, sub + L, ...} < n_gran of each row (L: the stride, lanes x warps sharing a row). The
// granule loop is unrolled U times: U = 4 for long rows (several granules per lane), U = 1 with
// R = 2-4 for short rows (one or two granules per lane), where unrolling the granule loop would
// only cost registers while R keeps R x 2-7 16-byte loads in flight per lane. `loc[k](i, body,
// tail, g)` gives granule i's block body, tail and index in the block for row k; granule i's values
// sit at xs + i * (GV + 4). The R rows are decoded in one loop body, so their loads are issued
// together (R x 2-7 16-byte loads in flight per lane).
template <gguf::TensorType T, int R, int U, class Locate>
__device__ __forceinline__ void rows_dot(int n_gran, int sub, int L, const float* xs,
                                         const fmt::IqTables& tables, const Locate (&loc)[R],
                                         float (&out)[R]) {
  using F = fmt::Format<T>;
  float4 acc[R];
#pragma unroll
  for (int k = 0; k < R; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    // Unrolled so that the loads of consecutive granules of a long row are in flight together.
#pragma unroll U
  for (int i = sub; i < n_gran; i += L) {
    const float* xg = xs + i * (F::kGranuleValues + 4);
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const uint8_t* body;
      const uint8_t* tail;
      int g;
      loc[k](i, body, tail, g);
      if constexpr (T == gguf::TensorType::Q6_K) {
        acc[k].x += q6k_granule_dot(body, tail, g, xg);
      } else {
        F::decode(body, tail, g, tables, [&](int j, float w0, float w1, float w2, float w3) {
          const float4 xv = *reinterpret_cast<const float4*>(xg + j);
          acc[k].x = fmaf(w0, xv.x, acc[k].x);
          acc[k].y = fmaf(w1, xv.y, acc[k].y);
          acc[k].z = fmaf(w2, xv.z, acc[k].z);
          acc[k].w = fmaf(w3, xv.w, acc[k].w);
        });
      }
    }
  }
#pragma unroll
  for (int k = 0; k < R; ++k) out[k] = (acc[k].x + acc[k].y) + (acc[k].z + acc[k].w);
}

// One row (R = 1) as a value.
template <gguf::TensorType T, class Locate>
__device__ __forceinline__ float row_dot(int n_gran, int sub, int L, const float* xs,
                                         const fmt::IqTables& tables, const Locate& locate) {
  const Locate loc[1] = {locate};
  float out[1];
  rows_dot<T, 1, 4>(n_gran, sub, L, xs, tables, loc, out);
  return out[0];
}

// Locates granule i of one row of a single matrix.
template <gguf::TensorType T>
struct RowLocator {
  const uint8_t* body;
  const uint8_t* tail;
  __device__ __forceinline__ void operator()(int i, const uint8_t*& b, const uint8_t*& t,
                                             int& g) const {
    using F = fmt::Format<T>;
    const int blk = i / F::kGranules;
    g = i - blk * F::kGranules;
    b = body + static_cast<int64_t>(blk) * F::kBodyBytes;
    t = tail + static_cast<int64_t>(blk) * F::kTailBytes;
  }
};

// Start of row r of expert e.
template <gguf::TensorType T>
__device__ __forceinline__ RowLocator<T> locate_row(const Matrix& m, int64_t e, int64_t r) {
  const int64_t row = e * m.expert_rows + m.row_offset + r;
  return {m.body + row * body_row_bytes<T>(m.cols), m.tail + row * tail_row_bytes<T>(m.cols)};
}

// Prefetches the first `limit` rows of [first, end) of a single matrix (bodies and tails) into
// L2; nothing when limit <= 0 (prefetch_rows_for's 0).
template <gguf::TensorType T>
__device__ __forceinline__ void prefetch_weight_rows(const Matrix& m, int64_t first, int64_t end,
                                                     int64_t limit) {
  if (limit <= 0) return;
  end = min(end, first + limit);
  const int64_t body_row = body_row_bytes<T>(m.cols), tail_row = tail_row_bytes<T>(m.cols);
  prefetch_l2(m.body + (m.row_offset + first) * body_row, (end - first) * body_row);
  if (tail_row) prefetch_l2(m.tail + (m.row_offset + first) * tail_row, (end - first) * tail_row);
}

// Rows per block that a grid of `matrices` matrices (of m's shape and type) prefetches into L2
// before its wait, 0 with RL_CUDA_PREFETCH=0: the grid together asks for at most 1/16 of L2.
// The prefetch only has to cover the latency of a block's first loads after the wait. Asking for
// more was slower, presumably because it competes with the previous kernel's reads and, for the
// output head's 255 MB, overflows the L2 (60 MB on the H200). Decode steps there (80B, 4K
// positions, tok/s): all rows 494-496, half of L2 497-498, 1/8 503, 1/16 to 1/128 501-506, none
// 498-499 (CUDA_DECODE.md, nineteenth pass).
template <gguf::TensorType T>
int64_t prefetch_rows_for(const Matrix& m, int64_t rows_per_block, int matrices = 1) {
  if (!prefetch_enabled()) return 0;
  constexpr int64_t kShareOfL2 = 16;
  const int64_t row_bytes = body_row_bytes<T>(m.cols) + tail_row_bytes<T>(m.cols);
  const int64_t blocks = (m.rows + rows_per_block - 1) / rows_per_block;
  const int64_t budget = static_cast<int64_t>(current_device().l2_bytes) / kShareOfL2;
  const int64_t rows = budget / std::max<int64_t>(1, blocks * row_bytes * matrices);
  return std::clamp<int64_t>(rows, 1, rows_per_block);
}

// Blocks of `kernel` (`threads` threads, smem bytes of dynamic shared memory) resident at once
// on the whole GPU. A grid of more blocks runs in waves, and every wave pays the input staging
// and the first round trip for weights again.
template <class Kernel>
int64_t resident_blocks(Kernel kernel, size_t smem, int threads = kGemvThreads) {
  int per_sm = 0;
  RL_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return static_cast<int64_t>(per_sm < 1 ? 1 : per_sm) * current_device().sm_count;
}

// A GemvIn::GroupRms group's factor 1 / rms from its partial sums of squares, added in order.
__device__ __forceinline__ float group_rms_scale(float4 parts, int group, float eps) {
  static_assert(kGroupSumsqParts == 4, "one float4 of partial sums per group");
  return 1.0f / sqrtf((((parts.x + parts.y) + parts.z) + parts.w) / group + eps);
}

// Sum over the L lanes of a row group (L a power of two; groups are aligned lane ranges).
__device__ __forceinline__ float group_sum(float v, int L) {
  for (int o = L >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Lanes per row: all 32 for rows of >= 32 granules, else the next power of two.
inline int lanes_for(int64_t n_gran) {
  int L = 1;
  while (L < 32 && L < n_gran) L <<= 1;
  return L;
}

// Stages in(x) (n values, a multiple of 8: rows are whole blocks of at least 8 values, which
// layout_of checks at upload) into shared memory in the padded layout; ends synchronised.
// Returns the RMSNorm's factor 1 / rms(x) (1 for the other inputs).
// The input comes from L2 (written by the previous kernel), so every load of a thread is issued
// before any is used: thread t takes the runs of 8 values starting at 8 (t + k blockDim),
// k = 0..1 per round (one round for inputs up to 4096 values). The RMSNorm's sum of squares
// (float) is one block sum; a GroupRms run of 8 values lies in one group (group % 8 == 0, which
// gemv checks) and takes its group's partial sums. This staging is on every GEMV's critical path
// (timed with globaltimer marks inside the decode graph, CUDA_DECODE.md, fifth pass).
template <int GV>
__device__ float stage_input(GemvIn mode, const float* x, int n, const float* norm,
                             const float* sumsq, int group, float eps, float* xs) {
  if (mode == GemvIn::RmsNorm && n <= 8 * static_cast<int>(blockDim.x)) {
    // The common case (the hidden state, 2048 values) in one run per thread, each value written
    // once: measured ~1 µs shorter per launch than the general path below.
    __shared__ float red[32];
    const int i = 8 * threadIdx.x;
    float4 v0 = make_float4(0.f, 0.f, 0.f, 0.f), v1 = v0, w0 = v0, w1 = v0;
    float ss = 0.f;
    if (i < n) {
      v0 = *reinterpret_cast<const float4*>(x + i);
      v1 = *reinterpret_cast<const float4*>(x + i + 4);
      w0 = *reinterpret_cast<const float4*>(norm + i);
      w1 = *reinterpret_cast<const float4*>(norm + i + 4);
      ss = v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w + v1.x * v1.x + v1.y * v1.y +
           v1.z * v1.z + v1.w * v1.w;
    }
    const float scale = 1.0f / sqrtf(block_sum(ss, red) / n + eps);
    if (i < n) {
      float* o = xs + padded<GV>(i);
      *reinterpret_cast<float4*>(o) = make_float4(v0.x * scale * w0.x, v0.y * scale * w0.y,
                                                  v0.z * scale * w0.z, v0.w * scale * w0.w);
      *reinterpret_cast<float4*>(o + 4) = make_float4(v1.x * scale * w1.x, v1.y * scale * w1.y,
                                                      v1.z * scale * w1.z, v1.w * scale * w1.w);
    }
    __syncthreads();
    return scale;
  }
  __shared__ float red[32];
  constexpr int kRuns = 2;
  float ss = 0.f;
  float4 v[kRuns][2], w[kRuns][2], parts[kRuns];
  for (int base = 0; base < n; base += kRuns * 8 * blockDim.x) {
#pragma unroll
    for (int k = 0; k < kRuns; ++k) {
      const int i = base + 8 * (threadIdx.x + k * blockDim.x);
      if (i >= n) continue;
      v[k][0] = *reinterpret_cast<const float4*>(x + i);
      v[k][1] = *reinterpret_cast<const float4*>(x + i + 4);
      if (mode == GemvIn::RmsNorm) {
        w[k][0] = *reinterpret_cast<const float4*>(norm + i);
        w[k][1] = *reinterpret_cast<const float4*>(norm + i + 4);
      }
      if (mode == GemvIn::GroupRms)
        parts[k] = *reinterpret_cast<const float4*>(sumsq + i / group * kGroupSumsqParts);
    }
#pragma unroll
    for (int k = 0; k < kRuns; ++k) {
      const int i = base + 8 * (threadIdx.x + k * blockDim.x);
      const bool mine = i < n;
      float a[8] = {v[k][0].x, v[k][0].y, v[k][0].z, v[k][0].w,
                    v[k][1].x, v[k][1].y, v[k][1].z, v[k][1].w};
      if (mode == GemvIn::GroupRms && mine) {
        const float scale = group_rms_scale(parts[k], group, eps);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] *= scale;
      } else if (mode == GemvIn::RmsNorm && mine) {
#pragma unroll
        for (int j = 0; j < 8; ++j) ss = fmaf(a[j], a[j], ss);
      }
      if (mine) {
        float* o = xs + padded<GV>(i);
        *reinterpret_cast<float4*>(o) = make_float4(a[0], a[1], a[2], a[3]);
        *reinterpret_cast<float4*>(o + 4) = make_float4(a[4], a[5], a[6], a[7]);
      }
    }
  }
  float scale = 1.f;
  if (mode == GemvIn::RmsNorm) {
    ss = block_sum(ss, red);
    scale = 1.0f / sqrtf(ss / n + eps);
    // Each thread rescales the runs it wrote; with one round the norm weights, loaded with x,
    // are still in registers.
    if (n <= kRuns * 8 * static_cast<int>(blockDim.x)) {
#pragma unroll
      for (int k = 0; k < kRuns; ++k) {
        const int i = 8 * (threadIdx.x + k * blockDim.x);
        if (i >= n) continue;
        float* o = xs + padded<GV>(i);
        const float nw[8] = {w[k][0].x, w[k][0].y, w[k][0].z, w[k][0].w,
                             w[k][1].x, w[k][1].y, w[k][1].z, w[k][1].w};
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = o[j] * scale * nw[j];
      }
    } else {
      for (int i = 8 * threadIdx.x; i < n; i += 8 * blockDim.x) {
        float* o = xs + padded<GV>(i);
#pragma unroll
        for (int j = 0; j < 8; ++j) o[j] = o[j] * scale * norm[i + j];
      }
    }
  }
  __syncthreads();
  return scale;
}

}  // namespace rl::cuda
