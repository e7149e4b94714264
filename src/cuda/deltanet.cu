// One token of a Gated DeltaNet layer: causal conv (with the conv state), SiLU, L2 norms of q and
// k, the gated delta rule on the float32 state, read once and written once, and the gated
// RMSNorm of the output but for its 1 / rms (the output projection's, GemvIn::GroupRms).
//
// Bytes: the state is 32 heads x 128 x 128 floats = 2 MiB per layer, read and written (4 MiB);
// everything else is a few KiB. The value columns of a head are independent in the delta rule
// (S[:, c] only meets k, q and v[c]), so CTA (h, c) owns value head h and 32 columns of its
// state: 128 CTAs of 256 threads, one per SM, each thread holding a 4 x 4 tile (four 16-byte
// loads), which spreads the 2 MiB over the whole GPU (16 KiB in flight per SM, the whole tile).
//
// The work itself is tiny; what costs time is latency, so the kernel is laid out to pay one
// memory round trip before the math and a short chain of barriers after it:
// - Everything that the preceding kernels of this token do not write is loaded before
//   pdl_wait(): the state tile, the conv weights, dt_bias and ssm_a, and all K slots of the conv
//   ring for this thread's channels (which slot holds which position depends on pos, which may
//   only be read after pdl_wait, so all are fetched and picked later in registers). With PDL
//   these loads fly while the previous kernel finishes. The state and the ring are this layer's
//   own and were last written by this kernel one token earlier.
// - After pdl_wait: pos, the conv inputs and b, a (written by the projection just before, so in
//   the pipeline they come from L2): one more round trip, short next to the state's.
// - Three barriers: the q/k sums of squares, the partial S^T k, the partial S^T q. Row sums are
//   reduced in a fixed order (4 rows in a thread, 4 lanes by shuffles, 8 warps through shared
//   memory), so results are reproducible and every thread that needs a column's delta computes
//   the same value itself instead of waiting for one thread to publish it.
//
// q and k of a head are recomputed by its four CTAs (256 channels of conv each; cheap). The conv
// state is a ring of K slots: the input of position p goes to slot p % K, whose old value (the
// input of p - K) no CTA uses at p (each CTA loads that slot too, before it knows p, and drops
// it), so the writes never change a value another CTA uses; the q/k channels are written by one
// CTA per key head, the v channels by the CTA that owns them.
#include <cstdint>
#include <iterator>

#include "cuda/check.h"
#include "cuda/device_utils.cuh"
#include "cuda/launch.cuh"

namespace rl::cuda {

namespace {

constexpr int kHd = 128;               // head dim (k and v) supported by this kernel
constexpr int kCols = 32;              // value columns per CTA
constexpr int kRows = 4;               // state rows per thread (one float4 each)
constexpr int kThreads = 256;          // 8 column quads x 32 row quads
constexpr int kWarps = kThreads / 32;  // warps 0..3 hold q channels, 4..7 k channels
constexpr int kColQuads = kCols / 4;   // threads along the columns (lane & 7)
constexpr int kMinConvKernel = 2, kMaxConvKernel = 8;
static_assert(kThreads == 2 * kHd, "one thread per q and k channel of the key head");
static_assert(kThreads == kColQuads * (kHd / kRows), "the threads tile the 128 x 32 slice");
static_assert(kColQuads == 8 && kRows == 4, "the shuffles below reduce lanes 8 and 16 apart");
static_assert(kHd / kCols == kGroupSumsqParts && kCols == 32, "a slice's sum of squares: warp 0");

// The conv taps of one channel: its K weights and all K ring slots.
template <int K>
struct ConvTaps {
  float w[K];
  float ring[K];
};

// kVecW: the weights are loaded as one float4 (K = 4, conv_w 16-byte aligned; the launcher
// checks). Four scalar loads 16 bytes apart would each miss L1 and fetch the warp's whole 512
// bytes from L2 again (4x the sectors). The choice is a template parameter, not a runtime branch:
// with a branch, ptxas gave both paths' loads the same registers and the vector load then waited
// on a scoreboard shared with the state loads (seen in the profile).
template <int K, bool kVecW>
__device__ __forceinline__ ConvTaps<K> load_taps(const DeltaNetArgs& a, int channel, int channels) {
  ConvTaps<K> taps;
  const float* w = a.conv_w + static_cast<int64_t>(channel) * K;
  if constexpr (kVecW) {
    static_assert(K == 4);
    const float4 w4 = *reinterpret_cast<const float4*>(w);
    taps.w[0] = w4.x, taps.w[1] = w4.y, taps.w[2] = w4.z, taps.w[3] = w4.w;
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) taps.w[j] = w[j];
  }
#pragma unroll
  for (int s = 0; s < K; ++s)
    taps.ring[s] = a.conv_ring[static_cast<int64_t>(s) * channels + channel];
  return taps;
}

// silu(sum_j w[j] * x(p - K + 1 + j)) with x(p) = input, summed in j order. Position x lives in
// slot x % K, so tap j < K - 1 reads slot (p + 1 + j) % K = (rot + j) % K. The slot is picked by
// selects over the unrolled array, because indexing a register array by a runtime value would
// put it in local memory.
template <int K>
__device__ __forceinline__ float conv_silu(const ConvTaps<K>& taps, int rot, float input) {
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < K - 1; ++j) {
    const int slot = rot + j < K ? rot + j : rot + j - K;
    float x = taps.ring[0];
#pragma unroll
    for (int s = 1; s < K; ++s) x = slot == s ? taps.ring[s] : x;
    acc += taps.w[j] * x;
  }
  acc += taps.w[K - 1] * input;
  return siluf(acc);
}

// Sums a value over the four lanes of a warp that share lane & 7 (the warp's four row quads).
// xor butterflies add the same pairs in every lane, so all four lanes get the same bits.
__device__ __forceinline__ float sum_row_quads(float v) {
  v += __shfl_xor_sync(kFullMask, v, 8);
  v += __shfl_xor_sync(kFullMask, v, 16);
  return v;
}

template <int K, bool kVecW>
__global__ void __launch_bounds__(kThreads) deltanet_kernel(DeltaNetArgs a) {
  pdl_launch_dependents();
  // Grid (value head, slice). A division-free grid (key head, slice, head in group) was measured
  // ~0.7 us slower per launch in a CUDA graph of back-to-back PDL launches, so h stays blockIdx.x.
  const int h = blockIdx.x, slice = blockIdx.y, t = threadIdx.x;
  const int nk = a.n_k_heads, nv = a.n_v_heads, r = nv / nk, kh = h / r;
  const int lane = t & 31, warp = t >> 5;
  const int channels = 2 * nk * kHd + nv * kHd;

  __shared__ float qk_raw[2 * kHd];  // conv outputs of q then k of key head kh, before the norms
  __shared__ __align__(16) float v_conv[kCols];
  __shared__ float sumsq[kWarps];  // per warp: sum of squares of its 32 q or k values
  __shared__ __align__(16) float kv_part[kWarps][kCols];  // per warp: S^T k over its 16 rows
  __shared__ float o_part[kWarps][kCols];                 // per warp: S^T q over its 16 rows

  // ---- Before pdl_wait: data the preceding kernels of this token do not write. ----
  // Thread (rq, cq) holds rows 4rq..4rq+3, columns 4cq..4cq+3 of the 128 x 32 slice; a warp's
  // load covers four full 128-byte rows.
  const int cq = t & 7, rq = t >> 3;
  float* S = a.state + (static_cast<int64_t>(h) * kHd + kRows * rq) * kHd + slice * kCols + 4 * cq;
  float4 s[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) s[i] = *reinterpret_cast<const float4*>(S + i * kHd);

  // Conv channels: thread t takes q channel t (t < 128) or k channel t - 128 of key head kh;
  // warp 0 also takes this CTA's 32 v channels.
  const int qk_channel = t < kHd ? kh * kHd + t : nk * kHd + kh * kHd + (t - kHd);
  const int v_channel = 2 * nk * kHd + h * kHd + slice * kCols + lane;
  const bool has_v = t < kCols;
  const ConvTaps<K> qk_taps = load_taps<K, kVecW>(a, qk_channel, channels);
  ConvTaps<K> v_taps{};
  if (has_v) v_taps = load_taps<K, kVecW>(a, v_channel, channels);
  const float dt_bias = a.dt_bias[h], ssm_a = a.ssm_a[h];
  const float norm_w = has_v ? a.norm[slice * kCols + t] : 0.f;

  // ---- After pdl_wait: the inputs written by the projection just before. ----
  pdl_wait();
  const float qk_in = a.qkv[qk_channel];
  const float v_in = has_v ? a.qkv[v_channel] : 0.f;
  const float z_in = has_v ? a.z[h * kHd + slice * kCols + t] : 0.f;
  const float b_logit = a.b[h], a_in = a.a[h];
  const int p = *a.pos;

  // 1. Conv + SiLU, and the per-warp sums of squares for the L2 norms (float: 128 squares of
  //    similar size, a tree of shuffles; error ~1e-7 relative).
  const int rot = (p + 1) % K;
  const float u = conv_silu(qk_taps, rot, qk_in);
  const float ss = warp_sum(u * u);
  if (lane == 0) sumsq[warp] = ss;
  qk_raw[t] = u;
  if (has_v) v_conv[t] = conv_silu(v_taps, rot, v_in);

  // Store the current input in slot p % K (see the top of the file).
  const int64_t slot_now = static_cast<int64_t>(p % K) * channels;
  if (h % r == 0 && slice == 0) a.conv_ring[slot_now + qk_channel] = qk_in;
  if (has_v) a.conv_ring[slot_now + v_channel] = v_in;

  // Gates, computed by every thread (cheaper than a broadcast through a barrier).
  const float beta = sigmoidf_exact(b_logit);
  const float decay = expf(ssm_a * softplusf(a_in + dt_bias));
  __syncthreads();

  // 2. Norm scales (same summation order in every thread) and this thread's rows of q and k.
  float ss_q = 0.f, ss_k = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps / 2; ++w) ss_q += sumsq[w], ss_k += sumsq[kWarps / 2 + w];
  const float q_scale = 1.0f / sqrtf(ss_q + a.eps) * (1.0f / sqrtf(static_cast<float>(kHd)));
  const float k_scale = 1.0f / sqrtf(ss_k + a.eps);
  float q[kRows], k[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    q[i] = qk_raw[kRows * rq + i] * q_scale;
    k[i] = qk_raw[kHd + kRows * rq + i] * k_scale;
  }

  // 3. S = decay * S; partial S^T k over this thread's rows, then over the warp's row quads.
  float kv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    s[i].x *= decay, s[i].y *= decay, s[i].z *= decay, s[i].w *= decay;
    kv[0] += s[i].x * k[i], kv[1] += s[i].y * k[i], kv[2] += s[i].z * k[i], kv[3] += s[i].w * k[i];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) kv[j] = sum_row_quads(kv[j]);
  if (lane < kColQuads)  // lane == cq here
    *reinterpret_cast<float4*>(&kv_part[warp][4 * cq]) = make_float4(kv[0], kv[1], kv[2], kv[3]);
  __syncthreads();

  // 4. delta = beta * (v - S^T k) for this thread's four columns, summed over the warps in order.
  float4 kv_sum = *reinterpret_cast<const float4*>(&kv_part[0][4 * cq]);
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    const float4 part = *reinterpret_cast<const float4*>(&kv_part[w][4 * cq]);
    kv_sum.x += part.x, kv_sum.y += part.y, kv_sum.z += part.z, kv_sum.w += part.w;
  }
  const float4 v = *reinterpret_cast<const float4*>(&v_conv[4 * cq]);
  const float delta[4] = {beta * (v.x - kv_sum.x), beta * (v.y - kv_sum.y), beta * (v.z - kv_sum.z),
                          beta * (v.w - kv_sum.w)};

  // 5. S += k delta^T, written back at once; partial o = S^T q.
  float o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    s[i].x += k[i] * delta[0], s[i].y += k[i] * delta[1];
    s[i].z += k[i] * delta[2], s[i].w += k[i] * delta[3];
    o[0] += s[i].x * q[i], o[1] += s[i].y * q[i], o[2] += s[i].z * q[i], o[3] += s[i].w * q[i];
    *reinterpret_cast<float4*>(S + i * kHd) = s[i];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = sum_row_quads(o[j]);
  if (lane < kColQuads) {
#pragma unroll
    for (int j = 0; j < 4; ++j) o_part[warp][4 * cq + j] = o[j];
  }
  __syncthreads();
  if (t < kCols) {  // warp 0, one column each
    float o_col = o_part[0][t];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) o_col += o_part[w][t];
    // The gated RMSNorm's part here, once per value: each of the output projection's CTAs had
    // gated the whole of o again, its SiLUs and products 16 % of that launch's instructions
    // (CUDA_DECODE.md, twenty-sixth pass).
    const float ss = warp_sum(o_col * o_col);
    if (t == 0) a.out_sumsq[h * kGroupSumsqParts + slice] = ss;
    a.out[h * kHd + slice * kCols + t] = o_col * norm_w * siluf(z_in);
  }
}

// The conv kernel size is a template parameter so the taps live in registers.
using DeltaNetKernel = void (*)(DeltaNetArgs);
constexpr DeltaNetKernel kKernels[] = {deltanet_kernel<2, false>, deltanet_kernel<3, false>,
                                       deltanet_kernel<4, false>, deltanet_kernel<5, false>,
                                       deltanet_kernel<6, false>, deltanet_kernel<7, false>,
                                       deltanet_kernel<8, false>};
static_assert(std::size(kKernels) == kMaxConvKernel - kMinConvKernel + 1);

}  // namespace

void deltanet_step(const DeltaNetArgs& a, cudaStream_t stream) {
  if (a.head_dim != kHd)
    fail("the CUDA DeltaNet kernel supports head dim ", kHd, ", the model has ", a.head_dim);
  if (a.n_k_heads <= 0 || a.n_v_heads <= 0 || a.n_v_heads % a.n_k_heads != 0 ||
      a.conv_kernel < kMinConvKernel || a.conv_kernel > kMaxConvKernel)
    fail("the CUDA DeltaNet kernel needs value heads a multiple of key heads and conv kernel ",
         kMinConvKernel, "..", kMaxConvKernel);
  const dim3 grid(a.n_v_heads, kHd / kCols);
  const bool vec_w = a.conv_kernel == 4 && reinterpret_cast<uintptr_t>(a.conv_w) % 16 == 0;
  const DeltaNetKernel kernel =
      vec_w ? deltanet_kernel<4, true> : kKernels[a.conv_kernel - kMinConvKernel];
  launch(kernel, grid, dim3(kThreads), 0, stream, a);
}

}  // namespace rl::cuda
