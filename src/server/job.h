// One generation job: the tokens to run and how to sample, and the channel its output comes
// back through. The HTTP thread that submitted it reads tokens with wait() and may cancel it at
// any time; the slot that runs it pushes tokens and finishes it exactly once.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace rl::server {

struct JobSpec {
  std::vector<int32_t> prompt;      // at least one token, fewer than the context
  std::vector<int64_t> boundaries;  // prompt positions where a message starts (ascending)
  int64_t max_tokens = -1;          // -1: until an end token or the context is full
  engine::SamplerParams sampler;
  std::vector<std::pair<int32_t, float>> logit_bias;
  int top_logprobs = -1;            // -1: none; else alternatives per token
  std::vector<int32_t> end_tokens;  // tokens that end generation (not fed back)
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct TokenEvent {
  int32_t token = 0;
  float logprob = 0;              // when logprobs were requested
  std::vector<TokenLogprob> top;  // when top_logprobs > 0
};

enum class CancelReason { None, ClientGone, ReplyComplete, Timeout, Shutdown };
enum class JobEnd {
  EndToken,     // the model wrote an end-of-generation token
  MaxTokens,    // max_tokens reached
  ContextFull,  // the context ran out
  Cancelled,    // see cancel_reason
  Failed,       // the engine threw; see error
};

struct JobStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens restored from saved state, not recomputed
  int64_t generated = 0;
  double queued_seconds = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

struct JobResult {
  JobEnd end = JobEnd::Failed;
  CancelReason cancel_reason = CancelReason::None;
  std::string error;
  JobStats stats;
};

class Job {
 public:
  explicit Job(JobSpec spec) : spec_(std::move(spec)) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const JobSpec& spec() const { return spec_; }

  // --- the client's side
  // Asks the job to stop; the first reason is kept. Safe from any thread, any number of times.
  void cancel(CancelReason reason);
  // Waits up to `timeout` for tokens or the end, moving new tokens to `out`. Returns true once
  // the job has ended and all its tokens have been taken.
  bool wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  const JobResult& result() const { return result_; }  // valid once wait() returned true
  // Once a slot has taken the job: how many prompt tokens it resumed from saved state.
  std::optional<int64_t> cached_tokens() const;

  // --- the scheduler's side
  void mark_started(int64_t cached_tokens);
  bool cancel_requested() const { return cancel_reason_.load() != CancelReason::None; }
  CancelReason cancel_reason() const { return cancel_reason_.load(); }
  void push(TokenEvent event);
  void finish(JobResult result);  // the first call counts; later ones are ignored
  bool finished() const;
  // Called (outside any lock of the job) when cancel() is first requested.
  void set_cancel_listener(std::function<void()> listener);

 private:
  const JobSpec spec_;
  std::atomic<CancelReason> cancel_reason_{CancelReason::None};
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<TokenEvent> pending_;
  bool finished_ = false;
  std::optional<int64_t> cached_tokens_;
  JobResult result_;
  std::function<void()> cancel_listener_;
};

}  // namespace rl::server
