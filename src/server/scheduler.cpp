#include "server/scheduler.h"

#include <algorithm>
#include <cmath>

#include "server/api_error.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace rl::server {

Scheduler::Scheduler(engine::Engine& engine, SchedulerOptions options, PrefixCache* cache,
                     Metrics* metrics)
    : engine_(engine), options_(std::move(options)), cache_(cache), metrics_(metrics) {
  if (options_.slots < 1) fail("--parallel must be at least 1 (got ", options_.slots, ")");
  if (options_.queue_limit < 0) fail("--queue must be >= 0 (got ", options_.queue_limit, ")");
  for (int i = 0; i < options_.slots; ++i) {
    auto runner = std::make_unique<Runner>();
    runner->slot = std::make_unique<Slot>(i, engine_.new_session(options_.session), options_.slot);
    runners_.push_back(std::move(runner));
  }
  for (auto& runner : runners_) {
    Runner* r = runner.get();
    r->thread = std::thread([this, r] { slot_loop(*r); });
  }
}

Scheduler::~Scheduler() {
  shutdown();
  for (auto& runner : runners_)
    if (runner->thread.joinable()) runner->thread.join();
}

std::shared_ptr<Job> Scheduler::submit(JobSpec spec) {
  auto job = std::make_shared<Job>(std::move(spec));
  std::lock_guard lock(mutex_);
  if (stopping_) throw ApiError(503, "the server is shutting down");
  const bool slot_idle = std::any_of(runners_.begin(), runners_.end(),
                                     [](const auto& r) { return r->job == nullptr; });
  if (!slot_idle && static_cast<int>(queue_.size()) >= options_.queue_limit) {
    if (metrics_) metrics_->count_rejected();
    ApiError busy(429, str("all ", options_.slots, " sessions are busy and ", queue_.size(),
                           " requests are waiting; retry later"));
    busy.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds_locked()));
    throw busy;
  }
  job->set_cancel_listener([this, raw = job.get()] { withdraw(raw); });
  queue_.push_back(job);
  dispatch_locked();
  return job;
}

int Scheduler::retry_after_seconds_locked() const {
  const double wait = average_job_seconds_ * double(queue_.size() + 1) / double(options_.slots);
  return static_cast<int>(std::clamp(std::ceil(wait), 1.0, 600.0));
}

void Scheduler::withdraw(Job* job) {
  std::shared_ptr<Job> removed;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const auto& queued) { return queued.get() == job; });
    if (it == queue_.end()) return;  // running (the slot sees the flag) or already done
    removed = *it;
    queue_.erase(it);
  }
  JobResult result;
  result.end = JobEnd::Cancelled;
  result.cancel_reason = removed->cancel_reason();
  result.stats.prompt_tokens = static_cast<int64_t>(removed->spec().prompt.size());
  if (metrics_) metrics_->count_cancelled();
  removed->finish(std::move(result));
}

void Scheduler::dispatch_locked() {
  while (!queue_.empty()) {
    std::vector<Runner*> idle;
    for (auto& r : runners_)
      if (!r->job) idle.push_back(r.get());
    if (idle.empty()) return;
    std::shared_ptr<Job> job = queue_.front();
    const auto& prompt = job->spec().prompt;

    // Best resume point among idle slots; ties go to the live state, then the longest idle.
    Runner* best = nullptr;
    ResumePlan best_plan;
    for (Runner* r : idle) {
      const ResumePlan plan = r->slot->plan(prompt);
      const bool better =
          !best || plan.position > best_plan.position ||
          (plan.position == best_plan.position &&
           (plan.from == ResumePlan::From::Live) > (best_plan.from == ResumePlan::From::Live));
      if (better) {
        best = r;
        best_plan = plan;
      }
    }
    Runner* lru = *std::min_element(idle.begin(), idle.end(), [](Runner* a, Runner* b) {
      return a->slot->last_used() < b->slot->last_used();
    });
    if (best_plan.position == 0) best = lru;
    if (options_.slot.prefix_reuse && cache_ && cache_->enabled()) {
      const PrefixCache::Match match = cache_->find(prompt);
      if (match.length > best_plan.position) {
        best = lru;
        best_plan = {ResumePlan::From::Cache, match.length, match.id};
      }
    }
    queue_.pop_front();
    best->job = std::move(job);
    best->plan = best_plan;
    best->wake.notify_one();
  }
}

void Scheduler::slot_loop(Runner& runner) {
  std::unique_lock lock(mutex_);
  while (true) {
    runner.wake.wait(lock, [&] { return runner.job != nullptr || stopping_; });
    if (!runner.job) return;  // stopping and nothing assigned
    std::shared_ptr<Job> job = runner.job;
    const ResumePlan plan = runner.plan;
    const uint64_t tick = ++tick_;
    lock.unlock();
    Timer timer;
    JobResult result = runner.slot->run(*job, plan, cache_, metrics_, tick);
    const double seconds = timer.seconds();
    lock.lock();
    average_job_seconds_ = 0.8 * average_job_seconds_ + 0.2 * seconds;
    runner.job = nullptr;
    if (!stopping_) dispatch_locked();
    lock.unlock();
    job->finish(std::move(result));  // the slot is free before the client hears of the end
    lock.lock();
    if (stopping_) return;
  }
}

void Scheduler::shutdown() {
  std::vector<std::shared_ptr<Job>> to_cancel;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& r : runners_)
      if (r->job) to_cancel.push_back(r->job);
    to_cancel.insert(to_cancel.end(), queue_.begin(), queue_.end());
    for (auto& r : runners_) r->wake.notify_one();
  }
  // Outside the lock: cancelling a queued job calls withdraw(), which takes it.
  for (auto& job : to_cancel) job->cancel(CancelReason::Shutdown);
  // A job cancelled before its listener ran may still sit in the queue; finish those here.
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(queue_);
  }
  for (auto& job : left) {
    JobResult result;
    result.end = JobEnd::Cancelled;
    result.cancel_reason = CancelReason::Shutdown;
    job->finish(std::move(result));
  }
  for (auto& runner : runners_)
    if (runner->thread.joinable()) runner->thread.join();
}

SchedulerStatus Scheduler::status() const {
  std::lock_guard lock(mutex_);
  SchedulerStatus s;
  s.slots = options_.slots;
  for (const auto& r : runners_) s.busy += r->job ? 1 : 0;
  s.queued = static_cast<int>(queue_.size());
  s.queue_limit = options_.queue_limit;
  return s;
}

}  // namespace rl::server
