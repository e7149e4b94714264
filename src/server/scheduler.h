// K slots, each a session with its own thread, and a bounded FIFO queue in front of them. The
// queue's head goes to the idle slot that can resume the most of its prompt (live state or a
// checkpoint), or to the least recently used idle slot when the shared prefix cache holds a
// longer prefix or nothing matches. HTTP threads only submit, read and cancel jobs; all model
// work happens on the slot threads.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/slot.h"

namespace rl::server {

struct SchedulerOptions {
  int slots = 1;
  int queue_limit = 16;  // requests that may wait for a slot; more get 429
  engine::SessionOptions session;
  SlotOptions slot;
};

class Scheduler {
 public:
  // Creates the sessions (throws rl::Error if the engine cannot) and starts the slot threads.
  Scheduler(engine::Engine& engine, SchedulerOptions options, PrefixCache* cache, Metrics* metrics);
  ~Scheduler();  // shutdown() and join
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Throws ApiError 429 (with Retry-After) when the queue is full, 503 after
  // shutdown().
  std::shared_ptr<Job> submit(JobSpec spec);

  // Refuses new jobs, cancels queued and running ones (they finish with CancelReason::Shutdown
  // within one token) and waits for the slot threads to go idle.
  void shutdown();

  SchedulerStatus status() const;
  int64_t context() const { return options_.session.max_context; }

 private:
  struct Runner {
    std::unique_ptr<Slot> slot;
    std::shared_ptr<Job> job;  // assigned and not yet finished
    ResumePlan plan;
    std::condition_variable wake;
    std::thread thread;
  };

  void slot_loop(Runner& runner);
  void dispatch_locked();
  void withdraw(Job* job);
  int retry_after_seconds_locked() const;

  engine::Engine& engine_;
  const SchedulerOptions options_;
  PrefixCache* cache_;
  Metrics* metrics_;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Runner>> runners_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  uint64_t tick_ = 0;
  double average_job_seconds_ = 1.0;
};

}  // namespace rl::server
