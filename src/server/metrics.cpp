#include "server/metrics.h"

#include <sstream>

namespace rl::server {

void Metrics::count_response(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++responses_[{route, status}];
}

void Metrics::add_prompt(int64_t prompt_tokens, int64_t cached_tokens) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt_tokens;
  cached_tokens_ += cached_tokens;
  ++(cached_tokens > 0 ? cache_hits_ : cache_misses_);
}

void Metrics::add_prefill(int64_t tokens, double seconds) {
  std::lock_guard lock(mutex_);
  prefill_tokens_ += tokens;
  prefill_seconds_ += seconds;
  if (tokens > 0 && seconds > 0) last_prefill_rate_ = double(tokens) / seconds;
}

void Metrics::add_decode(int64_t tokens, double seconds) {
  std::lock_guard lock(mutex_);
  decode_tokens_ += tokens;
  decode_seconds_ += seconds;
  if (tokens > 0 && seconds > 0) last_decode_rate_ = double(tokens) / seconds;
}

namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <typename T>
void metric(std::ostringstream& out, const char* name, const char* type, const char* help,
            T value) {
  family(out, name, type, help);
  out << name << ' ' << value << '\n';
}

}  // namespace

std::string Metrics::render(const SchedulerStatus& sched, const PrefixCacheStats& cache) const {
  std::ostringstream out;
  out.precision(10);
  std::lock_guard lock(mutex_);
  family(out, "redlite_http_responses_total", "counter", "HTTP responses by route and status.");
  for (const auto& [key, count] : responses_)
    out << "redlite_http_responses_total{route=\"" << key.first << "\",status=\"" << key.second
        << "\"} " << count << '\n';
  metric(out, "redlite_prompt_tokens_total", "counter", "Prompt tokens of started requests.",
         prompt_tokens_);
  metric(out, "redlite_prompt_tokens_cached_total", "counter",
         "Prompt tokens restored from saved state instead of recomputed.", cached_tokens_);
  metric(out, "redlite_prefix_cache_hits_total", "counter",
         "Requests that resumed from saved state.", cache_hits_);
  metric(out, "redlite_prefix_cache_misses_total", "counter",
         "Requests that started from an empty state.", cache_misses_);
  metric(out, "redlite_prefill_tokens_total", "counter", "Tokens run through prefill.",
         prefill_tokens_);
  metric(out, "redlite_prefill_seconds_total", "counter", "Time spent in prefill.",
         prefill_seconds_);
  metric(out, "redlite_generated_tokens_total", "counter", "Tokens generated.", decode_tokens_);
  metric(out, "redlite_decode_seconds_total", "counter", "Time spent generating.", decode_seconds_);
  metric(out, "redlite_prefill_tokens_per_second", "gauge",
         "Prefill speed of the last request that ran one.", last_prefill_rate_);
  metric(out, "redlite_decode_tokens_per_second", "gauge",
         "Generation speed of the last request that generated.", last_decode_rate_);
  metric(out, "redlite_requests_rejected_total", "counter",
         "Requests refused with 429 because the queue was full.", rejected_.load());
  metric(out, "redlite_requests_cancelled_total", "counter",
         "Requests stopped early (client gone, timeout, shutdown).", cancelled_.load());
  metric(out, "redlite_slots", "gauge", "Parallel sessions.", sched.slots);
  metric(out, "redlite_slots_busy", "gauge", "Sessions running a request.", sched.busy);
  metric(out, "redlite_queue_depth", "gauge", "Requests waiting for a session.", sched.queued);
  metric(out, "redlite_queue_limit", "gauge", "Most requests that may wait.", sched.queue_limit);
  metric(out, "redlite_prefix_cache_entries", "gauge", "Saved states in RAM.", cache.ram_entries);
  metric(out, "redlite_prefix_cache_bytes", "gauge", "Bytes of saved states in RAM.",
         cache.ram_bytes);
  metric(out, "redlite_prefix_cache_disk_entries", "gauge", "Saved states on disk.",
         cache.disk_entries);
  metric(out, "redlite_prefix_cache_disk_bytes", "gauge", "Bytes of saved states on disk.",
         cache.disk_bytes);
  metric(out, "redlite_prefix_cache_evictions_total", "counter", "Saved states dropped.",
         cache.evictions);
  metric(out, "redlite_prefix_cache_promotions_total", "counter",
         "Session states copied into the shared cache before their session was reused.",
         promotions_.load());
  return out.str();
}

}  // namespace rl::server
