// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of N threads starts N-1 workers. One loop runs at a time (calls are serialised).
//
// Decode runs hundreds of small loops per token, so waking the workers must cost microseconds:
// workers spin briefly on an atomic generation counter before sleeping on a condition variable,
// and the caller spins (then yields) while the last chunks finish.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rl {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end, thread_index) over disjoint ranges covering [0, n), each range at
  // most `grain` long. thread_index < size(), usable to pick per-thread scratch buffers.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_loop(int index);
  void run_chunks(int thread_index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // serialises parallel_for calls from different threads
  std::mutex mutex_;       // guards sleeping on wake_
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stop_{false};

  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace rl
