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
#include "quant/quant.h"

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
                             quant::tables::kvalues_iq4nl.data(), quant::tables::iq2xs_grid.data()};
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
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q2_K", "q3_K",
                                           "q4_K", "q5_K", "q6_K", "iq2_xxs", "iq2_xs", "iq3_xxs",
                                           "iq4_xs", "iq4_nl"));

// Regroups `bytes` quantised bytes with only bit `bit` set: the number of bits set in the body
// (every byte of which starts at 0xFF, so each must be written) and, in *at, the last of them.
int regrouped_bits(void (*regroup)(const uint8_t*, uint8_t*), int bytes, int bit, int* at) {
  std::vector<uint8_t> file_qs(bytes, 0), body(bytes, 0xff);
  file_qs[bit / 8] = static_cast<uint8_t>(1u << (bit % 8));
  regroup(file_qs.data(), body.data());
  int set = 0;
  for (int i = 0; i < bytes * 8; ++i)
    if ((body[i / 8] >> (i % 8)) & 1) ++set, *at = i;
  return set;
}

// Every bit of an IQ2_XXS block's 64 quantised bytes lands on its own bit of the regrouped body,
// where fmt::iq2xxs looks for it (the grid index, sign field or scale of its sub-block and
// group); the decoders' bit-exactness with ggml above goes through the same regrouping.
TEST(CudaLayout, Iq2xxsRegroupedOneToOne) {
  for (int bit = 0; bit < 64 * 8; ++bit) {
    int at = -1;
    ASSERT_EQ(regrouped_bits(regroup_iq2xxs, 64, bit, &at), 1) << "file bit " << bit;
    // Where the file's bit must go: sub-block s = byte / 8; bytes 0-3 are group l's index,
    // bytes 4-7 bits 0-27 group l's signs (l = bit / 7), bits 28-31 the scale.
    const int s = bit / 64, in_sub = bit % 64;
    int want;
    if (in_sub < 32) {
      want = 128 * (in_sub / 8) + 8 * s + in_sub % 8;  // quarter l, byte s
    } else if (in_sub - 32 < 28) {
      const int l = (in_sub - 32) / 7, k = (in_sub - 32) % 7;
      want = 128 * l + 64 + 7 * s + k;  // quarter l, bit 7s + k of bytes 8-14
    } else {
      want = 128 * (s / 2) + 120 + 4 * (s % 2) + (in_sub - 60);  // quarter s / 2, byte 15
    }
    EXPECT_EQ(at, want) << "file bit " << bit;
  }
}

// The tensor-core IQ2_XXS and IQ2_XS decoders (tc_gemv.cuh) encode each grid magnitude as one of
// three codes: a grid must hold no other byte.
template <class Grid>
void expect_three_magnitudes(const Grid& grid) {
  for (size_t i = 0; i < grid.size(); ++i)
    for (int j = 0; j < 8; ++j) {
      const int m = static_cast<int>((grid[i] >> (8 * j)) & 0xff);
      ASSERT_TRUE(m == 8 || m == 25 || m == 43) << "entry " << i << " byte " << j << ": " << m;
    }
}

TEST(CudaLayout, Iq2xxsGridHasThreeMagnitudes) {
  expect_three_magnitudes(quant::tables::iq2xxs_grid);
}

// IQ2_XS's 72 bytes after d: 32 16-bit fields (group l of sub-block s at bytes 8s + 2l, + 1), then
// 8 scale bytes, which stay where they are.
TEST(CudaLayout, Iq2xsRegroupedOneToOne) {
  for (int bit = 0; bit < 72 * 8; ++bit) {
    int at = -1;
    ASSERT_EQ(regrouped_bits(regroup_iq2xs, 72, bit, &at), 1) << "file bit " << bit;
    const int byte = bit / 8;
    int want = bit;
    if (byte < 64) {
      const int s = byte / 8, l = (byte % 8) / 2;
      want = 8 * (16 * l + 2 * s + byte % 2) + bit % 8;  // quarter l, field s
    }
    EXPECT_EQ(at, want) << "file bit " << bit;
  }
}

TEST(CudaLayout, Iq2xsGridHasThreeMagnitudes) {
  expect_three_magnitudes(quant::tables::iq2xs_grid);
}

// IQ4_NL's 16 index bytes: value v's index, the low nibble of byte v or the high nibble of byte
// v - 16, lands on nibble v of the body.
TEST(CudaLayout, Iq4nlRegroupedOneToOne) {
  for (int bit = 0; bit < 16 * 8; ++bit) {
    int at = -1;
    ASSERT_EQ(regrouped_bits(regroup_iq4nl, 16, bit, &at), 1) << "file bit " << bit;
    const int v = bit / 8 + (bit % 8 < 4 ? 0 : 16);
    EXPECT_EQ(at, 4 * v + bit % 4) << "file bit " << bit;
  }
}

// Q4_0's 16 bytes: value v (the low nibble of byte v or the high nibble of byte v - 16) lands in
// word t = v / 8, byte v % 4, low nibble for v % 8 < 4.
TEST(CudaLayout, Q4_0RegroupedOneToOne) {
  for (int bit = 0; bit < 16 * 8; ++bit) {
    int at = -1;
    ASSERT_EQ(regrouped_bits(regroup_q4_0, 16, bit, &at), 1) << "file bit " << bit;
    const int v = bit / 8 + (bit % 8 < 4 ? 0 : 16);
    const int want = 8 * (4 * (v / 8) + v % 4) + 4 * ((v % 8) / 4) + bit % 4;
    EXPECT_EQ(at, want) << "file bit " << bit;
  }
}

// Likewise IQ3_XXS's 96 quantised bytes: 64 grid indices (8 per sub-block, two per group), then
// a sign / scale word per sub-block.
TEST(CudaLayout, Iq3xxsRegroupedOneToOne) {
  for (int bit = 0; bit < 96 * 8; ++bit) {
    int at = -1;
    ASSERT_EQ(regrouped_bits(regroup_iq3xxs, 96, bit, &at), 1) << "file bit " << bit;
    int want;
    if (bit < 64 * 8) {  // index byte j = bit / 8 of sub-block j / 8, group (j % 8) / 2
      const int j = bit / 8, s = j / 8, l = (j % 8) / 2;
      want = 128 * l + 8 * (2 * s + j % 2) + bit % 8;
    } else {
      const int s = (bit - 512) / 32, in_word = (bit - 512) % 32;
      if (in_word < 28) {
        const int l = in_word / 7, k = in_word % 7;
        want = 512 + 64 * l + 7 * s + k;
      } else {
        want = 512 + 64 * (s / 2) + 56 + 4 * (s % 2) + (in_word - 28);
      }
    }
    EXPECT_EQ(at, want) << "file bit " << bit;
  }
}

// The tensor-core IQ3_XXS decoder negates grid bytes as (g ^ 0xFF) + 1, which stays within its
// byte for 1 <= g <= 127.
TEST(CudaLayout, Iq3xxsGridBytesArePositiveInt8) {
  for (size_t i = 0; i < quant::tables::iq3xxs_grid.size(); ++i)
    for (int j = 0; j < 4; ++j) {
      const int m = static_cast<int>((quant::tables::iq3xxs_grid[i] >> (8 * j)) & 0xff);
      ASSERT_TRUE(m >= 1 && m <= 127) << "entry " << i << " byte " << j << ": " << m;
    }
}

// PTX prmt (__byte_perm) in its default mode, as the PTX ISA defines it: result byte k is byte
// (nibble k of s) & 7 of the eight bytes y:x.
uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (uint64_t{y} << 32) | x;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k)
    r |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * k)) & 7))) & 0xff) << (8 * k);
  return r;
}

// Weight j of a grid entry with sign field k, by ggml's definition: the grid byte, negated where
// bit j of ksigns_iq2xs[k] is set.
int signed_weight(uint64_t grid_entry, int k, int j) {
  const int m = static_cast<int>((grid_entry >> (8 * j)) & 0xff);
  return (quant::tables::ksigns_iq2xs[k] >> j) & 1 ? -m : m;
}

// The tensor-core IQ2_XXS decoder's byte permute gives every signed weight of every (grid entry,
// sign field) pair.
TEST(CudaLayout, Iq2xxsPermuteTablesGiveSignedWeights) {
  const TcIqTables t = tc_iq_tables();
  for (int i = 0; i < 256; ++i)
    for (int k = 0; k < 128; ++k) {
      const uint32_t select = t.iq2xxs_codes[i] | t.iq2xxs_sign_nibbles[k];
      const uint32_t w[2] = {byte_perm(kIq2Magnitudes, kIq2Negated, select),
                             byte_perm(kIq2Magnitudes, kIq2Negated, select >> 16)};
      for (int j = 0; j < 8; ++j)
        ASSERT_EQ(static_cast<int8_t>(w[j / 4] >> (8 * (j % 4))),
                  signed_weight(quant::tables::iq2xxs_grid[i], k, j))
            << "entry " << i << " signs " << k << " weight " << j;
    }
}

// IQ2_XS's codes table with the same sign nibbles, likewise, over its 512 grid entries.
TEST(CudaLayout, Iq2xsPermuteTablesGiveSignedWeights) {
  const TcIqTables t = tc_iq_tables();
  for (int i = 0; i < 512; ++i)
    for (int k = 0; k < 128; ++k) {
      const uint32_t select = t.iq2xs_codes[i] | t.iq2xxs_sign_nibbles[k];
      const uint32_t w[2] = {byte_perm(kIq2Magnitudes, kIq2Negated, select),
                             byte_perm(kIq2Magnitudes, kIq2Negated, select >> 16)};
      for (int j = 0; j < 8; ++j)
        ASSERT_EQ(static_cast<int8_t>(w[j / 4] >> (8 * (j % 4))),
                  signed_weight(quant::tables::iq2xs_grid[i], k, j))
            << "entry " << i << " signs " << k << " weight " << j;
    }
}

// IQ3_XXS's bytewise (g ^ m) + (m & 1) with the sign-byte masks, likewise: two grid entries per
// 8-weight group, the first with the masks' low word.
TEST(CudaLayout, Iq3xxsSignMasksGiveSignedWeights) {
  const TcIqTables t = tc_iq_tables();
  for (int i = 0; i < 256; ++i)
    for (int k = 0; k < 128; ++k)
      for (int half = 0; half < 2; ++half) {
        const uint32_t g = quant::tables::iq3xxs_grid[i];
        const uint32_t m = static_cast<uint32_t>(t.sign_bytes[k] >> (32 * half));
        const uint32_t w = (g ^ m) + (m & 0x01010101u);
        for (int j = 0; j < 4; ++j) {
          const int want = signed_weight(uint64_t{g} << (32 * half), k, 4 * half + j);
          ASSERT_EQ(static_cast<int8_t>(w >> (8 * j)), want)
              << "entry " << i << " signs " << k << " weight " << 4 * half + j;
        }
      }
}

// Every bit of an IQ4_XS file block (d, scales_h, scales_l, qs) lands on its own bit of the
// body or the tail (bits 0-1023 the body, 1024-1087 the tail), where ggml's layout puts its meaning
// and layout.h says it goes.
TEST(CudaLayout, Iq4xsRegroupedOneToOne) {
  for (int bit = 0; bit < 136 * 8; ++bit) {
    std::vector<uint8_t> file(136, 0), body(128, 0xff), tail(8, 0xff);
    file[bit / 8] = static_cast<uint8_t>(1u << (bit % 8));
    regroup_iq4xs(file.data(), body.data(), tail.data());
    int set = 0, at = -1;
    for (int i = 0; i < 128 * 8; ++i)
      if ((body[i / 8] >> (i % 8)) & 1) ++set, at = i;
    for (int i = 0; i < 8 * 8; ++i)
      if ((tail[i / 8] >> (i % 8)) & 1) ++set, at = 1024 + i;
    ASSERT_EQ(set, 1) << "file bit " << bit;
    int want;
    if (bit < 16) {  // d
      want = 1024 + bit;
    } else if (bit < 32) {  // scales_h: bits 2s, 2s + 1 of sub-block s
      const int s = (bit - 16) / 2, i = (bit - 16) % 2, p = s % 4;
      const int nibble = p == 0 ? 0 : p == 1 ? 2 : p == 2 ? 1 : 3;
      want = 1024 + 16 + 4 * nibble + 2 * (s / 4) + i;
    } else if (bit < 64) {  // scales_l: nibble s % 2 of byte s / 2
      const int s = (bit - 32) / 4, i = (bit - 32) % 4;
      want = 1024 + 32 + 8 * (s % 4) + 4 * (s / 4) + i;
    } else {  // qs byte 16s + v: values v (low nibble) and v + 16 (high) of sub-block s
      const int byte = (bit - 64) / 8, s = byte / 16, v = byte % 16 + 16 * ((bit % 8) / 4);
      want = 8 * (32 * (v / 8) + 4 * s) + 4 * (v % 8) + bit % 4;
    }
    EXPECT_EQ(at, want) << "file bit " << bit;
  }
}

// The tensor-core IQ4_XS decoder's three byte permutes (tc_gemv.cuh) of its table words and
// selectors (fmt::iq4xs) give kvalues_iq4nl of every index, in both halves of a word and in
// every combination of four.
TEST(CudaLayout, Iq4xsPermutesGiveTableValues) {
  const auto& kv = quant::tables::kvalues_iq4nl;
  using fmt::iq4xs::table_word;
  for (uint32_t four = 0; four < 65536; ++four)
    for (int half = 0; half < 2; ++half) {
      const uint2 sel = fmt::iq4xs::selectors(four << (16 * half) | (half ? 0x9e37u : 0x79b90000u));
      const uint32_t index = sel.x >> (16 * half), pick = sel.y >> (16 * half);
      const uint32_t a = byte_perm(byte_perm(table_word(0), table_word(4), index),
                                   byte_perm(table_word(8), table_word(12), index), pick);
      for (int j = 0; j < 4; ++j)
        ASSERT_EQ(static_cast<int8_t>(a >> (8 * j)), kv[(four >> (4 * j)) & 15])
            << "indices " << four << " half " << half << " value " << j;
    }
}

// The unpacking of the 6-bit scales from the regrouped tail that both decoders use
// (fmt::iq4xs::scale_bytes) gives ggml's ls of every sub-block.
TEST(CudaLayout, Iq4xsScalesFromTail) {
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> file(136), body(128), tail(8);
    for (auto& b : file) b = static_cast<uint8_t>(next() >> 24);
    regroup_iq4xs(file.data(), body.data(), tail.data());
    uint2 words;
    std::memcpy(&words, tail.data(), 8);
    const uint2 both = fmt::iq4xs::scale_bytes(words);
    const uint32_t sc[2] = {both.x, both.y};
    const uint32_t scales_h = file[2] | file[3] << 8;
    for (int s = 0; s < 8; ++s) {
      const int ls = ((file[4 + s / 2] >> (4 * (s % 2))) & 15) | ((scales_h >> (2 * s)) & 3) << 4;
      ASSERT_EQ(static_cast<int>((sc[s / 4] >> (8 * (s % 4))) & 0xff), ls)
          << "trial " << trial << " sub-block " << s;
    }
  }
}

// The GPU decodes what the CPU engine decodes (rl::quant), no type more or fewer, with a layout
// of the same block shape: a model the CPU engine loads is never refused by the CUDA backend for
// its types alone.
TEST(CudaLayout, EveryTypeTheCpuDecodes) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto t = static_cast<TensorType>(id);
    const bool cpu = quant::is_supported(t);
    const auto layout = block_layout(t);
    const bool decoder = fmt::dispatch(t, []<TensorType>() {});
    EXPECT_EQ(layout.has_value(), cpu) << gguf::type_name(t);
    EXPECT_EQ(decoder, cpu) << gguf::type_name(t);
    if (!cpu || !layout) continue;
    const auto traits = gguf::type_traits(t);  // bytes per value as the file's
    ASSERT_TRUE(traits.has_value()) << gguf::type_name(t);
    EXPECT_EQ(static_cast<uint32_t>(layout->block_bytes) * traits->block_size,
              traits->block_bytes * static_cast<uint32_t>(layout->values))
        << gguf::type_name(t);
  }
}

TEST(CudaLayout, SplitKeepsEveryByte) {
  // Body + tail sizes add up to the block, and split_blocks moves the scale bytes to the tail
  // (the regrouped bodies as tested above).
  auto regroup_of = [](TensorType t) -> void (*)(const uint8_t*, uint8_t*) {
    switch (t) {
      case TensorType::IQ2_XXS:
        return regroup_iq2xxs;
      case TensorType::IQ2_XS:
        return regroup_iq2xs;
      case TensorType::IQ3_XXS:
        return regroup_iq3xxs;
      case TensorType::IQ4_NL:
        return regroup_iq4nl;
      case TensorType::Q4_0:
        return regroup_q4_0;
      default:
        return nullptr;
    }
  };
  for (auto t :
       {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q6_K,
        TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ3_XXS, TensorType::IQ4_NL}) {
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
      if (auto regroup = regroup_of(t)) {
        const std::vector<uint8_t> file = rest;
        regroup(file.data(), rest.data());
      }
      EXPECT_EQ(0, std::memcmp(body.data() + b * l.body_bytes(), rest.data(), rest.size()));
    }
  }
  EXPECT_FALSE(block_layout(TensorType::Q4_1).has_value());
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(CudaDecoder, NotBuilt) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif
