// Dot products against float64: the golden dequantised weights (ggml's, not ours) times random
// activations, summed exactly in double; the float32 result must lie within the rounding bound
// of golden.h. Scalar and AVX2 kernels are checked separately, at one block, a few blocks at an
// offset, and the full 2048-value rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "golden.h"
#include "quant/kernels.h"
#include "quant/quant.h"

namespace rl::quant {
namespace {

using testing::dot_within_bound;
using testing::Golden;
using testing::kGoldenCols;
using testing::kGoldenRows;
using testing::load_golden;
using testing::random_vector;

using DotFn = float (*)(TensorType, const void*, const float*, int64_t);

struct Span {
  int64_t first_block;
  int64_t blocks;
};

// Checks `dot` on the golden rows of one type over block ranges [first, first + count).
void check_dot_on_golden(const Golden& g, DotFn dot, const char* label) {
  const BlockShape shape = block_shape(g.type);
  const int64_t blocks_per_row = kGoldenCols / shape.block_size;
  std::vector<Span> spans = {{0, 1}, {1, 3}, {blocks_per_row - 1, 1}, {0, blocks_per_row}};
  if (shape.block_size == 1) {  // dense types: odd lengths exercise the vector tails
    spans.insert(spans.end(), {{0, 7}, {3, 13}, {5, 100}, {1, 2047}, {0, 33}});
  }
  const std::vector<float> x = random_vector(kGoldenCols, 7);
  for (int64_t r = 0; r < kGoldenRows; ++r) {
    for (const Span& s : spans) {
      const int64_t n = s.blocks * shape.block_size;
      const int64_t first = s.first_block * shape.block_size;
      const uint8_t* row = g.q_row(r) + s.first_block * shape.block_bytes;
      const float got = dot(g.type, row, x.data() + first, n);
      EXPECT_TRUE(dot_within_bound(got, g.deq_row(r) + first, x.data() + first, n))
          << label << " " << g.name << " row " << r << " values [" << first << ", " << first + n
          << ")";
    }
  }
}

class DotType : public ::testing::TestWithParam<std::string> {};

TEST_P(DotType, ScalarWithinFloat64Bound) {
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  check_dot_on_golden(g, dot_row_scalar, "scalar");
}

TEST_P(DotType, Avx2WithinFloat64Bound) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  check_dot_on_golden(g, avx2::dot_row, "avx2");
}

TEST_P(DotType, BatchWithinFloat64Bound) {
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  const int64_t stride = kGoldenCols + 5;  // vectors not packed, not 32-byte aligned
  for (int64_t n_vecs : {0, 1, 2, 4, 7}) {
    std::vector<float> x(std::max<int64_t>(n_vecs, 1) * stride);
    for (int64_t v = 0; v < n_vecs; ++v) {
      const std::vector<float> xv = random_vector(kGoldenCols, 100 + v);
      std::copy(xv.begin(), xv.end(), x.begin() + v * stride);
    }
    for (int64_t r = 0; r < kGoldenRows; ++r) {
      std::vector<float> out(n_vecs + 1, -7.f);
      dot_rows_batch(g.type, g.q_row(r), kGoldenCols, x.data(), stride, n_vecs, out.data());
      for (int64_t v = 0; v < n_vecs; ++v) {
        EXPECT_TRUE(dot_within_bound(out[v], g.deq_row(r), x.data() + v * stride, kGoldenCols))
            << g.name << " row " << r << " vector " << v << " of " << n_vecs;
      }
      EXPECT_EQ(out[n_vecs], -7.f) << "wrote past the last vector";
    }
  }
}

TEST(DotRowsBatch, DenseTypesAtOddLengths) {
  for (const char* name : {"f32", "f16", "bf16"}) {
    const Golden g = load_golden(name);
    ASSERT_NE(g.q, nullptr);
    for (int64_t n : {1, 13, 1001, 1500}) {
      const int64_t n_vecs = 3, stride = n + 1;
      const std::vector<float> x = random_vector(n_vecs * stride, 11);
      std::vector<float> out(n_vecs);
      dot_rows_batch(g.type, g.q_row(2), n, x.data(), stride, n_vecs, out.data());
      for (int64_t v = 0; v < n_vecs; ++v) {
        EXPECT_TRUE(dot_within_bound(out[v], g.deq_row(2), x.data() + v * stride, n))
            << name << " n " << n << " vector " << v;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotType, ::testing::ValuesIn(testing::golden_type_names()),
                         [](const auto& info) { return info.param; });

// Sizes around the vector widths and unroll factors of the kernels.
const std::vector<int64_t> kSizes = {0, 1, 7, 8, 9, 31, 32, 33, 63, 255, 256, 257, 1000, 4099};

using DotF32Fn = float (*)(const float*, const float*, int64_t);
void check_dot_f32(DotF32Fn dot) {
  for (int64_t n : kSizes) {
    const std::vector<float> a = random_vector(n, 1), b = random_vector(n, 2);
    EXPECT_TRUE(dot_within_bound(dot(a.data(), b.data(), n), a.data(), b.data(), n)) << n;
  }
}

TEST(DotF32, Scalar) {
  check_dot_f32(scalar::dot_f32);
}
TEST(DotF32, Avx2) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  check_dot_f32(avx2::dot_f32);
}
TEST(DotF32, Dispatched) {
  check_dot_f32(dot_f32);
}

TEST(DotF32, CancellationStaysWithinBound) {
  // sum of +-big terms that cancel, plus small ones: the bound is relative to sum |a_i b_i|.
  std::vector<float> a(1024), b(1024, 1.f);
  for (int i = 0; i < 1024; ++i) a[i] = (i % 2 ? -1e6f : 1e6f) + 0.001f * i;
  EXPECT_TRUE(dot_within_bound(dot_f32(a.data(), b.data(), 1024), a.data(), b.data(), 1024));
  EXPECT_TRUE(
      dot_within_bound(scalar::dot_f32(a.data(), b.data(), 1024), a.data(), b.data(), 1024));
}

using AxpyFn = void (*)(float, const float*, float*, int64_t);
void check_axpy(AxpyFn axpy) {
  const float alpha = -0.7310586f;
  for (int64_t n : kSizes) {
    const std::vector<float> x = random_vector(n, 3), y0 = random_vector(n + 1, 4);
    std::vector<float> y = y0;
    axpy(alpha, x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ax = static_cast<double>(alpha) * x[i];
      const double exact = y0[i] + ax;
      // Unfused: two roundings; fused: one. Either way within 2u(|y| + |alpha x|).
      const double bound = 2.0 * std::ldexp(1.0, -24) * (std::fabs(y0[i]) + std::fabs(ax)) * 1.001;
      ASSERT_LE(std::fabs(y[i] - exact), bound) << "n " << n << " i " << i;
    }
    EXPECT_EQ(y[n], y0[n]) << "wrote past the end, n " << n;
  }
}

TEST(Axpy, Scalar) {
  check_axpy(scalar::axpy_f32);
}
TEST(Axpy, Avx2) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  check_axpy(avx2::axpy_f32);
}
TEST(Axpy, Dispatched) {
  check_axpy(axpy_f32);
}

using MultiFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*);
void check_multi(MultiFn multi) {
  for (int64_t n : {1, 9, 16, 17, 256, 1024}) {
    for (int64_t n_vecs : {1, 3, 4, 5, 8, 9}) {
      const int64_t stride = n + 3;
      const std::vector<float> w = random_vector(n, 5), x = random_vector(stride * n_vecs, 6);
      std::vector<float> out(n_vecs + 1, 0.f);
      out[n_vecs] = 3.f;
      multi(w.data(), n, x.data(), stride, n_vecs, out.data());
      for (int64_t v = 0; v < n_vecs; ++v) {
        EXPECT_TRUE(dot_within_bound(out[v], w.data(), x.data() + v * stride, n))
            << "n " << n << " vector " << v << " of " << n_vecs;
      }
      EXPECT_EQ(out[n_vecs], 3.f);
    }
  }
}

TEST(DotF32Multi, Scalar) {
  check_multi(scalar::dot_f32_multi_add);
}
TEST(DotF32Multi, Avx2) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  check_multi(avx2::dot_f32_multi_add);
}

TEST(Dispatch, ReportsAvx2WhenTheCpuHasIt) {
  __builtin_cpu_init();
  const bool expected = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                        __builtin_cpu_supports("f16c");
  EXPECT_EQ(cpu_has_avx2(), expected);
}

}  // namespace
}  // namespace rl::quant
