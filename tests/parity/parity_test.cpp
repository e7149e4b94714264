// The CPU engine against the float64 reference logits of ../shared/testdata/tiny (computed by
// an independent numpy implementation), plus its own consistency: chunked vs token-by-token
// prefill, decode steps vs full-sequence rows, snapshot/restore.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "util/error.h"

namespace {

using rl::engine::Session;

const std::string kTiny = std::string(RL_SHARED_DIR) + "/testdata/tiny/";
constexpr int64_t kVocab = 512;

std::vector<int32_t> read_tokens(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<int32_t> t;
  int32_t v;
  while (in >> v) t.push_back(v);
  return t;
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), f.size() * 4);
  return f;
}

struct Diff {
  double max_abs = 0, rms = 0;
  double argmax_agree = 0;  // fraction of rows
};

int argmax(const float* row, int64_t n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

Diff compare(const std::vector<float>& a, const std::vector<float>& b, int64_t rows) {
  Diff d;
  double ss = 0;
  int agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < kVocab; ++i) {
      const double e = std::abs(double(a[r * kVocab + i]) - double(b[r * kVocab + i]));
      d.max_abs = std::max(d.max_abs, std::isnan(e) ? 1e30 : e);
      ss += e * e;
    }
    agree += argmax(&a[r * kVocab], kVocab) == argmax(&b[r * kVocab], kVocab);
  }
  d.rms = std::sqrt(ss / double(rows * kVocab));
  d.argmax_agree = double(agree) / double(rows);
  return d;
}

std::unique_ptr<rl::engine::Engine> load(const std::string& name) {
  rl::engine::EngineOptions o;
  o.backend = rl::engine::Backend::Cpu;
  o.threads = 2;
  return rl::engine::load_engine(kTiny + name, o);
}

std::unique_ptr<Session> new_session(rl::engine::Engine& e, int chunk = 2048,
                                     rl::engine::KvType kv = rl::engine::KvType::F32) {
  rl::engine::SessionOptions so;
  so.max_context = 1024;
  so.prefill_chunk = chunk;
  so.kv_type = kv;
  return e.new_session(so);
}

std::vector<float> prefill_all(Session& s, const std::vector<int32_t>& tokens) {
  std::vector<float> logits(tokens.size() * kVocab, NAN);  // poisoned
  s.prefill(tokens, {}, logits);
  return logits;
}

struct Golden {
  const char* model;
  const char* seq;
  double max_abs, rms;
};

class GoldenLogits : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenLogits, MatchFloat64ReferenceAtEveryPosition) {
  const auto g = GetParam();
  auto engine = load(std::string(g.model) + ".gguf");
  const std::string stem = kTiny + g.model + "." + g.seq;
  const auto tokens = read_tokens(stem + ".tokens.txt");
  const auto ref = read_f32(stem + ".ref64.logits.f32");
  ASSERT_EQ(ref.size(), tokens.size() * kVocab);
  auto session = new_session(*engine);
  const auto logits = prefill_all(*session, tokens);
  const auto d = compare(logits, ref, tokens.size());
  RecordProperty("max_abs", std::to_string(d.max_abs));
  std::printf("%s %s: max abs %.3g, rms %.3g, argmax agreement %.1f%%\n", g.model, g.seq, d.max_abs,
              d.rms, 100 * d.argmax_agree);
  EXPECT_LE(d.max_abs, g.max_abs);
  EXPECT_LE(d.rms, g.rms);
  EXPECT_EQ(d.argmax_agree, 1.0);
}

// Tolerances from testdata/README.md §4.4.
INSTANTIATE_TEST_SUITE_P(Tiny, GoldenLogits,
                         ::testing::Values(Golden{"tiny-f32", "seq96", 1e-3, 1e-4},
                                           Golden{"tiny-f32", "seq700", 1e-3, 1e-4},
                                           Golden{"tiny-quant", "seq96", 2e-3, 2e-4}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" + info.param.seq;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

std::vector<int32_t> greedy(Session& s, const std::vector<int32_t>& prompt, int n,
                            std::vector<float>* step_logits = nullptr) {
  s.prefill(prompt);
  std::vector<int32_t> out;
  auto logits = s.logits();
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(logits.data(), kVocab);
    out.push_back(t);
    if (i + 1 < n) {
      logits = s.decode(t);
      if (step_logits) step_logits->insert(step_logits->end(), logits.begin(), logits.end());
    }
  }
  return out;
}

TEST(GreedyContinuation, MatchesReferenceTokenForToken) {
  for (const char* model : {"tiny-f32", "tiny-quant"}) {
    auto engine = load(std::string(model) + ".gguf");
    const std::string stem = kTiny + model + ".seq96";
    auto session = new_session(*engine);
    const auto gen = greedy(*session, read_tokens(stem + ".tokens.txt"), 32);
    EXPECT_EQ(gen, read_tokens(stem + ".ref64.gen32.txt")) << model;
  }
}

TEST(DecodeSteps, MatchLlamaCppStepLogits) {
  // Step i of the golden file = logits after feeding gen[i] at position 96 + i (README §4.2).
  auto engine = load("tiny-f32.gguf");
  const std::string stem = kTiny + "tiny-f32.seq96";
  auto session = new_session(*engine);
  std::vector<float> steps;
  greedy(*session, read_tokens(stem + ".tokens.txt"), 32, &steps);
  const auto ref = read_f32(stem + ".llama.gen32.step_logits.f32");
  ASSERT_EQ(steps.size(), ref.size());
  const auto d = compare(steps, ref, 31);
  EXPECT_LE(d.max_abs, 1e-3);
  EXPECT_EQ(d.argmax_agree, 1.0);
}

TEST(ChunkedPrefill, AnyChunkSizeGivesTheSameLogits) {
  auto engine = load("tiny-f32.gguf");
  const auto tokens = read_tokens(kTiny + "tiny-f32.seq700.tokens.txt");
  auto whole = new_session(*engine, 2048);
  const auto ref = prefill_all(*whole, tokens);
  for (int chunk : {3, 64, 100, 699}) {
    auto s = new_session(*engine, chunk);
    const auto logits = prefill_all(*s, tokens);
    const auto d = compare(logits, ref, tokens.size());
    EXPECT_LE(d.max_abs, 1e-4) << "chunk " << chunk;
    EXPECT_EQ(d.argmax_agree, 1.0) << "chunk " << chunk;
  }
  // Token by token through decode().
  auto s = new_session(*engine);
  std::vector<float> stepwise;
  for (int32_t t : tokens) {
    auto l = s->decode(t);
    stepwise.insert(stepwise.end(), l.begin(), l.end());
  }
  EXPECT_LE(compare(stepwise, ref, tokens.size()).max_abs, 1e-4);
}

TEST(Snapshot, RestoreGivesIdenticalLogits) {
  auto engine = load("tiny-quant.gguf");
  const auto tokens = read_tokens(kTiny + "tiny-quant.seq96.tokens.txt");
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 50);
  const std::vector<int32_t> tail(tokens.begin() + 50, tokens.end());
  auto s = new_session(*engine, 16);
  s->prefill(head);
  const auto full = s->snapshot(true);
  const auto light = s->snapshot(false);
  EXPECT_EQ(full.position, 50);
  const auto first = prefill_all(*s, tail);

  // Restore with KV into a fresh session.
  auto fresh = new_session(*engine, 16);
  fresh->restore(full);
  EXPECT_EQ(fresh->position(), 50);
  const auto second = prefill_all(*fresh, tail);
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * 4)) << "not bit-identical";

  // Restore without KV into the session that still holds the rows: rewinds the recurrence.
  s->restore(light);
  EXPECT_EQ(s->position(), 50);
  const auto third = prefill_all(*s, tail);
  EXPECT_EQ(0, std::memcmp(first.data(), third.data(), first.size() * 4)) << "not bit-identical";

  // A snapshot without KV cannot move a session forward.
  auto empty = new_session(*engine);
  EXPECT_THROW(empty->restore(light), rl::Error);
}

TEST(KvCache, HalfPrecisionStaysClose) {
  auto engine = load("tiny-f32.gguf");
  const std::string stem = kTiny + "tiny-f32.seq96";
  const auto tokens = read_tokens(stem + ".tokens.txt");
  const auto ref = read_f32(stem + ".ref64.logits.f32");
  for (auto kv : {rl::engine::KvType::BF16, rl::engine::KvType::F16}) {
    auto s = new_session(*engine, 2048, kv);
    const auto d = compare(prefill_all(*s, tokens), ref, tokens.size());
    EXPECT_LE(d.max_abs, 0.2) << rl::engine::kv_type_name(kv);
    EXPECT_GT(d.max_abs, 0.0) << "half precision KV should not be exact";
  }
}

TEST(Errors, ContextOverflowAndBadTokens) {
  auto engine = load("tiny-f32.gguf");
  rl::engine::SessionOptions so;
  so.max_context = 8;
  auto s = engine->new_session(so);
  std::vector<int32_t> nine(9, 1);
  EXPECT_THROW(s->prefill(nine), rl::Error);
  EXPECT_EQ(s->position(), 0);
  std::vector<int32_t> bad = {1, 2, 512};
  EXPECT_THROW(s->prefill(bad), rl::Error);
  EXPECT_EQ(s->position(), 0);
  EXPECT_THROW(s->decode(-1), rl::Error);
}

}  // namespace
