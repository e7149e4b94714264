// fill_random_row: valid blocks (everything decodes finite), a standard deviation near the one
// asked for, determinism per seed, and random quant bits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "golden.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::quant {
namespace {

struct Stats {
  double mean = 0, std = 0;
  bool finite = true;
};
Stats stats(const std::vector<float>& v) {
  Stats s;
  double sum = 0, sum_sq = 0;
  for (float f : v) {
    s.finite = s.finite && std::isfinite(f);
    sum += f;
  }
  s.mean = sum / v.size();
  for (float f : v) sum_sq += (f - s.mean) * (f - s.mean);
  s.std = std::sqrt(sum_sq / v.size());
  return s;
}

class RandomFill : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomFill, DecodesFiniteWithRequestedSpread) {
  const TensorType t = *gguf::type_from_name(GetParam());
  const BlockShape shape = block_shape(t);
  constexpr int64_t n = 16 * 256;
  std::vector<uint8_t> row(n / shape.block_size * shape.block_bytes);
  std::vector<float> values(n);
  for (float stddev : {0.02f, 0.3f, 1.0f}) {
    for (uint64_t seed : {1u, 99u}) {
      fill_random_row(t, seed, stddev, row.data(), n);
      dequantize_row(t, row.data(), values.data(), n);
      const Stats s = stats(values);
      EXPECT_TRUE(s.finite) << GetParam() << " stddev " << stddev;
      EXPECT_GT(s.std, stddev / 2) << GetParam() << " stddev " << stddev << " seed " << seed;
      EXPECT_LT(s.std, stddev * 2) << GetParam() << " stddev " << stddev << " seed " << seed;
      EXPECT_LT(std::fabs(s.mean), stddev) << GetParam() << " stddev " << stddev;
    }
  }
}

TEST_P(RandomFill, DeterministicPerSeedAndDifferentAcrossSeeds) {
  const TensorType t = *gguf::type_from_name(GetParam());
  const BlockShape shape = block_shape(t);
  constexpr int64_t n = 512;
  const size_t bytes = n / shape.block_size * shape.block_bytes;
  std::vector<uint8_t> a(bytes), b(bytes), c(bytes);
  fill_random_row(t, 42, 0.5f, a.data(), n);
  fill_random_row(t, 42, 0.5f, b.data(), n);
  fill_random_row(t, 43, 0.5f, c.data(), n);
  EXPECT_EQ(a, b);
  size_t differing = 0;
  for (size_t i = 0; i < bytes; ++i) differing += a[i] != c[i];
  // Apart from the shared fp16 scales nearly every byte is random: expect most to differ.
  EXPECT_GT(differing, bytes / 2) << GetParam();
}

class RandomFillQuantised : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomFillQuantised, QuantBitsAreRandom) {
  // Every bit position of a block, other than the fp16 super-block scale fields, must take
  // both values across blocks.
  const TensorType t = *gguf::type_from_name(GetParam());
  const BlockShape shape = block_shape(t);
  ASSERT_GT(shape.block_size, 1);
  constexpr int64_t kBlocks = 256;
  std::vector<uint8_t> row(kBlocks * shape.block_bytes);
  fill_random_row(t, 7, 1.f, row.data(), kBlocks * shape.block_size);
  std::vector<uint8_t> ones(shape.block_bytes, 0), zeros(shape.block_bytes, 0);
  for (int64_t b = 0; b < kBlocks; ++b) {
    for (int i = 0; i < shape.block_bytes; ++i) {
      ones[i] |= row[b * shape.block_bytes + i];
      zeros[i] |= static_cast<uint8_t>(~row[b * shape.block_bytes + i]);
    }
  }
  int constant_bytes = 0;
  for (int i = 0; i < shape.block_bytes; ++i) {
    constant_bytes += (ones[i] != 0xFF || zeros[i] != 0xFF);
  }
  // d (2 bytes) and, for Q4_K/Q5_K/Q2_K, dmin (2 bytes) are fixed per row.
  EXPECT_LE(constant_bytes, 4) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RandomFill, ::testing::ValuesIn(testing::golden_type_names()),
                         [](const auto& info) { return info.param; });

// The quantised types: all but the first three (f32, f16, bf16).
INSTANTIATE_TEST_SUITE_P(QuantisedTypes, RandomFillQuantised,
                         ::testing::ValuesIn(testing::golden_type_names().begin() + 3,
                                             testing::golden_type_names().end()),
                         [](const auto& info) { return info.param; });

TEST(RandomFillErrors, BadStddevIsRejected) {
  std::vector<uint8_t> row(1024);
  EXPECT_THROW(fill_random_row(TensorType::Q4_K, 1, 0.f, row.data(), 256), Error);
  EXPECT_THROW(fill_random_row(TensorType::Q4_K, 1, -1.f, row.data(), 256), Error);
  EXPECT_THROW(fill_random_row(TensorType::F32, 1, NAN, row.data(), 256), Error);
  EXPECT_THROW(fill_random_row(TensorType::Q8_0, 1, INFINITY, row.data(), 32), Error);
  EXPECT_THROW(fill_random_row(TensorType::Q6_K, 1, 1e-12f, row.data(), 256), Error);
  EXPECT_THROW(fill_random_row(TensorType::IQ2_XXS, 1, 1e12f, row.data(), 256), Error);
  // d fits fp16 but dmin = 7.5 d would not.
  EXPECT_THROW(fill_random_row(TensorType::Q4_K, 1, 1e7f, row.data(), 256), Error);
}

}  // namespace
}  // namespace rl::quant
