#include "server/slot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace rl::server {

ResumePlan plan_in_slot(std::span<const int32_t> history, std::span<const int64_t> checkpoints,
                        std::span<const int32_t> prompt) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t h = static_cast<int64_t>(history.size());
  const auto mismatch = std::mismatch(history.begin(), history.end(), prompt.begin(), prompt.end());
  const int64_t common = mismatch.first - history.begin();
  ResumePlan plan;
  if (common == h && h > 0 && h < n) {
    plan.from = ResumePlan::From::Live;
    plan.position = h;
    return plan;
  }
  // A checkpoint must leave at least one prompt token to run: snapshots carry no logits.
  const int64_t limit = std::min(common, n - 1);
  for (int64_t pos : checkpoints) {
    if (pos > 0 && pos <= limit && pos > plan.position) {
      plan.from = ResumePlan::From::Checkpoint;
      plan.position = pos;
    }
  }
  return plan;
}

std::vector<int64_t> choose_checkpoints(std::span<const int64_t> boundaries, int64_t from,
                                        int64_t n, int64_t gap) {
  std::vector<int64_t> chosen;
  const int64_t last = n - 1;
  int64_t last_boundary = -1;
  for (int64_t b : boundaries)
    if (b > from && b < last) last_boundary = b;
  int64_t previous = from;
  for (int64_t b : boundaries) {
    if (b <= from || b >= last) continue;
    if (b == last_boundary || b - previous >= gap) {
      chosen.push_back(b);
      previous = b;
    }
  }
  if (last > from) chosen.push_back(last);
  return chosen;
}

Slot::Slot(int id, std::unique_ptr<engine::Session> session, SlotOptions options)
    : id_(id), session_(std::move(session)), options_(options) {}

std::vector<int64_t> Slot::checkpoint_positions() const {
  std::vector<int64_t> positions;
  for (const auto& c : checkpoints_) positions.push_back(c.position);
  return positions;
}

ResumePlan Slot::plan(std::span<const int32_t> prompt) const {
  if (!options_.prefix_reuse) return {};
  const auto positions = checkpoint_positions();
  return plan_in_slot(history_, positions, prompt);
}

void Slot::forget_state() {
  session_->reset();
  history_.clear();
  checkpoints_.clear();
}

void Slot::add_checkpoint(int64_t position) {
  if (!options_.prefix_reuse || options_.max_checkpoints <= 0) return;
  Checkpoint c{position, session_->snapshot(false)};
  auto at = std::lower_bound(checkpoints_.begin(), checkpoints_.end(), position,
                             [](const Checkpoint& a, int64_t p) { return a.position < p; });
  if (at != checkpoints_.end() && at->position == position) {
    *at = std::move(c);
    return;
  }
  checkpoints_.insert(at, std::move(c));
  // Over the limit: keep the first (often a shared system prompt) and the most recent ones;
  // drop the oldest after the first.
  if (static_cast<int>(checkpoints_.size()) > options_.max_checkpoints)
    checkpoints_.erase(checkpoints_.begin() + (checkpoints_.size() > 1 ? 1 : 0));
}

// Before a slot's state is overwritten by an unrelated prompt, its most valuable state (the
// longest checkpoint that will be lost) is copied with its KV rows into the shared cache, so
// that the conversation it belongs to can resume later in any slot.
void Slot::promote_lost_state(const ResumePlan& plan, PrefixCache* cache, Metrics* metrics) {
  if (!cache || !cache->enabled() || checkpoints_.empty()) return;
  const bool keeps_rows =
      plan.from == ResumePlan::From::Live || plan.from == ResumePlan::From::Checkpoint;
  const int64_t kept = keeps_rows ? plan.position : 0;
  const Checkpoint& longest = checkpoints_.back();
  if (longest.position <= kept || longest.position < options_.promote_min_tokens) return;
  const std::span<const int32_t> tokens(history_.data(), size_t(longest.position));
  const uint64_t estimate = longest.state.recurrent.size() +
                            options_.kv_bytes_per_position * uint64_t(longest.position) +
                            tokens.size() * sizeof(int32_t);
  if (!cache->fits(estimate) || cache->contains(tokens)) return;
  session_->restore(longest.state);  // the KV rows up to it are still in the session
  cache->insert(std::vector<int32_t>(tokens.begin(), tokens.end()), session_->snapshot(true));
  if (metrics) metrics->count_promotion();
  // The session now stands at the checkpoint; the live state beyond it is gone.
  history_.resize(size_t(longest.position));
}

int64_t Slot::resume(const ResumePlan& plan, std::span<const int32_t> prompt, PrefixCache* cache) {
  using From = ResumePlan::From;
  switch (plan.from) {
    case From::Live:
      if (int64_t(history_.size()) == plan.position && session_->position() == plan.position) {
        break;
      }
      [[fallthrough]];  // the live state moved (promotion): use the checkpoint there, if any
    case From::Checkpoint: {
      auto it = std::find_if(checkpoints_.begin(), checkpoints_.end(),
                             [&](const Checkpoint& c) { return c.position == plan.position; });
      if (it == checkpoints_.end()) {
        forget_state();
        return 0;
      }
      session_->restore(it->state);
      history_.resize(size_t(plan.position));
      break;
    }
    case From::Cache: {
      auto state = cache ? cache->load(plan.cache_id) : nullptr;
      checkpoints_.clear();
      if (!state || state->position != plan.position) {
        forget_state();
        return 0;
      }
      try {
        session_->restore(*state);
      } catch (const Error& e) {
        log_warn("slot ", id_, ": could not restore a cached state (", e.what(), ")");
        forget_state();
        return 0;
      }
      history_.assign(prompt.begin(), prompt.begin() + plan.position);
      break;
    }
    case From::Start:
      forget_state();
      return 0;
  }
  std::erase_if(checkpoints_, [&](const Checkpoint& c) { return c.position > plan.position; });
  return plan.position;
}

bool Slot::prefill(Job& job, int64_t from, JobStats& stats, Metrics* metrics) {
  const auto& prompt = job.spec().prompt;
  const int64_t n = static_cast<int64_t>(prompt.size());
  const auto cuts = choose_checkpoints(job.spec().boundaries, from, n, options_.checkpoint_gap);
  Timer timer;
  int64_t pos = from;
  size_t next_cut = 0;
  while (pos < n) {
    if (job.cancel_requested()) break;
    int64_t end = std::min(n, pos + std::max<int64_t>(1, options_.prefill_chunk));
    while (next_cut < cuts.size() && cuts[next_cut] <= pos) ++next_cut;
    if (next_cut < cuts.size() && cuts[next_cut] < end) end = cuts[next_cut];
    session_->prefill(std::span<const int32_t>(prompt.data() + pos, size_t(end - pos)));
    history_.insert(history_.end(), prompt.begin() + pos, prompt.begin() + end);
    pos = end;
    if (next_cut < cuts.size() && cuts[next_cut] == pos) add_checkpoint(pos);
  }
  stats.prefill_seconds = timer.seconds();
  if (metrics) metrics->add_prefill(pos - from, stats.prefill_seconds);
  return pos == n;
}

namespace {

// log-softmax of one entry, and the top entries, over raw model logits.
struct LogSoftmax {
  float max = 0;
  double log_sum = 0;
  explicit LogSoftmax(std::span<const float> logits) {
    max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - max);
    log_sum = std::log(sum);
  }
  float operator()(float logit) const { return float(double(logit) - max - log_sum); }
};

void fill_logprobs(std::span<const float> logits, int top, TokenEvent& event) {
  const LogSoftmax lsm(logits);
  event.logprob = lsm(logits[event.token]);
  if (top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  const size_t k = std::min(ids.size(), size_t(top));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < k; ++i) event.top.push_back({ids[i], lsm(logits[ids[i]])});
}

}  // namespace

JobEnd Slot::generate(Job& job, JobStats& stats, Metrics* metrics) {
  const JobSpec& spec = job.spec();
  const int64_t room = session_->max_context() - session_->position();
  int64_t budget = std::max<int64_t>(0, room);
  JobEnd at_budget = JobEnd::ContextFull;
  if (spec.max_tokens >= 0 && spec.max_tokens <= budget) {
    budget = spec.max_tokens;
    at_budget = JobEnd::MaxTokens;
  }
  engine::Sampler sampler(spec.sampler);
  std::span<const float> logits = session_->logits();
  Timer timer;
  JobEnd end = at_budget;
  while (true) {
    if (stats.generated >= budget) {
      end = at_budget;
      break;
    }
    if (job.cancel_requested()) {
      end = JobEnd::Cancelled;
      break;
    }
    std::span<const float> scored = logits;
    if (!spec.logit_bias.empty()) {
      biased_.assign(logits.begin(), logits.end());
      for (auto [id, bias] : spec.logit_bias)
        if (id >= 0 && size_t(id) < biased_.size()) biased_[id] += bias;
      scored = biased_;
    }
    TokenEvent event;
    event.token = sampler.sample(scored);
    if (spec.top_logprobs >= 0) fill_logprobs(logits, spec.top_logprobs, event);
    const int32_t token = event.token;
    job.push(std::move(event));
    ++stats.generated;
    if (std::find(spec.end_tokens.begin(), spec.end_tokens.end(), token) != spec.end_tokens.end()) {
      end = JobEnd::EndToken;
      break;
    }
    if (stats.generated >= budget || job.cancel_requested()) continue;  // ends at the top
    sampler.accept(token);
    logits = session_->decode(token);
    history_.push_back(token);
  }
  stats.decode_seconds = timer.seconds();
  if (metrics) metrics->add_decode(stats.generated, stats.decode_seconds);
  return end;
}

JobResult Slot::run(Job& job, const ResumePlan& plan, PrefixCache* cache, Metrics* metrics,
                    uint64_t tick) {
  last_used_ = tick;
  JobResult result;
  result.stats.prompt_tokens = static_cast<int64_t>(job.spec().prompt.size());
  try {
    if (options_.prefix_reuse) promote_lost_state(plan, cache, metrics);
    const int64_t from = resume(plan, job.spec().prompt, cache);
    result.stats.cached_tokens = from;
    job.mark_started(from);
    if (metrics) metrics->add_prompt(result.stats.prompt_tokens, from);
    if (!prefill(job, from, result.stats, metrics)) {
      result.end = JobEnd::Cancelled;
    } else {
      result.end = generate(job, result.stats, metrics);
    }
  } catch (const std::exception& e) {
    log_warn("slot ", id_, ": request failed: ", e.what());
    result.end = JobEnd::Failed;
    result.error = e.what();
    try {
      forget_state();
    } catch (const std::exception&) {
    }
  }
  if (result.end == JobEnd::Cancelled) {
    result.cancel_reason = job.cancel_reason();
    if (metrics && result.cancel_reason != CancelReason::ReplyComplete) metrics->count_cancelled();
  }
  return result;
}

}  // namespace rl::server
