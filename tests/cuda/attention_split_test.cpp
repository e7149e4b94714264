// The split-size rule of decode attention (host logic; no GPU needed): the smallest split size
// whose splits each get a CTA of their own, else the largest. The expectations are worked out by
// hand from that rule for an H200-like grid (132 CTAs per KV head in float32, 66 in bf16).
#include <gtest/gtest.h>

#ifdef RL_HAVE_CUDA
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/forward.h"
#include "util/error.h"

namespace rl::cuda {
namespace {

TEST(AttentionSplit, SmallestSplitWhoseSplitsAllGetACta) {
  const AttnGrid f32 = {{32, 132}, {64, 132}, {128, 132}, {256, 132}, {512, 132}, {1024, 132}};
  // {position + 1, split}: 132 x 32 = 4224, 132 x 64 = 8448, 132 x 128 = 16896, 132 x 256 = 33792,
  // 132 x 512 = 67584, 132 x 1024 = 135168; beyond that the largest.
  const std::vector<std::pair<int64_t, int>> f32_cases = {
      {1, 32},      {4096, 32},    {4224, 32},     {4225, 64},     {8448, 64},
      {8449, 128},  {16896, 128},  {16897, 256},   {33792, 256},   {33793, 512},
      {67584, 512}, {67585, 1024}, {135168, 1024}, {135169, 1024}, {262144, 1024}};
  for (const auto& [n, split] : f32_cases)
    EXPECT_EQ(attention_split_for(n - 1, f32, 0), split) << n << " positions, float32";

  const AttnGrid bf16 = {{64, 66}, {128, 66}, {256, 66}};  // 66 x 64 = 4224
  const std::vector<std::pair<int64_t, int>> bf16_cases = {{1, 64},     {4224, 64},  {4225, 128},
                                                           {8448, 128}, {8449, 256}, {262144, 256}};
  for (const auto& [n, split] : bf16_cases)
    EXPECT_EQ(attention_split_for(n - 1, bf16, 0), split) << n << " positions, bf16";
}

TEST(AttentionSplit, ForcedSizeMustBeOneOfTheGrid) {
  const AttnGrid f32 = {{32, 132}, {64, 132}, {128, 132}, {256, 132}};
  const AttnGrid bf16 = {{64, 66}, {128, 66}, {256, 66}};
  EXPECT_EQ(attention_split_for(262143, f32, 32), 32);
  EXPECT_EQ(attention_split_for(0, bf16, 256), 256);
  try {
    attention_split_for(0, bf16, 32);
    ADD_FAILURE() << "split 32 accepted for a bf16 grid";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RL_ENGINE_ATTN_BLK=32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64, 128, 256"), std::string::npos) << e.what();
  }
}

TEST(AttentionSplit, EnvironmentValues) {
  EXPECT_EQ(parse_attention_split(nullptr), 0);
  EXPECT_EQ(parse_attention_split(""), 0);
  for (int s : {32, 64, 128, 256, 512, 1024})
    EXPECT_EQ(parse_attention_split(std::to_string(s).c_str()), s);
  for (const char* bad : {"16", "2048", "128k", " 64", "0", "abc"}) {
    try {
      parse_attention_split(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RL_ENGINE_ATTN_BLK"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("32, 64, 128, 256, 512, 1024"), std::string::npos)
          << e.what();
    }
  }
}

TEST(AttentionSplit, PartialsAreTheLargestCtaCount) {
  EXPECT_EQ(most_ctas({{32, 132}, {64, 140}, {128, 90}}), 140);
  EXPECT_EQ(most_ctas({}), 1);
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(AttentionSplit, NotBuilt) {
  GTEST_SKIP() << "built without CUDA";
}
#endif
