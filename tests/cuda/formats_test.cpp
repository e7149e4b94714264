// The CUDA decoders (src/cuda/formats.cuh) run on the host against ggml's own dequantised values
// (quants.gguf "T.deq"), compared bit for bit. Needs no GPU: the same source is compiled for the
// device. The device side is checked by `redlite selftest` (selftest_test.cpp).
#include <gtest/gtest.h>

#ifdef RL_HAVE_CUDA
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/formats.cuh"
#include "cuda/layout.h"
#include "gguf/gguf.h"
#include "quant/iq_tables.h"

namespace rl::cuda {
namespace {

using gguf::TensorType;

class CudaDecoder : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaDecoder, BitExactWithGgml) {
  const std::string path = std::string(RL_SHARED_DIR) + "/testdata/quants/quants.gguf";
  const gguf::File file = gguf::File::open(path);
  const std::string name = GetParam();
  const gguf::TensorInfo* q = file.find_tensor(name + ".q");
  const gguf::TensorInfo* deq = file.find_tensor(name + ".deq");
  ASSERT_TRUE(q && deq) << name;
  ASSERT_EQ(q->n_elements(), deq->n_elements());
  const BlockLayout layout = *block_layout(q->type);
  const int64_t n_blocks = q->n_elements() / layout.values;
  // 16-byte aligned copies of the split layout, as on the device.
  std::vector<uint4> body((n_blocks * layout.body_bytes() + 15) / 16 + 1);
  std::vector<uint4> tail((n_blocks * layout.tail_bytes + 15) / 16 + 1);
  split_blocks(layout, q->data, n_blocks, reinterpret_cast<uint8_t*>(body.data()),
               reinterpret_cast<uint8_t*>(tail.data()));
  const fmt::IqTables tables{quant::tables::iq2xxs_grid.data(), quant::tables::iq3xxs_grid.data(),
                             quant::tables::kvalues_iq4nl.data()};
  std::vector<float> got(q->n_elements(), -1.0f);
  const bool ok = fmt::dispatch(q->type, [&]<TensorType T>() {
    fmt::decode_blocks<T>(reinterpret_cast<const uint8_t*>(body.data()),
                          reinterpret_cast<const uint8_t*>(tail.data()), n_blocks, tables,
                          got.data());
  });
  ASSERT_TRUE(ok) << name << " has no CUDA decoder";
  const auto* want = reinterpret_cast<const float*>(deq->data);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0 && ++bad <= 5)
      ADD_FAILURE() << name << " value " << i << ": got " << got[i] << ", ggml " << want[i];
  }
  EXPECT_EQ(bad, 0) << name;
}

INSTANTIATE_TEST_SUITE_P(Types, CudaDecoder,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q2_K", "q3_K", "q4_K",
                                           "q5_K", "q6_K", "iq2_xxs", "iq3_xxs", "iq4_xs"));

// The tensor-core decoder's f16 grid against the byte grid, each f16 decoded here from its
// sign, exponent and mantissa fields.
TEST(CudaLayout, Iq2xxsGridF16HoldsTheMagnitudes) {
  const std::array<uint16_t, 2048> f16 = iq2xxs_grid_f16();
  for (size_t i = 0; i < f16.size(); ++i) {
    const uint16_t h = f16[i];
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    ASSERT_EQ(h >> 15, 0) << "entry " << i / 8 << " value " << i % 8;
    ASSERT_NE(exponent, 0x1f) << "entry " << i / 8 << " value " << i % 8;  // no inf / NaN
    const double value =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
    const double want =
        static_cast<double>((quant::tables::iq2xxs_grid[i / 8] >> (8 * (i % 8))) & 0xff);
    ASSERT_EQ(value, want) << "entry " << i / 8 << " value " << i % 8;
  }
}

// Every high bit of a Q5_K block lands on its own bit of the regrouped qh, where the decoders
// look for it: chunk t = value / 64, the word of its sub-block, bit q5k_high_bit(value % 32).
TEST(CudaLayout, Q5kHighBitsRegroupedOneToOne) {
  for (int value = 0; value < 256; ++value) {
    uint8_t file_qh[32] = {}, qh[32];
    file_qh[value % 32] = static_cast<uint8_t>(1u << (value / 32));  // ggml: bit k of byte l
    regroup_q5k_high_bits(file_qh, qh);
    int set = 0;
    for (uint8_t b : qh) set += __builtin_popcount(b);
    ASSERT_EQ(set, 1) << "value " << value;
    const int word = 2 * (value / 64) + (value / 32) % 2, bit = q5k_high_bit(value % 32);
    const uint32_t w = qh[4 * word] | qh[4 * word + 1] << 8 | qh[4 * word + 2] << 16 |
                       static_cast<uint32_t>(qh[4 * word + 3]) << 24;
    EXPECT_EQ(w, 1u << bit) << "value " << value;
  }
}

TEST(CudaLayout, SplitKeepsEveryByte) {
  // Body + tail sizes add up to the block, and split_blocks moves the scale bytes to the tail.
  for (auto t : {TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q6_K,
                 TensorType::IQ2_XXS, TensorType::IQ3_XXS}) {
    const BlockLayout l = *block_layout(t);
    std::vector<uint8_t> src(2 * l.block_bytes), body(2 * l.body_bytes()), tail(2 * l.tail_bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    split_blocks(l, src.data(), 2, body.data(), tail.data());
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ(0, std::memcmp(tail.data() + b * l.tail_bytes,
                               src.data() + b * l.block_bytes + l.tail_offset, l.tail_bytes));
      std::vector<uint8_t> rest(src.begin() + b * l.block_bytes,
                                src.begin() + (b + 1) * l.block_bytes);
      rest.erase(rest.begin() + l.tail_offset, rest.begin() + l.tail_offset + l.tail_bytes);
      EXPECT_EQ(0, std::memcmp(body.data() + b * l.body_bytes(), rest.data(), rest.size()));
    }
  }
  EXPECT_FALSE(block_layout(TensorType::Q4_0).has_value());
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(CudaDecoder, NotBuilt) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif
