// Decoders of the GGUF block formats, shared by the GPU kernels and the host (where tests check
// them bit for bit against ggml's dequantised values). Internal to src/cuda.
//
// A block is split into a "body" and a "tail" at upload (cuda/layout.h). Each format is cut into
// "granules": the run of values one GPU lane decodes with a few wide loads (16 bytes where the
// body is 16-byte aligned). decode() hands the values of one granule to `emit` four at a time,
// emit(j, v0, v1, v2, v3) for the granule's values j..j+3.
//
// The arithmetic follows ggml's reference dequantisers operation by operation with fused
// multiply-add disabled (mul/sub/add below), so decoded values are bit-identical with
// rl::quant::dequantize_row. Callers may fuse what they do with the values.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gguf/types.h"
#include "quant/iq_tables.h"
#ifndef __CUDA_ARCH__
#include "util/half.h"
#endif

#define RL_HD __host__ __device__ __forceinline__
// "#pragma unroll" for the device pass only (the host compiler warns about it).
#ifdef __CUDA_ARCH__
#define RL_UNROLL _Pragma("unroll")
#else
#define RL_UNROLL
#endif

namespace rl::cuda::fmt {

using gguf::TensorType;

// The lookup tables of the IQ formats (shared memory in kernels, host memory in host tests).
struct IqTables {
  const uint64_t* iq2xxs_grid;  // [256], byte j = magnitude of weight j
  const uint32_t* iq3xxs_grid;  // [256]
  const int8_t* iq4nl_values;   // [16]
  const uint64_t* iq2xs_grid;   // [512], as iq2xxs_grid
};

RL_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
RL_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
RL_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
// The float of a small integer (|v| < 2^22), exactly, without the GPU's int-to-float unit (which
// issues at a fraction of the FP32 rate and would bound the decoders): 1.5 * 2^23 + v keeps v in
// the low mantissa bits, and subtracting 1.5 * 2^23 again is exact.
RL_HD float i2f(int v) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(__int_as_float(0x4B400000 + v), 12582912.0f);
#else
  return static_cast<float>(v);
#endif
}

RL_HD float as_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  return rl::bits_to_float(bits);
#endif
}
RL_HD float f16(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
#else
  return rl::half_to_float(static_cast<uint16_t>(bits & 0xffffu));
#endif
}
RL_HD float bf16(uint32_t bits) {
  return as_float((bits & 0xffffu) << 16);
}

// Read-only loads (through the non-coherent cache on the device).
RL_HD uint4 load16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint4*>(p));
#else
  return *reinterpret_cast<const uint4*>(p);
#endif
}
RL_HD uint2 load8(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint2*>(p));
#else
  return *reinterpret_cast<const uint2*>(p);
#endif
}
RL_HD uint32_t load4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  return *reinterpret_cast<const uint32_t*>(p);
#endif
}
RL_HD uint32_t load2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  return *reinterpret_cast<const uint16_t*>(p);
#endif
}

RL_HD uint32_t byte_of(uint32_t w, int i) {
  return (w >> (8 * i)) & 0xffu;
}
RL_HD int8_t sbyte_of(uint32_t w, int i) {
  return static_cast<int8_t>(byte_of(w, i));
}
// Byte k (runtime) of the 12 bytes held in three words.
RL_HD uint32_t byte12(uint32_t w0, uint32_t w1, uint32_t w2, int k) {
  const uint32_t w = k < 4 ? w0 : (k < 8 ? w1 : w2);
  return byte_of(w, k & 3);
}
// Q3_K's 16 6-bit scales from their 12 bytes (a0, a1, tmp), as ggml unpacks them: word w holds
// the scales of groups 4w .. 4w + 3, one per byte, biased by 32.
RL_HD uint32_t q3k_scales(uint32_t a0, uint32_t a1, uint32_t tmp, int w) {
  constexpr uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu;
  return (((w & 1 ? a1 : a0) >> (4 * (w >> 1))) & kmask2) | (((tmp >> (2 * w)) & kmask1) << 4);
}
// ggml's ksigns_iq2xs: 7 sign bits plus an eighth that makes the parity even.
RL_HD uint32_t ksigns(uint32_t i) {
#ifdef __CUDA_ARCH__
  return i | ((__popc(i) & 1u) << 7);
#else
  return i | ((static_cast<uint32_t>(__builtin_popcount(i)) & 1u) << 7);
#endif
}
RL_HD float with_sign(float v, uint32_t signs, int j) {
  return (signs >> j) & 1u ? -v : v;
}

template <TensorType T>
struct Format;

// ---- Float types: blocks of 8 values --------------------------------------------------------
template <>
struct Format<TensorType::F32> {
  static constexpr int kBlockValues = 8, kGranules = 1, kGranuleValues = 8;
  static constexpr int kBodyBytes = 32, kTailBytes = 0;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t*, int, const IqTables&, Emit&& emit) {
    const uint4 a = load16(body), b = load16(body + 16);
    emit(0, as_float(a.x), as_float(a.y), as_float(a.z), as_float(a.w));
    emit(4, as_float(b.x), as_float(b.y), as_float(b.z), as_float(b.w));
  }
};

template <>
struct Format<TensorType::F16> {
  static constexpr int kBlockValues = 8, kGranules = 1, kGranuleValues = 8;
  static constexpr int kBodyBytes = 16, kTailBytes = 0;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t*, int, const IqTables&, Emit&& emit) {
    const uint4 a = load16(body);
    emit(0, f16(a.x), f16(a.x >> 16), f16(a.y), f16(a.y >> 16));
    emit(4, f16(a.z), f16(a.z >> 16), f16(a.w), f16(a.w >> 16));
  }
};

template <>
struct Format<TensorType::BF16> {
  static constexpr int kBlockValues = 8, kGranules = 1, kGranuleValues = 8;
  static constexpr int kBodyBytes = 16, kTailBytes = 0;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t*, int, const IqTables&, Emit&& emit) {
    const uint4 a = load16(body);
    emit(0, bf16(a.x), bf16(a.x >> 16), bf16(a.y), bf16(a.y >> 16));
    emit(4, bf16(a.z), bf16(a.z >> 16), bf16(a.w), bf16(a.w >> 16));
  }
};

// ---- Q8_0: y = d * q ---------------------------------------------------------------------------
template <>
struct Format<TensorType::Q8_0> {
  static constexpr int kBlockValues = 32, kGranules = 1, kGranuleValues = 32;
  static constexpr int kBodyBytes = 32, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int, const IqTables&,
                           Emit&& emit) {
    const float d = f16(load2(tail));
    const uint4 a = load16(body), b = load16(body + 16);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    RL_UNROLL
    for (int i = 0; i < 8; ++i) {
      emit(4 * i, mul(i2f(sbyte_of(w[i], 0)), d), mul(i2f(sbyte_of(w[i], 1)), d),
           mul(i2f(sbyte_of(w[i], 2)), d), mul(i2f(sbyte_of(w[i], 3)), d));
    }
  }
};

// ---- Q4_0: y = d * (q - 8); the body regrouped (layout.h, regroup_q4_0): byte 4t + k holds
// values 8t + k (low nibble) and 8t + 4 + k (high) ------------------------------------------------
template <>
struct Format<TensorType::Q4_0> {
  static constexpr int kBlockValues = 32, kGranules = 1, kGranuleValues = 32;
  static constexpr int kBodyBytes = 16, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int, const IqTables&,
                           Emit&& emit) {
    const float d = f16(load2(tail));
    const uint4 a = load16(body);
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
    RL_UNROLL
    for (int t = 0; t < 4; ++t) {
      float lo[4], hi[4];
      RL_UNROLL
      for (int k = 0; k < 4; ++k) {
        lo[k] = mul(i2f(static_cast<int>(byte_of(w[t], k) & 0xFu) - 8), d);
        hi[k] = mul(i2f(static_cast<int>(byte_of(w[t], k) >> 4) - 8), d);
      }
      emit(8 * t, lo[0], lo[1], lo[2], lo[3]);
      emit(8 * t + 4, hi[0], hi[1], hi[2], hi[3]);
    }
  }
};

// ---- IQ4_NL: y = d * kvalues_iq4nl[q]; the body regrouped (layout.h, regroup_iq4nl): value v at
// nibble v, so word l holds values 8l .. 8l + 7 --------------------------------------------------
template <>
struct Format<TensorType::IQ4_NL> {
  static constexpr int kBlockValues = 32, kGranules = 1, kGranuleValues = 32;
  static constexpr int kBodyBytes = 16, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int, const IqTables& t,
                           Emit&& emit) {
    const float d = f16(load2(tail));
    const uint4 a = load16(body);
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
    const int8_t* kv = t.iq4nl_values;
    RL_UNROLL
    for (int l = 0; l < 4; ++l) {
      RL_UNROLL
      for (int j = 0; j < 8; j += 4)
        emit(8 * l + j, mul(d, i2f(kv[(w[l] >> (4 * j)) & 0xFu])),
             mul(d, i2f(kv[(w[l] >> (4 * j + 4)) & 0xFu])),
             mul(d, i2f(kv[(w[l] >> (4 * j + 8)) & 0xFu])),
             mul(d, i2f(kv[(w[l] >> (4 * j + 12)) & 0xFu])));
    }
  }
};

// ---- Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins ------------------------------
// ggml's get_scale_min_k4 over the 12 scale bytes held in three words: the 6-bit scale and min
// of sub-block j.
RL_HD void scale_min_k4(int j, uint32_t s0, uint32_t s1, uint32_t s2, uint32_t* sc, uint32_t* m) {
  if (j < 4) {
    *sc = byte12(s0, s1, s2, j) & 63u;
    *m = byte12(s0, s1, s2, j + 4) & 63u;
  } else {
    *sc = (byte12(s0, s1, s2, j + 4) & 0xFu) | ((byte12(s0, s1, s2, j - 4) >> 6) << 4);
    *m = (byte12(s0, s1, s2, j + 4) >> 4) | ((byte12(s0, s1, s2, j) >> 6) << 4);
  }
}
RL_HD void scale_min_k4(int j, uint32_t s0, uint32_t s1, uint32_t s2, float* sc, float* m) {
  uint32_t a, b;
  scale_min_k4(j, s0, s1, s2, &a, &b);
  *sc = i2f(static_cast<int>(a));
  *m = i2f(static_cast<int>(b));
}

// Granule g = values 64g..64g+63 (sub-blocks 2g and 2g+1).
template <>
struct Format<TensorType::Q4_K> {
  static constexpr int kBlockValues = 256, kGranules = 4, kGranuleValues = 64;
  static constexpr int kBodyBytes = 144, kTailBytes = 0;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t*, int g, const IqTables&,
                           Emit&& emit) {
    const uint4 h = load16(body);  // d, dmin, scales[12]
    const uint4 qa = load16(body + 16 + 32 * g), qb = load16(body + 32 + 32 * g);
    const float d = f16(h.x), dmin = f16(h.x >> 16);
    float sc1, m1, sc2, m2;
    scale_min_k4(2 * g, h.y, h.z, h.w, &sc1, &m1);
    scale_min_k4(2 * g + 1, h.y, h.z, h.w, &sc2, &m2);
    const float d1 = mul(d, sc1), mm1 = mul(dmin, m1);
    const float d2 = mul(d, sc2), mm2 = mul(dmin, m2);
    const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    RL_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo = q[i] & 0x0F0F0F0Fu, hi = (q[i] >> 4) & 0x0F0F0F0Fu;
      emit(4 * i, sub(mul(d1, i2f(byte_of(lo, 0))), mm1), sub(mul(d1, i2f(byte_of(lo, 1))), mm1),
           sub(mul(d1, i2f(byte_of(lo, 2))), mm1), sub(mul(d1, i2f(byte_of(lo, 3))), mm1));
      emit(32 + 4 * i, sub(mul(d2, i2f(byte_of(hi, 0))), mm2),
           sub(mul(d2, i2f(byte_of(hi, 1))), mm2), sub(mul(d2, i2f(byte_of(hi, 2))), mm2),
           sub(mul(d2, i2f(byte_of(hi, 3))), mm2));
    }
  }
};

template <>
struct Format<TensorType::Q5_K> {
  static constexpr int kBlockValues = 256, kGranules = 4, kGranuleValues = 64;
  static constexpr int kBodyBytes = 176, kTailBytes = 0;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t*, int g, const IqTables&,
                           Emit&& emit) {
    const uint4 h = load16(body);
    const uint4 ha = load16(body + 16), hb = load16(body + 32);  // qh[32]
    const uint4 qa = load16(body + 48 + 32 * g), qb = load16(body + 64 + 32 * g);
    const float d = f16(h.x), dmin = f16(h.x >> 16);
    float sc1, m1, sc2, m2;
    scale_min_k4(2 * g, h.y, h.z, h.w, &sc1, &m1);
    scale_min_k4(2 * g + 1, h.y, h.z, h.w, &sc2, &m2);
    const float d1 = mul(d, sc1), mm1 = mul(dmin, m1);
    const float d2 = mul(d, sc2), mm2 = mul(dmin, m2);
    const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    const uint32_t qh[8] = {ha.x, ha.y, ha.z, ha.w, hb.x, hb.y, hb.z, hb.w};
    const int s1 = 2 * g, s2 = 2 * g + 1;
    RL_UNROLL
    for (int i = 0; i < 8; ++i) {
      float lo[4], hi[4];
      RL_UNROLL
      for (int t = 0; t < 4; ++t) {
        const uint32_t b = byte_of(q[i], t), hb = byte_of(qh[i], t);
        lo[t] = sub(mul(d1, i2f((b & 0xFu) + (((hb >> s1) & 1u) << 4))), mm1);
        hi[t] = sub(mul(d2, i2f((b >> 4) + (((hb >> s2) & 1u) << 4))), mm2);
      }
      emit(4 * i, lo[0], lo[1], lo[2], lo[3]);
      emit(32 + 4 * i, hi[0], hi[1], hi[2], hi[3]);
    }
  }
};

// ---- Q6_K: granule = one half (128 values) ------------------------------------------------------
template <>
struct Format<TensorType::Q6_K> {
  static constexpr int kBlockValues = 256, kGranules = 2, kGranuleValues = 128;
  static constexpr int kBodyBytes = 208, kTailBytes = 2;
  // Granule n's bytes: ql (4-bit parts), qh (2-bit parts) and d · scale of its 8 groups of 16.
  // Shared with the GEMV's per-group dot (gemv_core.cuh, q6k_granule_dot).
  struct Granule {
    uint32_t ql[16], qh[8];
    float ds[8];
  };
  RL_HD static Granule load(const uint8_t* body, const uint8_t* tail, int n) {
    Granule g;
    RL_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint4 v = load16(body + 64 * n + 16 * k);
      g.ql[4 * k] = v.x, g.ql[4 * k + 1] = v.y, g.ql[4 * k + 2] = v.z, g.ql[4 * k + 3] = v.w;
    }
    RL_UNROLL
    for (int k = 0; k < 2; ++k) {
      const uint4 v = load16(body + 128 + 32 * n + 16 * k);
      g.qh[4 * k] = v.x, g.qh[4 * k + 1] = v.y, g.qh[4 * k + 2] = v.z, g.qh[4 * k + 3] = v.w;
    }
    const uint2 s = load8(body + 192 + 8 * n);
    const float d = f16(load2(tail));
    RL_UNROLL
    for (int k = 0; k < 8; ++k) {
      g.ds[k] = mul(d, i2f(sbyte_of(k < 4 ? s.x : s.y, k & 3)));
    }
    return g;
  }
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int n, const IqTables&,
                           Emit&& emit) {
    const Granule g = load(body, tail, n);
    const uint32_t(&ql)[16] = g.ql;
    const uint32_t(&qh)[8] = g.qh;
    const float(&ds)[8] = g.ds;
    RL_UNROLL
    for (int i = 0; i < 8; ++i) {  // values l = 4i..4i+3
      const int is = i / 4;        // l / 16
      float v1[4], v2[4], v3[4], v4[4];
      RL_UNROLL
      for (int t = 0; t < 4; ++t) {
        const uint32_t a = byte_of(ql[i], t), b = byte_of(ql[8 + i], t), h = byte_of(qh[i], t);
        const int q1 = static_cast<int>((a & 0xFu) | (((h >> 0) & 3u) << 4)) - 32;
        const int q2 = static_cast<int>((b & 0xFu) | (((h >> 2) & 3u) << 4)) - 32;
        const int q3 = static_cast<int>((a >> 4) | (((h >> 4) & 3u) << 4)) - 32;
        const int q4 = static_cast<int>((b >> 4) | (((h >> 6) & 3u) << 4)) - 32;
        v1[t] = mul(ds[is + 0], i2f(q1));
        v2[t] = mul(ds[is + 2], i2f(q2));
        v3[t] = mul(ds[is + 4], i2f(q3));
        v4[t] = mul(ds[is + 6], i2f(q4));
      }
      emit(4 * i, v1[0], v1[1], v1[2], v1[3]);
      emit(32 + 4 * i, v2[0], v2[1], v2[2], v2[3]);
      emit(64 + 4 * i, v3[0], v3[1], v3[2], v3[3]);
      emit(96 + 4 * i, v4[0], v4[1], v4[2], v4[3]);
    }
  }
};

// ---- Q2_K: granule = one half (128 values) ------------------------------------------------------
template <>
struct Format<TensorType::Q2_K> {
  static constexpr int kBlockValues = 256, kGranules = 2, kGranuleValues = 128;
  static constexpr int kBodyBytes = 80, kTailBytes = 4;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int n, const IqTables&,
                           Emit&& emit) {
    const uint2 s = load8(body + 8 * n);
    const uint4 qa = load16(body + 16 + 32 * n), qb = load16(body + 32 + 32 * n);
    const uint32_t dd = load4(tail);
    const float d = f16(dd), dmin = f16(dd >> 16);
    const uint32_t q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    RL_UNROLL
    for (int j = 0; j < 4; ++j) {
      RL_UNROLL
      for (int half = 0; half < 2; ++half) {
        const uint32_t sc = byte_of(j < 2 ? s.x : s.y, (2 * j + half) & 3);
        const float dl = mul(d, i2f(sc & 0xFu));
        const float ml = mul(dmin, i2f(sc >> 4));
        RL_UNROLL
        for (int w = 0; w < 4; ++w) {
          const uint32_t v = (q[4 * half + w] >> (2 * j)) & 0x03030303u;
          emit(32 * j + 16 * half + 4 * w, sub(mul(dl, i2f(byte_of(v, 0))), ml),
               sub(mul(dl, i2f(byte_of(v, 1))), ml), sub(mul(dl, i2f(byte_of(v, 2))), ml),
               sub(mul(dl, i2f(byte_of(v, 3))), ml));
        }
      }
    }
  }
};

// ---- Q3_K: granule = one half (128 values); the body is only 4-byte aligned ---------------------
template <>
struct Format<TensorType::Q3_K> {
  static constexpr int kBlockValues = 256, kGranules = 2, kGranuleValues = 128;
  static constexpr int kBodyBytes = 108, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int n, const IqTables&,
                           Emit&& emit) {
    uint32_t hm[8], q[8];
    RL_UNROLL
    for (int k = 0; k < 8; ++k) {
      hm[k] = load4(body + 4 * k);
      q[k] = load4(body + 32 + 32 * n + 4 * k);
    }
    const uint32_t a0 = load4(body + 96), a1 = load4(body + 100), tmp = load4(body + 104);
    const uint32_t lo = n == 0 ? q3k_scales(a0, a1, tmp, 0) : q3k_scales(a0, a1, tmp, 2);
    const uint32_t hi = n == 0 ? q3k_scales(a0, a1, tmp, 1) : q3k_scales(a0, a1, tmp, 3);
    const float d = f16(load2(tail));
    RL_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int mbit = 4 * n + j;
      RL_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int is = 2 * j + half;  // scale index within this 128-value half
        const float dl = mul(d, i2f(sbyte_of(is < 4 ? lo : hi, is & 3) - 32));
        RL_UNROLL
        for (int w = 0; w < 4; ++w) {
          const uint32_t v = q[4 * half + w] >> (2 * j), m = hm[4 * half + w] >> mbit;
          float out[4];
          RL_UNROLL
          for (int t = 0; t < 4; ++t) {
            const int val = static_cast<int>(byte_of(v, t) & 3u) - ((byte_of(m, t) & 1u) ? 0 : 4);
            out[t] = mul(dl, i2f(val));
          }
          emit(32 * j + 16 * half + 4 * w, out[0], out[1], out[2], out[3]);
        }
      }
    }
  }
};

// ---- IQ2_XXS and IQ3_XXS: granule = two groups of 32 --------------------------------------------
// Their bodies are regrouped at upload (layout.h, regroup_iq2xxs / regroup_iq3xxs) into quarters:
// quarter l holds what the 8-value group l of every 32-value group (sub-block) needs. Part of a
// quarter is 8 bytes of sign bits and scales, read by these (lo, hi: its two words).
namespace iq_quarter {
// Sub-block s's 7 sign bits of the group (bytes 0-6: bits 7s .. 7s + 6 of a 56-bit field).
RL_HD uint32_t sign_bits(uint32_t lo, uint32_t hi, int s) {
  const uint64_t field = lo | static_cast<uint64_t>(hi) << 32;
  return static_cast<uint32_t>(field >> (7 * s)) & 127u;
}
// Byte 7 of quarter l's sign part: the 4-bit scales of sub-blocks 2l (low nibble) and 2l + 1.
RL_HD uint32_t scale_pair(uint32_t hi) {
  return hi >> 24;
}
// ggml's factor of a 4-bit IQ scale ls: d · (0.5 + ls) · f (f = 1/4 for IQ2_XXS and IQ2_XS, 1/2
// for IQ3_XXS), in its order of operations.
RL_HD float scale_factor(float d, uint32_t ls, float f) {
  return mul(mul(d, add(0.5f, i2f(static_cast<int>(ls)))), f);
}
// Values j .. j + 7 of a granule: the magnitudes in the bytes of g0 (values 0-3) and g1 (4-7)
// times db, negated where bit i of signs is set.
template <class Emit>
RL_HD void emit_group(Emit&& emit, int j, float db, uint32_t g0, uint32_t g1, uint32_t signs) {
  emit(j, with_sign(mul(db, i2f(byte_of(g0, 0))), signs, 0),
       with_sign(mul(db, i2f(byte_of(g0, 1))), signs, 1),
       with_sign(mul(db, i2f(byte_of(g0, 2))), signs, 2),
       with_sign(mul(db, i2f(byte_of(g0, 3))), signs, 3));
  emit(j + 4, with_sign(mul(db, i2f(byte_of(g1, 0))), signs, 4),
       with_sign(mul(db, i2f(byte_of(g1, 1))), signs, 5),
       with_sign(mul(db, i2f(byte_of(g1, 2))), signs, 6),
       with_sign(mul(db, i2f(byte_of(g1, 3))), signs, 7));
}
}  // namespace iq_quarter

// IQ2_XXS quarter l (16 bytes at 16l): bytes 0-7 the grid index of group l of sub-blocks 0-7,
// bytes 8-15 the sign part.
namespace iq2xxs {
RL_HD uint32_t grid_index(const uint4& quarter, int s) {
  return byte_of(s < 4 ? quarter.x : quarter.y, s & 3);
}
RL_HD uint32_t sign_bits(const uint4& quarter, int s) {
  return iq_quarter::sign_bits(quarter.z, quarter.w, s);
}
RL_HD uint32_t scale_pair(const uint4& quarter) {
  return iq_quarter::scale_pair(quarter.w);
}
}  // namespace iq2xxs

template <>
struct Format<TensorType::IQ2_XXS> {
  static constexpr int kBlockValues = 256, kGranules = 4, kGranuleValues = 64;
  static constexpr int kBodyBytes = 64, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int g, const IqTables& t,
                           Emit&& emit) {
    const uint4 quarter[4] = {load16(body), load16(body + 16), load16(body + 32),
                              load16(body + 48)};
    const float d = f16(load2(tail));
    RL_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * g + h;
      const uint32_t ls = (iq2xxs::scale_pair(quarter[g]) >> (4 * h)) & 15u;
      const float db = iq_quarter::scale_factor(d, ls, 0.25f);
      RL_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = t.iq2xxs_grid[iq2xxs::grid_index(quarter[l], s)];
        const uint32_t signs = ksigns(iq2xxs::sign_bits(quarter[l], s));
        iq_quarter::emit_group(emit, 32 * h + 8 * l, db, static_cast<uint32_t>(grid),
                               static_cast<uint32_t>(grid >> 32), signs);
      }
    }
  }
};

// ---- IQ2_XS: granule = two groups of 32 ---------------------------------------------------------
// The body is regrouped at upload (layout.h, regroup_iq2xs): quarter l (16 bytes at 16l) holds the
// 16-bit field of group l of sub-blocks 0-7 (s at bytes 2s, 2s + 1: a 9-bit grid index and a 7-bit
// sign field), and bytes 64-71 are the sub-blocks' scales (low nibble: values 0-15, high: 16-31).
namespace iq2xs {
// Sub-block s's field in a word of two of them (sub-blocks 2k, 2k + 1 for the word at 4k).
RL_HD uint32_t field(uint32_t pair, int s) {
  return (pair >> (16 * (s & 1))) & 0xffffu;
}
RL_HD uint32_t grid_index(uint32_t field) {
  return field & 511u;
}
RL_HD uint32_t sign_bits(uint32_t field) {
  return field >> 9;
}
}  // namespace iq2xs

template <>
struct Format<TensorType::IQ2_XS> {
  static constexpr int kBlockValues = 256, kGranules = 4, kGranuleValues = 64;
  static constexpr int kBodyBytes = 72, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int g, const IqTables& t,
                           Emit&& emit) {
    uint32_t pair[4];  // [group l]: its fields of sub-blocks 2g, 2g + 1
    RL_UNROLL
    for (int l = 0; l < 4; ++l) pair[l] = load4(body + 16 * l + 4 * g);
    const uint32_t scales = load2(body + 64 + 2 * g);
    const float d = f16(load2(tail));
    RL_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * g + h;
      const uint32_t ls = byte_of(scales, h);
      const float db[2] = {iq_quarter::scale_factor(d, ls & 15u, 0.25f),
                           iq_quarter::scale_factor(d, ls >> 4, 0.25f)};
      RL_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint32_t f = iq2xs::field(pair[l], s);
        const uint64_t grid = t.iq2xs_grid[iq2xs::grid_index(f)];
        iq_quarter::emit_group(emit, 32 * h + 8 * l, db[l / 2], static_cast<uint32_t>(grid),
                               static_cast<uint32_t>(grid >> 32), ksigns(iq2xs::sign_bits(f)));
      }
    }
  }
};

// ---- IQ3_XXS ------------------------------------------------------------------------------------
// Quarter l: 16 bytes at 16l, bytes 2s and 2s + 1 the two grid indices (4 values each) of group l
// of sub-block s, and the sign part (8 bytes) at 64 + 8l.
namespace iq3xxs {
RL_HD uint32_t grid_index(const uint4& quarter, int s, int half) {
  const uint32_t w = s < 2 ? quarter.x : s < 4 ? quarter.y : s < 6 ? quarter.z : quarter.w;
  return byte_of(w, 2 * (s & 1) + half);
}
}  // namespace iq3xxs

template <>
struct Format<TensorType::IQ3_XXS> {
  static constexpr int kBlockValues = 256, kGranules = 4, kGranuleValues = 64;
  static constexpr int kBodyBytes = 96, kTailBytes = 2;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int g, const IqTables& t,
                           Emit&& emit) {
    const uint4 index[4] = {load16(body), load16(body + 16), load16(body + 32), load16(body + 48)};
    const uint4 sa = load16(body + 64), sb = load16(body + 80);
    const uint2 sign[4] = {{sa.x, sa.y}, {sa.z, sa.w}, {sb.x, sb.y}, {sb.z, sb.w}};
    const float d = f16(load2(tail));
    RL_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * g + h;
      const uint32_t ls = (iq_quarter::scale_pair(sign[g].y) >> (4 * h)) & 15u;
      const float db = iq_quarter::scale_factor(d, ls, 0.5f);
      RL_UNROLL
      for (int l = 0; l < 4; ++l) {
        const uint32_t signs = ksigns(iq_quarter::sign_bits(sign[l].x, sign[l].y, s));
        const uint32_t ga = t.iq3xxs_grid[iq3xxs::grid_index(index[l], s, 0)];
        const uint32_t gb = t.iq3xxs_grid[iq3xxs::grid_index(index[l], s, 1)];
        iq_quarter::emit_group(emit, 32 * h + 8 * l, db, ga, gb, signs);
      }
    }
  }
};

// ---- IQ4_XS: granule = one group of 32 -------------------------------------------------------
// Body and tail regrouped at upload (layout.h, regroup_iq4xs): the tail is d, the scales' high
// bits (nibble k: sub-blocks p, p + 4 for p = 0, 2, 1, 3) and their low bits (byte k: sub-blocks k,
// k + 4); quarter l of the body holds values 8l .. 8l + 7 of each sub-block, s in word s.
namespace iq4xs {
// The eight sub-blocks' 6-bit scales from the tail's two words, a byte each: x holds sub-blocks
// 0-3, y 4-7. Three masks and shifts per word: the high bits' nibbles 0, 2 | 1, 3 land in bytes
// 0, 1 | 2, 3.
RL_HD uint2 scale_bytes(uint2 tail) {
  const uint32_t pairs = ((tail.x >> 16) & 0x0F0Fu) | ((tail.x >> 4) & 0x0F0F0000u);
  return make_uint2((tail.y & 0x0F0F0F0Fu) | ((pairs << 4) & 0x30303030u),
                    ((tail.y >> 4) & 0x0F0F0F0Fu) | ((pairs << 2) & 0x30303030u));
}
// kvalues_iq4nl[first .. first + 3] as the bytes of a word: the tensor-core decoder's byte
// permutes take the table from four such words (first = 0, 4, 8, 12).
constexpr uint32_t table_word(int first) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j)
    w |= static_cast<uint32_t>(static_cast<uint8_t>(quant::tables::kvalues_iq4nl[first + j]))
         << (8 * j);
  return w;
}
// The permute selectors of a word of eight indices (value j at nibble j; values 4-7 in the high
// half): x the low three bits, for the permutes of entries 0-7 and 8-15; y byte j of the first
// or, where the index's fourth bit is set, of the second (selector j + 4).
RL_HD uint2 selectors(uint32_t indices) {
  return make_uint2(indices & 0x77777777u, ((indices >> 1) & 0x44444444u) | 0x32103210u);
}
}  // namespace iq4xs

template <>
struct Format<TensorType::IQ4_XS> {
  static constexpr int kBlockValues = 256, kGranules = 8, kGranuleValues = 32;
  static constexpr int kBodyBytes = 128, kTailBytes = 8;
  template <class Emit>
  RL_HD static void decode(const uint8_t* body, const uint8_t* tail, int ib, const IqTables& t,
                           Emit&& emit) {
    const uint2 h = load8(tail);
    const uint2 sc = iq4xs::scale_bytes(h);
    const float dl =
        mul(f16(h.x), i2f(static_cast<int>(byte_of(ib < 4 ? sc.x : sc.y, ib & 3)) - 32));
    const int8_t* kv = t.iq4nl_values;
    RL_UNROLL
    for (int l = 0; l < 4; ++l) {
      const uint32_t q = load4(body + 32 * l + 4 * ib);
      RL_UNROLL
      for (int j = 0; j < 8; j += 4)
        emit(8 * l + j, mul(dl, i2f(kv[(q >> (4 * j)) & 0xFu])),
             mul(dl, i2f(kv[(q >> (4 * j + 4)) & 0xFu])),
             mul(dl, i2f(kv[(q >> (4 * j + 8)) & 0xFu])),
             mul(dl, i2f(kv[(q >> (4 * j + 12)) & 0xFu])));
    }
  }
};

// Calls f.template operator()<T>() for the runtime type t; returns false for types without a
// decoder. Keeps the list of supported types in one place.
template <class F>
bool dispatch(TensorType t, F&& f) {
  switch (t) {
    case TensorType::F32:
      f.template operator()<TensorType::F32>();
      return true;
    case TensorType::F16:
      f.template operator()<TensorType::F16>();
      return true;
    case TensorType::BF16:
      f.template operator()<TensorType::BF16>();
      return true;
    case TensorType::Q8_0:
      f.template operator()<TensorType::Q8_0>();
      return true;
    case TensorType::Q4_0:
      f.template operator()<TensorType::Q4_0>();
      return true;
    case TensorType::IQ4_NL:
      f.template operator()<TensorType::IQ4_NL>();
      return true;
    case TensorType::Q2_K:
      f.template operator()<TensorType::Q2_K>();
      return true;
    case TensorType::Q3_K:
      f.template operator()<TensorType::Q3_K>();
      return true;
    case TensorType::Q4_K:
      f.template operator()<TensorType::Q4_K>();
      return true;
    case TensorType::Q5_K:
      f.template operator()<TensorType::Q5_K>();
      return true;
    case TensorType::Q6_K:
      f.template operator()<TensorType::Q6_K>();
      return true;
    case TensorType::IQ2_XXS:
      f.template operator()<TensorType::IQ2_XXS>();
      return true;
    case TensorType::IQ2_XS:
      f.template operator()<TensorType::IQ2_XS>();
      return true;
    case TensorType::IQ3_XXS:
      f.template operator()<TensorType::IQ3_XXS>();
      return true;
    case TensorType::IQ4_XS:
      f.template operator()<TensorType::IQ4_XS>();
      return true;
    default:
      return false;
  }
}

// Host or device: decodes n_blocks consecutive blocks (split layout) into y. Used by host tests
// and by the embedding lookup.
template <TensorType T>
RL_HD void decode_blocks(const uint8_t* body, const uint8_t* tail, int64_t n_blocks,
                         const IqTables& t, float* y) {
  using F = Format<T>;
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int g = 0; g < F::kGranules; ++g) {
      float* out = y + b * F::kBlockValues + g * F::kGranuleValues;
      F::decode(body + b * F::kBodyBytes, tail + b * F::kTailBytes, g, t,
                [&](int j, float a, float bb, float c, float d) {
                  out[j] = a, out[j + 1] = bb, out[j + 2] = c, out[j + 3] = d;
                });
    }
  }
}

}  // namespace rl::cuda::fmt
