// Compiled with -mavx2 -mfma; called only when the CPU has them (quant::cpu_has_avx2).
#include <immintrin.h>

#include "cpu/gemm.h"

namespace rl::cpu::avx2 {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R rows x T tokens, cols a multiple of 8 handled in vectors, the rest scalar.
template <int R, int T>
void tile(const float* w, int64_t cols, const float* x, int64_t x_stride, float* out,
          int64_t out_stride) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t vec_end = cols & ~int64_t{7};
  for (int64_t i = 0; i < vec_end; i += 8) {
    __m256 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * x_stride + i);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * cols + i);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t i = vec_end; i < cols; ++i) s += w[r * cols + i] * x[t * x_stride + i];
      out[t * out_stride + r] = s;
    }
}

template <int R>
void tokens_tile(const float* w, int64_t cols, const float* x, int64_t x_stride, int64_t n_tok,
                 float* out, int64_t out_stride) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4)
    tile<R, 4>(w, cols, x + t * x_stride, x_stride, out + t * out_stride, out_stride);
  for (; t < n_tok; ++t)
    tile<R, 1>(w, cols, x + t * x_stride, x_stride, out + t * out_stride, out_stride);
}

}  // namespace

void gemm_rows_tokens(const float* w, int64_t cols, int64_t n_rows, const float* x,
                      int64_t x_stride, int64_t n_tok, float* out, int64_t out_stride) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4)
    tokens_tile<4>(w + r * cols, cols, x, x_stride, n_tok, out + r, out_stride);
  for (; r < n_rows; ++r)
    tokens_tile<1>(w + r * cols, cols, x, x_stride, n_tok, out + r, out_stride);
}

}  // namespace rl::cpu::avx2
