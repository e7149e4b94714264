// The golden quantisation vectors of ../shared/testdata/quants/quants.gguf (README §1): for each
// type T, "T.q" holds 4 rows of 2048 values quantised by ggml and "T.deq" ggml's own float32
// dequantisation of them. Read through the gguf module's reader.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/quant.h"

namespace rl::quant::testing {

inline constexpr int64_t kGoldenCols = 2048;
inline constexpr int64_t kGoldenRows = 4;

// README §1, in file order.
inline const std::vector<std::string>& golden_type_names() {
  static const std::vector<std::string> names = {
      "f32",  "f16",  "bf16",    "q8_0",   "q4_0",    "q4_K",   "q5_K",  "q6_K",
      "q2_K", "q3_K", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq4_xs", "iq4_nl"};
  return names;
}

inline const gguf::File& golden_file() {
  static const gguf::File file =
      gguf::File::open(std::string(RL_SHARED_DIR) + "/testdata/quants/quants.gguf");
  return file;
}

struct Golden {
  std::string name;
  TensorType type;
  const uint8_t* q;  // kGoldenRows rows of row_bytes each
  uint64_t row_bytes;
  const float* deq;  // kGoldenRows x kGoldenCols
  const uint8_t* q_row(int64_t r) const { return q + r * row_bytes; }
  const float* deq_row(int64_t r) const { return deq + r * kGoldenCols; }
};

// Looks the tensors up and checks their shapes; fails the calling test if anything is off.
inline Golden load_golden(const std::string& name) {
  const gguf::File& f = golden_file();
  const gguf::TensorInfo* q = f.find_tensor(name + ".q");
  const gguf::TensorInfo* deq = f.find_tensor(name + ".deq");
  EXPECT_NE(q, nullptr) << name;
  EXPECT_NE(deq, nullptr) << name;
  if (q == nullptr || deq == nullptr) return {};
  const auto type = gguf::type_from_name(name);
  EXPECT_TRUE(type.has_value()) << name;
  EXPECT_EQ(q->type, type.value_or(TensorType::F32)) << name;
  EXPECT_EQ(deq->type, TensorType::F32) << name;
  EXPECT_EQ(q->ne[0], kGoldenCols);
  EXPECT_EQ(q->n_rows(), kGoldenRows);
  EXPECT_EQ(deq->ne[0], kGoldenCols);
  EXPECT_EQ(deq->n_rows(), kGoldenRows);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(deq->data) % alignof(float), 0u);
  return {name, q->type, q->data, q->row_bytes(), reinterpret_cast<const float*>(deq->data)};
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Deterministic activations: approximately N(0, 1) from a 64-bit LCG (independent of the code
// under test).
inline std::vector<float> random_vector(int64_t n, uint64_t seed) {
  std::vector<float> x(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (auto& v : x) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      sum += static_cast<double>(s >> 11) / 9007199254740992.0;  // U[0,1)
    }
    v = static_cast<float>((sum - 2.0) * std::sqrt(3.0));
  }
  return x;
}

// Error bound for a float32 dot product of n terms whose every product passes through at most
// `depth` roundings (the summation structure of the kernels, documented in dot.cpp and
// dot_avx2.cpp): |computed - exact| <= gamma(depth) * sum |w_i x_i| (Higham, Thm 3.1 style).
inline double dot_depth(int64_t n) {
  return 256.0 + static_cast<double>(n) / 32.0 + 16.0;
}
inline double gamma(double depth) {
  const double u = std::ldexp(1.0, -24);
  return depth * u / (1.0 - depth * u);
}

struct Exact {
  double value = 0;
  double abs_sum = 0;  // sum |w_i x_i|
};
inline Exact exact_dot(const float* w, const float* x, int64_t n) {
  Exact e;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(w[i]) * static_cast<double>(x[i]);  // exact
    e.value += p;
    e.abs_sum += std::fabs(p);
  }
  return e;
}

// Checks `got` against the float64 dot product of the float32 weights w and activations x.
inline ::testing::AssertionResult dot_within_bound(float got, const float* w, const float* x,
                                                   int64_t n) {
  const Exact e = exact_dot(w, x, n);
  // float64 summation error of the reference itself: n * 2^-53 * abs_sum, far below the bound.
  const double bound = gamma(dot_depth(n)) * e.abs_sum + n * std::ldexp(e.abs_sum, -52) + 1e-30;
  const double err = std::fabs(static_cast<double>(got) - e.value);
  if (std::isfinite(got) && err <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", exact " << e.value << ", error "
                                       << err << " > bound " << bound << " (n = " << n << ")";
}

}  // namespace rl::quant::testing
