#include "server/job.h"

namespace rl::server {

void Job::cancel(CancelReason reason) {
  CancelReason expected = CancelReason::None;
  if (!cancel_reason_.compare_exchange_strong(expected, reason)) return;
  std::function<void()> listener;
  {
    std::lock_guard lock(mutex_);
    listener = cancel_listener_;
  }
  if (listener) listener();
  changed_.notify_all();
}

void Job::set_cancel_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  cancel_listener_ = std::move(listener);
}

bool Job::wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return finished_ || !pending_.empty(); });
  for (auto& e : pending_) out.push_back(std::move(e));
  pending_.clear();
  return finished_;
}

void Job::push(TokenEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    pending_.push_back(std::move(event));
  }
  changed_.notify_all();
}

void Job::finish(JobResult result) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
    result_ = std::move(result);
    cancel_listener_ = nullptr;  // the scheduler no longer needs to hear about cancellation
  }
  changed_.notify_all();
}

void Job::mark_started(int64_t cached_tokens) {
  std::lock_guard lock(mutex_);
  cached_tokens_ = cached_tokens;
}

std::optional<int64_t> Job::cached_tokens() const {
  std::lock_guard lock(mutex_);
  if (finished_) return result_.stats.cached_tokens;
  return cached_tokens_;
}

bool Job::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

}  // namespace rl::server
