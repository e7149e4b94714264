// A register-blocked float32 product of a few decoded weight rows with a few activation
// vectors: the inner kernel of prefill. Four rows by four tokens share every load, so the
// kernel does two FMAs per load instead of the one of a plain dot product.
#pragma once
#include <cstdint>

namespace rl::cpu {

// out[t * out_stride + r] = sum_i w[r * cols + i] * x[t * x_stride + i], r < n_rows, t < n_tok.
void gemm_rows_tokens(const float* w, int64_t cols, int64_t n_rows, const float* x,
                      int64_t x_stride, int64_t n_tok, float* out, int64_t out_stride);

namespace avx2 {
void gemm_rows_tokens(const float* w, int64_t cols, int64_t n_rows, const float* x,
                      int64_t x_stride, int64_t n_tok, float* out, int64_t out_stride);
}

}  // namespace rl::cpu
