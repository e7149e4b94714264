// Dequantisation against ggml's own output (quants.gguf "T.deq"), compared as float bit
// patterns, for the reference decoder and the AVX2 decoder; error handling of bad arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden.h"
#include "quant/kernels.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::quant {
namespace {

using testing::bits_of;
using testing::Golden;
using testing::kGoldenCols;
using testing::kGoldenRows;
using testing::load_golden;

// Number of values whose bits differ; the first few are reported.
int count_bit_mismatches(const Golden& g, int64_t row, const std::vector<float>& got) {
  int bad = 0;
  for (int64_t i = 0; i < kGoldenCols; ++i) {
    const float want = g.deq_row(row)[i];
    if (bits_of(got[i]) != bits_of(want)) {
      if (++bad <= 5) {
        ADD_FAILURE() << g.name << " row " << row << " value " << i << ": got " << got[i] << " (0x"
                      << std::hex << bits_of(got[i]) << "), ggml " << want << " (0x"
                      << bits_of(want) << std::dec << ")";
      }
    }
  }
  return bad;
}

class GoldenType : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenType, ReferenceDecoderIsBitExact) {
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  ASSERT_TRUE(is_supported(g.type));
  std::vector<float> out(kGoldenCols);
  for (int64_t r = 0; r < kGoldenRows; ++r) {
    dequantize_row(g.type, g.q_row(r), out.data(), kGoldenCols);
    EXPECT_EQ(count_bit_mismatches(g, r, out), 0) << g.name << " row " << r;
  }
}

TEST_P(GoldenType, Avx2DecoderIsBitExact) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  std::vector<float> out(kGoldenCols + 1);
  for (int64_t r = 0; r < kGoldenRows; ++r) {
    out.back() = 12345.f;  // must stay untouched
    avx2::decode_row(g.type, g.q_row(r), out.data(), kGoldenCols);
    EXPECT_EQ(out.back(), 12345.f);
    out.resize(kGoldenCols);
    EXPECT_EQ(count_bit_mismatches(g, r, out), 0) << g.name << " row " << r;
    out.resize(kGoldenCols + 1);
  }
}

TEST_P(GoldenType, DispatchedDecoderIsBitExact) {
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  std::vector<float> out(kGoldenCols);
  for (int64_t r = 0; r < kGoldenRows; ++r) {
    std::fill(out.begin(), out.end(), std::nanf(""));
    decode_row(g.type, g.q_row(r), out.data(), kGoldenCols);
    EXPECT_EQ(count_bit_mismatches(g, r, out), 0) << g.name << " row " << r;
  }
}

// Dense types have no blocks: any length and offset must decode, including the vector tails.
TEST(Avx2Decoder, DenseTypesAtOddLengths) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  for (const char* name : {"f32", "f16", "bf16"}) {
    const Golden g = load_golden(name);
    ASSERT_NE(g.q, nullptr);
    const int64_t elem = block_shape(g.type).block_bytes;
    for (int64_t first : {0, 3}) {
      for (int64_t n : {1, 7, 9, 13, 1001}) {
        std::vector<float> out(n + 1, 5.f);
        avx2::decode_row(g.type, g.q_row(1) + first * elem, out.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(bits_of(out[i]), bits_of(g.deq_row(1)[first + i]))
              << name << " first " << first << " n " << n << " i " << i;
        }
        EXPECT_EQ(out[n], 5.f) << "wrote past the end";
      }
    }
  }
}

// With x = e_i (one-hot) a dot product must return weight i exactly: every other term is a
// signed zero. This checks that each kernel decodes every weight bit-exactly in place (up to
// the sign of zero), not only that the sums are close.
TEST_P(GoldenType, OneHotDotReturnsEachWeight) {
  const Golden g = load_golden(GetParam());
  ASSERT_NE(g.q, nullptr);
  std::vector<float> x(kGoldenCols, 0.f);
  for (int64_t r : {0, 3}) {
    int bad_scalar = 0, bad_dispatch = 0;
    for (int64_t i = 0; i < kGoldenCols; ++i) {
      x[i] = 1.f;
      const float want = g.deq_row(r)[i];
      const float scalar = dot_row_scalar(g.type, g.q_row(r), x.data(), kGoldenCols);
      const float dispatched = dot_row(g.type, g.q_row(r), x.data(), kGoldenCols);
      if (scalar != want && ++bad_scalar <= 3) {
        ADD_FAILURE() << g.name << " scalar, row " << r << " i " << i << ": " << scalar
                      << " != " << want;
      }
      if (dispatched != want && ++bad_dispatch <= 3) {
        ADD_FAILURE() << g.name << " dot_row, row " << r << " i " << i << ": " << dispatched
                      << " != " << want;
      }
      x[i] = 0.f;
    }
    EXPECT_EQ(bad_scalar, 0);
    EXPECT_EQ(bad_dispatch, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenType, ::testing::ValuesIn(testing::golden_type_names()),
                         [](const auto& info) { return info.param; });

TEST(Golden, FileListsExactlyTheSupportedTypes) {
  const gguf::Array* types = testing::golden_file().get_array("quants.types");
  ASSERT_NE(types, nullptr);
  std::vector<std::string> names;
  for (const auto& v : types->items) names.push_back(v.as_string() ? *v.as_string() : "?");
  EXPECT_EQ(names, testing::golden_type_names());
}

TEST(Golden, TinyScaleBlockIsExercised) {
  // README §1: row 3, columns 512..767 are scaled by 1e-3; make sure the golden data really
  // has small values there, so the bit-exact tests cover tiny block scales.
  const Golden g = load_golden("q4_K");
  ASSERT_NE(g.q, nullptr);
  float max_abs = 0;
  for (int64_t i = 512; i < 768; ++i) max_abs = std::max(max_abs, std::fabs(g.deq_row(3)[i]));
  EXPECT_GT(max_abs, 0.f);
  EXPECT_LT(max_abs, 0.1f);
}

TEST(Supported, ExactlyTheFifteenTypes) {
  for (const auto& name : testing::golden_type_names()) {
    EXPECT_TRUE(is_supported(*gguf::type_from_name(name))) << name;
  }
  for (TensorType t :
       {TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_1, TensorType::Q8_K, TensorType::IQ1_S,
        TensorType::IQ2_S, TensorType::IQ3_S, TensorType::IQ1_M, TensorType::I8, TensorType::F64,
        TensorType::MXFP4, static_cast<TensorType>(4), static_cast<TensorType>(1000)}) {
    EXPECT_FALSE(is_supported(t)) << static_cast<uint32_t>(t);
  }
}

// Runs f, expecting an rl::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no rl::Error thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

TEST(Errors, UnsupportedTypeIsNamed) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(256), x(256);
  expect_error([&] { dequantize_row(TensorType::Q4_1, src.data(), dst.data(), 32); },
               {"q4_1", "not supported"});
  expect_error([&] { dequantize_row(TensorType::IQ2_S, src.data(), dst.data(), 256); }, {"iq2_s"});
  expect_error([&] { dequantize_row(static_cast<TensorType>(77), src.data(), dst.data(), 32); },
               {"77"});
  expect_error([&] { dot_row(TensorType::Q5_1, src.data(), x.data(), 32); }, {"q5_1"});
  expect_error([&] { dot_row_scalar(TensorType::IQ1_M, src.data(), x.data(), 256); }, {"iq1_m"});
  expect_error([&] { fill_random_row(TensorType::Q8_K, 1, 1.f, src.data(), 256); }, {"q8_K"});
}

TEST(Errors, PartialBlockIsRejected) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(512), x(512);
  expect_error([&] { dequantize_row(TensorType::Q4_K, src.data(), dst.data(), 200); },
               {"q4_K", "200", "256"});
  expect_error([&] { dequantize_row(TensorType::Q8_0, src.data(), dst.data(), 33); },
               {"q8_0", "33", "32"});
  expect_error([&] { dequantize_row(TensorType::F16, src.data(), dst.data(), -1); }, {"f16"});
  expect_error([&] { dot_row(TensorType::IQ2_XXS, src.data(), x.data(), 255); }, {"iq2_xxs"});
  expect_error([&] { dot_row_scalar(TensorType::Q6_K, src.data(), x.data(), 100); }, {"q6_K"});
  float out[2];
  expect_error([&] { dot_rows_batch(TensorType::IQ4_NL, src.data(), 31, x.data(), 31, 2, out); },
               {"iq4_nl"});
  expect_error([&] { fill_random_row(TensorType::Q3_K, 1, 1.f, src.data(), 128); }, {"q3_K"});
}

TEST(Errors, ZeroValuesAreFine) {
  std::vector<float> x(1);
  for (const auto& name : testing::golden_type_names()) {
    const TensorType t = *gguf::type_from_name(name);
    dequantize_row(t, nullptr, nullptr, 0);
    EXPECT_EQ(dot_row(t, nullptr, x.data(), 0), 0.f) << name;
    EXPECT_EQ(dot_row_scalar(t, nullptr, x.data(), 0), 0.f) << name;
  }
}

}  // namespace
}  // namespace rl::quant
