// Matrix-vector products on the tensor cores for the formats that carry most decode bytes
// (Q4_K / Q5_K projections and experts, IQ2_XXS experts). Internal; .cu only.
//
// Why. The float decoders (formats.cuh) spend ~15 instructions per weight (Nsight Compute: the
// Q4_K projections issue 12M warp instructions for 25M weights); with a few warps per scheduler
// that chain, not memory, sets the time (DRAM 4-15 % busy). Here a lane turns 8 Q4_K weights
// into four f16 pairs with ~11 integer/half instructions and one mma.sync m16n8k16 does 256
// multiply-adds: by count of the operations, ~2 instructions per weight for Q4_K and ~3-4 for
// IQ2_XXS (its grid lookups and sign bits cost more). Only where the shape fills the GPU
// (usable() below); the other formats and shapes keep the float decoders.
//
// Exactness. Weights enter as small integers, exact in f16: Q4_K / Q5_K sc·q (≤ 63·31), IQ2_XXS
// (2·ls+1)·grid·sign (≤ 31·43); the block's float factors (d, dmin, IQ2_XXS's d/8) are applied to
// the fp32 sums afterwards. The input is split into two f16 parts x ≈ hi + lo (22 significant
// bits) after scaling each 256-value block by a power of two so that its largest value is just
// below 2^14 (no f16 overflow, nothing lost to f16 underflow that matters): float32-class
// accuracy, checked against float64 by the self-test like every GEMV.
//
// Layout of the work. A warp item is a tile of 16 rows × one 256-value block ("kb"). In the mma,
// lane 4g+t supplies rows g and g+8; for every row it loads the same 64-value chunk t of the
// block, so the 16 k-steps of the item cover the block. B's 8 columns are the input's hi part
// (column 0) and lo part (column 1); columns 2-7 are zero (room for a batch of tokens later).
// The input is staged in fragment order, each kb by the warp whose items use it: at k-step s, lanes
// 0-7 read one uint2 each.
#pragma once
#include <cuda_fp16.h>

#include <cstring>

#include "cuda/device.h"
#include "cuda/device_utils.cuh"
#include "cuda/formats.cuh"
#include "cuda/gemv_core.cuh"

namespace rl::cuda::tc {

using gguf::TensorType;

constexpr int kBlock = 256;    // values per kb (one K-quant / IQ super-block)
constexpr int kSteps = 16;     // k-steps of 16 per kb
constexpr int kTileRows = 16;  // rows per warp item (the mma's M)

__device__ __forceinline__ __half2 h2(uint32_t bits) {
  __half2 h;
  memcpy(&h, &bits, 4);
  return h;
}
__device__ __forceinline__ uint32_t bits(__half2 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

// c += A · B for one k-step (mma_m16n8k16 on f16): A = {a0, a1, a2, a3} in the fragment order
// (rows g / g+8 at k = 2t, 2t+1, then at k = 2t+8, 2t+9), B = {b.x, b.y}.
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint2 b) {
  mma_m16n8k16<false>(c, make_uint4(a0, a1, a2, a3), b.x, b.y);
}

// The f16 pair (v, v) of a small non-negative integer v (< 1024): 1024 + v has v in its low
// mantissa bits, and subtracting 1024 is exact.
__device__ __forceinline__ __half2 small_int_h2(uint32_t v) {
  const __half2 k1024 = h2(0x64006400u);
  return __hsub2(h2(0x64006400u + (v | (v << 16))), k1024);
}

// ---- Per-format pieces: the raw bytes of one item, their column order, and the dot product. ----
// col(s, j): the column (within the lane's 64-value chunk) of slot j of k-step s, where slots
// 0, 1 are the pair at k = 2t, 2t+1 and slots 2, 3 the pair at k = 2t+8, 2t+9.
template <TensorType T>
struct Tc;

// Q4_K and Q5_K: chunk t = qs bytes 32t..32t+31: low nibbles are values 64t + 0..31 (sub-block
// 2t), high nibbles 64t + 32..63 (sub-block 2t+1). Word w of the chunk holds values 4w..4w+3 (low)
// and 32+4w..32+4w+3 (high); masking nibbles 0 and 2 (or 1 and 3) of a word gives an f16 pair.
// Q5_K adds each value's fifth bit from the chunk's two regrouped high-bit words (layout.h), which
// hold a pair's two bits 16 apart, as the f16 pair wants them: q ≤ 31 and sc ≤ 63 keep q·sc below
// 2048, exact in f16 like Q4_K's.
template <bool kFifthBit>
struct TcK {
  static constexpr bool kSubSums = true;  // needs the input's sums per 32 values (the mins)
  static constexpr int kQsOffset = kFifthBit ? 48 : 16;  // after d, dmin, scales (and qh)
  struct Raw {
    uint4 head[2];  // d, dmin, scales of rows g and g+8
    uint4 q[2][2];  // the chunk's 32 bytes of each row
    uint2 qh[2];    // Q5_K: the chunk's high bits of each row (sub-blocks 2t, 2t+1)
  };
  // Slots 0-3 take nibbles 0, 2, 1, 3 of a word: swapping 1 and 2 maps slot to nibble and back.
  __host__ __device__ static constexpr int swap12(int i) { return i == 1 ? 2 : i == 2 ? 1 : i; }
  __host__ __device__ static constexpr int col(int s, int j) {
    return 32 * (s & 1) + 4 * (s >> 1) + swap12(j);
  }
  // The inverse: the k-step and slot of column c.
  __host__ __device__ static constexpr int step_of(int c) { return 2 * ((c & 31) >> 2) + (c >> 5); }
  __host__ __device__ static constexpr int slot_of(int c) { return swap12(c & 3); }
  // blk[r]: the block's body for row r; tail unused.
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&)[2], int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.head[r] = fmt::load16(blk[r]);
      raw.q[r][0] = fmt::load16(blk[r] + kQsOffset + 32 * t);
      raw.q[r][1] = fmt::load16(blk[r] + kQsOffset + 16 + 32 * t);
      raw.qh[r] = kFifthBit ? fmt::load8(blk[r] + 16 + 8 * t) : make_uint2(0u, 0u);
    }
    return raw;
  }
  // This lane's share of rows g and g+8 of M matrices at the same block (before the sum over the
  // quad's four lanes): out[m].
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xh, float inv_scale,
                             const float* xsum, int lane, const fmt::IqTables&, float2 (&out)[M]) {
    const int t = lane & 3;
    // [m][row][low/high sub-block]: f16 pairs of sc and -1024·sc
    uint32_t sc_c[M][2][2], sc_k[M][2][2];
    float min_term[M][2];
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint4& head = raw[m].head[r];
        uint32_t sc0, m0, sc1, m1;
        fmt::scale_min_k4(2 * t, head.y, head.z, head.w, &sc0, &m0);
        fmt::scale_min_k4(2 * t + 1, head.y, head.z, head.w, &sc1, &m1);
        const __half2 s0 = small_int_h2(sc0), s1 = small_int_h2(sc1);
        const __half2 minus1024 = h2(0xE400E400u);
        sc_c[m][r][0] = bits(s0), sc_k[m][r][0] = bits(__hmul2(s0, minus1024));
        sc_c[m][r][1] = bits(s1), sc_k[m][r][1] = bits(__hmul2(s1, minus1024));
        const float dmin = fmt::f16(head.x >> 16);
        min_term[m][r] = dmin * (fmt::i2f(static_cast<int>(m0)) * xsum[2 * t] +
                                 fmt::i2f(static_cast<int>(m1)) * xsum[2 * t + 1]);
      }
    }
    // Independent accumulator chains: with one matrix, even and odd k-steps (half the mma
    // latency); with several, one per matrix.
    constexpr int C = M == 1 ? 2 : 1;
    float c[M][C][4] = {};
    const bool feeds_b = lane < 8;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {  // k-step 2w + hi: low or high nibbles
        const int s = 2 * w + hi;
        const uint2 b = feeds_b ? xh[s * 8 + lane] : make_uint2(0u, 0u);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          uint32_t a[2][2];  // [row][pair 02 / 13]
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const uint4 q = raw[m].q[r][w >> 2];
            const uint32_t word = (w & 3) == 0   ? q.x
                                  : (w & 3) == 1 ? q.y
                                  : (w & 3) == 2 ? q.z
                                                 : q.w;
#pragma unroll
            for (int p = 0; p < 2; ++p) {
              uint32_t n = ((word >> (4 * hi + 8 * p)) & 0x000F000Fu) | 0x64006400u;
              if constexpr (kFifthBit) {  // bits j, 16 + j of the sub-block's word to 4, 20
                const uint32_t h = hi ? raw[m].qh[r].y : raw[m].qh[r].x;
                const int j = q5k_high_bit(4 * w + p) - 4;
                n |= (j < 0 ? h << -j : h >> j) & 0x00100010u;
              }
              // (1024 + q)·sc - 1024·sc = q·sc, exact: one rounding of an integer below 2048.
              a[r][p] = bits(__hfma2(h2(n), h2(sc_c[m][r][hi]), h2(sc_k[m][r][hi])));
            }
          }
          mma(c[m][s % C], a[0][0], a[1][0], a[0][1], a[1][1], b);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float r0 = 0.f, r1 = 0.f;
#pragma unroll
      for (int k = 0; k < C; ++k) r0 += c[m][k][0] + c[m][k][1], r1 += c[m][k][2] + c[m][k][3];
      const float d0 = fmt::f16(raw[m].head[0].x), d1 = fmt::f16(raw[m].head[1].x);
      out[m] =
          make_float2(d0 * inv_scale * r0 - min_term[m][0], d1 * inv_scale * r1 - min_term[m][1]);
    }
  }
};
template <>
struct Tc<TensorType::Q4_K> : TcK<false> {};
template <>
struct Tc<TensorType::Q5_K> : TcK<true> {};

// IQ2_XXS: chunk t = body bytes 16t..16t+15 = sub-blocks 2t and 2t+1 (grid indices and
// sign/scale word each). k-step s takes sub-block s / 8, group (s / 2) % 4, elements
// 4 (s % 2) .. +3 of the group's 8.
template <>
struct Tc<TensorType::IQ2_XXS> {
  static constexpr bool kSubSums = false;
  struct Raw {
    uint4 v[2];
    uint32_t d[2];
  };
  __host__ __device__ static constexpr int col(int s, int j) {
    return 32 * (s >> 3) + 8 * ((s >> 1) & 3) + 4 * (s & 1) + j;
  }
  __host__ __device__ static constexpr int step_of(int c) {
    return 8 * (c >> 5) + 2 * ((c >> 3) & 3) + ((c >> 2) & 1);
  }
  __host__ __device__ static constexpr int slot_of(int c) { return c & 3; }
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.v[r] = fmt::load16(blk[r] + 16 * t);
      raw.d[r] = fmt::load2(tail[r]);
    }
    return raw;
  }
  // A lane's pair of elements e, e+1 of a grid entry is word e / 2 of its f16 form
  // (tables.iq2xxs_grid_f16); the signs go into the pair's scale, so a pair costs a shift, a
  // logic op and one f16 multiply. M matrices at the same block share each k-step's B fragment.
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xh, float inv_scale, const float*,
                             int lane, const fmt::IqTables& tables, float2 (&out)[M]) {
    constexpr int C = M == 1 ? 2 : 1;  // accumulator chains per matrix (as for Q4_K)
    float c[M][C][4] = {};
    const bool feeds_b = lane < 8;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t idx[M][2], aux[M][2], scale[M][2];
#pragma unroll
      for (int m = 0; m < M; ++m) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          idx[m][r] = h ? raw[m].v[r].z : raw[m].v[r].x;
          aux[m][r] = h ? raw[m].v[r].w : raw[m].v[r].y;
          scale[m][r] = bits(small_int_h2(2 * (aux[m][r] >> 28) + 1));
        }
      }
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        uint4 grid[M][2];
        uint32_t spread[M][2];  // sign bit 2p at bit 2p, bit 2p+1 at bit 2p+16
#pragma unroll
        for (int m = 0; m < M; ++m) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            grid[m][r] = tables.iq2xxs_grid_f16[fmt::byte_of(idx[m][r], l)];
            const uint32_t sb = fmt::ksigns((aux[m][r] >> (7 * l)) & 127u);
            spread[m][r] = (sb & 0x55u) | ((sb & 0xAAu) << 15);
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int s = 8 * h + 2 * l + half;
          const uint2 b = feeds_b ? xh[s * 8 + lane] : make_uint2(0u, 0u);
#pragma unroll
          for (int m = 0; m < M; ++m) {
            uint32_t a[2][2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
#pragma unroll
              for (int p = 0; p < 2; ++p) {
                const int e = 4 * half + 2 * p;  // elements e, e + 1 of the entry
                const uint4& g = grid[m][r];
                const uint32_t pair = half ? (p ? g.w : g.z) : (p ? g.y : g.x);
                const uint32_t sign = (spread[m][r] << (15 - e)) & 0x80008000u;
                a[r][p] = bits(__hmul2(h2(pair), h2(scale[m][r] ^ sign)));
              }
            }
            mma(c[m][s % C], a[0][0], a[1][0], a[0][1], a[1][1], b);
          }
        }
      }
    }
    // ggml: d · (0.5 + ls) / 4 · grid · sign = d / 8 · (2 ls + 1) · grid · sign.
    const float f = 0.125f * inv_scale;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float r0 = 0.f, r1 = 0.f;
#pragma unroll
      for (int k = 0; k < C; ++k) r0 += c[m][k][0] + c[m][k][1], r1 += c[m][k][2] + c[m][k][3];
      out[m] = make_float2(fmt::f16(raw[m].d[0]) * f * r0, fmt::f16(raw[m].d[1]) * f * r1);
    }
  }
};

template <TensorType T>
constexpr bool supported() {
  return T == TensorType::Q4_K || T == TensorType::Q5_K || T == TensorType::IQ2_XXS;
}

// The lookup tables the tensor-core decoder of T reads, in shared memory (the caller synchronises
// before use): IQ2_XXS's grid in its f16 form.
template <TensorType T>
__device__ fmt::IqTables stage_tables(const DeviceTables& g) {
  fmt::IqTables t{nullptr, nullptr, nullptr};
  if constexpr (T == TensorType::IQ2_XXS) {
    __shared__ uint4 grid[256];
    const uint4* from = reinterpret_cast<const uint4*>(g.iq2xxs_grid_f16);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = from[i];
    t.iq2xxs_grid_f16 = grid;
  }
  return t;
}

// ---- The staged input -------------------------------------------------------------------------
// Shared memory of n input values (a multiple of kBlock): the fragments, one power-of-two scale
// per kb, the sums per 32 values and the sums of squares per kb.
struct Staged {
  uint2* xh;         // [n_kb][kSteps][8]: B fragments of lanes 0-3 (hi part), 4-7 (lo part)
  float* inv_scale;  // [n_kb]: the inverse of the block's power-of-two scale
  float* xsum;       // [n_kb * 8]: unscaled sums per 32 values (formats with kSubSums)
  float* sumsq;      // [n_kb]: sums of squares of x (RmsNorm inputs)
};
constexpr size_t staged_bytes(int64_t n) {
  return static_cast<size_t>(n) * 4 + static_cast<size_t>(n / kBlock) * 4 * 10;
}
__device__ inline Staged carve(void* at, int n) {
  Staged s;
  s.xh = static_cast<uint2*>(at);
  s.inv_scale = reinterpret_cast<float*>(s.xh + static_cast<int64_t>(n / kBlock) * kSteps * 8);
  s.xsum = s.inv_scale + n / kBlock;
  s.sumsq = s.xsum + (n / kBlock) * 8;
  return s;
}
// The item sums that follow the staged input in shared memory.
__device__ inline float* after(const Staged& s, int n) {
  return s.sumsq + n / kBlock;
}

// step_of / slot_of invert col over the 64 columns of a chunk.
template <TensorType T>
constexpr bool inverse_holds() {
  for (int s = 0; s < kSteps; ++s)
    for (int j = 0; j < 4; ++j)
      if (Tc<T>::step_of(Tc<T>::col(s, j)) != s || Tc<T>::slot_of(Tc<T>::col(s, j)) != j)
        return false;
  return true;
}
static_assert(inverse_holds<TensorType::Q4_K>() && inverse_holds<TensorType::Q5_K>() &&
              inverse_holds<TensorType::IQ2_XXS>());

// The input of a product: in(x) over n values as GemvIn says.
struct Input {
  GemvIn mode = GemvIn::Plain;
  const float* x = nullptr;
  const float* norm = nullptr;
  const float* gate = nullptr;
  int group = 0;
  float eps = 0.f;
  int n = 0;
};

// Whether stage_own_blocks forms this input: a gated group must lie within one kb and take a
// power-of-two number of lanes (8 values each).
inline bool input_supported(GemvIn mode, int group) {
  return mode != GemvIn::GatedRmsNorm ||
         (group >= 8 && group <= kBlock && kBlock % group == 0 && (group & (group - 1)) == 0);
}

// Block kb's fragments from its 256 values (lane: values 8 lane .. 8 lane + 7, which lie in chunk
// lane / 8): the block's power-of-two scale, its sums per 32 values and the f16 hi / lo parts in
// their fragment slots (the inverse of the column map, step_of / slot_of).
template <TensorType T>
__device__ __forceinline__ void write_fragments(const float (&v)[8], int kb, int lane,
                                                const Staged& st) {
  const int t = lane >> 3;
  float mx = 0.f, sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fabsf(v[j])), sum += v[j];
  mx = warp_max(mx);
  if constexpr (Tc<T>::kSubSums) {  // per 32 values: lanes 4q .. 4q + 3
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    if ((lane & 3) == 0) st.xsum[kb * 8 + lane / 4] = sum;
  }
  // max < 2^e; scale so that the largest value lands in [2^13, 2^14). Blocks of zeros,
  // infinities or NaN keep scale 1 (the products then carry them as the float path would);
  // below 2^-100 the scale stops growing (such values are noise to the sum).
  int e = 14;
  if (mx > 0.f && mx <= 3.4e38f) e = max(((__float_as_int(mx) >> 23) & 0xff) - 126, -100);
  if (lane == 0) st.inv_scale[kb] = __int_as_float((e - 14 + 127) << 23);
  const float scale = __int_as_float((14 - e + 127) << 23);  // powers of two: exact
  __half* frag = reinterpret_cast<__half*>(st.xh + kb * kSteps * 8);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int c = 8 * (lane & 7) + j;  // column within the chunk
    const float x = v[j] * scale;
    const __half hi = __float2half_rn(x);
    // uint2 (s, t) of the hi part is frag entry s * 8 + t, of the lo part s * 8 + 4 + t.
    __half* at = frag + 4 * (Tc<T>::step_of(c) * 8 + t) + Tc<T>::slot_of(c);
    at[0] = hi;
    at[16] = __float2half_rn(x - __half2float(hi));
  }
}

// Warps per CTA: one per kb up to `most` (so that a tile's items run side by side rather than in
// turn on fewer warps), the kbs spread evenly when there are more.
constexpr int warps_for(int64_t n_kb, int most) {
  const int64_t per = (n_kb + most - 1) / most;
  return static_cast<int>((n_kb + per - 1) / per);
}
constexpr int kMinWarps = 8;  // n >= 8 kbs takes this path (usable)

// A warp stages the blocks it owns, kb = warp, warp + W, ... (W warps; its items are all at those
// blocks, WarpItems), straight from global memory: no block-wide barrier and no second pass over
// shared memory, which the fifth pass's timeline showed on every launch's critical path (2-3.6 µs).
// An RmsNorm's 1 / rms, which needs every block, is not applied here: the warp leaves its blocks'
// sums of squares and the rows' sums are scaled at the end (input_factor). A gated group lies in
// one block (input_supported) and is normalised here. All loads of a round are issued before any
// is used (they come from L2). Ends with the warp synchronised.
template <TensorType T>
__device__ void stage_own_blocks(const Input& in, const Staged& st) {
  constexpr int kRound = 2;  // blocks loaded together
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_kb = in.n / kBlock;
  const int n_warps = blockDim.x >> 5;
  for (int base = warp; base < n_kb; base += kRound * n_warps) {
    float4 x[kRound][2], w[kRound][2], g[kRound][2];
#pragma unroll
    for (int r = 0; r < kRound; ++r) {
      const int kb = base + r * n_warps, i = kb * kBlock + 8 * lane;
      if (kb >= n_kb) continue;
      x[r][0] = *reinterpret_cast<const float4*>(in.x + i);
      x[r][1] = *reinterpret_cast<const float4*>(in.x + i + 4);
      if (in.mode != GemvIn::Plain) {
        const int j = in.mode == GemvIn::GatedRmsNorm ? i % in.group : i;
        w[r][0] = *reinterpret_cast<const float4*>(in.norm + j);
        w[r][1] = *reinterpret_cast<const float4*>(in.norm + j + 4);
      }
      if (in.mode == GemvIn::GatedRmsNorm) {
        g[r][0] = *reinterpret_cast<const float4*>(in.gate + i);
        g[r][1] = *reinterpret_cast<const float4*>(in.gate + i + 4);
      }
    }
#pragma unroll
    for (int r = 0; r < kRound; ++r) {
      const int kb = base + r * n_warps;
      if (kb >= n_kb) continue;
      float v[8] = {x[r][0].x, x[r][0].y, x[r][0].z, x[r][0].w,
                    x[r][1].x, x[r][1].y, x[r][1].z, x[r][1].w};
      if (in.mode != GemvIn::Plain) {
        const float nw[8] = {w[r][0].x, w[r][0].y, w[r][0].z, w[r][0].w,
                             w[r][1].x, w[r][1].y, w[r][1].z, w[r][1].w};
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) ss = fmaf(v[j], v[j], ss);
        if (in.mode == GemvIn::GatedRmsNorm) {
          for (int o = 1; o < in.group / 8; o <<= 1) ss += __shfl_xor_sync(kFullMask, ss, o);
          const float scale = 1.0f / sqrtf(ss / in.group + in.eps);
          const float gv[8] = {g[r][0].x, g[r][0].y, g[r][0].z, g[r][0].w,
                               g[r][1].x, g[r][1].y, g[r][1].z, g[r][1].w};
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = v[j] * scale * nw[j] * siluf(gv[j]);
        } else {
          ss = warp_sum(ss);
          if (lane == 0) st.sumsq[kb] = ss;
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] *= nw[j];
        }
      }
      write_fragments<T>(v, kb, lane, st);
    }
  }
  __syncwarp();
}

// The factor of every row sum: an RmsNorm's 1 / rms over all blocks' sums of squares (read after
// the block synchronised), else 1.
__device__ __forceinline__ float input_factor(const Input& in, const Staged& st) {
  if (in.mode != GemvIn::RmsNorm) return 1.f;
  float ss = 0.f;
  for (int kb = 0; kb < in.n / kBlock; ++kb) ss += st.sumsq[kb];
  return 1.0f / sqrtf(ss / in.n + in.eps);
}

// A warp's items: every tile of the CTA at each block the warp owns, block by block within a
// tile. Item j of the warp is the CTA's item (tile, kb) = index(j) / n_kb, index(j) % n_kb.
struct WarpItems {
  int n;      // items of this warp
  int owned;  // blocks it owns
  int n_kb;
  __device__ int index(int j) const {
    const int warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    return (j / owned) * n_kb + warp + n_warps * (j % owned);
  }
};

// One warp item: rows g and g+8 (lane = 4g + t) of a tile at block kb of M matrices, from the
// raw bytes of that block; the lanes' shares are summed over the quad, so every lane of it holds
// the item's two results per matrix.
template <TensorType T, int M>
__device__ __forceinline__ void item_sums(const typename Tc<T>::Raw (&raw)[M], const Staged& st,
                                          int kb, int lane, const fmt::IqTables& tables,
                                          float2 (&v)[M]) {
  Tc<T>::template dot<M>(raw, st.xh + kb * kSteps * 8, st.inv_scale[kb], st.xsum + kb * 8, lane,
                         tables, v);
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      v[m].x += __shfl_xor_sync(kFullMask, v[m].x, o);
      v[m].y += __shfl_xor_sync(kFullMask, v[m].y, o);
    }
  }
}

// Stores an item's two row sums (held by the lanes with t = 0) at out[g] and out[g + 8].
__device__ __forceinline__ void store_item(float* out, float2 v, int lane) {
  if ((lane & 3) == 0) out[lane >> 2] = v.x, out[(lane >> 2) + 8] = v.y;
}

// A CTA's rows [first, end) (rows_per_block of `rows`, whole tiles) and this warp's items among
// the CTA's (tile, kb) items, numbered tile * n_kb + kb.
struct CtaRows {
  int64_t first, end;
  WarpItems items;
};
__device__ __forceinline__ CtaRows cta_rows(int rows_per_block, int64_t rows, int n_kb) {
  CtaRows r;
  r.first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  r.end = min(r.first + rows_per_block, rows);
  const int tiles = static_cast<int>((r.end - r.first + kTileRows - 1) / kTileRows);
  const int n_warps = blockDim.x >> 5;
  const int owned = (n_kb - (static_cast<int>(threadIdx.x) >> 5) + n_warps - 1) / n_warps;
  r.items = {tiles * owned, owned, n_kb};
  return r;
}

// The bytes of block kb of rows g and g+8 (lane = 4g + t) of a tile of matrix m (expert e); rows
// past the CTA's end read its last row instead (their sums are never used).
template <TensorType T>
__device__ __forceinline__ typename Tc<T>::Raw load_item(const Matrix& m, int64_t e,
                                                         const CtaRows& rows, int tile, int kb,
                                                         int lane) {
  using F = fmt::Format<T>;
  const uint8_t *blk[2], *tail[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = min(rows.first + tile * kTileRows + (lane >> 2) + 8 * r, rows.end - 1);
    const RowLocator<T> loc = locate_row<T>(m, e, row);
    blk[r] = loc.body + static_cast<int64_t>(kb) * F::kBodyBytes;
    tail[r] = loc.tail + static_cast<int64_t>(kb) * F::kTailBytes;
  }
  return Tc<T>::load(blk, tail, lane & 3);
}

// Row j's (of the CTA) total over its item sums, laid out [tile][kb][stride] with the row's sum at
// j % kTileRows, added in kb order.
__device__ __forceinline__ float row_total(const float* partial, int64_t j, int n_kb, int stride) {
  const float* in = partial + (j / kTileRows) * n_kb * stride + j % kTileRows;
  float sum = 0.f;
  for (int kb = 0; kb < n_kb; ++kb) sum += in[kb * stride];
  return sum;
}

// Runs use(i, raw) over a warp's items (CTA item numbers i), loading each item's bytes (load(i))
// while the previous item is computed. The caller passes the first item's bytes, loaded as early
// as their addresses are known (for fixed matrices before waiting for the previous kernel), so the
// weights' memory latency overlaps the wait and the input staging.
template <class Raw, class Load, class Use>
__device__ __forceinline__ void pipelined(const WarpItems& items, Raw raw, Load&& load, Use&& use) {
  for (int j = 0; j < items.n; ++j) {
    Raw next = raw;
    if (j + 1 < items.n) next = load(items.index(j + 1));
    use(items.index(j), raw);
    raw = next;
  }
}

// All of a warp's items (the first one's bytes given), each one's two row sums into
// partial[i][kTileRows]; then lets the next kernel start and synchronises the block.
template <TensorType T, class Load>
__device__ __forceinline__ void sum_items(const CtaRows& rows, typename Tc<T>::Raw first,
                                          Load&& load, const Staged& st, int n_kb,
                                          const fmt::IqTables& tables, float* partial) {
  const int lane = threadIdx.x & 31;
  pipelined(rows.items, first, load, [&](int i, const auto& item) {
    const typename Tc<T>::Raw raw[1] = {item};
    float2 v[1];
    item_sums<T, 1>(raw, st, i % n_kb, lane, tables, v);
    store_item(partial + i * kTileRows, v[0], lane);
  });
  pdl_launch_dependents();
  __syncthreads();
}

// ---- Host side ----------------------------------------------------------------------------------
// Shared memory of a CTA: the staged input of n values and `sums` item sums per row and kb (2 for
// gate and up) for its rows.
inline size_t smem_bytes(int64_t n, int64_t rows_per_block, int sums = 1) {
  return staged_bytes(n) +
         static_cast<size_t>(rows_per_block) * sums * (n / kBlock) * sizeof(float);
}
constexpr size_t kMaxSmem = 96 * 1024;

// Whether a product over `rows` rows of n values (a multiple of kBlock), launched other_blocks
// times (slots), takes this path: the tensor cores on (compute capability 8.0+, not
// RL_CUDA_TC=0), one tile's shared memory within kMaxSmem, and enough work for its shape: every
// warp owns a kb (n >= 8 blocks) and the tiles fill half the SMs. Measured with Nsight
// Compute (CUDA_DECODE.md, fourth pass): the shared expert's down (2 kb per tile) and gate/up (32
// tiles) took 5.5 and 8.6 µs here against 4.6 and 7.3 µs on the float decoders.
inline bool usable(int64_t rows, int64_t n, int64_t other_blocks, int sums = 1) {
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  return tensor_core_gemv_enabled() && smem_bytes(n, kTileRows, sums) <= kMaxSmem &&
         n / kBlock >= kMinWarps && 2 * tiles * other_blocks >= current_device().sm_count;
}

struct Plan {
  int rows_per_block;  // whole tiles
  size_t smem;
  int threads;
};
// Rows per CTA so that other_blocks × the CTAs over `rows` are one resident wave (as many tiles
// per CTA as that takes, within kMaxSmem), each CTA of warps_for(n_kb, most_warps) warps, and the
// kernel allowed the shared memory it needs.
template <class Kernel>
Plan plan(Kernel kernel, int most_warps, int64_t rows, int64_t n, int64_t other_blocks,
          int sums = 1) {
  int64_t max_tiles = 1;
  while (max_tiles < 64 && smem_bytes(n, 2 * max_tiles * kTileRows, sums) <= kMaxSmem)
    max_tiles *= 2;
  RL_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem_bytes(n, max_tiles * kTileRows, sums))));
  const int threads = 32 * warps_for(n / kBlock, most_warps);
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t resident = resident_blocks(kernel, smem_bytes(n, kTileRows, sums), threads);
  int64_t per = (tiles * other_blocks + resident - 1) / resident;
  per = per < 1 ? 1 : (per > max_tiles ? max_tiles : per);
  return {static_cast<int>(per * kTileRows), smem_bytes(n, per * kTileRows, sums), threads};
}

}  // namespace rl::cuda::tc
