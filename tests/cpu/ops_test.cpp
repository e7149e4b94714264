// The CPU engine's kernels against float64 on random data, outputs poisoned first.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/ops.h"

namespace {

std::vector<float> random_vector(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

TEST(Gemm, RowsTimesTokensMatchesFloat64) {
  std::mt19937 rng(7);
  for (int64_t cols : {1, 7, 8, 33, 256, 2048})
    for (int64_t rows : {1, 3, 4, 5, 9})
      for (int64_t toks : {1, 2, 4, 7}) {
        const int64_t x_stride = cols + 3, out_stride = rows + 2;
        const auto w = random_vector(rng, rows * cols);
        const auto x = random_vector(rng, toks * x_stride);
        std::vector<float> out(toks * out_stride, NAN);
        rl::cpu::gemm_rows_tokens(w.data(), cols, rows, x.data(), x_stride, toks, out.data(),
                                  out_stride);
        for (int64_t t = 0; t < toks; ++t)
          for (int64_t r = 0; r < rows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < cols; ++i) {
              ref += double(w[r * cols + i]) * x[t * x_stride + i];
              mag += std::abs(double(w[r * cols + i]) * x[t * x_stride + i]);
            }
            // float32 summation of `cols` products: error below cols * eps * sum|products|.
            const double tol = 1e-7 * double(cols + 8) * mag + 1e-30;
            ASSERT_NEAR(out[t * out_stride + r], ref, tol)
                << "cols " << cols << " rows " << rows << " tokens " << toks;
          }
        // Padding between outputs must be untouched.
        for (int64_t t = 0; t < toks; ++t)
          for (int64_t r = rows; r < out_stride; ++r)
            ASSERT_TRUE(std::isnan(out[t * out_stride + r]));
      }
}

TEST(Norms, RmsnormAndL2normMatchFloat64) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 32, 128, 2048}) {
    const auto x = random_vector(rng, n);
    const auto w = random_vector(rng, n);
    std::vector<float> y(n, NAN);
    rl::cpu::rmsnorm(x.data(), w.data(), y.data(), n, 1e-6f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-6 * std::abs(x[i] * scale * w[i]) + 1e-7);
    auto z = x;
    rl::cpu::l2norm(z.data(), n, 1e-6f);
    const double l2 = 1.0 / std::sqrt(ss + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(z[i], x[i] * l2, 1e-6 * std::abs(x[i] * l2) + 1e-8);
  }
}

TEST(Rope, NeoxPairsMatchFloat64) {
  std::mt19937 rng(5);
  const int n_rot = 64, head = 256;
  for (int64_t pos : {0, 1, 17, 4095, 262143}) {
    const auto x = random_vector(rng, head);
    auto y = x;
    rl::cpu::rope_neox(y.data(), n_rot, pos, 1e7f);
    for (int j = 0; j < n_rot / 2; ++j) {
      const double angle = double(pos) * std::pow(1e7, -2.0 * j / n_rot);
      const double a = x[j], b = x[j + n_rot / 2];
      EXPECT_NEAR(y[j], a * std::cos(angle) - b * std::sin(angle), 1e-5) << pos << " " << j;
      EXPECT_NEAR(y[j + n_rot / 2], a * std::sin(angle) + b * std::cos(angle), 1e-5);
    }
    for (int j = n_rot; j < head; ++j) EXPECT_EQ(y[j], x[j]) << "dims past n_rot pass through";
  }
}

}  // namespace
