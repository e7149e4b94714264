// Full attention for one token: Q/K RMSNorm + partial NEOX RoPE + KV append, split-K GQA decode
// attention, and the merge of the splits with the output gate.
//
// Bytes: at position P the decode kernel must read P rows of K and V for each of the 2 KV heads,
// 2 x 2 x 256 x 4 B = 4 KiB per position per layer in float32 (half in bf16/f16); nothing else
// it touches grows with P. So the kernel is built to stream K and V once at full bandwidth:
//  - one CTA serves all 8 query heads of its KV head, so each K/V row is read once, not 8 times;
//  - during the score pass the query vectors sit in registers (each lane owns 8 dims of all 8
//    heads, reloaded from shared memory once per split), so there is no shared-memory traffic
//    per K byte;
//  - a warp scores 2 (f32) or 4 (bf16/f16) positions per step with 4 independent 16-byte loads
//    per lane, then folds the 8 heads x positions partial sums across the warp with a
//    transposed butterfly (16 or 31 shuffles for all of them);
//  - the value pass gives each thread one 16-byte chunk of a row and loads 8 (f32) or 4 (half)
//    rows before using them; 4 (f32) or 8 (half) streams of positions are summed in shared
//    memory in a fixed order;
//  - the grid is persistent (CTAs = what fits on the GPU at once) and its size is fixed, so it
//    captures into a CUDA graph while the position changes; each CTA folds its splits into one
//    running (max, sum, output) so the merge reads one partial per CTA, not per split.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/device_utils.cuh"
#include "cuda/launch.cuh"

namespace rl::cuda {

namespace {

using engine::KvType;
constexpr int kHD = kAttnHeadDim, kQPG = kAttnGroup, kThreads = 256;

// How a KV element type is loaded (16 bytes = kVec values) and stored.
struct KvF32 {
  using Elem = float;
  static constexpr int kVec = 4;
  __device__ static void load(const Elem* p, float (&out)[kVec]) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  }
  __device__ static Elem from_float(float x) { return x; }
};
struct KvBF16 {
  using Elem = __nv_bfloat16;
  static constexpr int kVec = 8;
  __device__ static void load(const Elem* p, float (&out)[kVec]) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static Elem from_float(float x) {
    return __float2bfloat16_rn(x);
  }
};
struct KvF16 {
  using Elem = __half;
  static constexpr int kVec = 8;
  __device__ static void load(const Elem* p, float (&out)[kVec]) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  }
  __device__ static Elem from_float(float x) {
    return __float2half_rn(x);
  }
};

template <class F>
void with_kv_type(KvType t, F&& f) {
  switch (t) {
    case KvType::F32:
      f.template operator()<KvF32>();
      break;
    case KvType::BF16:
      f.template operator()<KvBF16>();
      break;
    case KvType::F16:
      f.template operator()<KvF16>();
      break;
  }
}

// ---- Q/K norm, RoPE, append ---------------------------------------------------------------------
template <class Kv>
__global__ void attn_prep_kernel(AttnPrepArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  const int b = blockIdx.x, t = threadIdx.x, hd = a.head_dim;  // blockDim.x == hd
  const int64_t pos = *a.pos;
  __shared__ float buf[1024];
  __shared__ double red[32];
  using Elem = typename Kv::Elem;
  if (b >= a.n_head + a.n_head_kv) {  // V: append as is
    const int g = b - a.n_head - a.n_head_kv;
    static_cast<Elem*>(a.v_cache)[(g * a.max_ctx + pos) * hd + t] = Kv::from_float(a.v[g * hd + t]);
    return;
  }
  const bool is_q = b < a.n_head;
  const float* src = is_q ? a.qg + static_cast<int64_t>(b) * 2 * hd
                          : a.k + static_cast<int64_t>(b - a.n_head) * hd;
  const float x = src[t];
  const double ss = block_sum(static_cast<double>(x) * x, red);
  const float scale = static_cast<float>(1.0 / sqrt(ss / hd + a.eps));
  float y = x * scale * (is_q ? a.q_norm : a.k_norm)[t];
  buf[t] = y;
  __syncthreads();
  const int half = a.n_rot / 2;
  if (t < a.n_rot) {  // NEOX: pairs (j, j + half); the angle in double, as positions reach 2^18
    const int j = t < half ? t : t - half;
    double sn, cs;
    sincos(static_cast<double>(pos) * a.rope_inv_freq[j], &sn, &cs);
    const float c = static_cast<float>(cs), s = static_cast<float>(sn);
    const float x0 = buf[j], x1 = buf[j + half];
    y = t < half ? __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s))
                 : __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
  if (is_q) {
    a.q_out[static_cast<int64_t>(b) * hd + t] = y * (1.0f / sqrtf(static_cast<float>(hd)));
  } else {
    const int g = b - a.n_head;
    static_cast<Elem*>(a.k_cache)[(g * a.max_ctx + pos) * hd + t] = Kv::from_float(y);
  }
}

// ---- Split-K decode attention -------------------------------------------------------------------
// Sums v[NV] across the warp so that lane l ends with the total of index l >> (5 - log2 NV):
// at each step a lane keeps the half of its values that matches its lane bit and adds the
// partner's copy of that half (NV/2 + NV/4 + ... shuffles instead of NV * 5).
template <int NV>
__device__ __forceinline__ float transposed_sum(float (&v)[NV], int lane) {
  int n = NV;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if (n > 1) {
      const bool upper = lane & o;
#pragma unroll
      for (int i = 0; i < NV / 2; ++i) {
        if (i < n / 2) {
          const float send = upper ? v[i] : v[i + n / 2];
          const float keep = upper ? v[i + n / 2] : v[i];
          v[i] = keep + __shfl_xor_sync(kFullMask, send, o);
        }
      }
      n /= 2;
    } else {
      v[0] += __shfl_xor_sync(kFullMask, v[0], o);
    }
  }
  return v[0];
}

template <class Kv, int BLK>
__global__ void __launch_bounds__(kThreads, 2) attn_decode_kernel(AttnArgs a) {
  using Elem = typename Kv::Elem;
  constexpr int VEC = Kv::kVec;
  constexpr int NCH = kHD / (32 * VEC);  // 16-byte chunks per lane and row, score pass
  constexpr int P = NCH == 2 ? 2 : 4;    // positions per warp step, score pass
  constexpr int NV = kQPG * P;           // partial sums per lane per step
  constexpr int TPR = kHD / VEC;         // threads per row, value pass
  constexpr int STREAMS = kThreads / TPR;
  constexpr int U = VEC == 4 ? 8 : 4;            // rows in flight per thread, value pass
  __shared__ __align__(16) float ps[BLK][kQPG];  // scores, then probabilities
  __shared__ __align__(16) float acc_s[kQPG * kHD];
  __shared__ __align__(16) float q_s[kQPG * kHD];
  __shared__ __align__(16) float run_o[kQPG * kHD];  // running output over this CTA's splits
  __shared__ float run_m[kQPG], run_l[kQPG], blk_m[kQPG], blk_l[kQPG];
  pdl_wait();

  const int t = threadIdx.x, lane = t & 31, warp = threadIdx.x >> 5;
  const int g = blockIdx.x;
  const int n = *a.pos + 1;
  const int n_splits = (n + BLK - 1) / BLK;
  if (static_cast<int>(blockIdx.y) >= n_splits) return;  // uniform per CTA
  const Elem* K = static_cast<const Elem*>(a.k_cache) + static_cast<int64_t>(g) * a.max_ctx * kHD;
  const Elem* V = static_cast<const Elem*>(a.v_cache) + static_cast<int64_t>(g) * a.max_ctx * kHD;
  const float* q = a.q + static_cast<int64_t>(g) * kQPG * kHD;
  for (int i = t; i < kQPG * kHD; i += kThreads) q_s[i] = q[i], run_o[i] = 0.f;
  if (t < kQPG) run_m[t] = -INFINITY, run_l[t] = 0.f;
  __syncthreads();

  for (int split = blockIdx.y; split < n_splits; split += gridDim.y) {
    const int p0 = split * BLK;
    const int cnt = min(BLK, n - p0);

    // Pass 1: scores q_h · k_j for the 8 heads. This lane's query dims: chunk c covers dims
    // VEC * (lane + 32c) .. + VEC - 1, held in registers during the pass.
    float qr[kQPG][NCH][VEC];
#pragma unroll
    for (int h = 0; h < kQPG; ++h)
#pragma unroll
      for (int c = 0; c < NCH; ++c)
#pragma unroll
        for (int v = 0; v < VEC; v += 4) {
          const float4 x =
              *reinterpret_cast<const float4*>(&q_s[h * kHD + VEC * (lane + 32 * c) + v]);
          qr[h][c][v] = x.x, qr[h][c][v + 1] = x.y, qr[h][c][v + 2] = x.z, qr[h][c][v + 3] = x.w;
        }
    for (int base = warp * P; base < cnt; base += 8 * P) {
      float kf[P][NCH][VEC];
#pragma unroll
      for (int pp = 0; pp < P; ++pp) {
        const int j = base + pp;
#pragma unroll
        for (int c = 0; c < NCH; ++c) {
          if (j < cnt) {
            Kv::load(K + static_cast<int64_t>(p0 + j) * kHD + VEC * (lane + 32 * c), kf[pp][c]);
          } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) kf[pp][c][v] = 0.f;
          }
        }
      }
      float s[NV];
#pragma unroll
      for (int pp = 0; pp < P; ++pp)
#pragma unroll
        for (int h = 0; h < kQPG; ++h) {
          float acc = 0.f;
#pragma unroll
          for (int c = 0; c < NCH; ++c)
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc = fmaf(qr[h][c][v], kf[pp][c][v], acc);
          s[pp * kQPG + h] = acc;
        }
      const float total = transposed_sum<NV>(s, lane);
      constexpr int kShift = NV == 32 ? 0 : 1;  // lanes sharing one index
      const int idx = lane >> kShift;
      const int j = base + (idx >> 3);
      if ((lane & ((1 << kShift) - 1)) == 0 && j < cnt) ps[j][idx & 7] = total;
    }
    __syncthreads();

    // Pass 2: per head max and sum of exp; warp h owns head h.
    {
      const int h = warp;
      float m = -INFINITY;
      for (int j = lane; j < cnt; j += 32) m = fmaxf(m, ps[j][h]);
      m = warp_max(m);
      float l = 0.f;
      for (int j = lane; j < cnt; j += 32) {
        const float p = expf(ps[j][h] - m);
        ps[j][h] = p;
        l += p;
      }
      l = warp_sum(l);
      if (lane == 0) blk_m[h] = m, blk_l[h] = l;
    }
    __syncthreads();

    // Pass 3: o_h += p_hj * v_j; thread = (stream, 16-byte chunk of the row).
    const int c = t % TPR, stream = t / TPR;
    float acc[kQPG][VEC];
#pragma unroll
    for (int h = 0; h < kQPG; ++h)
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[h][v] = 0.f;
    for (int j0 = stream; j0 < cnt; j0 += STREAMS * U) {
      float vf[U][VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * STREAMS;
        if (j < cnt) {
          Kv::load(V + static_cast<int64_t>(p0 + j) * kHD + VEC * c, vf[u]);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) vf[u][v] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * STREAMS;
        if (j < cnt) {
          const float4 pa = *reinterpret_cast<const float4*>(&ps[j][0]);
          const float4 pb = *reinterpret_cast<const float4*>(&ps[j][4]);
          const float p[kQPG] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
          for (int h = 0; h < kQPG; ++h)
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[h][v] = fmaf(p[h], vf[u][v], acc[h][v]);
        }
      }
    }
    // Sum the streams in a fixed order.
#pragma unroll 1
    for (int turn = 0; turn < STREAMS; ++turn) {
      if (stream == turn) {
#pragma unroll
        for (int h = 0; h < kQPG; ++h)
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            float& dst = acc_s[h * kHD + VEC * c + v];
            dst = turn == 0 ? acc[h][v] : dst + acc[h][v];
          }
      }
      __syncthreads();
    }

    // Fold this split into the running state; thread t owns dim t of every head.
#pragma unroll
    for (int h = 0; h < kQPG; ++h) {
      const float m_new = fmaxf(run_m[h], blk_m[h]);
      const float alpha = expf(run_m[h] - m_new), beta = expf(blk_m[h] - m_new);
      run_o[h * kHD + t] = run_o[h * kHD + t] * alpha + acc_s[h * kHD + t] * beta;
    }
    __syncthreads();
    if (t < kQPG) {
      const float m_new = fmaxf(run_m[t], blk_m[t]);
      run_l[t] = run_l[t] * expf(run_m[t] - m_new) + blk_l[t] * expf(blk_m[t] - m_new);
      run_m[t] = m_new;
    }
    __syncthreads();  // ps, acc_s and blk_* are rewritten by the next split
  }

  pdl_launch_dependents();
  const int64_t part = static_cast<int64_t>(g) * gridDim.y + blockIdx.y;
  for (int i = t; i < kQPG * kHD; i += kThreads) a.part_o[part * kQPG * kHD + i] = run_o[i];
  if (t < kQPG) {
    a.part_ml[(part * kQPG + t) * 2 + 0] = run_m[t];
    a.part_ml[(part * kQPG + t) * 2 + 1] = run_l[t];
  }
}

// ---- Merge: one CTA per (query head, 32 dims); 8 groups of partials per CTA -------------------
constexpr int kMaxCtas = 2048;

__global__ void __launch_bounds__(256) attn_merge_kernel(AttnMergeArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  const int h = blockIdx.x, t = threadIdx.x, lane = t & 31, grp = t >> 5;
  const int d = blockIdx.y * 32 + lane;
  const int g = h / kQPG, hl = h % kQPG;
  const int n = *a.pos + 1;
  const int n_parts = min(a.ctas, (n + a.split - 1) / a.split);
  __shared__ float w[kMaxCtas];
  __shared__ float red_f[32];
  __shared__ float sums[8][33];
  const float* ml = a.part_ml + (static_cast<int64_t>(g) * a.ctas * kQPG + hl) * 2;
  float m = -INFINITY;
  for (int y = t; y < n_parts; y += blockDim.x) m = fmaxf(m, ml[y * kQPG * 2]);
  // block max
  m = warp_max(m);
  if (lane == 0) red_f[grp] = m;
  __syncthreads();
  float M = -INFINITY;
  for (int i = 0; i < 8; ++i) M = fmaxf(M, red_f[i]);
  float l = 0.f;
  for (int y = t; y < n_parts; y += blockDim.x) {
    const float wy = expf(ml[y * kQPG * 2] - M);
    w[y] = wy;
    l += wy * ml[y * kQPG * 2 + 1];
  }
  __shared__ float red_l[32];
  l = block_sum(l, red_l);  // ends synchronised: w[] is complete
  const float* po = a.part_o + (static_cast<int64_t>(g) * a.ctas * kQPG + hl) * kHD + d;
  float o = 0.f;
  for (int y = grp; y < n_parts; y += 8) o += w[y] * po[static_cast<int64_t>(y) * kQPG * kHD];
  sums[grp][lane] = o;
  __syncthreads();
  if (grp == 0) {
    float total = 0.f;
    for (int i = 0; i < 8; ++i) total += sums[i][lane];
    const float gate = a.qg[static_cast<int64_t>(h) * 2 * kHD + kHD + d];
    a.out[static_cast<int64_t>(h) * kHD + d] = total / l * sigmoidf_exact(gate);
  }
}

template <class Kv, int BLK>
void launch_decode(const AttnArgs& a, cudaStream_t stream) {
  const dim3 grid(a.n_head_kv, a.ctas);
  launch(attn_decode_kernel<Kv, BLK>, grid, dim3(kThreads), 0, stream, a);
}

}  // namespace

void attn_prep(const AttnPrepArgs& a, cudaStream_t stream) {
  if (a.head_dim > 1024 || a.head_dim % 32 != 0 || a.n_rot > a.head_dim || a.n_rot % 2 != 0)
    fail("attention: head dim ", a.head_dim, " / rotary dims ", a.n_rot, " not supported");
  with_kv_type(a.kv_type, [&]<class Kv>() {
    launch(attn_prep_kernel<Kv>, dim3(a.n_head + 2 * a.n_head_kv), dim3(a.head_dim), 0, stream, a);
  });
}

void attn_decode(const AttnArgs& a, cudaStream_t stream) {
  if (a.split != 128 && a.split != 256) fail("attention: split size ", a.split, " (128 or 256)");
  if (a.ctas < 1 || a.ctas > kMaxCtas) fail("attention: ", a.ctas, " CTAs per KV head");
  with_kv_type(a.kv_type, [&]<class Kv>() {
    if (a.split == 128)
      launch_decode<Kv, 128>(a, stream);
    else
      launch_decode<Kv, 256>(a, stream);
  });
}

int attn_ctas_per_head(KvType kv_type, int split, int n_head_kv) {
  int per_sm = 0;
  with_kv_type(kv_type, [&]<class Kv>() {
    if (split == 128)
      RL_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attn_decode_kernel<Kv, 128>,
                                                            kThreads, 0));
    else
      RL_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, attn_decode_kernel<Kv, 256>,
                                                            kThreads, 0));
  });
  const int ctas = std::max(1, per_sm) * current_device().sm_count / std::max(1, n_head_kv);
  return std::min(std::max(ctas, 1), kMaxCtas);
}

void attn_merge(const AttnMergeArgs& a, cudaStream_t stream) {
  if (a.ctas > kMaxCtas) fail("attention merge: ", a.ctas, " partials per head");
  const dim3 grid(a.n_head, kHD / 32);
  launch(attn_merge_kernel, grid, dim3(256), 0, stream, a);
}

}  // namespace rl::cuda
