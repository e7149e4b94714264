// The sampler against distributions computed independently in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler.h"
#include "util/error.h"

namespace {

using rl::engine::Sampler;
using rl::engine::SamplerParams;

SamplerParams plain(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max_l = -1e300, sum = 0;
  for (float l : logits) max_l = std::max(max_l, double(l));
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp((l - max_l) / temperature));
  for (double x : p) sum += x;
  for (double& x : p) x /= sum;
  return p;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < n; ++i) f[s.sample(logits)] += 1.0 / n;
  return f;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}), 1);
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  for (float t : {0.5f, 1.0f, 1.7f}) {
    auto p = plain(t);
    p.seed = 11;
    Sampler s(p);
    const int n = 200000;
    const auto f = frequencies(s, logits, n);
    const auto expected = softmax(logits, t);
    for (size_t i = 0; i < logits.size(); ++i) {
      const double sigma = std::sqrt(expected[i] * (1 - expected[i]) / n);
      EXPECT_NEAR(f[i], expected[i], 5 * sigma + 1e-9) << "temperature " << t << " token " << i;
    }
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
  auto p = plain(1.0f);
  p.seed = 42;
  Sampler a(p), b(p);
  p.seed = 43;
  Sampler c(p);
  std::vector<int> ta, tb, tc;
  for (int i = 0; i < 64; ++i) {
    ta.push_back(a.sample(logits));
    tb.push_back(b.sample(logits));
    tc.push_back(c.sample(logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  a.reset();
  std::vector<int> again;
  for (int i = 0; i < 64; ++i) again.push_back(a.sample(logits));
  EXPECT_EQ(again, ta) << "reset() restarts the seeded sequence";
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  // Probabilities at temperature 1: about 0.47, 0.26, 0.17, 0.064, 0.024, 0.0087...
  const std::vector<float> logits = {3.0f, 2.4f, 2.0f, 1.0f, 0.0f, -1.0f};
  const auto probs = softmax(logits, 1.0);
  auto p = plain(1.0f);
  p.top_k = 2;
  Sampler k(p);
  auto f = frequencies(k, logits, 20000);
  EXPECT_EQ(f[2] + f[3] + f[4] + f[5], 0.0);
  EXPECT_NEAR(f[0], probs[0] / (probs[0] + probs[1]), 0.02) << "renormalised over the top 2";

  p = plain(1.0f);
  p.top_p = 0.8f;  // 0.47 + 0.26 < 0.8 <= + 0.17: keeps three
  Sampler nucleus(p);
  f = frequencies(nucleus, logits, 20000);
  EXPECT_GT(f[2], 0.0);
  EXPECT_EQ(f[3] + f[4] + f[5], 0.0);

  p = plain(1.0f);
  p.min_p = 0.2f;  // keeps p >= 0.2 * 0.47 = 0.094: three tokens
  Sampler minp(p);
  f = frequencies(minp, logits, 20000);
  EXPECT_GT(f[2], 0.0);
  EXPECT_EQ(f[3] + f[4] + f[5], 0.0);

  p = plain(5.0f);
  p.top_k = 1;
  Sampler one(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.sample(logits), 0) << "top_k 1 is greedy";
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  // Token 0 leads by 0.5; seen twice in the window.
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
  auto p = plain(0.0f);
  p.repeat_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.5
  Sampler rep(p);
  rep.accept(0);
  rep.accept(0);
  EXPECT_EQ(rep.sample(logits), 1);

  p = plain(0.0f);
  p.presence_penalty = 0.4f;  // 2.0 - 0.4 = 1.6 > 1.5: still 0
  Sampler pres(p);
  pres.accept(0);
  pres.accept(0);
  EXPECT_EQ(pres.sample(logits), 0);

  p = plain(0.0f);
  p.frequency_penalty = 0.3f;  // 2.0 - 2 * 0.3 = 1.4 < 1.5
  Sampler freq(p);
  freq.accept(0);
  freq.accept(0);
  EXPECT_EQ(freq.sample(logits), 1);

  p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 1;  // only the last token counts, and it is not 0
  Sampler window(p);
  window.accept(0);
  window.accept(2);
  EXPECT_EQ(window.sample(logits), 0);

  // A negative repeated logit is multiplied, moving it further down.
  p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  Sampler neg(p);
  neg.accept(0);
  neg.accept(1);
  EXPECT_EQ(neg.sample(std::vector<float>{-0.5f, -0.6f, -0.9f}), 2);
}

TEST(Sampler, BadParametersAreRejectedWithTheirName) {
  auto expect_bad = [](SamplerParams p, const char* name) {
    try {
      Sampler s(p);
      ADD_FAILURE() << name << " accepted";
    } catch (const rl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  auto p = plain(1.0f);
  p.temperature = -1;
  expect_bad(p, "temperature");
  p = plain(1.0f);
  p.top_p = 0;
  expect_bad(p, "top_p");
  p = plain(1.0f);
  p.min_p = 2;
  expect_bad(p, "min_p");
  p = plain(1.0f);
  p.top_k = -3;
  expect_bad(p, "top_k");
  p = plain(1.0f);
  p.repeat_penalty = 0;
  expect_bad(p, "repeat_penalty");
  p = plain(1.0f);
  p.presence_penalty = NAN;
  expect_bad(p, "presence_penalty");
  Sampler ok(plain(1.0f));
  EXPECT_THROW(ok.sample(std::vector<float>{}), rl::Error);
  EXPECT_THROW(ok.sample(std::vector<float>{-INFINITY, NAN}), rl::Error);
}

}  // namespace
