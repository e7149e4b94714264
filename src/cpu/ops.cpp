#include "cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "cpu/gemm.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::cpu {

namespace {
// Rows decoded together, then used against a tile of tokens while they sit in L1/L2.
constexpr int64_t kRowBlock = 8;
constexpr int64_t kTokenTile = 32;
}  // namespace

void Scratch::ensure(int threads, int64_t floats_per_thread) {
  if (static_cast<int>(rows.size()) < threads) rows.resize(threads);
  for (auto& r : rows)
    if (static_cast<int64_t>(r.size()) < floats_per_thread) r.resize(floats_per_thread);
}

void matmul_rows(ThreadPool& pool, Scratch& scratch, gguf::TensorType type, int64_t cols,
                 const uint8_t* const* rows, int64_t n_rows, const float* x, int64_t x_stride,
                 int64_t n_tokens, float* out, int64_t out_stride) {
  if (n_tokens == 1) {
    // Decode: one pass over the weights, straight from the quantised blocks.
    pool.parallel_for(n_rows, 16, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) out[r] = quant::dot_row(type, rows[r], x, cols);
    });
    return;
  }
  scratch.ensure(pool.size(), kRowBlock * cols);
  const int64_t n_blocks = (n_rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1, int thread) {
    float* decoded = scratch.rows[thread].data();
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kRowBlock;
      const int64_t nr = std::min(kRowBlock, n_rows - r0);
      for (int64_t r = 0; r < nr; ++r)
        quant::decode_row(type, rows[r0 + r], decoded + r * cols, cols);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
        const int64_t nt = std::min(kTokenTile, n_tokens - t0);
        gemm_rows_tokens(decoded, cols, nr, x + t0 * x_stride, x_stride, nt,
                         out + t0 * out_stride + r0, out_stride);
      }
    }
  });
}

void matmul(ThreadPool& pool, Scratch& scratch, const model::Tensor& w, int64_t row0,
            int64_t n_rows, const float* x, int64_t x_stride, int64_t n_tokens, float* out,
            int64_t out_stride) {
  // Row pointers are cheap to build and keep one code path for dense and expert weights.
  thread_local std::vector<const uint8_t*> rows;
  rows.resize(n_rows);
  for (int64_t r = 0; r < n_rows; ++r) rows[r] = w.row(row0 + r);
  matmul_rows(pool, scratch, w.type, w.cols(), rows.data(), n_rows, x, x_stride, n_tokens, out,
              out_stride);
}

void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / double(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void l2norm(float* x, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss + eps));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void rope_neox(float* head, int n_rot, int64_t position, float theta) {
  const int half = n_rot / 2;
  for (int j = 0; j < half; ++j) {
    // The angle in double: positions reach 2^18 and float would lose the phase.
    const double freq = std::pow(double(theta), -2.0 * j / n_rot);
    const double angle = double(position) * freq;
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    const float a = head[j];
    const float b = head[j + half];
    head[j] = a * c - b * s;
    head[j + half] = a * s + b * c;
  }
}

void embedding_row(const model::Tensor& table, int64_t id, float* out) {
  if (id < 0 || id >= table.n_rows())
    fail("token id ", id, " is outside the vocabulary (", table.n_rows(), ")");
  quant::dequantize_row(table.type, table.row(id), out, table.cols());
}

}  // namespace rl::cpu
