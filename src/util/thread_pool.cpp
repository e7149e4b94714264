#include "util/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RL_CPU_RELAX() _mm_pause()
#else
#define RL_CPU_RELAX() std::this_thread::yield()
#endif

namespace rl {

namespace {
// A few µs of spinning: long enough to bridge the serial gaps between the loops of one
// decode step, short enough not to burn a core while idle.
constexpr int kSpinIterations = 1000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int thread_index) {
  for (;;) {
    const int64_t begin = next_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_) return;
    (*fn_)(begin, std::min(n_, begin + grain_), thread_index);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin first: the next loop of a decode step usually comes within microseconds.
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      RL_CPU_RELAX();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    run_chunks(index);
    busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex, so a worker about to sleep either sees the new generation or is
    // already waiting when notify_all runs.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_chunks(0);
  for (int spins = 0; busy_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations)
      RL_CPU_RELAX();
    else
      std::this_thread::yield();
  }
  fn_ = nullptr;
}

}  // namespace rl
