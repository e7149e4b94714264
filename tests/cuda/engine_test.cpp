// The CUDA Session's own behaviour on the tiny model (needs a GPU; skipped without one):
// snapshot/restore and reset reproduce decode bit for bit, prefill rows equal decode steps,
// the context limit and memory planning fail with clear messages. Logit accuracy against the
// goldens is checked by scripts/device.sh (redlite eval vs ../shared/testdata).
#include <gtest/gtest.h>

#ifdef RL_HAVE_CUDA
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_engine.h"
#include "util/error.h"

namespace rl::cuda {
namespace {

const std::string kModel = std::string(RL_SHARED_DIR) + "/testdata/tiny/tiny-f32.gguf";

std::vector<int32_t> tokens(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 131 + 7) % 509;
  return t;
}

class CudaEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
    engine_ = make_engine(kModel, engine::EngineOptions{});
  }
  std::unique_ptr<engine::Session> session(int64_t ctx = 256) {
    engine::SessionOptions o;
    o.max_context = ctx;
    return engine_->new_session(o);
  }
  // Logits of decoding `ts` one by one.
  static std::vector<float> decode_all(engine::Session& s, const std::vector<int32_t>& ts) {
    std::vector<float> out;
    for (int32_t t : ts) {
      const auto l = s.decode(t);
      out.insert(out.end(), l.begin(), l.end());
    }
    return out;
  }
  std::unique_ptr<engine::Engine> engine_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST_F(CudaEngineTest, SnapshotRestoreReproducesDecode) {
  auto s = session();
  const auto t = tokens(70);
  s->prefill(std::span(t).first(60));
  const auto snap = s->snapshot(true);
  const auto tail = std::vector<int32_t>(t.begin() + 60, t.end());
  const auto first = decode_all(*s, tail);
  s->restore(snap);
  EXPECT_EQ(s->position(), 60);
  EXPECT_TRUE(same_bits(first, decode_all(*s, tail)));
  // Without the KV rows: the session's cache still holds them.
  auto light = s->snapshot(false);
  const auto again = decode_all(*s, {1, 2, 3});
  s->restore(light);
  EXPECT_TRUE(same_bits(again, decode_all(*s, {1, 2, 3})));
  // Into a fresh session of the same model.
  auto fresh = session();
  fresh->restore(snap);
  EXPECT_TRUE(same_bits(first, decode_all(*fresh, tail)));
}

TEST_F(CudaEngineTest, ResetMatchesAFreshSession) {
  auto s = session();
  const auto t = tokens(20);
  const auto first = decode_all(*s, t);
  s->reset();
  EXPECT_EQ(s->position(), 0);
  EXPECT_TRUE(s->logits().empty());
  EXPECT_TRUE(same_bits(first, decode_all(*s, t)));
}

TEST_F(CudaEngineTest, PrefillRowsEqualDecodeSteps) {
  const auto t = tokens(33);
  auto a = session();
  std::vector<float> rows(t.size() * engine_->config().n_vocab);
  a->prefill(t, {}, rows);
  auto b = session();
  EXPECT_TRUE(same_bits(rows, decode_all(*b, t)));
  const auto last = a->logits();
  EXPECT_EQ(0, std::memcmp(last.data(), rows.data() + rows.size() - last.size(), last.size() * 4));
}

TEST_F(CudaEngineTest, FullContextAndBadTokensThrow) {
  auto s = session(8);
  EXPECT_THROW(s->prefill(tokens(9)), Error);
  EXPECT_EQ(s->position(), 0);  // nothing consumed
  EXPECT_THROW(s->decode(-1), Error);
  EXPECT_THROW(s->decode(static_cast<int32_t>(engine_->config().n_vocab)), Error);
  s->prefill(tokens(8));
  EXPECT_THROW(s->decode(1), Error);
}

TEST_F(CudaEngineTest, TooLargeContextNamesWhatFits) {
  try {
    session(int64_t{1} << 29);  // terabytes of KV cache
    FAIL() << "expected an out-of-memory plan";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--ctx 536870912"), std::string::npos) << m;
    EXPECT_NE(m.find("--kv-type bf16"), std::string::npos) << m;
    EXPECT_NE(m.find("largest context that fits"), std::string::npos) << m;
  }
}

TEST_F(CudaEngineTest, RandomStateDecodesToFiniteLogits) {
  auto s = session(4096);
  s->fill_random_state(3000, 5);
  EXPECT_EQ(s->position(), 3000);
  for (float v : s->decode(42)) ASSERT_TRUE(std::isfinite(v));
  EXPECT_THROW(s->fill_random_state(4096, 1), Error);
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(CudaEngine, NotBuilt) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif
