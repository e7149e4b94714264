// The CPU engine's building blocks: matrix products on quantised weights and the small
// element-wise operations of the forward pass. Activations are float32, row-major
// [tokens][features].
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/weights.h"
#include "util/thread_pool.h"

namespace rl::cpu {

// Per-thread scratch for decoding weight rows, sized once.
struct Scratch {
  std::vector<std::vector<float>> rows;  // [thread][kRowBlock * max_cols]
  void ensure(int threads, int64_t floats_per_thread);
};

// out[t][r] = sum_i W.row(row0 + r)[i] * x[t][i] for r < n_rows, t < n_tokens.
// x has stride x_stride, out has stride out_stride. Parallel over rows.
void matmul(ThreadPool& pool, Scratch& scratch, const model::Tensor& w, int64_t row0,
            int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tokens, float* out,
            int64_t out_stride);

// Same over rows given by pointer (rows of experts inside a 3-D tensor), all of one type.
void matmul_rows(ThreadPool& pool, Scratch& scratch, gguf::TensorType type, int64_t cols,
                 const uint8_t* const* rows, int64_t n_rows, const float* x, int64_t x_stride,
                 int64_t n_tokens, float* out, int64_t out_stride);

// y = x / sqrt(mean(x^2) + eps) * w over n values.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);
// x *= 1 / sqrt(sum(x^2) + eps)
void l2norm(float* x, int64_t n, float eps);

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}
inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// NEOX rotary embedding on the first n_rot dims of one head: pairs (j, j + n_rot/2).
void rope_neox(float* head, int n_rot, int64_t position, float theta);

// Row `id` of the embedding table, decoded to float.
void embedding_row(const model::Tensor& table, int64_t id, float* out);

}  // namespace rl::cpu
