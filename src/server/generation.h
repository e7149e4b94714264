// Follows one submitted job on behalf of an HTTP request: reads its tokens, turns them into
// reply deltas, and cancels the job when the reply is complete (stop string, single tool
// call), the client is gone, or the deadline passes. Destroying it cancels a job still running,
// so no exit path of a handler can leave a session busy.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/job.h"
#include "server/reply_stream.h"
#include "tokenizer/tokenizer.h"

namespace rl::server {

enum class ReplyEnd {
  EndToken,    // the model ended its turn
  StopString,  // a stop string matched
  Length,      // max_tokens or the context
  ClientGone,
  Timeout,
  Shutdown,
  Failed,
};

class GenerationRun {
 public:
  using Clock = std::chrono::steady_clock;

  GenerationRun(std::shared_ptr<Job> job, const tokenizer::Tokenizer& tokenizer, ReplyOptions reply,
                Clock::time_point deadline, int max_tool_calls = -1);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  struct Step {
    chat::OutputDelta delta;
    std::vector<TokenEvent> tokens;  // tokens whose text is in this delta (end tokens excluded)
    bool done = false;
  };
  // Waits up to `wait` for progress. `client_alive` is asked while the job runs.
  Step next(std::chrono::milliseconds wait, const std::function<bool()>& client_alive);
  void cancel(CancelReason reason) { job_->cancel(reason); }

  bool done() const { return done_; }
  ReplyEnd end() const { return end_; }  // after done
  const std::string& stop_string() const { return reply_.stop_string(); }
  int64_t prompt_tokens() const { return int64_t(job_->spec().prompt.size()); }
  const JobStats& stats() const { return job_->result().stats; }  // after done
  const std::string& error() const { return job_->result().error; }
  int64_t completion_tokens() const { return completion_tokens_; }
  int tool_calls() const { return tool_calls_; }
  // Prompt tokens restored rather than recomputed, once a slot has taken the job.
  std::optional<int64_t> cached_tokens() const { return job_->cached_tokens(); }
  double seconds() const;  // since the run began

 private:
  std::shared_ptr<Job> job_;
  const tokenizer::Tokenizer& tokenizer_;
  ReplyStream reply_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  int max_tool_calls_;
  int tool_calls_ = 0;
  bool done_ = false;
  ReplyEnd end_ = ReplyEnd::Failed;
  int64_t completion_tokens_ = 0;
};

}  // namespace rl::server
