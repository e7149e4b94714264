// Turns logits into a token: penalties, then temperature with top-k / top-p / min-p, or greedy.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace rl::engine {

struct SamplerParams {
  float temperature = 0.8f;        // 0: greedy (argmax; ties go to the lowest id)
  int top_k = 40;                  // 0: off
  float top_p = 0.95f;             // 1: off
  float min_p = 0.05f;             // 0: off
  float repeat_penalty = 1.0f;     // 1: off; divides positive logits, multiplies negative ones
  int repeat_last_n = 64;          // window for all penalties; -1: whole history
  float presence_penalty = 0.0f;   // subtracted once per token present in the window
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the window
  uint64_t seed = 0;

  void validate() const;  // throws rl::Error naming the bad parameter
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);
  // Picks the next token. Does not modify logits.
  int32_t sample(std::span<const float> logits);
  // Records a token of the context (prompt or generated) for the penalties.
  void accept(int32_t token);
  void reset();

 private:
  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;
  // Reused between calls so that sampling allocates nothing once warm.
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<double> probs_;
  std::unordered_map<int32_t, int> counts_;
};

}  // namespace rl::engine
