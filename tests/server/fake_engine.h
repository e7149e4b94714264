// FOR TESTS ONLY: a deterministic stand-in for engine::Engine, never a backend.
//
// Its logits are a pseudo-random function of everything the session holds: a recurrent hash
// chained over the consumed tokens and a hash of the KV rows [0, position). Restoring the wrong
// snapshot, or resuming over KV rows another prompt overwrote, therefore changes the output,
// which is what the scheduler and prefix-cache tests look for. restore() enforces the engine
// contract (a snapshot without KV needs position <= the session's position) and clears the
// logits, so a server that samples without running a token after a restore fails loudly.
//
// An optional script hook forces the next token (as a strongly peaked distribution) from the
// history, to make a test model "say" chosen text.
#pragma once
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/config.h"
#include "util/error.h"

namespace rl::testing {

struct FakeEngineOptions {
  int32_t n_vocab = 512;
  int64_t context = 4096;
  std::vector<int32_t> never_sampled;        // e.g. end tokens: only a script produces them
  std::chrono::microseconds token_delay{0};  // per consumed token, to make work take time
  size_t recurrent_bytes = 256;              // padding, to give snapshots a realistic shape
  std::function<std::optional<int32_t>(std::span<const int32_t> history)> script;
};

inline uint64_t fake_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

class FakeSession : public engine::Session {
 public:
  FakeSession(const FakeEngineOptions& options, int64_t max_context, std::atomic<int64_t>& consumed)
      : options_(options), max_context_(max_context), consumed_(consumed) {}

  void prefill(std::span<const int32_t> tokens, const engine::Progress& = {},
               std::span<float> all_logits = {}) override {
    if (tokens.empty()) fail("fake prefill: no tokens");
    if (position_ + int64_t(tokens.size()) > max_context_)
      fail("fake prefill: context overflow at ", position_, " + ", tokens.size());
    if (!all_logits.empty()) fail("fake prefill: all_logits not supported");
    for (int32_t t : tokens) consume(t);
    compute_logits();
  }

  std::span<const float> decode(int32_t token) override {
    if (position_ + 1 > max_context_) fail("fake decode: context full");
    consume(token);
    compute_logits();
    return logits_;
  }

  std::span<const float> logits() const override { return logits_; }
  int64_t position() const override { return position_; }
  int64_t max_context() const override { return max_context_; }

  engine::StateSnapshot snapshot(bool with_kv) const override {
    engine::StateSnapshot s;
    s.position = position_;
    s.recurrent.assign(options_.recurrent_bytes, 0);
    std::memcpy(s.recurrent.data(), &recurrent_, sizeof(recurrent_));
    std::memcpy(s.recurrent.data() + 8, &position_, sizeof(position_));
    if (with_kv) {
      s.kv.resize(size_t(position_) * sizeof(int32_t));
      std::memcpy(s.kv.data(), rows_.data(), s.kv.size());
    }
    return s;
  }

  void restore(const engine::StateSnapshot& s) override {
    if (s.recurrent.size() != options_.recurrent_bytes) fail("fake restore: wrong state size");
    int64_t pos;
    std::memcpy(&pos, s.recurrent.data() + 8, 8);
    if (pos != s.position) fail("fake restore: inconsistent snapshot");
    if (s.kv.empty()) {
      if (s.position > position_)
        fail("fake restore: a snapshot without KV at ", s.position,
             " needs the session at or beyond it (session at ", position_, ")");
    } else {
      if (s.kv.size() != size_t(s.position) * sizeof(int32_t)) fail("fake restore: bad KV size");
      if (rows_.size() < size_t(s.position)) rows_.resize(size_t(s.position));
      std::memcpy(rows_.data(), s.kv.data(), s.kv.size());
    }
    std::memcpy(&recurrent_, s.recurrent.data(), 8);
    position_ = s.position;
    ++restores;
    logits_.clear();
  }

  void reset() override {
    position_ = 0;
    recurrent_ = 0;
    logits_.clear();
  }

  int restores = 0;

 private:
  void consume(int32_t t) {
    if (options_.token_delay.count() > 0) std::this_thread::sleep_for(options_.token_delay);
    if (rows_.size() <= size_t(position_)) rows_.resize(size_t(position_) + 1);
    rows_[size_t(position_)] = t;
    recurrent_ = fake_mix(recurrent_, uint64_t(uint32_t(t)));
    ++position_;
    consumed_.fetch_add(1);
  }

  void compute_logits() {
    // The KV part is recomputed from the rows themselves, so stale rows cannot hide.
    uint64_t kv = 0;
    for (int64_t i = 0; i < position_; ++i) kv = fake_mix(kv, uint64_t(uint32_t(rows_[i])));
    const uint64_t h = fake_mix(recurrent_, kv);
    logits_.resize(size_t(options_.n_vocab));
    for (int32_t i = 0; i < options_.n_vocab; ++i) {
      const uint64_t r = fake_mix(h, uint64_t(i));
      logits_[i] = float(double(r >> 11) / double(1ull << 53) * 8.0 - 4.0);
    }
    for (int32_t id : options_.never_sampled) logits_[id] = -1e4f;
    if (options_.script) {
      if (auto forced =
              options_.script(std::span<const int32_t>(rows_.data(), size_t(position_)))) {
        for (float& l : logits_) l = -30.0f;
        logits_[*forced] = 30.0f;
      }
    }
  }

  const FakeEngineOptions& options_;
  const int64_t max_context_;
  std::atomic<int64_t>& consumed_;
  std::vector<int32_t> rows_;
  int64_t position_ = 0;
  uint64_t recurrent_ = 0;
  std::vector<float> logits_;
};

class FakeEngine : public engine::Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {}) : options_(std::move(options)) {
    config_.name = "fake";
    config_.n_vocab = options_.n_vocab;
    config_.context_length = options_.context;
  }
  const model::Config& config() const override { return config_; }
  std::string backend_name() const override { return "fake (tests only)"; }
  std::unique_ptr<engine::Session> new_session(const engine::SessionOptions& o) override {
    return std::make_unique<FakeSession>(
        options_, o.max_context > 0 ? o.max_context : options_.context, consumed);
  }

  FakeEngineOptions options_;
  std::atomic<int64_t> consumed{0};  // tokens run through prefill/decode, over all sessions

 private:
  model::Config config_;
};

}  // namespace rl::testing
