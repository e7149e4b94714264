// AVX2+FMA kernels: each block is decoded straight into registers, eight weights per __m256,
// bit-exact with the reference decoders, and handed to a sink that either multiplies it with
// the activations (dot products) or stores it (decode_row). Compiled with -mavx2 -mfma -mf16c;
// only reached when cpu_has_avx2() is true.
//
// Exactness: every weight is formed by the same single float operation as in ggml (or by an
// operation that provably rounds identically). Where ggml computes (d*sc) * q - (dmin*m), d*sc
// has at most 11+6 significant bits and q at most 5, so (d*sc)*q is exact and
// fma(d*sc, q, -(dmin*m)) rounds exactly once, like ggml's subtraction. IQ signs: xor of the
// sign bit equals ggml's multiplication by -1.f, signed zeros included.
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>

#include "quant/iq_tables.h"
#include "quant/kernels.h"

namespace rl::quant::avx2 {
namespace {

#define RL_INLINE inline __attribute__((always_inline))

// ---- Lookup tables expanded for vector loads (built at compile time) --------------------------

template <size_t N>
constexpr std::array<float, N * 8> expand_grid8(const std::array<uint64_t, N>& grid) {
  std::array<float, N * 8> out{};
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < 8; ++j) out[i * 8 + j] = static_cast<float>((grid[i] >> (8 * j)) & 0xFF);
  }
  return out;
}
template <size_t N>
constexpr std::array<float, N * 4> expand_grid4(const std::array<uint32_t, N>& grid) {
  std::array<float, N * 4> out{};
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < 4; ++j) out[i * 4 + j] = static_cast<float>((grid[i] >> (8 * j)) & 0xFF);
  }
  return out;
}
// Row i: the float sign bit for each of the 8 values whose bit is set in ksigns_iq2xs[i].
constexpr std::array<uint32_t, 128 * 8> make_sign_masks() {
  std::array<uint32_t, 128 * 8> out{};
  for (size_t i = 0; i < 128; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      out[i * 8 + j] = (tables::ksigns_iq2xs[i] & tables::kmask_iq2xs[j]) ? 0x80000000u : 0u;
    }
  }
  return out;
}

alignas(32) constexpr auto kIq2xxsGrid = expand_grid8(tables::iq2xxs_grid);
alignas(32) constexpr auto kIq2xsGrid = expand_grid8(tables::iq2xs_grid);
alignas(32) constexpr auto kIq3xxsGrid = expand_grid4(tables::iq3xxs_grid);
alignas(32) constexpr auto kSignMasks = make_sign_masks();

// ---- Small helpers ----------------------------------------------------------------------------

RL_INLINE float half(const uint8_t* p) {
  return _cvtsh_ss(load_u16(p));
}

RL_INLINE __m128i load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
RL_INLINE __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
RL_INLINE __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
RL_INLINE __m256 u8x8_to_f32(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
}
RL_INLINE __m256 i8x8_to_f32(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

// 32 bytes (unsigned or signed) to four vectors of 8 floats, in order.
struct Quad {
  __m256 v[4];
};
RL_INLINE Quad u8x32_to_f32(__m256i q) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  return {{u8x8_to_f32(lo), u8x8_to_f32(_mm_unpackhi_epi64(lo, lo)), u8x8_to_f32(hi),
           u8x8_to_f32(_mm_unpackhi_epi64(hi, hi))}};
}
RL_INLINE Quad i8x32_to_f32(__m256i q) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  return {{i8x8_to_f32(lo), i8x8_to_f32(_mm_unpackhi_epi64(lo, lo)), i8x8_to_f32(hi),
           i8x8_to_f32(_mm_unpackhi_epi64(hi, hi))}};
}
// 16 signed bytes to two vectors of 8 floats.
RL_INLINE void i8x16_to_f32(__m128i q, __m256& a, __m256& b) {
  a = i8x8_to_f32(q);
  b = i8x8_to_f32(_mm_unpackhi_epi64(q, q));
}

RL_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Per-block scale tables: d * s for eight integer sub-scales s (int32 lanes), kept in memory so
// each use is a broadcast load rather than scalar arithmetic. Same single multiply as ggml.
RL_INLINE void store_scaled(float* out, float d, __m256i s) {
  _mm256_store_ps(out, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s)));
}
RL_INLINE __m256 broadcast(const float* p) {
  return _mm256_broadcast_ss(p);
}

// Q4_K / Q5_K: the eight 6-bit scales and mins (see k4_scale_min) unpacked four at a time.
RL_INLINE void k4_tables(const uint8_t* s, float d, float dmin, float* dsc, float* neg_dm) {
  const uint32_t w0 = load_u32(s), w1 = load_u32(s + 4), w2 = load_u32(s + 8);
  const uint32_t sc_lo = w0 & 0x3f3f3f3fu, m_lo = w1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
  store_scaled(dsc, d, _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, sc_hi, sc_lo)));
  // (-dmin) * m == -(dmin * m) exactly: rounding to nearest is symmetric.
  store_scaled(neg_dm, -dmin, _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, m_hi, m_lo)));
}

// ---- Sinks: what happens to each run of 32 decoded weights ------------------------------------

// Multiplies weights [off, off+32) of the current block with the activations; four independent
// accumulators keep the FMA latency hidden and the summation depth at n/32.
struct DotSink {
  const float* x = nullptr;  // activations of the current block
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  RL_INLINE void operator()(int off, __m256 w0, __m256 w1, __m256 w2, __m256 w3) {
    acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + off), acc0);
    acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + off + 8), acc1);
    acc2 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + off + 16), acc2);
    acc3 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + off + 24), acc3);
  }
  RL_INLINE void operator()(int off, const Quad& q) {
    (*this)(off, q.v[0], q.v[1], q.v[2], q.v[3]);
  }
  RL_INLINE float total() const {
    return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  }
};

struct StoreSink {
  float* y = nullptr;  // output of the current block
  RL_INLINE void operator()(int off, __m256 w0, __m256 w1, __m256 w2, __m256 w3) {
    _mm256_storeu_ps(y + off, w0);
    _mm256_storeu_ps(y + off + 8, w1);
    _mm256_storeu_ps(y + off + 16, w2);
    _mm256_storeu_ps(y + off + 24, w3);
  }
  RL_INLINE void operator()(int off, const Quad& q) {
    (*this)(off, q.v[0], q.v[1], q.v[2], q.v[3]);
  }
};

// ---- Block decoders ---------------------------------------------------------------------------

template <class Sink>
RL_INLINE void decode(const BlockQ8_0& b, Sink& sink) {
  const __m256 d = _mm256_set1_ps(half(b.d));
  const auto* q = reinterpret_cast<const uint8_t*>(b.qs);
  sink(0, _mm256_mul_ps(i8x8_to_f32(load8(q)), d), _mm256_mul_ps(i8x8_to_f32(load8(q + 8)), d),
       _mm256_mul_ps(i8x8_to_f32(load8(q + 16)), d), _mm256_mul_ps(i8x8_to_f32(load8(q + 24)), d));
}

template <class Sink>
RL_INLINE void decode(const BlockQ4_0& b, Sink& sink) {
  const __m256 d = _mm256_set1_ps(half(b.d));
  const __m256i m4 = _mm256_set1_epi32(0xF), eight = _mm256_set1_epi32(8);
  const __m256i a0 = _mm256_cvtepu8_epi32(load8(b.qs)), a1 = _mm256_cvtepu8_epi32(load8(b.qs + 8));
  auto w = [&](__m256i q) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, eight)), d);
  };
  sink(0, w(_mm256_and_si256(a0, m4)), w(_mm256_and_si256(a1, m4)), w(_mm256_srli_epi32(a0, 4)),
       w(_mm256_srli_epi32(a1, 4)));
}

// 16 bytes of nibbles -> kvalues_iq4nl of the low nibbles (values 0..15) and high (16..31).
RL_INLINE void iq4_values(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  const __m128i table =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables::kvalues_iq4nl.data()));
  const __m128i m4 = _mm_set1_epi8(0xF);
  const __m128i q = load16(qs);
  lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
  hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
}

template <class Sink>
RL_INLINE void decode_iq4_32(const uint8_t* qs, __m256 d, int off, Sink& sink) {
  __m128i lo, hi;
  iq4_values(qs, lo, hi);
  __m256 w0, w1, w2, w3;
  i8x16_to_f32(lo, w0, w1);
  i8x16_to_f32(hi, w2, w3);
  sink(off, _mm256_mul_ps(d, w0), _mm256_mul_ps(d, w1), _mm256_mul_ps(d, w2), _mm256_mul_ps(d, w3));
}

template <class Sink>
RL_INLINE void decode(const BlockIQ4_NL& b, Sink& sink) {
  decode_iq4_32(b.qs, _mm256_set1_ps(half(b.d)), 0, sink);
}

template <class Sink>
RL_INLINE void decode(const BlockIQ4_XS& b, Sink& sink) {
  // Scale j: bits 4j..4j+3 of scales_l and bits 2j..2j+1 of scales_h (see iq4xs_scale).
  const __m256i low = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(b.scales_l))),
                                        _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  const __m256i high = _mm256_srlv_epi32(_mm256_set1_epi32(load_u16(b.scales_h)),
                                         _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
  const __m256i ls =
      _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(0xF)),
                      _mm256_slli_epi32(_mm256_and_si256(high, _mm256_set1_epi32(3)), 4));
  alignas(32) float dl[8];
  store_scaled(dl, half(b.d), _mm256_sub_epi32(ls, _mm256_set1_epi32(32)));
  for (int j = 0; j < 8; ++j) decode_iq4_32(b.qs + 16 * j, broadcast(dl + j), 32 * j, sink);
}

template <class Sink>
RL_INLINE void decode(const BlockQ4_K& b, Sink& sink) {
  alignas(32) float dsc[8], neg_dm[8];
  k4_tables(b.scales, half(b.d), half(b.dmin), dsc, neg_dm);
  const __m256i m4 = _mm256_set1_epi32(0xF);
#pragma GCC unroll 4
  for (int pair = 0; pair < 4; ++pair) {
    const __m256 d1 = broadcast(dsc + 2 * pair), neg_m1 = broadcast(neg_dm + 2 * pair);
    const __m256 d2 = broadcast(dsc + 2 * pair + 1), neg_m2 = broadcast(neg_dm + 2 * pair + 1);
    const uint8_t* q = b.qs + 32 * pair;
    const __m256i a0 = _mm256_cvtepu8_epi32(load8(q)), a1 = _mm256_cvtepu8_epi32(load8(q + 8));
    const __m256i a2 = _mm256_cvtepu8_epi32(load8(q + 16)),
                  a3 = _mm256_cvtepu8_epi32(load8(q + 24));
    auto wl = [&](__m256i v) {
      return _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(_mm256_and_si256(v, m4)), neg_m1);
    };
    auto wh = [&](__m256i v) {
      return _mm256_fmadd_ps(d2, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), neg_m2);
    };
    sink(64 * pair, wl(a0), wl(a1), wl(a2), wl(a3));
    sink(64 * pair + 32, wh(a0), wh(a1), wh(a2), wh(a3));
  }
}

// fma(scale, q, -min) for a run of 32 quants; exact because scale * q is (see the top).
RL_INLINE Quad scale_min(const Quad& q, __m256 s, __m256 neg_m) {
  Quad w;
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) w.v[k] = _mm256_fmadd_ps(s, q.v[k], neg_m);
  return w;
}

template <class Sink>
RL_INLINE void decode(const BlockQ5_K& b, Sink& sink) {
  alignas(32) float dsc[8], neg_dm[8];
  k4_tables(b.scales, half(b.d), half(b.dmin), dsc, neg_dm);
  const __m256i m4 = _mm256_set1_epi8(0xF), bit4 = _mm256_set1_epi8(0x10);
  __m256i high = load32(b.qh);  // shifted right by 2 per pair: bits 0/1 are the current ones
#pragma GCC unroll 4
  for (int pair = 0; pair < 4; ++pair) {
    const __m256i q = load32(b.qs + 32 * pair);
    const __m256i ql = _mm256_or_si256(_mm256_and_si256(q, m4),
                                       _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
    const __m256i qh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                       _mm256_and_si256(_mm256_slli_epi16(high, 3), bit4));
    const int j = 2 * pair;
    sink(64 * pair, scale_min(u8x32_to_f32(ql), broadcast(dsc + j), broadcast(neg_dm + j)));
    sink(64 * pair + 32,
         scale_min(u8x32_to_f32(qh), broadcast(dsc + j + 1), broadcast(neg_dm + j + 1)));
    high = _mm256_srli_epi16(high, 2);
  }
}

template <class Sink>
RL_INLINE void decode(const BlockQ6_K& b, Sink& sink) {
  alignas(32) float dsc[16];
  const auto* scales = reinterpret_cast<const uint8_t*>(b.scales);
  store_scaled(dsc, half(b.d), _mm256_cvtepi8_epi32(load8(scales)));
  store_scaled(dsc + 8, half(b.d), _mm256_cvtepi8_epi32(load8(scales + 8)));
  const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = load32(b.ql + 64 * h), l1 = load32(b.ql + 64 * h + 32);
    const __m256i qh = load32(b.qh + 32 * h);
    const float* sc = dsc + 8 * h;
    // Bits 4..5 of the quant come from qh bits 2i..2i+1 for the i-th run of 32.
    auto quant = [&](__m256i low4, int i) {
      const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), m2), 4);
      return _mm256_sub_epi8(_mm256_or_si256(low4, top), bias);
    };
    const __m256i q[4] = {quant(_mm256_and_si256(l0, m4), 0), quant(_mm256_and_si256(l1, m4), 1),
                          quant(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), 2),
                          quant(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), 3)};
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const Quad v = i8x32_to_f32(q[i]);
      const __m256 s0 = broadcast(sc + 2 * i), s1 = broadcast(sc + 2 * i + 1);
      sink(128 * h + 32 * i, _mm256_mul_ps(s0, v.v[0]), _mm256_mul_ps(s0, v.v[1]),
           _mm256_mul_ps(s1, v.v[2]), _mm256_mul_ps(s1, v.v[3]));
    }
  }
}

template <class Sink>
RL_INLINE void decode(const BlockQ2_K& b, Sink& sink) {
  // Scale byte s: 4-bit scale (low nibble) and 4-bit min (high nibble).
  alignas(32) float dsc[16], neg_dm[16];
  const float d = half(b.d), dmin = half(b.dmin);
  const __m128i packed = load16(b.scales), nib = _mm_set1_epi8(0xF);
  const __m128i sc = _mm_and_si128(packed, nib), mn = _mm_and_si128(_mm_srli_epi16(packed, 4), nib);
  store_scaled(dsc, d, _mm256_cvtepu8_epi32(sc));
  store_scaled(dsc + 8, d, _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sc, sc)));
  store_scaled(neg_dm, -dmin, _mm256_cvtepu8_epi32(mn));
  store_scaled(neg_dm + 8, -dmin, _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(mn, mn)));
  const __m256i m2 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(b.qs + 32 * h);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const Quad v = u8x32_to_f32(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2));
      const int s = 8 * h + 2 * j;
      const __m256 da = broadcast(dsc + s), neg_ma = broadcast(neg_dm + s);
      const __m256 db = broadcast(dsc + s + 1), neg_mb = broadcast(neg_dm + s + 1);
      sink(128 * h + 32 * j, _mm256_fmadd_ps(da, v.v[0], neg_ma),
           _mm256_fmadd_ps(da, v.v[1], neg_ma), _mm256_fmadd_ps(db, v.v[2], neg_mb),
           _mm256_fmadd_ps(db, v.v[3], neg_mb));
    }
  }
}

template <class Sink>
RL_INLINE void decode(const BlockQ3_K& b, Sink& sink) {
  // The 16 six-bit scales (see q3k_scales), four at a time: low nibbles from bytes 0..7,
  // two high bits from bytes 8..11.
  const uint32_t a0 = load_u32(b.scales), a1 = load_u32(b.scales + 4), t = load_u32(b.scales + 8);
  const uint32_t k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
  const __m128i packed =
      _mm_setr_epi32(static_cast<int>((a0 & k4) | ((t & k2) << 4)),
                     static_cast<int>((a1 & k4) | (((t >> 2) & k2) << 4)),
                     static_cast<int>(((a0 >> 4) & k4) | (((t >> 4) & k2) << 4)),
                     static_cast<int>(((a1 >> 4) & k4) | (((t >> 6) & k2) << 4)));
  const __m256i bias32 = _mm256_set1_epi32(32);
  alignas(32) float dsc[16];
  store_scaled(dsc, half(b.d), _mm256_sub_epi32(_mm256_cvtepu8_epi32(packed), bias32));
  store_scaled(dsc + 8, half(b.d),
               _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(packed, packed)), bias32));
  const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  const __m256i hmask = load32(b.hmask);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load32(b.qs + 32 * h);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << (4 * h + j)));
      const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
      const __m256i v = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2),
                                        _mm256_and_si256(clear, four));
      const Quad w = i8x32_to_f32(v);
      const int s = 8 * h + 2 * j;
      const __m256 da = broadcast(dsc + s), db = broadcast(dsc + s + 1);
      sink(128 * h + 32 * j, _mm256_mul_ps(da, w.v[0]), _mm256_mul_ps(da, w.v[1]),
           _mm256_mul_ps(db, w.v[2]), _mm256_mul_ps(db, w.v[3]));
    }
  }
}

// Eight grid magnitudes (a row of an expanded grid) times db, with the sign row applied.
RL_INLINE __m256 signed_grid(const float* grid_row, __m256 db, uint32_t sign_index) {
  const __m256 sign =
      _mm256_load_ps(reinterpret_cast<const float*>(kSignMasks.data() + 8 * sign_index));
  return _mm256_xor_ps(_mm256_mul_ps(_mm256_load_ps(grid_row), db), sign);
}

template <class Sink>
RL_INLINE void decode(const BlockIQ2_XXS& b, Sink& sink) {
  // db = d * (0.5f + (aux >> 28)) * 0.25f for all eight groups: gather the odd u32 words.
  alignas(32) float dbs[8];
  const __m256 lo = _mm256_castsi256_ps(load32(b.qs)), hi = _mm256_castsi256_ps(load32(b.qs + 32));
  const __m256i aux8 = _mm256_permute4x64_epi64(
      _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
      _MM_SHUFFLE(3, 1, 2, 0));
  _mm256_store_ps(
      dbs,
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(half(b.d)),
                                  _mm256_add_ps(_mm256_set1_ps(0.5f),
                                                _mm256_cvtepi32_ps(_mm256_srli_epi32(aux8, 28)))),
                    _mm256_set1_ps(0.25f)));
  for (int g = 0; g < 8; ++g) {
    const uint8_t* idx = b.qs + 8 * g;
    const uint32_t aux = load_u32(b.qs + 8 * g + 4);
    const __m256 db = broadcast(dbs + g);
    auto w = [&](int l) {
      return signed_grid(kIq2xxsGrid.data() + 8 * size_t{idx[l]}, db, (aux >> (7 * l)) & 127);
    };
    sink(32 * g, w(0), w(1), w(2), w(3));
  }
}

template <class Sink>
RL_INLINE void decode(const BlockIQ2_XS& b, Sink& sink) {
  // db = d * (0.5f + s) * 0.25f for the low (first 16 values) and high nibble of each scale.
  alignas(32) float db_lo[8], db_hi[8];
  const __m256 d = _mm256_set1_ps(half(b.d)), half_one = _mm256_set1_ps(0.5f);
  const __m256 quarter = _mm256_set1_ps(0.25f);
  const __m256i s = _mm256_cvtepu8_epi32(load8(b.scales));
  auto db_of = [&](__m256i nibble) {
    return _mm256_mul_ps(_mm256_mul_ps(d, _mm256_add_ps(half_one, _mm256_cvtepi32_ps(nibble))),
                         quarter);
  };
  _mm256_store_ps(db_lo, db_of(_mm256_and_si256(s, _mm256_set1_epi32(0xF))));
  _mm256_store_ps(db_hi, db_of(_mm256_srli_epi32(s, 4)));
  for (int g = 0; g < 8; ++g) {
    const __m256 db0 = broadcast(db_lo + g), db1 = broadcast(db_hi + g);
    auto w = [&](int l, __m256 db) {
      const uint16_t q = load_u16(b.qs + 2 * (4 * g + l));
      return signed_grid(kIq2xsGrid.data() + 8 * size_t{q & 511u}, db, q >> 9);
    };
    sink(32 * g, w(0, db0), w(1, db0), w(2, db1), w(3, db1));
  }
}

template <class Sink>
RL_INLINE void decode(const BlockIQ3_XXS& b, Sink& sink) {
  // db = d * (0.5f + (aux >> 28)) * 0.5f for the eight groups' scale-and-sign words at once.
  alignas(32) float dbs[8];
  const __m256i aux8 = load32(b.qs + 64);
  _mm256_store_ps(
      dbs,
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(half(b.d)),
                                  _mm256_add_ps(_mm256_set1_ps(0.5f),
                                                _mm256_cvtepi32_ps(_mm256_srli_epi32(aux8, 28)))),
                    _mm256_set1_ps(0.5f)));
  for (int g = 0; g < 8; ++g) {
    const uint8_t* idx = b.qs + 8 * g;
    const uint32_t aux = load_u32(b.qs + 64 + 4 * g);
    const __m256 db = broadcast(dbs + g);
    auto w = [&](int l) {
      const size_t i0 = idx[2 * l], i1 = idx[2 * l + 1];
      const __m256 grid =
          _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_load_ps(kIq3xxsGrid.data() + 4 * i0)),
                               _mm_load_ps(kIq3xxsGrid.data() + 4 * i1), 1);
      const __m256 sign = _mm256_load_ps(
          reinterpret_cast<const float*>(kSignMasks.data() + 8 * ((aux >> (7 * l)) & 127)));
      return _mm256_xor_ps(_mm256_mul_ps(grid, db), sign);
    };
    sink(32 * g, w(0), w(1), w(2), w(3));
  }
}

// ---- Row drivers ------------------------------------------------------------------------------

template <class Block>
constexpr int kValuesPerBlock = kQK;
template <>
constexpr int kValuesPerBlock<BlockQ8_0> = 32;
template <>
constexpr int kValuesPerBlock<BlockQ4_0> = 32;
template <>
constexpr int kValuesPerBlock<BlockIQ4_NL> = 32;

constexpr int kPrefetchBytes = 2048;

template <class Block>
float dot_blocks(const void* row, const float* x, int64_t n) {
  constexpr int kValues = kValuesPerBlock<Block>;
  const auto* blocks = static_cast<const Block*>(row);
  DotSink sink;
  for (int64_t i = 0; i < n / kValues; ++i) {
    // The hardware prefetcher alone leaves these compute-heavy loops waiting on DRAM; fetching
    // a few hundred bytes ahead (past the row end is harmless: prefetches never fault, and in a
    // matrix the next row follows) keeps the weights streaming.
    const char* ahead = reinterpret_cast<const char*>(blocks + i) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(Block); line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    sink.x = x + i * kValues;
    decode(blocks[i], sink);
  }
  return sink.total();
}

template <class Block>
void decode_blocks(const void* row, float* y, int64_t n) {
  constexpr int kValues = kValuesPerBlock<Block>;
  const auto* blocks = static_cast<const Block*>(row);
  StoreSink sink;
  for (int64_t i = 0; i < n / kValues; ++i) {
    sink.y = y + i * kValues;
    decode(blocks[i], sink);
  }
}

// Dense rows, eight elements at a time; the last n % 8 go through zero-padded copies.
struct F32Elems {
  using Raw = float;
  static RL_INLINE __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16Elems {
  using Raw = uint16_t;
  static RL_INLINE __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct BF16Elems {
  using Raw = uint16_t;
  static RL_INLINE __m256 load(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

template <class E>
float dot_dense(const void* row, const float* x, int64_t n) {
  const auto* w = static_cast<const typename E::Raw*>(row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(E::load(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(E::load(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(E::load(w + i + 16), _mm256_loadu_ps(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(E::load(w + i + 24), _mm256_loadu_ps(x + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(E::load(w + i), _mm256_loadu_ps(x + i), acc0);
  if (i < n) {
    typename E::Raw wt[8] = {};
    float xt[8] = {};
    std::memcpy(wt, w + i, (n - i) * sizeof(wt[0]));
    std::memcpy(xt, x + i, (n - i) * sizeof(float));
    acc1 = _mm256_fmadd_ps(E::load(wt), _mm256_loadu_ps(xt), acc1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

template <class E>
void decode_dense(const void* row, float* y, int64_t n) {
  const auto* w = static_cast<const typename E::Raw*>(row);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, E::load(w + i));
  if (i < n) {
    typename E::Raw wt[8] = {};
    alignas(32) float yt[8];
    std::memcpy(wt, w + i, (n - i) * sizeof(wt[0]));
    _mm256_store_ps(yt, E::load(wt));
    std::memcpy(y + i, yt, (n - i) * sizeof(float));
  }
}

}  // namespace

float dot_row(TensorType t, const void* row, const float* x, int64_t n) {
  switch (t) {
    case TensorType::F32:
      return dot_dense<F32Elems>(row, x, n);
    case TensorType::F16:
      return dot_dense<F16Elems>(row, x, n);
    case TensorType::BF16:
      return dot_dense<BF16Elems>(row, x, n);
    case TensorType::Q8_0:
      return dot_blocks<BlockQ8_0>(row, x, n);
    case TensorType::Q4_0:
      return dot_blocks<BlockQ4_0>(row, x, n);
    case TensorType::IQ4_NL:
      return dot_blocks<BlockIQ4_NL>(row, x, n);
    case TensorType::Q4_K:
      return dot_blocks<BlockQ4_K>(row, x, n);
    case TensorType::Q5_K:
      return dot_blocks<BlockQ5_K>(row, x, n);
    case TensorType::Q6_K:
      return dot_blocks<BlockQ6_K>(row, x, n);
    case TensorType::Q2_K:
      return dot_blocks<BlockQ2_K>(row, x, n);
    case TensorType::Q3_K:
      return dot_blocks<BlockQ3_K>(row, x, n);
    case TensorType::IQ2_XXS:
      return dot_blocks<BlockIQ2_XXS>(row, x, n);
    case TensorType::IQ2_XS:
      return dot_blocks<BlockIQ2_XS>(row, x, n);
    case TensorType::IQ3_XXS:
      return dot_blocks<BlockIQ3_XXS>(row, x, n);
    case TensorType::IQ4_XS:
      return dot_blocks<BlockIQ4_XS>(row, x, n);
    default:
      return 0.f;  // unreachable: callers check the type
  }
}

void decode_row(TensorType t, const void* row, float* y, int64_t n) {
  switch (t) {
    case TensorType::F32:
      std::memcpy(y, row, n * sizeof(float));
      return;
    case TensorType::F16:
      return decode_dense<F16Elems>(row, y, n);
    case TensorType::BF16:
      return decode_dense<BF16Elems>(row, y, n);
    case TensorType::Q8_0:
      return decode_blocks<BlockQ8_0>(row, y, n);
    case TensorType::Q4_0:
      return decode_blocks<BlockQ4_0>(row, y, n);
    case TensorType::IQ4_NL:
      return decode_blocks<BlockIQ4_NL>(row, y, n);
    case TensorType::Q4_K:
      return decode_blocks<BlockQ4_K>(row, y, n);
    case TensorType::Q5_K:
      return decode_blocks<BlockQ5_K>(row, y, n);
    case TensorType::Q6_K:
      return decode_blocks<BlockQ6_K>(row, y, n);
    case TensorType::Q2_K:
      return decode_blocks<BlockQ2_K>(row, y, n);
    case TensorType::Q3_K:
      return decode_blocks<BlockQ3_K>(row, y, n);
    case TensorType::IQ2_XXS:
      return decode_blocks<BlockIQ2_XXS>(row, y, n);
    case TensorType::IQ2_XS:
      return decode_blocks<BlockIQ2_XS>(row, y, n);
    case TensorType::IQ3_XXS:
      return decode_blocks<BlockIQ3_XXS>(row, y, n);
    case TensorType::IQ4_XS:
      return decode_blocks<BlockIQ4_XS>(row, y, n);
    default:
      return;  // unreachable: callers check the type
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return dot_dense<F32Elems>(a, b, n);
}

void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(alpha, x[i], y[i]);
}

// Four activation vectors per pass share each load of w; two accumulators per vector hide the
// FMA latency.
void dot_f32_multi_add(const float* w, int64_t n, const float* x, int64_t x_stride, int64_t n_vecs,
                       float* out) {
  int64_t v = 0;
  for (; v + 4 <= n_vecs; v += 4) {
    const float* xs[4] = {x + v * x_stride, x + (v + 1) * x_stride, x + (v + 2) * x_stride,
                          x + (v + 3) * x_stride};
    __m256 a[4], b[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) a[k] = b[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        a[k] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xs[k] + i), a[k]);
        b[k] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xs[k] + i + 8), b[k]);
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      float sum = hsum(_mm256_add_ps(a[k], b[k]));
      for (int64_t j = i; j < n; ++j) sum += w[j] * xs[k][j];
      out[v + k] += sum;
    }
  }
  for (; v < n_vecs; ++v) out[v] += dot_f32(w, x + v * x_stride, n);
}

}  // namespace rl::quant::avx2
