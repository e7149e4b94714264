// One token of a Gated DeltaNet layer: causal conv (with the conv state), SiLU, L2 norms of q and
// k, and the gated delta rule on the float32 state, read once and written once.
//
// Bytes: the state is 32 heads x 128 x 128 floats = 2 MiB per layer, read and written (4 MiB);
// everything else is a few KiB. The value columns of a head are independent in the delta rule
// (S[:, c] only meets k, q and v[c]), so CTA (h, c) owns value head h and 32 columns of its
// state: 128 CTAs of 256 threads, each thread holding a 4 x 4 tile (four 16-byte loads in
// flight), which spreads the 4 MiB over the whole GPU. q and k of a head are recomputed by its
// four CTAs (256 channels of conv each; cheap). The conv state is a ring of K slots: the input of
// position p goes to slot p % K, which no CTA reads at p, so CTAs never race on it; the q/k
// channels are written by one CTA per key head, the v channels by the CTA that owns them.
#include "cuda/check.h"
#include "cuda/device_utils.cuh"
#include "cuda/launch.cuh"

namespace rl::cuda {

namespace {

constexpr int kHd = 128;       // head dim (k and v) supported by this kernel
constexpr int kCols = 32;      // value columns per CTA
constexpr int kThreads = 256;  // 8 column quads x 32 row quads

__device__ float conv_silu(const DeltaNetArgs& a, int channel, int channels, int p, float input) {
  const int K = a.conv_kernel;
  const float* w = a.conv_w + static_cast<int64_t>(channel) * K;
  float acc = 0.f;
  for (int j = 0; j < K - 1; ++j) {  // inputs of positions p-K+1 .. p-1, oldest first
    const int slot = (p - (K - 1) + j + K) % K;
    acc += w[j] * a.conv_ring[static_cast<int64_t>(slot) * channels + channel];
  }
  acc += w[K - 1] * input;
  return siluf(acc);
}

__global__ void __launch_bounds__(kThreads) deltanet_kernel(DeltaNetArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  const int h = blockIdx.x, slice = blockIdx.y, t = threadIdx.x;
  const int nk = a.n_k_heads, nv = a.n_v_heads, r = nv / nk, kh = h / r;
  const int channels = 2 * nk * kHd + nv * kHd;
  const int p = *a.pos;
  const int K = a.conv_kernel;
  __shared__ float qk[2 * kHd];  // q then k of key head kh
  __shared__ float vv[kCols];
  __shared__ float partial[32][kCols + 1];
  __shared__ float delta[kCols];
  __shared__ double red[32];
  __shared__ float gate[2];  // beta, decay

  // The state tile is only read here and written at the end: start its loads first, so they
  // fly during the conv and the norms. Thread (rq, cq) holds rows 4rq..4rq+3, columns
  // 4cq..4cq+3 of the 128 x 32 slice.
  const int cq = t & 7, rq = t >> 3;
  float* S = a.state + (static_cast<int64_t>(h) * kHd) * kHd + slice * kCols + 4 * cq;
  float4 s[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] = *reinterpret_cast<const float4*>(S + (4 * rq + i) * kHd);

  // 1. Conv + SiLU: threads 0..127 take q channels, 128..255 k channels; warp 0 also v.
  const int qk_channel = t < kHd ? kh * kHd + t : nk * kHd + kh * kHd + (t - kHd);
  const float qk_in = a.qkv[qk_channel];
  float u = conv_silu(a, qk_channel, channels, p, qk_in);
  const int v_channel = 2 * nk * kHd + h * kHd + slice * kCols + (t & 31);
  float v_in = 0.f;
  if (t < kCols) {
    v_in = a.qkv[v_channel];
    vv[t] = conv_silu(a, v_channel, channels, p, v_in);
  }

  // 2. L2 norms of q (threads 0..127) and k (128..255); q also takes 1/sqrt(hd).
  const double sq = static_cast<double>(u) * u;
  const double ss_q = block_sum(t < kHd ? sq : 0.0, red);
  const double ss_k = block_sum(t < kHd ? 0.0 : sq, red);
  if (t < kHd) {
    u *= static_cast<float>(1.0 / sqrt(ss_q + a.eps));
    u *= 1.0f / sqrtf(static_cast<float>(kHd));
  } else {
    u *= static_cast<float>(1.0 / sqrt(ss_k + a.eps));
  }
  qk[t] = u;
  if (t == 0) {
    gate[0] = sigmoidf_exact(a.b[h]);
    gate[1] = expf(a.ssm_a[h] * softplusf(a.a[h] + a.dt_bias[h]));
  }
  __syncthreads();
  // Store the current input in slot p % K: no CTA reads that slot at position p.
  const int slot_now = p % K;
  if (h % r == 0 && slice == 0)
    a.conv_ring[static_cast<int64_t>(slot_now) * channels + qk_channel] = qk_in;
  if (t < kCols) a.conv_ring[static_cast<int64_t>(slot_now) * channels + v_channel] = v_in;

  // 3. The delta rule on the 128 x 32 tile.
  const float beta = gate[0], decay = gate[1];
  const float* q = qk;
  const float* k = qk + kHd;
  float kv[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float ki = k[4 * rq + i];
    s[i].x *= decay, s[i].y *= decay, s[i].z *= decay, s[i].w *= decay;
    kv[0] += s[i].x * ki, kv[1] += s[i].y * ki, kv[2] += s[i].z * ki, kv[3] += s[i].w * ki;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) partial[rq][4 * cq + j] = kv[j];
  __syncthreads();
  if (t < kCols) {
    float sum = 0.f;
    for (int i = 0; i < 32; ++i) sum += partial[i][t];
    delta[t] = beta * (vv[t] - sum);
  }
  __syncthreads();
  float o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float ki = k[4 * rq + i], qi = q[4 * rq + i];
    s[i].x += ki * delta[4 * cq + 0], s[i].y += ki * delta[4 * cq + 1];
    s[i].z += ki * delta[4 * cq + 2], s[i].w += ki * delta[4 * cq + 3];
    o[0] += s[i].x * qi, o[1] += s[i].y * qi, o[2] += s[i].z * qi, o[3] += s[i].w * qi;
    *reinterpret_cast<float4*>(S + (4 * rq + i) * kHd) = s[i];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) partial[rq][4 * cq + j] = o[j];
  __syncthreads();
  if (t < kCols) {
    float sum = 0.f;
    for (int i = 0; i < 32; ++i) sum += partial[i][t];
    a.out[h * kHd + slice * kCols + t] = sum;
  }
}

}  // namespace

void deltanet_step(const DeltaNetArgs& a, cudaStream_t stream) {
  if (a.head_dim != kHd)
    fail("the CUDA DeltaNet kernel supports head dim ", kHd, ", the model has ", a.head_dim);
  if (a.n_v_heads % a.n_k_heads != 0 || a.conv_kernel < 2 || a.conv_kernel > 8)
    fail("the CUDA DeltaNet kernel needs value heads a multiple of key heads and conv kernel 2..8");
  const dim3 grid(a.n_v_heads, kHd / kCols);
  launch(deltanet_kernel, grid, dim3(kThreads), 0, stream, a);
}

}  // namespace rl::cuda
