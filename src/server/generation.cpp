#include "server/generation.h"

#include <algorithm>

namespace rl::server {

GenerationRun::GenerationRun(std::shared_ptr<Job> job, const tokenizer::Tokenizer& tokenizer,
                             ReplyOptions reply, Clock::time_point deadline, int max_tool_calls)
    : job_(std::move(job)),
      tokenizer_(tokenizer),
      reply_(tokenizer, std::move(reply)),
      start_(Clock::now()),
      deadline_(deadline),
      max_tool_calls_(max_tool_calls) {}

GenerationRun::~GenerationRun() {
  if (!job_->finished()) job_->cancel(CancelReason::ClientGone);
}

double GenerationRun::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

GenerationRun::Step GenerationRun::next(std::chrono::milliseconds wait,
                                        const std::function<bool()>& client_alive) {
  Step step;
  if (done_) {
    step.done = true;
    return step;
  }
  std::vector<TokenEvent> events;
  const bool finished = job_->wait(events, wait);
  bool complete = reply_.stopped() || (max_tool_calls_ >= 0 && tool_calls_ >= max_tool_calls_);
  for (TokenEvent& e : events) {
    if (complete) break;  // tokens the slot made before it saw the cancellation
    ++completion_tokens_;
    const auto& ends = job_->spec().end_tokens;
    if (std::find(ends.begin(), ends.end(), e.token) != ends.end()) continue;
    chat::OutputDelta d = reply_.push(e.token);
    // One tool call only (parallel_tool_calls false): the reply is complete after it.
    if (max_tool_calls_ >= 0 && tool_calls_ + int(d.tool_calls.size()) >= max_tool_calls_) {
      d.tool_calls.resize(size_t(max_tool_calls_ - tool_calls_));
      complete = true;
    }
    tool_calls_ += int(d.tool_calls.size());
    append_delta(step.delta, std::move(d));
    step.tokens.push_back(std::move(e));
    complete = complete || reply_.stopped();
  }
  if (complete) job_->cancel(CancelReason::ReplyComplete);
  if (!finished) {
    if (client_alive && !client_alive()) job_->cancel(CancelReason::ClientGone);
    if (Clock::now() > deadline_) job_->cancel(CancelReason::Timeout);
    return step;
  }
  chat::OutputDelta last = reply_.finish();
  if (max_tool_calls_ >= 0 && tool_calls_ + int(last.tool_calls.size()) > max_tool_calls_)
    last.tool_calls.resize(size_t(std::max(0, max_tool_calls_ - tool_calls_)));
  tool_calls_ += int(last.tool_calls.size());
  append_delta(step.delta, std::move(last));
  done_ = true;
  step.done = true;
  const JobResult& r = job_->result();
  if (reply_.stopped()) {
    end_ = ReplyEnd::StopString;
  } else {
    switch (r.end) {
      case JobEnd::EndToken:
        end_ = ReplyEnd::EndToken;
        break;
      case JobEnd::MaxTokens:
      case JobEnd::ContextFull:
        end_ = ReplyEnd::Length;
        break;
      case JobEnd::Failed:
        end_ = ReplyEnd::Failed;
        break;
      case JobEnd::Cancelled:
        switch (r.cancel_reason) {
          case CancelReason::ReplyComplete:
            end_ = ReplyEnd::EndToken;
            break;
          case CancelReason::Timeout:
            end_ = ReplyEnd::Timeout;
            break;
          case CancelReason::Shutdown:
            end_ = ReplyEnd::Shutdown;
            break;
          default:
            end_ = ReplyEnd::ClientGone;
            break;
        }
        break;
    }
  }
  return step;
}

}  // namespace rl::server
