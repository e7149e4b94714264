// Counters for GET /metrics (Prometheus text format). Updated from the HTTP threads and the
// slots; all methods are thread-safe.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/prefix_cache.h"

namespace rl::server {

struct SchedulerStatus {
  int slots = 0;
  int busy = 0;
  int queued = 0;
  int queue_limit = 0;
};

class Metrics {
 public:
  void count_response(const std::string& route, int status);
  void add_prompt(int64_t prompt_tokens, int64_t cached_tokens);  // one per started job
  void add_prefill(int64_t tokens, double seconds);
  void add_decode(int64_t tokens, double seconds);
  void count_rejected() { rejected_.fetch_add(1); }
  void count_cancelled() { cancelled_.fetch_add(1); }
  void count_promotion() { promotions_.fetch_add(1); }

  std::string render(const SchedulerStatus& scheduler, const PrefixCacheStats& cache) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, cache_hits_ = 0, cache_misses_ = 0;
  int64_t prefill_tokens_ = 0, decode_tokens_ = 0;
  double prefill_seconds_ = 0, decode_seconds_ = 0;
  double last_prefill_rate_ = 0, last_decode_rate_ = 0;
  std::atomic<int64_t> rejected_{0}, cancelled_{0}, promotions_{0};
};

}  // namespace rl::server
