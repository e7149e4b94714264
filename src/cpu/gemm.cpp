#include "cpu/gemm.h"

#include "quant/quant.h"

namespace rl::cpu {

void gemm_rows_tokens(const float* w, int64_t cols, int64_t n_rows, const float* x,
                      int64_t x_stride, int64_t n_tok, float* out, int64_t out_stride) {
  if (quant::cpu_has_avx2()) {
    avx2::gemm_rows_tokens(w, cols, n_rows, x, x_stride, n_tok, out, out_stride);
    return;
  }
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < n_rows; ++r)
      out[t * out_stride + r] = quant::dot_f32(w + r * cols, x + t * x_stride, cols);
}

}  // namespace rl::cpu
