// Full attention for one token: Q/K RMSNorm + partial NEOX RoPE + KV append, split-K GQA decode
// attention, and the merge of the splits with the output gate.
//
// Bytes: at position P the decode kernel must read P rows of K and V for each of the 2 KV heads,
// 2 x 2 x 256 x 4 B = 4 KiB per position per layer in float32 (half in bf16/f16); nothing else
// it touches grows with P. So the kernels are built to stream K and V once at full bandwidth,
// one CTA serving all 8 query heads of its KV head so each K/V row is read once, not 8 times.
// The grid is persistent (CTAs = what fits on the GPU at once) and its size is fixed, so it
// captures into a CUDA graph while the position (read from device memory) changes; each CTA
// takes an equal share of the positions (cta_share) and leaves one partial (max, sum,
// unnormalised output) for the merge.
//  - float32 caches (attn_decode_kernel, CUDA cores): K and V arrive through a ring in shared
//    memory (cp.async, two steps in flight). The query vectors sit in registers during the
//    score pass; a warp scores 2 positions per step and folds the 8 heads x positions partial
//    sums with a transposed butterfly; the value pass gives each thread one 16-byte chunk of a
//    row and a stream of rows; the 4 streams are summed in shared memory in a fixed order.
//  - bf16/f16 caches (attn_decode_tc_kernel, tensor cores): see the comment there. On the CUDA
//    cores these took as long as float32 for half the bytes (about 200 instructions per position
//    and KV head); the MMAs bring that to about 12.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/device_utils.cuh"
#include "cuda/launch.cuh"

namespace rl::cuda {

namespace {

using engine::KvType;
constexpr int kHD = kAttnHeadDim, kQPG = kAttnGroup, kThreads = 256;

// How a KV element type is stored. The decode kernels read the caches as raw 16-byte chunks.
struct KvF32 {
  using Elem = float;
  __device__ static Elem from_float(float x) { return x; }
};
struct KvBF16 {
  using Elem = __nv_bfloat16;
  __device__ static Elem from_float(float x) { return __float2bfloat16_rn(x); }
};
struct KvF16 {
  using Elem = __half;
  __device__ static Elem from_float(float x) { return __float2half_rn(x); }
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
// One warp per job (a query head, a key head or a value head): the work is 256 values, so a
// block barrier or a second round trip costs more than the arithmetic. Lane l owns dims
// l + 32 i. The norm weights, the position and the RoPE angles do not depend on the previous
// kernel (the position is uploaded before the step's first kernel), so they are loaded and the
// sines computed before pdl_wait(), overlapping the projection that produces q, k and v.
template <class Kv>
__global__ void __launch_bounds__(32) attn_prep_kernel(AttnPrepArgs a) {
  constexpr int N = kHD / 32;
  pdl_launch_dependents();
  const int job = blockIdx.x, lane = threadIdx.x;
  const int64_t pos = *a.pos;
  const bool is_q = job < a.n_head, is_v = job >= a.n_head + a.n_head_kv;
  const int half = a.n_rot / 2;
  float w[N], cs[N], sn[N];
  if (!is_v) {
    const float* nw = is_q ? a.q_norm : a.k_norm;
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = nw[lane + 32 * i];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int d = lane + 32 * i;
      cs[i] = 1.f, sn[i] = 0.f;
      if (d < a.n_rot) {  // NEOX: pairs (j, j + half); the angle in double (positions reach 2^18)
        double s, c;
        sincos(static_cast<double>(pos) * a.rope_inv_freq[d < half ? d : d - half], &s, &c);
        cs[i] = static_cast<float>(c), sn[i] = static_cast<float>(s);
      }
    }
  }
  pdl_wait();

  using Elem = typename Kv::Elem;
  float x[N];
  if (is_v) {
    const int g = job - a.n_head - a.n_head_kv;
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = a.v[g * kHD + lane + 32 * i];
    Elem* dst = static_cast<Elem*>(a.v_cache) + (g * a.max_ctx + pos) * kHD;
#pragma unroll
    for (int i = 0; i < N; ++i) dst[lane + 32 * i] = Kv::from_float(x[i]);
    return;
  }
  const float* src = is_q ? a.qg + static_cast<int64_t>(job) * 2 * kHD
                          : a.k + static_cast<int64_t>(job - a.n_head) * kHD;
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = src[lane + 32 * i];
  double ss = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) ss += static_cast<double>(x[i]) * x[i];
  ss = warp_sum(ss);
  const float scale = static_cast<float>(1.0 / sqrt(ss / kHD + a.eps));
  __shared__ float buf[kHD];
  float y[N];
#pragma unroll
  for (int i = 0; i < N; ++i) buf[lane + 32 * i] = y[i] = x[i] * scale * w[i];
  __syncwarp();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int d = lane + 32 * i;
    if (d < a.n_rot) {
      const int j = d < half ? d : d - half;
      const float x0 = buf[j], x1 = buf[j + half];
      y[i] = d < half ? __fsub_rn(__fmul_rn(x0, cs[i]), __fmul_rn(x1, sn[i]))
                      : __fadd_rn(__fmul_rn(x0, sn[i]), __fmul_rn(x1, cs[i]));
    }
  }
  if (is_q) {
    float* dst = a.q_out + static_cast<int64_t>(job) * kHD;
#pragma unroll
    for (int i = 0; i < N; ++i) dst[lane + 32 * i] = y[i] * (1.0f / 16.0f);  // 1/sqrt(256)
  } else {
    const int g = job - a.n_head;
    Elem* dst = static_cast<Elem*>(a.k_cache) + (g * a.max_ctx + pos) * kHD;
#pragma unroll
    for (int i = 0; i < N; ++i) dst[lane + 32 * i] = Kv::from_float(y[i]);
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

// Every CTA of a KV head takes an equal share of the n positions, in whole tiles of 8: CTA y of
// ny gets tiles [y * base + min(y, rem), + base + (y < rem)) of the ceil(n / 8), base and rem
// being their quotient and remainder by ny. Shares differ by one tile at most (whole splits per
// CTA gave some CTAs a split more than others, 3 % above the mean at 64K-256K), the non-empty
// ones are a prefix of the CTAs, and only the last tile crosses n.
constexpr int kShareTile = 8;
struct Share {
  int lo, hi;  // positions [lo, hi); empty when lo >= hi
};
__device__ __forceinline__ Share cta_share(int n, int y, int ny) {
  const int tiles = (n + kShareTile - 1) / kShareTile, base = tiles / ny, rem = tiles % ny;
  const int first = y * base + min(y, rem), count = base + (y < rem ? 1 : 0);
  return {first * kShareTile, min((first + count) * kShareTile, n)};
}
// Partials the merge reads: one per non-empty share.
__device__ __forceinline__ int non_empty_shares(int n, int ny) {
  return min(ny, (n + kShareTile - 1) / kShareTile);
}

// Asks L2 for `rows` float32 cache rows from position p (none when rows <= 0): thread t takes
// line t % 8 (of 128 bytes) of row t / 8, so a CTA covers 32 rows with one prefetch per thread.
constexpr int kLinesPerRow = kHD * 4 / 128, kAheadRows = kThreads / kLinesPerRow;
__device__ __forceinline__ void prefetch_rows_l2(const float* cache, int p, int rows, int t) {
  if (t / kLinesPerRow < rows)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(
        cache + static_cast<int64_t>(p + t / kLinesPerRow) * kHD + (t % kLinesPerRow) * 32));
}

// The float32 kernel's shapes. Both passes read the cache through a ring of kRingStages steps in
// shared memory, kRingStages - 1 in flight (cp.async). Each thread copies exactly the 16-byte
// chunks it later reads, so waiting for its own copies is all the synchronisation a step needs.
// Loaded into registers, the score pass had one step (2 KiB per warp) in flight and ran at ~93 %
// of copy speed, and the value pass drained between its batches of 8 rows; through the rings a
// layer at 128K positions takes 128 instead of 141 us (CUDA_DECODE.md, twenty-second pass).
static_assert(kThreads == kHD, "float32 kernel: thread t owns dim t of every head");
constexpr int kRowChunks = kHD / 4;                   // 16-byte chunks of a float32 row
constexpr int kScoreRows = 2;                         // positions per warp step, score pass
constexpr int kValueStreams = kThreads / kRowChunks;  // value pass: thread = (stream, chunk)
constexpr int kValueRows = 4;                         // rows per thread and step, value pass
constexpr int kRingStages = 3;
constexpr int kRingStep = kThreads / 32 * kScoreRows * kRowChunks;  // float4s: 16 KiB
static_assert(kValueStreams * kValueRows * kRowChunks == kRingStep, "one step size for both");
// The stream sums at the end of a pass reuse each thread's own value slots: 8 heads' float4s.
static_assert(kQPG <= kRingStages * kValueRows, "the sums fit in a thread's slots");
// Dynamic shared memory: the pass's scores (BLK x 8 floats), then the ring.
constexpr int f32_smem(int blk) {
  return (blk * kQPG / 4 + kRingStages * kRingStep) * 16;
}

template <int BLK>
__global__ void __launch_bounds__(kThreads, 2) attn_decode_kernel(AttnArgs a) {
  constexpr int NCH = kRowChunks / 32;  // chunks per lane and row, score pass
  constexpr int P = kScoreRows, NV = kQPG * P;
  constexpr int STREAMS = kValueStreams, U = kValueRows, S = kRingStages;
  extern __shared__ float4 dyn[];
  auto* ps = reinterpret_cast<float(*)[kQPG]>(dyn);  // scores, then probabilities
  float4* ring = dyn + BLK * kQPG / 4;               // [stage][kRingStep]
  __shared__ __align__(16) float q_s[kQPG * kHD];
  __shared__ __align__(16) float run_o[kQPG * kHD];  // running output over this CTA's passes
  __shared__ float run_m[kQPG], run_l[kQPG], blk_m[kQPG], blk_l[kQPG];

  const int t = threadIdx.x, lane = t & 31, warp = threadIdx.x >> 5;
  const int c = t % kRowChunks, stream = t / kRowChunks;  // value pass
  const int g = blockIdx.x;
  const int n = *a.pos + 1;  // the position is uploaded before the step: readable before the wait
  const Share share = cta_share(n, blockIdx.y, gridDim.y);
  if (share.lo >= share.hi) return;  // uniform per CTA
  // One pass per CTA is the usual case (attention_split_for picks the smallest split that gives
  // each CTA at most one); only float32 past 1024 positions per CTA takes more.
  const bool one_pass = share.hi - share.lo <= BLK;
  const float* K = static_cast<const float*>(a.k_cache) + static_cast<int64_t>(g) * a.max_ctx * kHD;
  const float* V = static_cast<const float*>(a.v_cache) + static_cast<int64_t>(g) * a.max_ctx * kHD;

  // Score step i of this warp in the pass at p0 covers rows p0 + warp * P + i * 8P + 0..P-1;
  // lane copies chunks lane + 32 k of each. Value step i of thread (stream, c) covers rows
  // p0 + stream + (i * U + u) * STREAMS, u < U. Steps past the pass are not issued; a row past
  // it in a step is zero-filled (its score is never stored, its probability never read).
  // The first row (within the pass) of each step: the copies and the loops that use them share
  // these, so a step is read from the slot it was copied to.
  auto key_row0 = [&](int i) { return warp * P + i * 8 * P; };
  auto value_row0 = [&](int i) { return stream + i * U * STREAMS; };
  auto issue_keys = [&](int p0, int cnt, int i) {
    const int base = key_row0(i);
    if (base >= cnt) return;
    float4* slot = ring + (i % S) * kRingStep + warp * P * kRowChunks;
#pragma unroll
    for (int pp = 0; pp < P; ++pp) {
      const int j = base + pp;
#pragma unroll
      for (int k = 0; k < NCH; ++k) {
        const int col = lane + 32 * k;
        cp_async16(slot + pp * kRowChunks + col,
                   K + static_cast<int64_t>(p0 + (j < cnt ? j : 0)) * kHD + 4 * col,
                   j < cnt ? 16 : 0);
      }
    }
  };
  auto issue_values = [&](int p0, int cnt, int i) {
    const int j0 = value_row0(i);
    if (j0 >= cnt) return;
    float4* slot = ring + (i % S) * kRingStep;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * STREAMS;
      cp_async16(slot + (u * STREAMS + stream) * kRowChunks + c,
                 V + static_cast<int64_t>(p0 + (j < cnt ? j : 0)) * kHD + 4 * c, j < cnt ? 16 : 0);
    }
  };

  // The first pass's first key steps. Only row n - 1 is written during the step (by attn_prep),
  // so steps made only of earlier rows are requested before the wait, as one leading group:
  // every step then sits in a group <= its index + 1.
  {
    const int cnt = min(BLK, share.hi - share.lo);
    auto settled = [&](int i) { return share.lo + key_row0(i) + P < n; };
#pragma unroll
    for (int i = 0; i < S - 1; ++i)
      if (settled(i)) issue_keys(share.lo, cnt, i);
    cp_async_commit();
    pdl_wait();
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
      if (!settled(i)) issue_keys(share.lo, cnt, i);
      cp_async_commit();
    }
  }
  // This CTA's partial: thread t stores dim t of every head, o(h), then the heads' max and sum.
  auto store_partial = [&](auto o, const float* m, const float* l) {
    pdl_launch_dependents();
    const int64_t part = static_cast<int64_t>(g) * gridDim.y + blockIdx.y;
#pragma unroll
    for (int h = 0; h < kQPG; ++h) a.part_o[(part * kQPG + h) * kHD + t] = o(h);
    if (t < kQPG) {
      a.part_ml[(part * kQPG + t) * 2 + 0] = m[t];
      a.part_ml[(part * kQPG + t) * 2 + 1] = l[t];
    }
  };
  const float* q = a.q + static_cast<int64_t>(g) * kQPG * kHD;
  for (int i = t; i < kQPG * kHD; i += kThreads) q_s[i] = q[i], run_o[i] = 0.f;
  if (t < kQPG) run_m[t] = -INFINITY, run_l[t] = 0.f;
  __syncthreads();

  // The share in passes of up to BLK positions.
  for (int p0 = share.lo; p0 < share.hi; p0 += BLK) {
    const int cnt = min(BLK, share.hi - p0);
    if (p0 != share.lo) {  // a later pass: its first key steps, with the same group layout
      cp_async_commit();
#pragma unroll
      for (int i = 0; i < S - 1; ++i) {
        issue_keys(p0, cnt, i);
        cp_async_commit();
      }
    }

    // Pass 1: scores q_h · k_j for the 8 heads. This lane's query dims: chunk k covers dims
    // 4 (lane + 32k) .. + 3, held in registers during the pass.
    float qr[kQPG][NCH][4];
#pragma unroll
    for (int h = 0; h < kQPG; ++h)
#pragma unroll
      for (int k = 0; k < NCH; ++k) {
        const float4 x = *reinterpret_cast<const float4*>(&q_s[h * kHD + 4 * (lane + 32 * k)]);
        qr[h][k][0] = x.x, qr[h][k][1] = x.y, qr[h][k][2] = x.z, qr[h][k][3] = x.w;
      }
    for (int i = 0; key_row0(i) < cnt; ++i) {
      const int base = key_row0(i);
      issue_keys(p0, cnt, i + S - 1);
      cp_async_commit();
      cp_async_wait<S - 1>();  // step i has landed
      const float4* slot = ring + (i % S) * kRingStep + warp * P * kRowChunks;
      float kf[P][NCH][4];
#pragma unroll
      for (int pp = 0; pp < P; ++pp)
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
          const float4 x = slot[pp * kRowChunks + lane + 32 * k];
          kf[pp][k][0] = x.x, kf[pp][k][1] = x.y, kf[pp][k][2] = x.z, kf[pp][k][3] = x.w;
        }
      float s[NV];
#pragma unroll
      for (int pp = 0; pp < P; ++pp)
#pragma unroll
        for (int h = 0; h < kQPG; ++h) {
          float acc = 0.f;
#pragma unroll
          for (int k = 0; k < NCH; ++k)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc = fmaf(qr[h][k][v], kf[pp][k][v], acc);
          s[pp * kQPG + h] = acc;
        }
      const float total = transposed_sum<NV>(s, lane);
      constexpr int kShift = NV == 32 ? 0 : 1;  // lanes sharing one index
      const int idx = lane >> kShift;
      const int j = base + (idx >> 3);
      if ((lane & ((1 << kShift) - 1)) == 0 && j < cnt) ps[j][idx & 7] = total;
    }
    __syncthreads();  // the scores are complete and the ring is free

    // The value pass's first steps now, so that they arrive during the softmax pass.
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
      issue_values(p0, cnt, i);
      cp_async_commit();
    }
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

    // Pass 3: o_h += p_hj * v_j over this thread's stream of rows, in row order.
    float acc[kQPG][4];
#pragma unroll
    for (int h = 0; h < kQPG; ++h)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[h][v] = 0.f;
    for (int i = 0; value_row0(i) < cnt; ++i) {
      const int j0 = value_row0(i);
      issue_values(p0, cnt, i + S - 1);
      cp_async_commit();
      cp_async_wait<S - 1>();
      const float4* slot = ring + (i % S) * kRingStep;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int j = j0 + u * STREAMS;
        if (j < cnt) {
          const float4 x = slot[(u * STREAMS + stream) * kRowChunks + c];
          const float vf[4] = {x.x, x.y, x.z, x.w};
          const float4 pa = *reinterpret_cast<const float4*>(&ps[j][0]);
          const float4 pb = *reinterpret_cast<const float4*>(&ps[j][4]);
          const float p[kQPG] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
          for (int h = 0; h < kQPG; ++h)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[h][v] = fmaf(p[h], vf[v], acc[h][v]);
        }
      }
    }
    // The next pass's first key rows into L2, during the sums and the fold below.
    prefetch_rows_l2(K, p0 + BLK, min(share.hi - (p0 + BLK), kAheadRows), t);
    // The streams' sums go to this thread's own value slots (head h: stage h / U, row slot
    // h % U), which no other thread touches, so one barrier suffices before they are summed.
    auto sum_slot = [&](int h, int st) {
      return ring + (h / U) * kRingStep + ((h % U) * STREAMS + st) * kRowChunks;
    };
#pragma unroll
    for (int h = 0; h < kQPG; ++h)
      sum_slot(h, stream)[c] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
    __syncthreads();

    // Thread t owns dim t of every head and adds the streams in their order.
    auto stream_sum = [&](int h) {
      float o = 0.f;
#pragma unroll
      for (int st = 0; st < STREAMS; ++st) {
        const float x = reinterpret_cast<const float*>(sum_slot(h, st))[t];
        o = st == 0 ? x : o + x;
      }
      return o;
    };
    if (one_pass) {
      // The pass is the partial: folding it into the empty running state would multiply it by
      // exp(0) = 1 and add 0, so it is stored as it stands (the same values), two barriers and
      // the running state's shared-memory round trip fewer.
      store_partial(stream_sum, blk_m, blk_l);
      return;
    }

    // Fold this pass into the running state.
#pragma unroll
    for (int h = 0; h < kQPG; ++h) {
      const float o = stream_sum(h);
      const float m_new = fmaxf(run_m[h], blk_m[h]);
      const float alpha = expf(run_m[h] - m_new), beta = expf(blk_m[h] - m_new);
      run_o[h * kHD + t] = run_o[h * kHD + t] * alpha + o * beta;
    }
    __syncthreads();
    if (t < kQPG) {
      const float m_new = fmaxf(run_m[t], blk_m[t]);
      run_l[t] = run_l[t] * expf(run_m[t] - m_new) + blk_l[t] * expf(blk_m[t] - m_new);
      run_m[t] = m_new;
    }
    __syncthreads();  // ps, the ring and blk_* are rewritten by the next pass
  }

  store_partial([&](int h) { return run_o[h * kHD + t]; }, run_m, run_l);
}

// ---- Split-K decode attention on the tensor cores (bf16 / f16 caches)
// ---------------------------- K and V are exact in the 16-bit cache type; the float32 operand of
// each product (q for the scores, the probabilities p for the values) is split into hi + lo in that
// type, so q·k and p·v keep ~2^-16 (bf16) or ~2^-22 (f16) relative accuracy with float32
// accumulation.
//
// Every warp runs its own online softmax over tiles of 8 positions (no block barrier until the
// CTA's end), with two mma.m16n8k16 shapes that need no data exchange between lanes:
//  - scores: A = [q_hi of the 8 heads; q_lo of the 8 heads] (16 x 16 dims, from shared memory),
//    B = K^T (16 dims x 8 positions) straight from global memory: lane (g, t) = (lane / 4,
//    lane % 4) holds row g of the tile. 16 k-steps cover the 256 dims. D rows 0-7 are the hi
//    part, rows 8-15 the lo part of the scores of head g at positions 2t, 2t + 1.
//  - values: A = V^T (16 dims x [8 positions, the same 8 again]), B = [p_hi; p_lo] (16 x 8
//    heads), so hi and lo are summed by the MMA itself. The scores' D fragment (head g,
//    positions 2t, 2t + 1) is exactly the B fragment this needs, and A's columns 8-15 repeat
//    columns 0-7, so a2 = a0 and a3 = a1. The A fragment pairs two positions of one dim: two
//    byte permutes per register from two rows' 16-byte loads. 16 m-tiles cover the 256 dims.
// Dims are assigned to MMA rows/columns by any bijection that makes the loads 16 bytes wide:
//  - scores: k-step s, element e (k = 2t + e for e < 2, 2t + 8 + e - 2 otherwise) is dim
//    32 (s / 2) + 8 t + 4 (s % 2) + e, so lane (g, t) loads K[row g][32 c + 8 t .. + 7], c < 8;
//  - values: m-tile m = 4 c + j, row g is dim 64 c + 8 g + 2 j, row g + 8 is that dim + 1, so lane
//    (g, t) loads V[row 2t or 2t + 1][64 c + 8 g .. + 7], c < 4.
// Per 8 positions a warp reads 8 KiB, issues 32 MMAs and 32 permutes; the next tiles' copies are
// issued before the current one is used, so each warp keeps 8-16 KiB in flight without
// depending on occupancy. On sm_90 a tile arrives as 16 bulk copies of whole rows (one per lane,
// completion counted on an mbarrier): the earlier per-lane 16-byte cp.async kept the shared-memory
// pipe busy (Nsight Compute at 128K positions: short-scoreboard and MIO-throttle stalls first,
// DRAM at 2.7 TB/s). Rows are padded in shared memory so that the fragment reads use every bank.
template <class Kv>
struct Tc;
template <>
struct Tc<KvBF16> {
  static constexpr float kQLoScale = 1.0f;  // bf16 has float32's exponent range
  static constexpr float kPScale = 1.0f;
  __device__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ static float round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
  __device__ static void mma(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
    mma_m16n8k16<true>(d, a, b0, b1);
  }
};
template <>
struct Tc<KvF16> {
  // f16 tops out at 65504 and goes subnormal below 6.1e-5: the lo part of q is scaled by 2^11
  // (it is ~2^-11 of q) and sits in its own output rows, so the scale is undone exactly; p <= 1
  // is scaled by 2^14 before the split (the output is scaled back at the end), which keeps p_hi
  // and p_lo normal down to p ~ 1e-5 and their absolute error below 1e-11.
  static constexpr float kQLoScale = 2048.0f;
  static constexpr float kPScale = 16384.0f;
  __device__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ static float round(float x) { return __half2float(__float2half_rn(x)); }
  __device__ static void mma(float (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
    mma_m16n8k16<false>(d, a, b0, b1);
  }
};

constexpr int kTcSteps = kHD / 16;  // k-steps of the score MMA, m-tiles of the value MMA
constexpr int kTile = 8;            // positions per warp step
// A warp's tile in shared memory: rows 0-7 are K of positions p..p+7, rows 8-15 V, each padded
// from 512 to 528 bytes: the fragment reads (8 rows at one column, or 2 rows at 8 columns) then
// fall in distinct banks.
constexpr int kRowBytes = kHD * 2, kRowStride = kRowBytes + 16;
constexpr int kTileBytes = 2 * kTile * kRowStride;
// Shared memory of the ring of `stages` tiles per warp plus the q fragments: 3 stages (206 KiB,
// two tiles = 16 KiB per warp in flight while one is used) where the GPU grants it (sm_90),
// 1 stage (74 KiB) elsewhere.
constexpr int tc_smem(int stages) {
  return (kThreads / 32) * stages * kTileBytes + kTcSteps * 32 * 16;
}
// The fold at the end reuses it for 8 warps' outputs in fragment order and one [head][dim] copy.
static_assert((kThreads / 32) * kTcSteps * 2 * 32 * 8 + kQPG * kHD * 4 <= tc_smem(1));

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kBulkCopies = true;
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
// A copy that never lands (a bad address) traps instead of hanging the GPU.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  for (uint32_t spins = 0;; ++spins) {
    uint32_t done;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    if (done) return;
    if (spins == (1u << 26)) __trap();
  }
}
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_u32(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
#else
constexpr bool kBulkCopies = false;
#endif

// Copies K and V rows p .. p + 7 into a warp's tile; V rows at or past n are zero (they meet a
// probability of 0, and uninitialised memory may hold NaN), K rows there are never used (their
// scores are masked). sm_90: lane 0 announces the tile's bytes on its mbarrier, lane j < 16
// copies row j with one bulk copy. Before sm_90: cp.async of the 16-byte pieces each lane later
// reads itself (so the wait needs no warp barrier), zero-filled past n.
__device__ __forceinline__ void tc_issue(uint8_t* tile, uint64_t* bar, const uint16_t* K,
                                         const uint16_t* V, int p, int n, int lane) {
  if constexpr (kBulkCopies) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int rows = min(kTile, n - p);
    if (lane == 0) mbar_expect(bar, static_cast<uint32_t>(2 * rows * kRowBytes));
    __syncwarp();
    const int r = lane & (kTile - 1);
    const uint16_t* src = (lane < kTile ? K : V) + static_cast<int64_t>(p + r) * kHD;
    if (lane < 2 * kTile && r < rows) bulk_copy(tile + lane * kRowStride, src, kRowBytes, bar);
    if (rows < kTile) {  // the last tile: zero the V rows past n
      for (int row = rows; row < kTile; ++row)
        reinterpret_cast<uint4*>(tile + (kTile + row) * kRowStride)[lane] = make_uint4(0, 0, 0, 0);
    }
#endif
  } else {
    const int g = lane >> 2, t = lane & 3;
    const int kr = p + g < n ? p + g : p;  // clamped into the cache; the copy is zero-filled
    const uint16_t* ks = K + static_cast<int64_t>(kr) * kHD + 8 * t;
#pragma unroll
    for (int c = 0; c < 8; ++c)
      cp_async16(tile + g * kRowStride + 64 * c + 16 * t, ks + 32 * c, p + g < n ? 16 : 0);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = p + 2 * t + r, vr = row < n ? row : p;
      const uint16_t* vs = V + static_cast<int64_t>(vr) * kHD + 8 * g;
#pragma unroll
      for (int c = 0; c < 4; ++c)
        cp_async16(tile + (kTile + 2 * t + r) * kRowStride + 128 * c + 16 * g, vs + 64 * c,
                   row < n ? 16 : 0);
    }
  }
}

// The running state of one warp: max and partial sum of head g (the sum over this lane's
// positions only), and o for heads 2t, 2t + 1 in the value MMA's D layout.
struct TcState {
  float m = -INFINITY, l = 0.f;
  float o[kTcSteps][4] = {};
};

template <class Kv>
__device__ __forceinline__ void tc_step(const uint8_t* tile, const uint4* qf, TcState& st, int p,
                                        int n, int lane) {
  using T = Tc<Kv>;
  const int g = lane >> 2, t = lane & 3;
  // K[row g][32 c + 8 t ..], V[row 2t + r][64 c + 8 g ..] (bf16/f16 elements).
  auto k_chunk = [&](int c) {
    return *reinterpret_cast<const uint4*>(tile + g * kRowStride + 64 * c + 16 * t);
  };
  auto v_chunk = [&](int r, int c) {
    return *reinterpret_cast<const uint4*>(tile + (kTile + 2 * t + r) * kRowStride + 128 * c +
                                           16 * g);
  };
  // Scores: two accumulators (even and odd k-steps) halve the dependent MMA chain.
  float sa[4] = {}, sb[4] = {};
#pragma unroll
  for (int s = 0; s < kTcSteps; s += 2) {
    const uint4 kk = k_chunk(s / 2);
    T::mma(sa, qf[s * 32 + lane], kk.x, kk.y);
    T::mma(sb, qf[(s + 1) * 32 + lane], kk.z, kk.w);
  }
  constexpr float kLoInv = 1.0f / T::kQLoScale;
  float s0 = (sa[0] + sb[0]) + (sa[2] + sb[2]) * kLoInv;
  float s1 = (sa[1] + sb[1]) + (sa[3] + sb[3]) * kLoInv;
  if (p + 2 * t >= n) s0 = -INFINITY;
  if (p + 2 * t + 1 >= n) s1 = -INFINITY;

  // Online softmax of head g over this tile (position p < n, so the max is finite).
  float mt = fmaxf(s0, s1);
  mt = fmaxf(mt, __shfl_xor_sync(kFullMask, mt, 1));
  mt = fmaxf(mt, __shfl_xor_sync(kFullMask, mt, 2));
  const float m_new = fmaxf(st.m, mt);
  const float alpha = expf(st.m - m_new);  // 0 on the first tile, 1 while the max stands
  const float p0 = expf(s0 - m_new), p1 = expf(s1 - m_new);
  st.l = st.l * alpha + (p0 + p1);
  st.m = m_new;
  if (__any_sync(kFullMask, alpha != 1.0f)) {
    const float al0 = __shfl_sync(kFullMask, alpha, 8 * t);  // heads 2t and 2t + 1
    const float al1 = __shfl_sync(kFullMask, alpha, 8 * t + 4);
#pragma unroll
    for (int m = 0; m < kTcSteps; ++m) {
      st.o[m][0] *= al0, st.o[m][1] *= al1, st.o[m][2] *= al0, st.o[m][3] *= al1;
    }
  }

  // p = hi + lo in the cache type (after the power-of-two scale that keeps f16 normal).
  const float q0 = p0 * T::kPScale, q1 = p1 * T::kPScale;
  const float h0 = T::round(q0), h1 = T::round(q1);
  const uint32_t b_hi = T::pack(h0, h1), b_lo = T::pack(q0 - h0, q1 - h1);

  // Values: m-tile 4c + j takes word j of the two rows' chunk c.
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint4 r0 = v_chunk(0, c), r1 = v_chunk(1, c);
    const uint32_t w0[4] = {r0.x, r0.y, r0.z, r0.w}, w1[4] = {r1.x, r1.y, r1.z, r1.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = __byte_perm(w0[j], w1[j], 0x5410);  // dim 2j of both rows
      const uint32_t hi = __byte_perm(w0[j], w1[j], 0x7632);  // dim 2j + 1
      T::mma(st.o[4 * c + j], make_uint4(lo, hi, lo, hi), b_hi, b_lo);
    }
  }
}

template <class Kv, int kStages>
__global__ void __launch_bounds__(kThreads, 1) attn_decode_tc_kernel(AttnArgs a) {
  // The merge launches at once: its CTAs (256 threads at 89 registers, 1 KiB of shared memory)
  // fit beside this kernel's one CTA per SM and wait there for the last partial (bench kernel
  // -1.3 to -1.9 % at 128K-256K). The float32 kernel's two CTAs per SM leave no room, and
  // launching the merge early there was measured slower (WHAT_DID_NOT_WORK.md).
  pdl_launch_dependents();
  using T = Tc<Kv>;
  constexpr int kWarps = kThreads / 32;
  static_assert(kTile == kShareTile, "shares are whole tiles");
  extern __shared__ uint4 tc_dyn[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(tc_dyn);       // [warp][stage] tiles
  uint4* qf = tc_dyn + kWarps * kStages * kTileBytes / 16;  // A fragments, [k-step][lane]
  // At the end the ring and qf hold the warps' outputs (o_w) and the folded output (o_s).
  float2* o_w = reinterpret_cast<float2*>(tc_dyn);
  float* o_s = reinterpret_cast<float*>(o_w + kWarps * kTcSteps * 2 * 32);
  __shared__ float w_m[kWarps][kQPG], w_l[kWarps][kQPG];
  __shared__ uint64_t bars[kWarps][kStages];  // sm_90: tile arrivals per warp and stage

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int kvh = blockIdx.x, y = blockIdx.y, ny = gridDim.y;
  const int n = *a.pos + 1;  // the position is uploaded before the step: readable before the wait
  const Share share = cta_share(n, y, ny);
  if (share.lo >= share.hi) return;  // uniform per CTA
  const uint16_t* K =
      static_cast<const uint16_t*>(a.k_cache) + static_cast<int64_t>(kvh) * a.max_ctx * kHD;
  const uint16_t* V =
      static_cast<const uint16_t*>(a.v_cache) + static_cast<int64_t>(kvh) * a.max_ctx * kHD;
  // This warp's tiles in order: tiles warp, warp + 8, ... of the share. Positions only grow,
  // so the first tile at or past the share's end ends the walk.
  auto tile_pos = [&](int i) { return share.lo + (i * kWarps + warp) * kTile; };
  uint8_t* my_ring = ring + warp * kStages * kTileBytes;
  uint64_t* my_bars = bars[warp];
  auto issue = [&](int i) {
    tc_issue(my_ring + (i % kStages) * kTileBytes, &my_bars[i % kStages], K, V, tile_pos(i), n,
             lane);
  };
  if constexpr (kBulkCopies) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (lane < kStages) mbar_init(&my_bars[lane]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
#endif
  }
  // Keep kStages - 1 tiles in flight ahead of the one in use. Rows before n - 1 are not written
  // during a step (only row n - 1 is, by attn_prep), so the first tiles made only of such rows
  // are requested before pdl_wait(). With cp.async they form one extra leading commit group:
  // every tile then sits in group <= its index + 1, and waiting until kStages - 1 groups are
  // pending still finds tile i complete at step i.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i)
    if (tile_pos(i) < share.hi && tile_pos(i) + kTile < n) issue(i);
  cp_async_commit();
  pdl_wait();
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    const int p = tile_pos(i);
    if (p < share.hi && p + kTile >= n) issue(i);
    cp_async_commit();
  }

  // q fragments: entry (s, lane) holds head g's dims 32 (s / 2) + 8 t + 4 (s % 2) + 0..3 as
  // a0 = hi[0..1], a1 = lo[0..1], a2 = hi[2..3], a3 = lo[2..3] (rows g and g + 8).
  const float* q = a.q + static_cast<int64_t>(kvh) * kQPG * kHD;
  for (int i = tid; i < kTcSteps * 32; i += kThreads) {
    const int s = i / 32, fg = (i % 32) >> 2, ft = i & 3;
    const float4 x =
        *reinterpret_cast<const float4*>(q + fg * kHD + 32 * (s / 2) + 8 * ft + 4 * (s % 2));
    const float v[4] = {x.x, x.y, x.z, x.w};
    float hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      hi[e] = T::round(v[e]);
      lo[e] = (v[e] - hi[e]) * T::kQLoScale;  // exact: a power of two
    }
    qf[i] = make_uint4(T::pack(hi[0], hi[1]), T::pack(lo[0], lo[1]), T::pack(hi[2], hi[3]),
                       T::pack(lo[2], lo[3]));
  }
  __syncthreads();  // qf complete

  TcState st;
  for (int i = 0;; ++i) {
    const int p = tile_pos(i);
    if (p >= share.hi) break;
    if (tile_pos(i + kStages - 1) < share.hi) {
      if constexpr (kBulkCopies) {
        // The slot was read by every lane at step i - 1: order those reads before the copy.
        __syncwarp();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      }
      issue(i + kStages - 1);
    }
    cp_async_commit();
    if constexpr (kBulkCopies) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      mbar_wait(&my_bars[i % kStages], static_cast<uint32_t>((i / kStages) & 1));
      __syncwarp();  // the last tile's zeroed rows, written by other lanes
#endif
    } else {
      cp_async_wait<kStages - 1>();  // tile i has landed
    }
    tc_step<Kv>(my_ring + (i % kStages) * kTileBytes, qf, st, p, n, lane);
  }
  cp_async_wait<0>();

  // Fold the 8 warps into the CTA's partial, in warp order. Each warp stores its scaled output
  // in its own fragment order (consecutive lanes, no bank conflicts), then each thread sums one
  // fragment slot over the warps and puts it at its (head, dim) for a coalesced store. (A
  // running sum in the [head][dim] layout, one warp after another, cost ~4.5 us per launch:
  // eight serial turns of 8-way conflicted read-modify-writes.)
  float l = st.l;
  l += __shfl_xor_sync(kFullMask, l, 1);
  l += __shfl_xor_sync(kFullMask, l, 2);
  if (t == 0) w_m[warp][g] = st.m, w_l[warp][g] = l;
  __syncthreads();  // also: every warp is done with the ring and qf, which become o_w and o_s
  float scale[2];   // heads 2t, 2t + 1
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int h = 2 * t + e;
    float mh = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mh = fmaxf(mh, w_m[w][h]);
    scale[e] = expf(w_m[warp][h] - mh);  // finite max: warp 0 has position share.lo < n
  }
  constexpr int kSlots = kTcSteps * 2 * 32;  // float2 fragment slots per warp: [m][e][lane]
#pragma unroll
  for (int m = 0; m < kTcSteps; ++m)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      o_w[warp * kSlots + (2 * m + e) * 32 + lane] =
          make_float2(st.o[m][e] * scale[e], st.o[m][2 + e] * scale[e]);
  __syncthreads();
  for (int q = tid; q < kSlots; q += kThreads) {
    float2 sum = o_w[q];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const float2 v = o_w[w * kSlots + q];
      sum.x += v.x, sum.y += v.y;
    }
    const int m = q >> 6, e = (q >> 5) & 1, fg = (q & 31) >> 2, ft = q & 3;
    const int d = 64 * (m / 4) + 8 * fg + 2 * (m % 4);
    *reinterpret_cast<float2*>(&o_s[(2 * ft + e) * kHD + d]) = sum;
  }
  __syncthreads();
  const int64_t part = static_cast<int64_t>(kvh) * ny + y;
  constexpr float kPInv = 1.0f / T::kPScale;
  for (int j = tid; j < kQPG * kHD; j += kThreads) a.part_o[part * kQPG * kHD + j] = o_s[j] * kPInv;
  if (tid < kQPG) {
    float m = -INFINITY, sum = 0.f;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, w_m[w][tid]);
    for (int w = 0; w < kWarps; ++w) sum += w_l[w][tid] * expf(w_m[w][tid] - m);
    a.part_ml[(part * kQPG + tid) * 2 + 0] = m;
    a.part_ml[(part * kQPG + tid) * 2 + 1] = sum;
  }
}

// ---- Merge: one CTA per (query head, 32 dims) -------------------------------------------------
// Warp w folds partials w, w + 8, ... with its own running max (24 loads in flight per lane, so
// that the 132 partials of a float32 grid on the H200 take one round, not two), then warp 0
// folds the 8 warps in order: one round of loads from L2 and one block barrier.
constexpr int kMaxCtas = 2048;

__global__ void __launch_bounds__(256) attn_merge_kernel(AttnMergeArgs a) {
  constexpr int kWarps = 8, kBatch = 24;
  pdl_launch_dependents();
  const int h = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int d = blockIdx.y * 32 + lane;
  const int g = h / kQPG, hl = h % kQPG;
  const int n = *a.pos + 1;  // uploaded before the step
  const int n_parts = non_empty_shares(n, a.ctas);
  __shared__ float w_m[kWarps], w_l[kWarps], w_o[kWarps][32];
  pdl_wait();
  const float gate = a.qg[static_cast<int64_t>(h) * 2 * kHD + kHD + d];
  const float2* ml = reinterpret_cast<const float2*>(a.part_ml) +
                     static_cast<int64_t>(g) * a.ctas * kQPG + hl;  // stride kQPG per part
  const float* po = a.part_o + (static_cast<int64_t>(g) * a.ctas * kQPG + hl) * kHD + d;
  float m = -INFINITY, l = 0.f, o = 0.f;
  for (int y0 = warp; y0 < n_parts; y0 += kWarps * kBatch) {
    float2 pml[kBatch];
    float pov[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int y = y0 + u * kWarps;
      pml[u] = y < n_parts ? ml[static_cast<int64_t>(y) * kQPG] : make_float2(-INFINITY, 0.f);
      pov[u] = y < n_parts ? po[static_cast<int64_t>(y) * kQPG * kHD] : 0.f;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) m_new = fmaxf(m_new, pml[u].x);  // finite: part y0 exists
    const float alpha = expf(m - m_new);
    l *= alpha, o *= alpha;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const float w = expf(pml[u].x - m_new);
      l += w * pml[u].y;
      o += w * pov[u];
    }
    m = m_new;
  }
  if (lane == 0) w_m[warp] = m, w_l[warp] = l;
  w_o[warp][lane] = o;
  __syncthreads();
  if (warp == 0) {
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, w_m[w]);  // finite: warp 0 has part 0
    float L = 0.f, O = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float s = expf(w_m[w] - M);
      L += s * w_l[w];
      O += s * w_o[w][lane];
    }
    a.out[static_cast<int64_t>(h) * kHD + d] = O / L * sigmoidf_exact(gate);
  }
}

// The kernel for a cache type and split size: float32 caches take the CUDA-core kernel, 16-bit
// caches the tensor-core one with the deepest ring the GPU's shared memory allows (beyond the
// default 48 KiB, which the kernel must be allowed once per device).
struct DecodeKernel {
  void (*fn)(AttnArgs);
  int smem;
};
template <class Kv, int BLK>
DecodeKernel decode_kernel() {
  DecodeKernel k;
  if constexpr (std::is_same_v<Kv, KvF32>) {
    k = {attn_decode_kernel<BLK>, f32_smem(BLK)};
  } else {
    int dev = 0, optin = 0;
    RL_CUDA(cudaGetDevice(&dev));
    RL_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    k = optin >= tc_smem(3) + 1024 ? DecodeKernel{attn_decode_tc_kernel<Kv, 3>, tc_smem(3)}
                                   : DecodeKernel{attn_decode_tc_kernel<Kv, 1>, tc_smem(1)};
  }
  allow_smem(k.fn, static_cast<size_t>(k.smem));
  return k;
}

// The split size is the float32 kernel's positions per pass. The tensor-core kernel has no
// passes (its warps walk the share's tiles in turn), so for 16-bit caches the size only selects
// the session's graph; they keep 64, 128 and 256, the sizes their kernel once needed. float32
// also takes 512 and 1024 (from 256 · CTAs and 512 · CTAs positions on): fewer passes, so fewer
// barriers between a CTA's key and value streams.
template <class Kv>
constexpr bool split_supported(int split) {
  constexpr bool f32 = std::is_same_v<Kv, KvF32>;
  return ((split == 32 || split == 512 || split == 1024) && f32) || split == 64 || split == 128 ||
         split == 256;
}

// Calls f.operator()<BLK>() for split == BLK; fails for a size the cache type does not support.
template <class Kv, int BLK = 32, class F>
void with_split(KvType kv_type, int split, F&& f) {
  if constexpr (BLK <= 1024) {
    if constexpr (split_supported<Kv>(BLK)) {
      if (split == BLK) return f.template operator()<BLK>();
    }
    with_split<Kv, 2 * BLK>(kv_type, split, f);
  } else {
    fail("attention: split size ", split, " with a ", engine::kv_type_name(kv_type),
         " cache (64, 128 or 256; 32, 512 and 1024 for float32 only)");
  }
}

}  // namespace

void attn_prep(const AttnPrepArgs& a, cudaStream_t stream) {
  if (a.head_dim != kHD || a.n_rot > a.head_dim || a.n_rot % 2 != 0)
    fail("attention: head dim ", a.head_dim, " / rotary dims ", a.n_rot,
         " not supported (head dim ", kHD, ")");
  with_kv_type(a.kv_type, [&]<class Kv>() {
    launch(attn_prep_kernel<Kv>, dim3(a.n_head + 2 * a.n_head_kv), dim3(32), 0, stream, a);
  });
}

std::vector<int> attn_splits(KvType kv_type) {
  std::vector<int> splits;
  with_kv_type(kv_type, [&]<class Kv>() {
    for (int s : kAttnSplitSizes)
      if (split_supported<Kv>(s)) splits.push_back(s);
  });
  return splits;
}

void attn_decode(const AttnArgs& a, cudaStream_t stream) {
  if (a.ctas < 1 || a.ctas > kMaxCtas) fail("attention: ", a.ctas, " CTAs per KV head");
  with_kv_type(a.kv_type, [&]<class Kv>() {
    with_split<Kv>(a.kv_type, a.split, [&]<int BLK>() {
      const DecodeKernel k = decode_kernel<Kv, BLK>();
      launch(k.fn, dim3(a.n_head_kv, a.ctas), dim3(kThreads), k.smem, stream, a);
    });
  });
}

int attn_ctas_per_head(KvType kv_type, int split, int n_head_kv) {
  int per_sm = 0;
  with_kv_type(kv_type, [&]<class Kv>() {
    with_split<Kv>(kv_type, split, [&]<int BLK>() {
      const DecodeKernel k = decode_kernel<Kv, BLK>();
      RL_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k.fn, kThreads, k.smem));
    });
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
