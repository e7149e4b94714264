// Matrix-vector products on the tensor cores for the formats that carry most decode bytes
// (the projections and experts of Q2_K to Q6_K, Q8_0, Q4_0, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ4_XS and
// IQ4_NL files; the Q6_K output head). Internal; .cu only.
//
// Why. The float decoders (formats.cuh) spend ~15 instructions per weight (Nsight Compute: the
// Q4_K projections issue 12M warp instructions for 25M weights); with a few warps per scheduler
// that chain, not memory, sets the time (DRAM 4-15 % busy). Here the weights enter an integer
// mma.sync m16n8k32 as the format's own small integers, so a lane's share of a k-step is a few
// masks (Q4_K: an AND per 4 weights) or table lookups (IQ2_XXS: two per 8 weights, IQ3_XXS:
// three), and one mma does 512 multiply-adds. Only where the shape fills the GPU (usable()
// below); the other formats and shapes keep the float decoders.
//
// Exactness. Weights: Q4_K / Q5_K q ≤ 31, IQ2_XXS / IQ2_XS / IQ3_XXS grid·sign with |.| ≤ 62,
// Q2_K 0 ≤ q ≤ 3, Q3_K -4 ≤ q ≤ 3, Q6_K 0 ≤ q ≤ 63, Q8_0 its own int8, Q4_0 as 16 (q - 8) in
// [-128, 112], IQ4_XS and IQ4_NL their table's int8 (|.| ≤ 127; IQ4_XS's times ls - 32 of at most
// 32 in magnitude: |sum| < 2^27 as below), exact in int8 (Q4_K's high nibbles as 16 q ≤ 240 and
// Q2_K's fields as 4^j q ≤ 192 in uint8). Input: each 256-value block is
// scaled by a power of two so that its largest magnitude lies in [2^29, 2^30) and rounded to an
// integer v: exact for every value of at least 2^-6 of the largest (scaled, its float has no
// fraction bits), off by at most 2^-30 of the largest for the smaller ones. v is written as four
// signed 8-bit digits, v = 2^24 d0 + 2^16 d1 + 2^8 d2 + d3. The mma (s8 or u8 × s8 → s32) is exact;
// a k-step is one 32-value sub-block, whose integer scale multiplies the step's int32 sums, still
// exact (|sum| < 2^27 over a block: 8 steps × 32 × 128 × 31 · 63, the largest weight times its
// scale; Q6_K < 2^28: 8 × 16 × 128 × 63 · 128 per half; Q4_K's, kept 16 times larger, < 2^29:
// TcK; Q2_K's, kept 64 times larger, < 2^26).
// The sums are rounded once, to float, per block (Q8_0, Q4_0 and IQ4_NL, whose scales are
// floats: once per step).
// The block's float factors (d, dmin, the IQ formats' d/8 or d/4, the input's power of two) are
// applied once per block; the self-test checks every GEMV against float64.
//
// Layout of the work. A warp item is a tile of 16 rows × one 256-value block ("kb"). K-step s
// (of 8) is sub-block s, values 32s .. 32s + 31: lane 4g + t supplies rows g and g + 8 at the
// sub-block's values 8t .. 8t + 7 (registers a0 / a1: values 8t .. 8t + 3, a2 / a3: 8t + 4 ..
// 8t + 7, as the fragment's k = 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3). B's columns 0-3 are
// the input's digits d0 .. d3 (lanes 4c .. 4c + 3 supply column c), columns 4-7 are zero (room
// for a batch of tokens later). The lane then holds the sums of columns 2t and 2t + 1.
// Q2_K, Q3_K and Q6_K have a scale per 16 values, two per k-step: for them B is split in halves
// (kHalves), columns 0-3 the digits of the step's first 16 values (those of lanes t = 0, 1) and
// columns 4-7 of its last 16 (t = 2, 3), so that lane t's sums are of its own group only.
#pragma once
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/device.h"
#include "cuda/device_utils.cuh"
#include "cuda/formats.cuh"
#include "cuda/gemv_core.cuh"
#include "cuda/layout.h"

namespace rl::cuda::tc {

using gguf::TensorType;

constexpr int kBlock = 256;              // values per kb (one K-quant / IQ super-block)
constexpr int kSteps = 8;                // k-steps of 32 per kb: one sub-block each
constexpr int kTileRows = 16;            // rows per warp item (the mma's M)
constexpr int kDigits = 4;               // B columns: the input's 8-bit digits
constexpr int kFragLanes = 4 * kDigits;  // lanes that supply B

// D = A · B (mma_m16n8k32 on 8-bit integers, int32 sums): A = {a0, a1, a2, a3} in the fragment
// order (rows g / g + 8 at k = 4t .. 4t + 3, then at k = 16 + 4t .. 16 + 4t + 3), B = {b.x, b.y}.
// A's bytes are signed, or with kUnsignedA unsigned; B's are signed.
template <bool kUnsignedA = false>
__device__ __forceinline__ void mma(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                    uint2 b) {
  if constexpr (kUnsignedA)
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y), "r"(0));
  else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y), "r"(0));
}

// The IQ decoders' lookup tables (layout.h, TcIqTables) in shared memory, filled by
// stage_tables. Each is aligned to its size, so that entry i's address is the table's address |
// i · (entry size), a bitwise or that one logic op can form with the index's mask. Through an
// array index the SASS had an add after the mask for every lookup: on sm_90 a table's shared
// address carries the CTA's place in its cluster, so it is not a constant a load can take as an
// offset. Only alignments up to 1 KB hold as shared addresses: the static shared memory starts
// after the 1 KB the hardware reserves per CTA, at address 0x400, and the alignment is kept
// relative to that start (a table declared 2048-aligned sat at 0xc00 on the H200,
// CUDA_DECODE.md, forty-first pass).
namespace iq_tables {
static __shared__ __align__(1024) uint32_t iq2xxs_codes[256];
static __shared__ __align__(16) uint32_t iq2xs_codes[512];  // entry_at: see there
static __shared__ __align__(512) uint32_t iq2xxs_sign_nibbles[128];
static __shared__ __align__(1024) uint32_t iq3xxs_grid[256];
static __shared__ __align__(1024) uint2 sign_bytes[128];
}  // namespace iq_tables

// Entry i (within the table) of an aligned table (iq_tables) at shared address `table`.
__device__ __forceinline__ uint32_t entry(uint32_t table, uint32_t i) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(table | i << 2));
  return v;
}
// Entry i of a table at any 4-byte aligned shared address `table` (an add instead of the or), for
// IQ2_XS's 2 KiB codes table: declared aligned to 2048 and read through or-formed addresses, its
// GEMVs failed the self-test on the H200 (thirty-third pass), as that alignment does not hold (see
// iq_tables).
__device__ __forceinline__ uint32_t entry_at(uint32_t table, uint32_t i) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(table + (i << 2)));
  return v;
}
__device__ __forceinline__ uint2 entry2(uint32_t table, uint32_t i) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(table | i << 3));
  return v;
}

// Bytes of {b, a} picked by the selector's low four nibbles, as __byte_perm, for selectors whose
// nibbles never have bit 3 set. prmt reads that bit as "replicate the sign", so __byte_perm masks
// a selector in a register first, an instruction per call that these do not need.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// The digit weights of this lane's two sum columns (2t, 2t + 1): 2^24 and 2^16 for lane t = 0,
// 2^8 and 1 for t = 1, and with kHalves the same again for t = 2, 3 (without, their columns are
// zero and any weight does; t == 0 rather than t & 1 there keeps the IQ3_XXS gate/up from
// spilling). Each is multiplied by unit, the power of two in which a format counts its sums, so
// the weights stay exact.
template <bool kHalves>
__device__ __forceinline__ float2 digit_weights(int t, float unit) {
  return (kHalves ? (t & 1) == 0 : t == 0) ? make_float2(16777216.f * unit, 65536.f * unit)
                                           : make_float2(256.f * unit, unit);
}

// Byte k of w, as an integer.
__device__ __forceinline__ int byte_at(uint32_t w, int k) {
  return static_cast<int>((w >> (8 * k)) & 0xffu);
}

// One k-step's sums, scaled by the scales of rows g (sc0) and g + 8 (sc1), into acc: integer
// scales into int32 sums, or (Q8_0) float scales into float sums.
template <bool kUnsignedA, class Acc>
__device__ __forceinline__ void step(Acc (&acc)[4], const uint32_t (&a)[2][2], uint2 b, Acc sc0,
                                     Acc sc1) {
  int c[4];
  mma<kUnsignedA>(c, a[0][0], a[1][0], a[0][1], a[1][1], b);
  if constexpr (std::is_same_v<Acc, float>) {
    acc[0] = fmaf(static_cast<float>(c[0]), sc0, acc[0]);
    acc[1] = fmaf(static_cast<float>(c[1]), sc0, acc[1]);
    acc[2] = fmaf(static_cast<float>(c[2]), sc1, acc[2]);
    acc[3] = fmaf(static_cast<float>(c[3]), sc1, acc[3]);
  } else {
    acc[0] += c[0] * sc0, acc[1] += c[1] * sc0;
    acc[2] += c[2] * sc1, acc[3] += c[3] * sc1;
  }
}

// The item's two row sums (rows g, g + 8) in units of the block's scales, from the lane's sums
// counted in unit (a power of two: 1/16 when the scales were taken 16 times).
template <bool kHalves = false, class Acc>
__device__ __forceinline__ float2 row_sums(const Acc (&acc)[4], int t, float unit = 1.f) {
  const float2 w = digit_weights<kHalves>(t, unit);
  return make_float2(fmaf(static_cast<float>(acc[1]), w.y, static_cast<float>(acc[0]) * w.x),
                     fmaf(static_cast<float>(acc[3]), w.y, static_cast<float>(acc[2]) * w.x));
}

// The item's k-steps over M matrices: per matrix, row and step A's two words from
// group(m, r, s, a), the step's sums times scale(m, r, s) (the integer scale of the sub-block, or
// with kHalves of the lane's 16 values) into acc.
template <int M, bool kHalves, bool kUnsignedA = false, class Acc, class Group, class Scale>
__device__ __forceinline__ void k_steps(const uint2* xb, int lane, Group&& group, Scale&& scale,
                                        Acc (&acc)[M][4]) {
  // Lane 4c + t supplies column c from the fragment staged for lane (4c + t) % 16.
  const bool feeds_b = kHalves ? (lane < kFragLanes) == ((lane & 3) < 2) : lane < kFragLanes;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const uint2 b = feeds_b ? xb[s * kFragLanes + (kHalves ? lane & (kFragLanes - 1) : lane)]
                            : make_uint2(0u, 0u);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      uint32_t a[2][2];  // [row][values 0-3 / 4-7]
#pragma unroll
      for (int r = 0; r < 2; ++r) group(m, r, s, a[r]);
      step<kUnsignedA>(acc[m], a, b, scale(m, 0, s), scale(m, 1, s));
    }
  }
}

// ---- Per-format pieces: the raw bytes of one item and the dot product. -------------------------
template <TensorType T>
struct Tc;

// Q4_K and Q5_K: sub-block s is the low (s even) or high (s odd) nibbles of qs bytes 32(s / 2)
// .. + 31, so lane t loads qs bytes 32c + 8t .. + 7 of each 64-value chunk c, and one mask gives
// four weights. Q5_K's fifth bit of sub-block s, value l is bit s of qh byte l: lane t loads qh
// bytes 8t .. 8t + 7. The scales and mins are 6-bit (12 bytes, ggml's get_scale_min_k4).
template <bool kFifthBit>
struct TcK {
  static constexpr int kSumValues = 32;  // the input's sums per 32 values (for the mins)
  static constexpr int kQsOffset = kFifthBit ? 48 : 16;  // after d, dmin, scales (and qh)
  struct Raw {
    uint4 head[2];  // d, dmin, scales of rows g and g+8
    uint2 q[2][4];  // [row][chunk]: the lane's 8 qs bytes of each chunk
    uint2 qh[2];    // Q5_K: the lane's 8 qh bytes of each row
  };
  // blk[r]: the block's body for row r; tail unused.
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&)[2], int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.head[r] = fmt::load16(blk[r]);
#pragma unroll
      for (int c = 0; c < 4; ++c) raw.q[r][c] = fmt::load8(blk[r] + kQsOffset + 32 * c + 8 * t);
      raw.qh[r] = kFifthBit ? fmt::load8(blk[r] + 16 + 8 * t) : make_uint2(0u, 0u);
    }
    return raw;
  }
  // This lane's share of rows g and g+8 of M matrices at the same block (before the sum over the
  // quad's four lanes): out[m].
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale,
                             const float* xsum, int lane, float2 (&out)[M]) {
    const int t = lane & 3;
    uint32_t sc[M][2][2];  // [m][row][sub-blocks 0-3 / 4-7]: the 6-bit scales as bytes
    float min_term[M][2];  // this lane's sub-blocks 2t, 2t + 1 of the mins
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint4& h = raw[m].head[r];
        sc[m][r][0] = h.y & 0x3F3F3F3Fu;
        sc[m][r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
        const uint32_t mins =
            t < 2 ? h.z & 0x3F3F3F3Fu : ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u);
        const int k = 2 * (t & 1);  // bytes k, k + 1 of the half that holds 2t, 2t + 1
        min_term[m][r] =
            fmt::f16(h.x >> 16) * (static_cast<float>(byte_at(mins, k)) * xsum[2 * t] +
                                   static_cast<float>(byte_at(mins, k + 1)) * xsum[2 * t + 1]);
      }
    }
    int acc[M][4] = {};
    // Q4_K takes a high nibble where it lies, as the unsigned byte 16 q: one mask per register and
    // no shift. Its low nibbles' steps take 16 times their scale instead, so every sum is 16 times
    // the sub-block's (|sum| < 2^29 over a block: 8 steps × 32 × 240 × 128 · 63), and the 1/16, a
    // power of two, is applied to the row sums below: the same floats as shifting (bit-identical
    // logits; +0.45 % at 4K, CUDA_DECODE.md, twenty-third pass). Q5_K's fifth bit needs the shift.
    k_steps<M, false, !kFifthBit>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint2 q = raw[m].q[r][s >> 1];
          if constexpr (kFifthBit) {  // bit s of each qh byte to bit 4
            const uint2 h = raw[m].qh[r];
            const int shift = 4 * (s & 1);
            a[0] = ((q.x >> shift) & 0x0F0F0F0Fu) |
                   ((s <= 4 ? h.x << (4 - s) : h.x >> (s - 4)) & 0x10101010u);
            a[1] = ((q.y >> shift) & 0x0F0F0F0Fu) |
                   ((s <= 4 ? h.y << (4 - s) : h.y >> (s - 4)) & 0x10101010u);
          } else {
            const uint32_t mask = s & 1 ? 0xF0F0F0F0u : 0x0F0F0F0Fu;
            a[0] = q.x & mask;
            a[1] = q.y & mask;
          }
        },
        [&](int m, int r, int s) {
          const int scale = byte_at(sc[m][r][s >> 2], s & 3);
          return kFifthBit || (s & 1) ? scale : 16 * scale;
        },
        acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums(acc[m], t, kFifthBit ? 1.f : 0.0625f);
      const float d0 = fmt::f16(raw[m].head[0].x), d1 = fmt::f16(raw[m].head[1].x);
      out[m] =
          make_float2(d0 * inv_scale * v.x - min_term[m][0], d1 * inv_scale * v.y - min_term[m][1]);
    }
  }
};
template <>
struct Tc<TensorType::Q4_K> : TcK<false> {};
template <>
struct Tc<TensorType::Q5_K> : TcK<true> {};

// The IQ formats' sub-block scales for rows g and g + 8 as 2 ls + 1, from each lane's scale byte
// of its quarter (scales of sub-blocks 2t, 2t + 1) of each row: two exchanges give every lane of
// the quad all four bytes. sc[row][0 / 1]: byte k for sub-block 2k / 2k + 1.
__device__ __forceinline__ void sub_block_scales(uint32_t row0, uint32_t row1, int t,
                                                 uint32_t (&sc)[2][2]) {
  const uint32_t own = row0 | row1 << 16;
  const uint32_t other = __shfl_xor_sync(kFullMask, own, 1);
  const uint32_t pair = t & 1 ? other | own << 8 : own | other << 8;  // lanes 2h, 2h + 1
  const uint32_t far = __shfl_xor_sync(kFullMask, pair, 2);
  const uint32_t low = t & 2 ? far : pair, high = t & 2 ? pair : far;  // lanes 0-1, 2-3
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint32_t ls = __byte_perm(low, high, r ? 0x7632 : 0x5410);
    sc[r][0] = ((ls & 0x0F0F0F0Fu) << 1) | 0x01010101u;
    sc[r][1] = ((ls >> 3) & 0x1E1E1E1Eu) | 0x01010101u;
  }
}

// The item of an IQ format: per row and k-step A's two words from group(m, r, s, a), the sums
// scaled by the sub-block scales (scale_pair(m, r): this lane's scale byte of row r) and by
// d(m, r) · f at the end.
template <int M, class ScalePair, class Group, class D>
__device__ __forceinline__ void iq_item(const uint2* xb, int lane, float f, ScalePair&& scale_pair,
                                        Group&& group, D&& d, float2 (&out)[M]) {
  const int t = lane & 3;
  uint32_t sc[M][2][2];  // [m][row][even / odd sub-blocks]: 2 ls + 1, byte k: sub-block 2k (+ 1)
#pragma unroll
  for (int m = 0; m < M; ++m) sub_block_scales(scale_pair(m, 0), scale_pair(m, 1), t, sc[m]);
  int acc[M][4] = {};
  k_steps<M, false>(
      xb, lane, group, [&](int m, int r, int s) { return byte_at(sc[m][r][s & 1], s >> 1); }, acc);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float2 v = row_sums(acc[m], t);
    out[m] = make_float2(d(m, 0) * f * v.x, d(m, 1) * f * v.y);
  }
}

// IQ2_XXS: the body is regrouped at upload (layout.h, regroup_iq2xxs) so that quarter t holds
// group t (values 8t .. 8t + 7) of every sub-block: lane t loads it, 16 bytes per row. The grid's
// magnitudes are 8, 25 and 43 only, so a weight is one of six signed bytes, and one byte permute
// picks four of them from a pair of registers holding {8, 25, 43, 0} and their negatives: its
// selector nibbles are the magnitude's code (0-2) with the sign in bit 2, an entry of the codes
// table or'ed with an entry of the sign table (layout.h, TcIqTables). The scales (byte 15 of each
// quarter) are gathered from the quad's lanes.
template <>
struct Tc<TensorType::IQ2_XXS> {
  static constexpr int kSumValues = 0;
  struct Raw {
    uint4 v[2];  // quarter t of rows g and g+8
    uint32_t d[2];
  };
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
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    const uint32_t codes = smem_u32(iq_tables::iq2xxs_codes);
    const uint32_t sign_nibbles = smem_u32(iq_tables::iq2xxs_sign_nibbles);
    // ggml: d · (0.5 + ls) / 4 · grid · sign = d / 8 · (2 ls + 1) · grid · sign.
    iq_item<M>(
        xb, lane, 0.125f * inv_scale,
        [&](int m, int r) { return fmt::iq2xxs::scale_pair(raw[m].v[r]); },
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint4& v = raw[m].v[r];
          const uint32_t select = entry(codes, fmt::iq2xxs::grid_index(v, s)) |
                                  entry(sign_nibbles, fmt::iq2xxs::sign_bits(v, s));
          a[0] =
              prmt(kIq2Magnitudes, kIq2Negated, select);  // nibbles 0-6: codes 0-2, sign in bit 2
          a[1] = prmt(kIq2Magnitudes, kIq2Negated, select >> 16);
        },
        [&](int m, int r) { return fmt::f16(raw[m].d[r]); }, out);
  }
};

// IQ2_XS: regrouped at upload (layout.h, regroup_iq2xs) so that quarter t holds the 16-bit field
// of group t of every sub-block: lane t loads it (two 8-byte loads per row: the body is 72 bytes)
// and the row's 8 scale bytes. The grid's magnitudes are IQ2_XXS's, and so is the decoding: a
// byte permute per four weights with a selector from the codes table or'ed with the sign
// nibbles. The scales are per 16 values (kHalves): lanes t = 0, 1 take the low nibbles, 2, 3 the
// high ones.
template <>
struct Tc<TensorType::IQ2_XS> {
  static constexpr int kSumValues = 0;
  struct Raw {
    uint2 q[2][2];  // [row][sub-blocks 0-3 / 4-7]: quarter t's fields
    uint2 sc[2];    // [row]: the scale bytes
    uint32_t d[2];
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.q[r][0] = fmt::load8(blk[r] + 16 * t);
      raw.q[r][1] = fmt::load8(blk[r] + 16 * t + 8);
      raw.sc[r] = fmt::load8(blk[r] + 64);
      raw.d[r] = fmt::load2(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    const int t = lane & 3;
    const uint32_t codes = smem_u32(iq_tables::iq2xs_codes);
    const uint32_t sign_nibbles = smem_u32(iq_tables::iq2xxs_sign_nibbles);
    // ggml: d · (0.5 + ls) / 4 · grid · sign = d / 8 · (2 ls + 1) · grid · sign, ls the nibble of
    // the lane's half of the sub-block. sc: byte k = 2 ls + 1 of sub-block k (x) and 4 + k (y).
    uint2 sc[M][2];
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int shift = t & 2 ? 4 : 0;
        sc[m][r].x = (((raw[m].sc[r].x >> shift) & 0x0F0F0F0Fu) << 1) | 0x01010101u;
        sc[m][r].y = (((raw[m].sc[r].y >> shift) & 0x0F0F0F0Fu) << 1) | 0x01010101u;
      }
    }
    int acc[M][4] = {};
    k_steps<M, true>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint2 q = raw[m].q[r][s >> 2];
          const uint32_t f = fmt::iq2xs::field(s & 2 ? q.y : q.x, s);
          const uint32_t select = entry_at(codes, fmt::iq2xs::grid_index(f)) |
                                  entry(sign_nibbles, fmt::iq2xs::sign_bits(f));
          a[0] = prmt(kIq2Magnitudes, kIq2Negated, select);
          a[1] = prmt(kIq2Magnitudes, kIq2Negated, select >> 16);
        },
        [&](int m, int r, int s) { return byte_at(s < 4 ? sc[m][r].x : sc[m][r].y, s & 3); }, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums<true>(acc[m], t);
      out[m] = make_float2(fmt::f16(raw[m].d[0]) * 0.125f * inv_scale * v.x,
                           fmt::f16(raw[m].d[1]) * 0.125f * inv_scale * v.y);
    }
  }
};

// IQ3_XXS: regrouped like IQ2_XXS (layout.h, regroup_iq3xxs): lane t loads quarter t's 16 bytes
// of grid indices and its 8-byte sign part per row. A group is two grid entries (4 magnitudes of
// 4 to 62 each); the signs apply bytewise as (g ^ x) + (x & 1) with x = 0xFF where negative, from
// a table of byte masks (TcIqTables): no byte carries into the next, since g > 0.
template <>
struct Tc<TensorType::IQ3_XXS> {
  static constexpr int kSumValues = 0;
  struct Raw {
    uint4 index[2];  // quarter t's grid indices of rows g and g+8
    uint2 sign[2];   // its sign part
    uint32_t d[2];
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.index[r] = fmt::load16(blk[r] + 16 * t);
      raw.sign[r] = fmt::load8(blk[r] + 64 + 8 * t);
      raw.d[r] = fmt::load2(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    // ggml: d · (0.5 + ls) / 2 · grid · sign = d / 4 · (2 ls + 1) · grid · sign.
    const uint32_t grid = smem_u32(iq_tables::iq3xxs_grid);
    const uint32_t sign_bytes = smem_u32(iq_tables::sign_bytes);
    iq_item<M>(
        xb, lane, 0.25f * inv_scale,
        [&](int m, int r) { return fmt::iq_quarter::scale_pair(raw[m].sign[r].y); },
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint2 sg = raw[m].sign[r];
          const uint2 x = entry2(sign_bytes, fmt::iq_quarter::sign_bits(sg.x, sg.y, s));
          const uint32_t ga = entry(grid, fmt::iq3xxs::grid_index(raw[m].index[r], s, 0));
          const uint32_t gb = entry(grid, fmt::iq3xxs::grid_index(raw[m].index[r], s, 1));
          a[0] = (ga ^ x.x) + (x.x & 0x01010101u);
          a[1] = (gb ^ x.y) + (x.y & 0x01010101u);
        },
        [&](int m, int r) { return fmt::f16(raw[m].d[r]); }, out);
  }
};

// Q2_K and Q3_K: sub-block s = 4h + j is bits 2j, 2j + 1 of qs bytes 32h .. 32h + 31 (half h), so
// lane t loads qs bytes 32h + 8t .. + 7 of both halves; its values of every step lie in the
// 16-value group 2s + t / 2 (kHalves). own_groups: from the bytes of the 8 groups of sub-blocks
// 4w .. 4w + 3 (lo: groups 8w .. 8w + 3, hi: the next 4), lane t's group of sub-block 4w + k at
// byte k.
__device__ __forceinline__ uint32_t own_groups(uint32_t lo, uint32_t hi, int t) {
  return __byte_perm(lo, hi, t & 2 ? 0x7531 : 0x6420);
}

// Σ weight(s) · (the input's sum over the lane's group of sub-block s), over the sub-blocks
// s = t (mod 2): the quad's four lanes then take each of a row's 16 groups once.
template <class Weight>
__device__ __forceinline__ float own_group_sums(const float* xsum, int t, Weight&& weight) {
  float sum = 0.f;
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
    if ((s & 1) == (t & 1)) sum += weight(s) * xsum[2 * s + t / 2];
  return sum;
}

// Q2_K (ggml): w = d · sc · q - dmin · m per group, sc and m the low and high nibbles of the
// group's byte; the mins' part is dmin · Σ m · (the group's input sum).
template <>
struct Tc<TensorType::Q2_K> {
  static constexpr int kSumValues = 16;
  struct Raw {
    uint4 scales[2];  // rows g and g+8: byte k = group k's scale and min
    uint2 q[2][2];    // [row][half]: the lane's 8 qs bytes
    uint32_t dd[2];   // d, dmin
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.scales[r] = fmt::load16(blk[r]);
#pragma unroll
      for (int h = 0; h < 2; ++h) raw.q[r][h] = fmt::load8(blk[r] + 16 + 32 * h + 8 * t);
      raw.dd[r] = fmt::load4(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale,
                             const float* xsum, int lane, float2 (&out)[M]) {
    const int t = lane & 3;
    uint32_t sc[M][2][2];  // [m][row][sub-blocks 0-3 / 4-7]: the lane's group bytes
    float min_term[M][2];  // the mins' part of the lane's groups (own_group_sums)
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint4& b = raw[m].scales[r];
        sc[m][r][0] = own_groups(b.x, b.y, t);
        sc[m][r][1] = own_groups(b.z, b.w, t);
        const float sum = own_group_sums(xsum, t, [&](int s) {
          return static_cast<float>(byte_at(sc[m][r][s >> 2], s & 3) >> 4);
        });
        min_term[m][r] = fmt::f16(raw[m].dd[r] >> 16) * sum;
      }
    }
    int acc[M][4] = {};
    // Field j of a qs byte (bits 2j, 2j + 1) enters where it lies, as the unsigned byte 4^j q
    // (≤ 192): one mask per register and no shift. The step's scale is taken 4^(3 - j) times, so
    // every sum is 64 times the field's (|sum| < 2^26 over a block: 8 steps × 16 values × 64 · 3
    // · 15 × 128), and the 1/64, a power of two, is applied to the row sums below: the same
    // floats as shifting (as Q4_K's high nibbles, TcK).
    k_steps<M, true, true>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint2 q = raw[m].q[r][s >> 2];
          const uint32_t mask = 0x03030303u << 2 * (s & 3);
          a[0] = q.x & mask;
          a[1] = q.y & mask;
        },
        [&](int m, int r, int s) {
          return (byte_at(sc[m][r][s >> 2], s & 3) & 15) << 2 * (3 - (s & 3));
        },
        acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums<true>(acc[m], t, 0.015625f);
      const float d0 = fmt::f16(raw[m].dd[0]), d1 = fmt::f16(raw[m].dd[1]);
      out[m] =
          make_float2(d0 * inv_scale * v.x - min_term[m][0], d1 * inv_scale * v.y - min_term[m][1]);
    }
  }
};

// Q3_K (ggml): w = d · (sc - 32) · q with sc 6-bit (12 bytes, as dequantize_row_q3_K unpacks
// them) and q = low2 - 4 where bit s of hmask byte l (sub-block s, value l) is clear: the byte
// low2 | 0xFC then. The body is only 4-byte aligned (108 bytes): 4-byte loads.
template <>
struct Tc<TensorType::Q3_K> {
  static constexpr int kSumValues = 0;
  struct Raw {
    uint32_t hm[2][2];      // [row]: the lane's 8 hmask bytes
    uint32_t q[2][2][2];    // [row][half]: the lane's 8 qs bytes
    uint32_t scales[2][3];  // [row]: the 12 scale bytes
    uint32_t d[2];
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        raw.hm[r][i] = fmt::load4(blk[r] + 8 * t + 4 * i);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          raw.q[r][h][i] = fmt::load4(blk[r] + 32 + 32 * h + 8 * t + 4 * i);
      }
#pragma unroll
      for (int i = 0; i < 3; ++i) raw.scales[r][i] = fmt::load4(blk[r] + 96 + 4 * i);
      raw.d[r] = fmt::load2(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    const int t = lane & 3;
    uint32_t sc[M][2][2];  // [m][row][sub-blocks 0-3 / 4-7]: the lane's group bytes (+ 32)
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t(&b)[3] = raw[m].scales[r];
        sc[m][r][0] = own_groups(fmt::q3k_scales(b[0], b[1], b[2], 0),
                                 fmt::q3k_scales(b[0], b[1], b[2], 1), t);
        sc[m][r][1] = own_groups(fmt::q3k_scales(b[0], b[1], b[2], 2),
                                 fmt::q3k_scales(b[0], b[1], b[2], 3), t);
      }
    }
    int acc[M][4] = {};
    k_steps<M, true>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const int shift = 2 * (s & 3);
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const uint32_t low2 = (raw[m].q[r][s >> 2][i] >> shift) & 0x03030303u;
            const uint32_t clear = ((raw[m].hm[r][i] >> s) & 0x01010101u) ^ 0x01010101u;
            a[i] = low2 | clear * 0xFCu;
          }
        },
        [&](int m, int r, int s) { return byte_at(sc[m][r][s >> 2], s & 3) - 32; }, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums<true>(acc[m], t);
      out[m] = make_float2(fmt::f16(raw[m].d[0]) * inv_scale * v.x,
                           fmt::f16(raw[m].d[1]) * inv_scale * v.y);
    }
  }
};

// Q6_K (ggml): w = d · sc · (q - 32), sc a signed byte per 16-value group, q = 4 bits of ql and 2
// of qh. Sub-block s = 4h + j of half h: the low (j < 2) or high nibbles of ql bytes
// 64h + 32(j & 1) .. + 31 and bits 2j, 2j + 1 of qh bytes 32h .. 32h + 31. The weights enter as
// q (0 .. 63), and the offset's part is 32 · d · Σ sc · (the group's input sum).
template <>
struct Tc<TensorType::Q6_K> {
  static constexpr int kSumValues = 16;
  struct Raw {
    uint2 ql[2][4];     // [row][2h + (j & 1)]: the lane's 8 ql bytes at 64h + 32(j & 1) + 8t
    uint2 qh[2][2];     // [row][half]: its 8 qh bytes at 32h + 8t
    uint32_t sc[2][2];  // [row][sub-blocks 0-3 / 4-7]: the lane's group bytes (own_groups)
    uint32_t d[2];
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i) raw.ql[r][i] = fmt::load8(blk[r] + 32 * i + 8 * t);
#pragma unroll
      for (int h = 0; h < 2; ++h) raw.qh[r][h] = fmt::load8(blk[r] + 128 + 32 * h + 8 * t);
      const uint4 b = fmt::load16(blk[r] + 192);
      raw.sc[r][0] = own_groups(b.x, b.y, t);
      raw.sc[r][1] = own_groups(b.z, b.w, t);
      raw.d[r] = fmt::load2(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale,
                             const float* xsum, int lane, float2 (&out)[M]) {
    const int t = lane & 3;
    auto sc = [&](int m, int r, int s) {
      return static_cast<int>(static_cast<int8_t>(byte_at(raw[m].sc[r][s >> 2], s & 3)));
    };
    float offset[M][2];  // the offset's part of the lane's groups (own_group_sums)
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float sum =
            own_group_sums(xsum, t, [&](int s) { return static_cast<float>(sc(m, r, s)); });
        offset[m][r] = 32.f * fmt::f16(raw[m].d[r]) * sum;
      }
    }
    int acc[M][4] = {};
    k_steps<M, true>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const int h = s >> 2, j = s & 3;
          const uint2 ql = raw[m].ql[r][2 * h + (j & 1)], qh = raw[m].qh[r][h];
          const int nibble = 4 * (j >> 1);
          a[0] = ((ql.x >> nibble) & 0x0F0F0F0Fu) | (((qh.x >> (2 * j)) & 0x03030303u) << 4);
          a[1] = ((ql.y >> nibble) & 0x0F0F0F0Fu) | (((qh.y >> (2 * j)) & 0x03030303u) << 4);
        },
        sc, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums<true>(acc[m], t);
      out[m] = make_float2(fmt::f16(raw[m].d[0]) * inv_scale * v.x - offset[m][0],
                           fmt::f16(raw[m].d[1]) * inv_scale * v.y - offset[m][1]);
    }
  }
};

// The 32-value formats (Q8_0, Q4_0, IQ4_NL): eight file blocks per kb, so k-step s is block s.
// Each block's scale is an f16, not an integer: a step's int32 sums (|sum| <= 32 · 128 · 128 <
// 2^24, exact as floats) are scaled into float sums. block_scale: block s's scale from the kb's
// eight (its 16 tail bytes).
__device__ __forceinline__ float block_scale(const uint4& d, int s) {
  const uint32_t w = s < 2 ? d.x : s < 4 ? d.y : s < 6 ? d.z : d.w;
  return fmt::f16(w >> (16 * (s & 1)));
}

// The item of a 32-value format: lane t's part of each of the kb's eight blocks (Blocks::load,
// a Blocks::Word), A's two words from it (Blocks::weights), their sums counted in Blocks::kUnit.
template <class Blocks>
struct TcBlocks32 {
  static constexpr int kSumValues = 0;
  struct Raw {
    typename Blocks::Word q[2][kSteps];  // [row][block s]: the lane's part
    uint4 d[2];                          // [row]: the 8 blocks' scales (f16)
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int s = 0; s < kSteps; ++s) raw.q[r][s] = Blocks::load(blk[r], s, t);
      raw.d[r] = fmt::load16(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    float acc[M][4] = {};
    k_steps<M, false>(
        xb, lane, [&](int m, int r, int s, uint32_t(&a)[2]) { Blocks::weights(raw[m].q[r][s], a); },
        [&](int m, int r, int s) { return block_scale(raw[m].d[r], s); }, acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums(acc[m], lane & 3, Blocks::kUnit);
      out[m] = make_float2(inv_scale * v.x, inv_scale * v.y);
    }
  }
};

// Q8_0: lane t loads bytes 8t .. 8t + 7 of each block (the weights as they are, int8).
struct Q8_0Blocks {
  using Word = uint2;
  static constexpr float kUnit = 1.f;
  __device__ static Word load(const uint8_t* blk, int s, int t) {
    return fmt::load8(blk + 32 * s + 8 * t);
  }
  __device__ static void weights(Word w, uint32_t (&a)[2]) { a[0] = w.x, a[1] = w.y; }
};
template <>
struct Tc<TensorType::Q8_0> : TcBlocks32<Q8_0Blocks> {};

// The int8 weights of IQ4_XS and IQ4_NL (kvalues_iq4nl[q]) at values 0-3 (a[0]) and 4-7 (a[1]) of
// a word of eight indices, value j at nibble j. The table of 16 int8 values is two byte permutes
// over 8 bytes each: one from entries 0-7 and one from 8-15 with the index's low three bits, then
// a third picks per byte by its fourth bit (fmt::iq4xs): six permutes and five masks or shifts
// per eight weights in the source, and no loads.
__device__ __forceinline__ void iq4_weights(uint32_t indices, uint32_t (&a)[2]) {
  constexpr uint32_t low0 = fmt::iq4xs::table_word(0), low1 = fmt::iq4xs::table_word(4);
  constexpr uint32_t high0 = fmt::iq4xs::table_word(8), high1 = fmt::iq4xs::table_word(12);
  const uint2 sel = fmt::iq4xs::selectors(indices);  // x: index, y: pick
  a[0] = prmt(prmt(low0, low1, sel.x), prmt(high0, high1, sel.x), sel.y);
  a[1] = prmt(prmt(low0, low1, sel.x >> 16), prmt(high0, high1, sel.x >> 16), sel.y >> 16);
}

// Q4_0 and IQ4_NL: 4-bit values, regrouped at upload (layout.h, regroup_q4_0, regroup_iq4nl) so
// that word t of a block holds lane t's eight values: lane t loads that word of each block.
__device__ __forceinline__ uint32_t nibble_word(const uint8_t* blk, int s, int t) {
  return fmt::load4(blk + 16 * s + 4 * t);
}

// Q4_0 (ggml): w = d · (q - 8); word t holds values 8t .. 8t + 3 in its low nibbles and 8t + 4 ..
// 8t + 7 in its high ones. Each enters as the signed byte 16 (q - 8): the nibble in the byte's high
// half, its top bit flipped (a shift and two logic ops per eight weights); the 1/16 is applied to
// the row sums (a power of two, exact).
struct Q4_0Blocks {
  using Word = uint32_t;
  static constexpr float kUnit = 0.0625f;
  __device__ static Word load(const uint8_t* blk, int s, int t) { return nibble_word(blk, s, t); }
  __device__ static void weights(Word w, uint32_t (&a)[2]) {
    a[0] = ((w << 4) & 0xF0F0F0F0u) ^ 0x80808080u;
    a[1] = (w & 0xF0F0F0F0u) ^ 0x80808080u;
  }
};
template <>
struct Tc<TensorType::Q4_0> : TcBlocks32<Q4_0Blocks> {};

// IQ4_NL (ggml): w = d · kvalues_iq4nl[q]; word t holds the indices of values 8t .. 8t + 7, value
// j at nibble j, as IQ4_XS's words.
struct Iq4nlBlocks {
  using Word = uint32_t;
  static constexpr float kUnit = 1.f;
  __device__ static Word load(const uint8_t* blk, int s, int t) { return nibble_word(blk, s, t); }
  __device__ static void weights(Word w, uint32_t (&a)[2]) { iq4_weights(w, a); }
};
template <>
struct Tc<TensorType::IQ4_NL> : TcBlocks32<Iq4nlBlocks> {};

// IQ4_XS (ggml): w = d · (ls - 32) · kvalues_iq4nl[q], ls a 6-bit scale per sub-block, q 4 bits.
// Regrouped at upload (layout.h, regroup_iq4xs): lane t loads quarter t, a word per sub-block
// holding its values' indices as nibbles (iq4_weights), and the row's tail (d and the scales).
template <>
struct Tc<TensorType::IQ4_XS> {
  static constexpr int kSumValues = 0;
  struct Raw {
    uint4 q[2][2];  // [row][sub-blocks 0-3 / 4-7]: the lane's index words
    uint2 tail[2];  // [row]: d, the scales
  };
  __device__ static Raw load(const uint8_t* const (&blk)[2], const uint8_t* const (&tail)[2],
                             int t) {
    Raw raw;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      raw.q[r][0] = fmt::load16(blk[r] + 32 * t);
      raw.q[r][1] = fmt::load16(blk[r] + 32 * t + 16);
      raw.tail[r] = fmt::load8(tail[r]);
    }
    return raw;
  }
  template <int M>
  __device__ static void dot(const Raw (&raw)[M], const uint2* xb, float inv_scale, const float*,
                             int lane, float2 (&out)[M]) {
    uint2 sc[M][2];  // [m][row]: the 6-bit scales as bytes, x sub-blocks 0-3, y 4-7
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) sc[m][r] = fmt::iq4xs::scale_bytes(raw[m].tail[r]);
    }
    int acc[M][4] = {};
    k_steps<M, false>(
        xb, lane,
        [&](int m, int r, int s, uint32_t(&a)[2]) {
          const uint4& q = raw[m].q[r][s >> 2];
          const int k = s & 3;
          iq4_weights(k == 0 ? q.x : k == 1 ? q.y : k == 2 ? q.z : q.w, a);
        },
        [&](int m, int r, int s) { return byte_at(s < 4 ? sc[m][r].x : sc[m][r].y, s & 3) - 32; },
        acc);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float2 v = row_sums(acc[m], lane & 3);
      out[m] = make_float2(fmt::f16(raw[m].tail[0].x) * inv_scale * v.x,
                           fmt::f16(raw[m].tail[1].x) * inv_scale * v.y);
    }
  }
};

template <TensorType T>
constexpr bool supported() {
  return T == TensorType::Q4_K || T == TensorType::Q5_K || T == TensorType::IQ2_XXS ||
         T == TensorType::IQ3_XXS || T == TensorType::Q2_K || T == TensorType::Q3_K ||
         T == TensorType::Q6_K || T == TensorType::Q8_0 || T == TensorType::IQ4_XS ||
         T == TensorType::Q4_0 || T == TensorType::IQ4_NL || T == TensorType::IQ2_XS;
}

// Whether the tensor-core decoder of T reads lookup tables (iq_tables) from shared memory.
template <TensorType T>
constexpr bool reads_tables() {
  return T == TensorType::IQ2_XXS || T == TensorType::IQ2_XS || T == TensorType::IQ3_XXS;
}
// Copies the lookup tables the tensor-core decoder of T reads (iq_tables) into shared memory; the
// caller synchronises before use.
template <TensorType T>
__device__ void stage_tables(const DeviceTables& g) {
  if constexpr (T == TensorType::IQ2_XXS) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
      iq_tables::iq2xxs_codes[i] = g.iq2xxs_codes[i];
    for (int i = threadIdx.x; i < 128; i += blockDim.x)
      iq_tables::iq2xxs_sign_nibbles[i] = g.iq2xxs_sign_nibbles[i];
  }
  if constexpr (T == TensorType::IQ2_XS) {
    for (int i = threadIdx.x; i < 512; i += blockDim.x)
      iq_tables::iq2xs_codes[i] = g.iq2xs_codes[i];
    for (int i = threadIdx.x; i < 128; i += blockDim.x)
      iq_tables::iq2xxs_sign_nibbles[i] = g.iq2xxs_sign_nibbles[i];
  }
  if constexpr (T == TensorType::IQ3_XXS) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
      iq_tables::iq3xxs_grid[i] = g.iq3xxs_grid[i];
    for (int i = threadIdx.x; i < 128; i += blockDim.x) iq_tables::sign_bytes[i] = g.sign_bytes[i];
  }
}

// ---- The staged input -------------------------------------------------------------------------
// Shared memory of n input values (a multiple of kBlock): the B fragments, one power-of-two scale
// per kb, the sums per 32 values and the sums of squares per kb.
struct Staged {
  uint2* xb;         // [n_kb][kSteps][kFragLanes]: B fragments of lanes 0-15 (digits d0 .. d3)
  float* inv_scale;  // [n_kb]: the inverse of the block's power-of-two scale (NaN: not finite)
  float* xsum;       // [n_kb][16]: unscaled sums per Tc<T>::kSumValues values (for the mins)
  float* sumsq;      // [n_kb]: sums of squares of x (RmsNorm inputs)
};
constexpr size_t staged_bytes(int64_t n) {
  return static_cast<size_t>(n / kBlock) * (kSteps * kFragLanes * 8 + 4 * 18);
}
__device__ inline Staged carve(void* at, int n) {
  Staged s;
  s.xb = static_cast<uint2*>(at);
  s.inv_scale =
      reinterpret_cast<float*>(s.xb + static_cast<int64_t>(n / kBlock) * kSteps * kFragLanes);
  s.xsum = s.inv_scale + n / kBlock;
  s.sumsq = s.xsum + (n / kBlock) * 16;
  return s;
}
// The item sums that follow the staged input in shared memory.
__device__ inline float* after(const Staged& s, int n) {
  return s.sumsq + n / kBlock;
}

// The input of a product: in(x) over n values as GemvIn says.
struct Input {
  GemvIn mode = GemvIn::Plain;
  const float* x = nullptr;
  const float* norm = nullptr;
  const float* sumsq = nullptr;
  int group = 0;
  float eps = 0.f;
  int n = 0;
};

// Block kb's B fragments from its 256 values (lane: values 8 lane .. 8 lane + 7, which are
// values 8t .. 8t + 7 of sub-block lane / 4, t = lane % 4, the k-step's values of lane t): the
// block's power-of-two scale, its sums per 32 or 16 values (the mins) and the four digits of each
// value.
template <TensorType T>
__device__ __forceinline__ void write_digits(const float (&v)[8], int kb, int lane,
                                             const Staged& st) {
  // The largest magnitude as the largest of the values' bits without their signs: the same order
  // for finite values, and an infinity or NaN (every exponent bit set) above all of them, so one
  // warp reduction in hardware (redux.sync, sm_80+) gives both the scale and whether the block is
  // finite (a float maximum was five shuffles and a vote).
  uint32_t top = 0;
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) top = max(top, __float_as_uint(v[j]) & 0x7fffffffu), sum += v[j];
  top = __reduce_max_sync(kFullMask, top);
  const bool finite = top < 0x7f800000u;
  if constexpr (Tc<T>::kSumValues == 32) {  // lanes 4q .. 4q + 3
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    if ((lane & 3) == 0) st.xsum[kb * 16 + lane / 4] = sum;
  } else if constexpr (Tc<T>::kSumValues == 16) {  // lanes 2q, 2q + 1
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    if ((lane & 1) == 0) st.xsum[kb * 16 + lane / 2] = sum;
  }
  // max < 2^e; scale so that the largest magnitude lands in [2^29, 2^30). Below 2^-100 the
  // scale stops growing (such values are noise to the sum). A block with an infinity or NaN has
  // no integer form: its scale is NaN, so the sums it enters are NaN, as a float product's would
  // be (or infinite: both are not finite).
  int e = 30;
  if (top > 0 && finite) e = max(static_cast<int>(top >> 23) - 126, -100);
  if (lane == 0)
    st.inv_scale[kb] = finite ? __int_as_float((e - 30 + 127) << 23) : __int_as_float(0x7fc00000);
  const float scale = __int_as_float((30 - e + 127) << 23);  // powers of two: exact
  // Byte i of w[j] is value j's digit d(3 - i) in offset binary for the three low digits (q +
  // 0x808080); flipping their top bits after the transpose makes them two's complement (six
  // logic ops for the lane's eight values; the top byte is d0 as it is). A block that is not
  // finite converts its values all the same: its NaN scale makes whatever digits they give NaN.
  // |q| <= 2^30, so |d0| <= 64. A block that is not finite may saturate q, so the offset is added
  // as unsigned: it wraps instead of overflowing an int.
  uint32_t w[8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
    w[j] = static_cast<uint32_t>(__float2int_rn(v[j] * scale)) + 0x808080u;
  // A 4 x 4 byte transpose per half: digit[c][h] holds digit d(c) of values 4h .. 4h + 3.
  uint32_t digit[kDigits][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t* x = w + 4 * h;
    const uint32_t ab_lo = __byte_perm(x[0], x[1], 0x5140), ab_hi = __byte_perm(x[0], x[1], 0x7362);
    const uint32_t cd_lo = __byte_perm(x[2], x[3], 0x5140), cd_hi = __byte_perm(x[2], x[3], 0x7362);
    digit[3][h] = __byte_perm(ab_lo, cd_lo, 0x5410) ^ 0x80808080u;
    digit[2][h] = __byte_perm(ab_lo, cd_lo, 0x7632) ^ 0x80808080u;
    digit[1][h] = __byte_perm(ab_hi, cd_hi, 0x5410) ^ 0x80808080u;
    digit[0][h] = __byte_perm(ab_hi, cd_hi, 0x7632);
  }
  uint2* frag = st.xb + (kb * kSteps + lane / 4) * kFragLanes + (lane & 3);
#pragma unroll
  for (int c = 0; c < kDigits; ++c) frag[4 * c] = make_uint2(digit[c][0], digit[c][1]);
}

// Warps per CTA: one per kb up to `most` (so that a tile's items run side by side rather than in
// turn on fewer warps), the kbs spread evenly when there are more.
constexpr int warps_for(int64_t n_kb, int most) {
  const int64_t per = (n_kb + most - 1) / most;
  return static_cast<int>((n_kb + per - 1) / per);
}
constexpr int kMinWarps = 8;  // n >= 8 kbs takes this path (usable)

// Warp `warp` of n_warps stages the blocks it owns, kb = warp, warp + n_warps, ... (its items are
// all at those blocks, WarpItems), straight from global memory: no block-wide barrier and no
// second pass over shared memory, which the fifth pass's timeline showed on every launch's
// critical path (2-3.6 µs). An RmsNorm's 1 / rms, which needs every block, is not applied here:
// the warp leaves its blocks' sums of squares and the rows' sums are scaled at the end
// (input_factor). A GroupRms lane's 8 values lie in one group, scaled here from its partial sums.
// All loads of a round are issued before any is used (they come from L2). Ends with the warp
// synchronised.
template <TensorType T>
__device__ __forceinline__ void stage_blocks(const Input& in, const Staged& st, int warp,
                                             int n_warps) {
  constexpr int kRound = 2;  // blocks loaded together
  const int lane = threadIdx.x & 31, n_kb = in.n / kBlock;
  for (int base = warp; base < n_kb; base += kRound * n_warps) {
    float4 x[kRound][2], w[kRound][2], parts[kRound];
#pragma unroll
    for (int r = 0; r < kRound; ++r) {
      const int kb = base + r * n_warps, i = kb * kBlock + 8 * lane;
      if (kb >= n_kb) continue;
      x[r][0] = *reinterpret_cast<const float4*>(in.x + i);
      x[r][1] = *reinterpret_cast<const float4*>(in.x + i + 4);
      if (in.mode == GemvIn::RmsNorm) {
        w[r][0] = *reinterpret_cast<const float4*>(in.norm + i);
        w[r][1] = *reinterpret_cast<const float4*>(in.norm + i + 4);
      }
      if (in.mode == GemvIn::GroupRms)
        parts[r] = *reinterpret_cast<const float4*>(in.sumsq + i / in.group * kGroupSumsqParts);
    }
#pragma unroll
    for (int r = 0; r < kRound; ++r) {
      const int kb = base + r * n_warps;
      if (kb >= n_kb) continue;
      float v[8] = {x[r][0].x, x[r][0].y, x[r][0].z, x[r][0].w,
                    x[r][1].x, x[r][1].y, x[r][1].z, x[r][1].w};
      if (in.mode == GemvIn::RmsNorm) {
        const float nw[8] = {w[r][0].x, w[r][0].y, w[r][0].z, w[r][0].w,
                             w[r][1].x, w[r][1].y, w[r][1].z, w[r][1].w};
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) ss = fmaf(v[j], v[j], ss);
        ss = warp_sum(ss);
        if (lane == 0) st.sumsq[kb] = ss;
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] *= nw[j];
      } else if (in.mode == GemvIn::GroupRms) {
        const float scale = group_rms_scale(parts[r], in.group, in.eps);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] *= scale;
      }
      write_digits<T>(v, kb, lane, st);
    }
  }
  __syncwarp();
}
// The blocks of this warp among all the CTA's warps.
template <TensorType T>
__device__ void stage_own_blocks(const Input& in, const Staged& st) {
  stage_blocks<T>(in, st, static_cast<int>(threadIdx.x >> 5), static_cast<int>(blockDim.x >> 5));
}

// The factor of every row sum: an RmsNorm's 1 / rms over all blocks' sums of squares (read after
// the block synchronised), else 1.
__device__ __forceinline__ float input_factor(const Input& in, const Staged& st) {
  if (in.mode != GemvIn::RmsNorm) return 1.f;
  float ss = 0.f;
  for (int kb = 0; kb < in.n / kBlock; ++kb) ss += st.sumsq[kb];
  return 1.0f / sqrtf(ss / in.n + in.eps);
}

// A warp item: a tile of the CTA's rows at input block kb; the CTA's items are numbered
// tile · n_kb + kb.
struct Item {
  int tile, kb;
};

// A warp's items: every tile of the CTA at each block the warp owns (kb = warp, warp + W, ...),
// block by block within a tile. Walked item to item: computing the j-th from j took two integer
// divisions per item (~45 of a Q4_K item's ~270 instructions in the SASS).
struct WarpItems {
  int n;  // items of this warp
  int n_kb;
  __device__ Item first() const { return {0, static_cast<int>(threadIdx.x >> 5)}; }
  __device__ Item next(Item it) const {
    it.kb += static_cast<int>(blockDim.x >> 5);
    if (it.kb >= n_kb) it.kb = static_cast<int>(threadIdx.x >> 5), ++it.tile;
    return it;
  }
  __device__ int number(Item it) const { return it.tile * n_kb + it.kb; }  // within the CTA
};

// One warp item: rows g and g+8 (lane = 4g + t) of a tile at block kb of M matrices, from the
// raw bytes of that block; the lanes' shares are summed over the quad, so every lane of it holds
// the item's two results per matrix.
template <TensorType T, int M>
__device__ __forceinline__ void item_sums(const typename Tc<T>::Raw (&raw)[M], const Staged& st,
                                          int kb, int lane, float2 (&v)[M]) {
  Tc<T>::template dot<M>(raw, st.xb + kb * kSteps * kFragLanes, st.inv_scale[kb], st.xsum + kb * 16,
                         lane, v);
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
  r.items = {tiles * owned, n_kb};
  return r;
}

// Where the CTA's first row of matrix m (expert e) starts, and the bytes of a row. An item's
// addresses are 32-bit offsets from here: a CTA has at most 64 tiles (plan) of rows whose input
// fits the staging's shared memory, tens of MB at most. Computed from the row number in 64 bits,
// with the expert's offset, they took ~100 of an IQ2_XXS gate/up item's ~720 instructions (SASS).
struct CtaBase {
  const uint8_t* body;
  const uint8_t* tail;
  uint32_t body_row, tail_row;
};
template <TensorType T>
__device__ __forceinline__ CtaBase cta_base(const Matrix& m, int64_t e, const CtaRows& rows) {
  const RowLocator<T> loc = locate_row<T>(m, e, rows.first);
  return {loc.body, loc.tail, static_cast<uint32_t>(body_row_bytes<T>(m.cols)),
          static_cast<uint32_t>(tail_row_bytes<T>(m.cols))};
}

// The bytes of block kb of rows g and g+8 (lane = 4g + t) of a tile of the CTA's rows from base;
// rows past the CTA's end read its last row instead (their sums are never used).
template <TensorType T>
__device__ __forceinline__ typename Tc<T>::Raw load_item(const CtaBase& base, const CtaRows& rows,
                                                         Item it, int lane) {
  using F = fmt::Format<T>;
  constexpr uint32_t kFileBlocks = kBlock / F::kBlockValues;  // Q8_0: 8 blocks per kb, else 1
  const uint32_t last = static_cast<uint32_t>(rows.end - rows.first - 1);
  const uint8_t *blk[2], *tail[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint32_t row =
        min(static_cast<uint32_t>(it.tile * kTileRows + (lane >> 2) + 8 * r), last);
    const uint32_t kb = static_cast<uint32_t>(it.kb);
    blk[r] = base.body + (row * base.body_row + kb * (kFileBlocks * F::kBodyBytes));
    tail[r] = base.tail + (row * base.tail_row + kb * (kFileBlocks * F::kTailBytes));
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

// Runs use(item, raw) over a warp's items, loading each item's bytes (load(item)) while the
// previous item is computed. The caller passes the first item's bytes, loaded as early as their
// addresses are known (for fixed matrices before waiting for the previous kernel), so the
// weights' memory latency overlaps the wait and the input staging.
template <class Raw, class Load, class Use>
__device__ __forceinline__ void pipelined(const WarpItems& items, Raw raw, Load&& load, Use&& use) {
  Item it = items.first();
  for (int j = 0; j < items.n; ++j) {
    const Item after = items.next(it);
    Raw next = raw;
    if (j + 1 < items.n) next = load(after);
    use(it, raw);
    raw = next;
    it = after;
  }
}

// All of a warp's items (the first one's bytes given), each one's two row sums into
// partial[i][kTileRows]; then the warp's other work (then()), and it synchronises the block.
struct NoWork {
  __device__ void operator()() const {}
};
template <TensorType T, class Load, class Then = NoWork>
__device__ __forceinline__ void sum_items(const CtaRows& rows, typename Tc<T>::Raw first,
                                          Load&& load, const Staged& st, float* partial,
                                          Then&& then = Then{}) {
  const int lane = threadIdx.x & 31;
  pipelined(rows.items, first, load, [&](Item it, const auto& item) {
    const typename Tc<T>::Raw raw[1] = {item};
    float2 v[1];
    item_sums<T, 1>(raw, st, it.kb, lane, v);
    store_item(partial + rows.items.number(it) * kTileRows, v[0], lane);
  });
  then();
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
// tiles) took 5.5 and 8.6 µs here against 4.6 and 7.3 µs on the float decoders. On the integer
// path the gate/up here still lost: the 80B's step -1.5 % at 4K (thirteenth pass).
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
// extra_bytes(rows) adds shared memory for other work of a CTA of that many rows (the router
// fold; the shared expert's down).
template <class Kernel, class ExtraBytes>
Plan plan(Kernel kernel, int most_warps, int64_t rows, int64_t n, int64_t other_blocks, int sums,
          ExtraBytes&& extra_bytes) {
  auto bytes = [&](int64_t r) { return smem_bytes(n, r, sums) + extra_bytes(r); };
  int64_t max_tiles = 1;
  while (max_tiles < 64 && bytes(2 * max_tiles * kTileRows) <= kMaxSmem) max_tiles *= 2;
  allow_smem(kernel, bytes(max_tiles * kTileRows));
  const int threads = 32 * warps_for(n / kBlock, most_warps);
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t resident = resident_blocks(kernel, bytes(kTileRows), threads);
  int64_t per = (tiles * other_blocks + resident - 1) / resident;
  per = per < 1 ? 1 : (per > max_tiles ? max_tiles : per);
  return {static_cast<int>(per * kTileRows), bytes(per * kTileRows), threads};
}
template <class Kernel>
Plan plan(Kernel kernel, int most_warps, int64_t rows, int64_t n, int64_t other_blocks,
          int sums = 1) {
  return plan(kernel, most_warps, rows, n, other_blocks, sums, [](int64_t) { return int64_t{0}; });
}

}  // namespace rl::cuda::tc
