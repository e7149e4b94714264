#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace rl::engine {

void SamplerParams::validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    fail("temperature must be >= 0 (got ", temperature, ")");
  if (top_k < 0) fail("top_k must be >= 0 (got ", top_k, ")");
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1] (got ", top_p, ")");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1] (got ", min_p, ")");
  if (!(repeat_penalty > 0.0f) || !std::isfinite(repeat_penalty))
    fail("repeat_penalty must be > 0 (got ", repeat_penalty, ")");
  if (repeat_last_n < -1) fail("repeat_last_n must be >= -1 (got ", repeat_last_n, ")");
  if (!std::isfinite(presence_penalty)) fail("presence_penalty must be finite");
  if (!std::isfinite(frequency_penalty)) fail("frequency_penalty must be finite");
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

void Sampler::accept(int32_t token) {
  history_.push_back(token);
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(params_.seed);
}

int32_t Sampler::sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (n == 0) fail("sampler: no logits");

  // Penalties apply to the tokens in the recent window, each distinct token once (repeat and
  // presence) or per occurrence (frequency), as llama.cpp and OpenAI define them.
  auto& counts = counts_;
  counts.clear();  // keeps its buckets: no allocation per token once warm
  const bool penalise = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                        params_.frequency_penalty != 0.0f;
  if (penalise && params_.repeat_last_n != 0) {
    const size_t window = params_.repeat_last_n < 0
                              ? history_.size()
                              : std::min(history_.size(), size_t(params_.repeat_last_n));
    for (size_t i = history_.size() - window; i < history_.size(); ++i) ++counts[history_[i]];
  }
  auto adjusted = [&](int32_t id) {
    float l = logits[id];
    if (counts.empty()) return l;
    auto it = counts.find(id);
    if (it == counts.end()) return l;
    l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    return l - params_.presence_penalty - params_.frequency_penalty * float(it->second);
  };

  if (params_.temperature == 0.0f) {
    int32_t best = 0;
    float best_l = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n; ++i) {
      const float l = adjusted(i);
      if (l > best_l) {  // strict: ties keep the lowest id
        best_l = l;
        best = i;
      }
    }
    return best;
  }

  candidates_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const float l = adjusted(i);
    if (l != -std::numeric_limits<float>::infinity() && !std::isnan(l))
      candidates_.emplace_back(l, i);
  }
  if (candidates_.empty()) fail("sampler: every logit is -inf or NaN");
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && size_t(params_.top_k) < keep) {
    keep = size_t(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }

  // Softmax at the temperature, in double for stable sums.
  const double max_l = candidates_[0].first;
  auto& probs = probs_;
  probs.resize(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probs[i] = std::exp((candidates_[i].first - max_l) / params_.temperature);
    total += probs[i];
  }
  for (auto& p : probs) p /= total;

  // min-p: drop tokens below min_p times the most likely one.
  if (params_.min_p > 0.0f) {
    const double floor = probs[0] * params_.min_p;
    while (keep > 1 && probs[keep - 1] < floor) --keep;
  }
  keep = std::min(keep, probs.size());
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i];
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept_mass = 0;
  for (size_t i = 0; i < keep; ++i) kept_mass += probs[i];
  std::uniform_real_distribution<double> uniform(0.0, kept_mass);
  const double r = uniform(rng_);
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (r < acc) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace rl::engine
