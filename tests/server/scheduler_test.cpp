// The scheduler, slots and prefix reuse against the deterministic fake engine. Expected outputs
// come from running the same prompt on a fresh fake session directly (no server code), so a
// resume from the wrong state, or tokens of one request reaching another, shows as a mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "fake_engine.h"
#include "server/api_error.h"
#include "server/scheduler.h"

namespace rl::server {
namespace {

using namespace std::chrono_literals;
using testing::FakeEngine;
using testing::FakeEngineOptions;

std::vector<int32_t> reference_greedy(FakeEngine& engine, const std::vector<int32_t>& prompt, int n,
                                      int64_t context = 0) {
  auto session = engine.new_session({.max_context = context});
  session->prefill(prompt);
  std::vector<int32_t> out;
  auto logits = session->logits();
  for (int i = 0; i < n; ++i) {
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(t);
    if (i + 1 < n) logits = session->decode(t);
  }
  return out;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int32_t vocab = 500) {
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

JobSpec greedy_spec(std::vector<int32_t> prompt, int max_tokens) {
  JobSpec spec;
  spec.prompt = std::move(prompt);
  spec.max_tokens = max_tokens;
  spec.sampler.temperature = 0;
  return spec;
}

struct Outcome {
  std::vector<int32_t> tokens;
  JobResult result;
};

Outcome collect(Job& job, std::chrono::milliseconds limit = 20s) {
  Outcome out;
  std::vector<TokenEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!job.wait(events, 50ms)) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "job did not finish in time";
      job.cancel(CancelReason::Timeout);
    }
  }
  for (auto& e : events) out.tokens.push_back(e.token);
  out.result = job.result();
  return out;
}

Outcome run(Scheduler& s, JobSpec spec) {
  return collect(*s.submit(std::move(spec)));
}

PrefixCacheOptions cache_options(uint64_t ram, uint64_t disk = 0, std::string dir = {}) {
  PrefixCacheOptions o;
  o.ram_bytes = ram;
  o.disk_bytes = disk;
  o.dir = std::move(dir);
  o.fingerprint = "fake";
  return o;
}

SchedulerOptions options(int slots, int queue = 8) {
  SchedulerOptions o;
  o.slots = slots;
  o.queue_limit = queue;
  o.session.max_context = 4096;
  o.slot.prefill_chunk = 37;  // odd chunking: resumed and cold runs split work differently
  o.slot.checkpoint_gap = 16;
  o.slot.promote_min_tokens = 8;
  o.slot.kv_bytes_per_position = 4;
  return o;
}

TEST(CheckpointChoice, KeepsLastBoundaryAndOneBeforeTheEnd) {
  const std::vector<int64_t> boundaries = {0, 5, 40, 45, 90, 120};
  EXPECT_EQ(choose_checkpoints(boundaries, 0, 130, 32), (std::vector<int64_t>{40, 90, 120, 129}));
  EXPECT_EQ(choose_checkpoints(boundaries, 100, 130, 32), (std::vector<int64_t>{120, 129}));
  EXPECT_EQ(choose_checkpoints(boundaries, 129, 130, 32), (std::vector<int64_t>{}));
  EXPECT_EQ(choose_checkpoints({}, 0, 1, 32), (std::vector<int64_t>{}));
}

TEST(CheckpointChoice, PlanPrefersLiveThenLongestUsableCheckpoint) {
  const std::vector<int32_t> history = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> cps = {2, 4, 6};
  auto p = plan_in_slot(history, cps, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(p.from, ResumePlan::From::Live);
  EXPECT_EQ(p.position, 6);
  p = plan_in_slot(history, cps, std::vector<int32_t>{1, 2, 3, 4, 5, 6});  // same prompt
  EXPECT_EQ(p.from, ResumePlan::From::Checkpoint);
  EXPECT_EQ(p.position, 4);  // 6 would leave no token to run
  p = plan_in_slot(history, cps, std::vector<int32_t>{1, 2, 3, 9, 9});
  EXPECT_EQ(p.from, ResumePlan::From::Checkpoint);
  EXPECT_EQ(p.position, 2);
  p = plan_in_slot(history, cps, std::vector<int32_t>{7, 2, 3});
  EXPECT_EQ(p.from, ResumePlan::From::Start);
}

TEST(Scheduler, OutputMatchesADirectRunOfTheEngine) {
  FakeEngine engine;
  Scheduler s(engine, options(1), nullptr, nullptr);
  std::mt19937 rng(1);
  const auto prompt = random_tokens(rng, 100);
  const Outcome o = run(s, greedy_spec(prompt, 20));
  EXPECT_EQ(o.tokens, reference_greedy(engine, prompt, 20));
  EXPECT_EQ(o.result.end, JobEnd::MaxTokens);
  EXPECT_EQ(o.result.stats.prompt_tokens, 100);
  EXPECT_EQ(o.result.stats.cached_tokens, 0);
  EXPECT_EQ(o.result.stats.generated, 20);
}

TEST(Scheduler, FollowUpTurnResumesAndMatchesAColdRun) {
  FakeEngine engine;
  Scheduler s(engine, options(1), nullptr, nullptr);
  std::mt19937 rng(2);
  const auto turn1 = random_tokens(rng, 120);
  const Outcome first = run(s, greedy_spec(turn1, 10));
  // The next prompt repeats the first, the reply, and adds a new message.
  const auto turn2 = concat(concat(turn1, first.tokens), random_tokens(rng, 30));
  const Outcome second = run(s, greedy_spec(turn2, 15));
  EXPECT_EQ(second.tokens, reference_greedy(engine, turn2, 15));
  // The live state covered turn1 and all but the last generated token (never fed back).
  EXPECT_EQ(second.result.stats.cached_tokens, 120 + 9);

  // A prompt that diverges inside the reply resumes from the checkpoint one before turn1's end.
  auto edited = concat(turn1, random_tokens(rng, 20));
  const Outcome third = run(s, greedy_spec(edited, 12));
  EXPECT_EQ(third.tokens, reference_greedy(engine, edited, 12));
  EXPECT_EQ(third.result.stats.cached_tokens, 119);
}

TEST(Scheduler, RepeatedPromptResumesOneTokenBeforeTheEnd) {
  FakeEngine engine;
  Scheduler s(engine, options(1), nullptr, nullptr);
  std::mt19937 rng(3);
  const auto prompt = random_tokens(rng, 64);
  const Outcome a = run(s, greedy_spec(prompt, 8));
  const Outcome b = run(s, greedy_spec(prompt, 8));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(b.result.stats.cached_tokens, 63);
  EXPECT_EQ(b.tokens, reference_greedy(engine, prompt, 8));
}

TEST(Scheduler, MessageBoundaryCheckpointServesAnotherConversation) {
  FakeEngine engine;
  Scheduler s(engine, options(1), nullptr, nullptr);
  std::mt19937 rng(4);
  const auto system = random_tokens(rng, 50);
  auto a = concat(system, random_tokens(rng, 40));
  JobSpec spec = greedy_spec(a, 5);
  spec.boundaries = {0, 50};
  run(s, spec);
  auto b = concat(system, random_tokens(rng, 33));
  const Outcome ob = run(s, greedy_spec(b, 6));
  EXPECT_EQ(ob.result.stats.cached_tokens, 50);
  EXPECT_EQ(ob.tokens, reference_greedy(engine, b, 6));
}

TEST(Scheduler, DisabledReuseRunsEverythingCold) {
  FakeEngine engine;
  SchedulerOptions o = options(1);
  o.slot.prefix_reuse = false;
  Scheduler s(engine, o, nullptr, nullptr);
  std::mt19937 rng(5);
  const auto prompt = random_tokens(rng, 40);
  run(s, greedy_spec(prompt, 4));
  const int64_t before = engine.consumed.load();
  const Outcome again = run(s, greedy_spec(prompt, 4));
  EXPECT_EQ(again.result.stats.cached_tokens, 0);
  EXPECT_EQ(engine.consumed.load() - before, 40 + 3);
}

TEST(Scheduler, SharedCacheCarriesAConversationAcrossAnother) {
  FakeEngine engine;
  PrefixCache cache(cache_options(1 << 20));
  Metrics metrics;
  Scheduler s(engine, options(1), &cache, &metrics);
  std::mt19937 rng(6);
  const auto a1 = random_tokens(rng, 90);
  const Outcome ra = run(s, greedy_spec(a1, 6));
  const auto b1 = random_tokens(rng, 70);  // unrelated: the slot is repurposed
  run(s, greedy_spec(b1, 6));
  EXPECT_GE(cache.stats().ram_entries, 1);
  const auto a2 = concat(concat(a1, ra.tokens), random_tokens(rng, 25));
  const Outcome ra2 = run(s, greedy_spec(a2, 9));
  EXPECT_EQ(ra2.result.stats.cached_tokens, 89);  // a1's end-of-prompt checkpoint, via the cache
  EXPECT_EQ(ra2.tokens, reference_greedy(engine, a2, 9));
  // And b continues from the cache too (b1's state was promoted when a2 took the slot).
  const auto b2 = concat(b1, random_tokens(rng, 10));
  const Outcome rb2 = run(s, greedy_spec(b2, 7));
  EXPECT_EQ(rb2.result.stats.cached_tokens, 69);
  EXPECT_EQ(rb2.tokens, reference_greedy(engine, b2, 7));
  EXPECT_NE(metrics.render({}, cache.stats()).find("redlite_prefix_cache_promotions_total 3"),
            std::string::npos);
}

TEST(Scheduler, CacheSpilledToDiskResumesIdentically) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rl_sched_spill_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  FakeEngine engine;
  {
    PrefixCache cache(cache_options(0, 1 << 20, dir.string()));
    Scheduler s(engine, options(1), &cache, nullptr);
    std::mt19937 rng(7);
    const auto a = random_tokens(rng, 80);
    run(s, greedy_spec(a, 3));
    run(s, greedy_spec(random_tokens(rng, 80), 3));  // pushes a's state to disk
    EXPECT_EQ(cache.stats().disk_entries, 1);
    const auto a2 = concat(a, random_tokens(rng, 5));
    const Outcome r = run(s, greedy_spec(a2, 10));
    EXPECT_EQ(r.result.stats.cached_tokens, 79);
    EXPECT_EQ(r.tokens, reference_greedy(engine, a2, 10));
    EXPECT_EQ(cache.stats().disk_loads, 1);
  }
  std::filesystem::remove_all(dir);
}

TEST(Scheduler, ContextLimitEndsGeneration) {
  FakeEngine engine;
  SchedulerOptions o = options(1);
  o.session.max_context = 64;
  Scheduler s(engine, o, nullptr, nullptr);
  std::mt19937 rng(8);
  const auto prompt = random_tokens(rng, 60);
  const Outcome r = run(s, greedy_spec(prompt, -1));
  EXPECT_EQ(r.result.end, JobEnd::ContextFull);
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(r.tokens, reference_greedy(engine, prompt, 4, 64));
  const Outcome zero = run(s, greedy_spec(prompt, 0));
  EXPECT_EQ(zero.result.end, JobEnd::MaxTokens);
  EXPECT_TRUE(zero.tokens.empty());
}

TEST(Scheduler, EndTokenStopsAndIsReported) {
  FakeEngineOptions fo;
  fo.never_sampled = {7};
  // Say 3, 4, 5 then the end token, whatever the prompt.
  fo.script = [](std::span<const int32_t> h) -> std::optional<int32_t> {
    const int32_t last = h.back();
    if (last >= 3 && last < 5) return last + 1;
    if (last == 5) return 7;
    return 3;
  };
  FakeEngine engine(fo);
  Scheduler s(engine, options(1), nullptr, nullptr);
  JobSpec spec = greedy_spec({100, 101, 102}, 50);
  spec.end_tokens = {7};
  const Outcome r = run(s, spec);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{3, 4, 5, 7}));
  EXPECT_EQ(r.result.end, JobEnd::EndToken);
}

TEST(Scheduler, LogitBiasAndLogprobs) {
  FakeEngine engine;
  Scheduler s(engine, options(1), nullptr, nullptr);
  JobSpec spec = greedy_spec({10, 20, 30}, 5);
  spec.logit_bias = {{42, 100.0f}};
  spec.top_logprobs = 3;
  auto job = s.submit(spec);
  std::vector<TokenEvent> events;
  while (!job->wait(events, 50ms)) {
  }
  ASSERT_EQ(events.size(), 5u);
  // Reference log-probabilities from the raw (unbiased) logits, in double.
  auto session = engine.new_session({});
  session->prefill(std::vector<int32_t>{10, 20, 30});
  for (const TokenEvent& e : events) {
    EXPECT_EQ(e.token, 42);
    auto logits = session->logits();
    double mx = -1e30, sum = 0;
    for (float l : logits) mx = std::max(mx, double(l));
    for (float l : logits) sum += std::exp(double(l) - mx);
    EXPECT_NEAR(e.logprob, double(logits[42]) - mx - std::log(sum), 1e-5);
    ASSERT_EQ(e.top.size(), 3u);
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(e.top[k].token, order[k]);
      EXPECT_NEAR(e.top[k].logprob, double(logits[order[k]]) - mx - std::log(sum), 1e-5);
    }
    session->decode(42);
  }
}

TEST(Scheduler, FullQueueIsRefusedWith429AndRetryAfter) {
  FakeEngineOptions fo;
  fo.token_delay = 2ms;
  FakeEngine engine(fo);
  Scheduler s(engine, options(1, 1), nullptr, nullptr);
  auto running = s.submit(greedy_spec({1, 2, 3}, 2000));
  auto queued = s.submit(greedy_spec({4, 5, 6}, 5));
  try {
    s.submit(greedy_spec({7, 8, 9}, 5));
    FAIL() << "expected 429";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 429);
    ASSERT_EQ(e.headers.size(), 1u);
    EXPECT_EQ(e.headers[0].first, "Retry-After");
    EXPECT_GE(std::stoi(e.headers[0].second), 1);
  }
  EXPECT_EQ(s.status().queued, 1);
  running->cancel(CancelReason::ClientGone);
  const Outcome r = collect(*running);
  EXPECT_EQ(r.result.end, JobEnd::Cancelled);
  EXPECT_EQ(r.result.cancel_reason, CancelReason::ClientGone);
  EXPECT_LT(r.tokens.size(), 2000u);
  const Outcome q = collect(*queued);
  EXPECT_EQ(q.result.end, JobEnd::MaxTokens);
  EXPECT_EQ(s.status().busy, 0);
}

TEST(Scheduler, CancelledWhileQueuedFinishesAtOnceAndFreesNothingElse) {
  FakeEngineOptions fo;
  fo.token_delay = 1ms;
  FakeEngine engine(fo);
  Scheduler s(engine, options(1, 4), nullptr, nullptr);
  auto running = s.submit(greedy_spec({1, 2, 3}, 300));
  auto queued = s.submit(greedy_spec({4, 5, 6}, 5));
  queued->cancel(CancelReason::ClientGone);
  EXPECT_TRUE(queued->finished());
  EXPECT_EQ(queued->result().end, JobEnd::Cancelled);
  EXPECT_EQ(s.status().queued, 0);
  const Outcome r = collect(*running);
  EXPECT_EQ(r.tokens.size(), 300u);
}

TEST(Scheduler, CancellationTakesEffectWithinOneToken) {
  FakeEngineOptions fo;
  fo.token_delay = 1ms;
  FakeEngine engine(fo);
  Scheduler s(engine, options(1), nullptr, nullptr);
  auto job = s.submit(greedy_spec({1, 2, 3}, 100000));
  std::vector<TokenEvent> events;
  while (events.size() < 10) job->wait(events, 50ms);
  job->cancel(CancelReason::ClientGone);
  const size_t seen = events.size();
  while (!job->wait(events, 50ms)) {
  }
  // Tokens already sampled may still arrive, at most the one in flight plus the pending ones.
  EXPECT_LE(events.size(), seen + 2);
  EXPECT_EQ(job->result().end, JobEnd::Cancelled);
}

TEST(Scheduler, ShutdownEndsRunningAndQueuedJobs) {
  FakeEngineOptions fo;
  fo.token_delay = 1ms;
  FakeEngine engine(fo);
  auto s = std::make_unique<Scheduler>(engine, options(1, 4), nullptr, nullptr);
  auto running = s->submit(greedy_spec({1, 2, 3}, 100000));
  auto queued = s->submit(greedy_spec({4, 5, 6}, 5));
  std::this_thread::sleep_for(20ms);
  s->shutdown();
  EXPECT_TRUE(running->finished());
  EXPECT_TRUE(queued->finished());
  EXPECT_EQ(running->result().cancel_reason, CancelReason::Shutdown);
  EXPECT_EQ(queued->result().cancel_reason, CancelReason::Shutdown);
  try {
    s->submit(greedy_spec({1}, 1));
    FAIL() << "expected 503";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
  }
}

TEST(Scheduler, ManyClientsOnFewSlotsGetTheirOwnAnswers) {
  FakeEngine engine;
  PrefixCache cache(cache_options(1 << 16));
  Scheduler s(engine, options(3, 64), &cache, nullptr);
  std::mt19937 rng(9);
  // Conversations that share a system prompt, each with two turns.
  const auto system = random_tokens(rng, 40);
  constexpr int kClients = 8;
  std::vector<std::vector<int32_t>> first(kClients), second(kClients);
  for (int c = 0; c < kClients; ++c) {
    first[c] = concat(system, random_tokens(rng, 10 + c));
    second[c] = random_tokens(rng, 7);
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(kClients, 0);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      JobSpec a = greedy_spec(first[c], 6);
      a.boundaries = {0, 40};
      const Outcome r1 = run(s, a);
      if (r1.tokens != reference_greedy(engine, first[c], 6)) ++failures[c];
      const auto p2 = concat(concat(first[c], r1.tokens), second[c]);
      const Outcome r2 = run(s, greedy_spec(p2, 6));
      if (r2.tokens != reference_greedy(engine, p2, 6)) ++failures[c];
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], 0) << "client " << c;
  EXPECT_EQ(s.status().busy, 0);
  EXPECT_EQ(s.status().queued, 0);
}

}  // namespace
}  // namespace rl::server
