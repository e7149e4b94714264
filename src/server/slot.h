// One parallel session and what the server knows about its state: the tokens it has consumed
// (its KV rows) and a few recurrent-state checkpoints along them. A request resumes from the
// live state when its prompt extends those tokens, else from the longest checkpoint that is a
// prefix of it (restoring only the recurrent state; the KV rows are still in the session).
//
// A slot is used by one thread at a time: the scheduler plans while the slot is idle, and the
// slot's own thread runs the job.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"

namespace rl::server {

struct SlotOptions {
  bool prefix_reuse = true;
  int max_checkpoints = 8;             // recurrent-state checkpoints kept per slot
  int64_t checkpoint_gap = 64;         // fewest tokens between two checkpoints of one prompt
  int64_t prefill_chunk = 2048;        // tokens per prefill call (cancellation is checked between)
  int64_t promote_min_tokens = 64;     // shortest state worth copying into the shared cache
  uint64_t kv_bytes_per_position = 0;  // to size a full snapshot before taking it
};

struct ResumePlan {
  enum class From { Start, Live, Checkpoint, Cache };
  From from = From::Start;
  int64_t position = 0;   // prompt tokens that will not be recomputed
  uint64_t cache_id = 0;  // for From::Cache
};

// Where a new prompt could resume in this slot (Start at 0 if nowhere).
ResumePlan plan_in_slot(std::span<const int32_t> history, std::span<const int64_t> checkpoints,
                        std::span<const int32_t> prompt);

// The prompt positions worth a checkpoint when running prompt[from, n): the last message start,
// the position one before the end (an identical or extended prompt then resumes with one token
// left to run), and earlier message starts at least `gap` tokens apart.
std::vector<int64_t> choose_checkpoints(std::span<const int64_t> boundaries, int64_t from,
                                        int64_t n, int64_t gap);

class Slot {
 public:
  Slot(int id, std::unique_ptr<engine::Session> session, SlotOptions options);

  int id() const { return id_; }
  uint64_t last_used() const { return last_used_; }
  ResumePlan plan(std::span<const int32_t> prompt) const;

  // Runs the job to its end and returns how it ended (never throws). The caller finishes the
  // job, after marking the slot free, so a client that sees the end can count on the slot.
  JobResult run(Job& job, const ResumePlan& plan, PrefixCache* cache, Metrics* metrics,
                uint64_t tick);

 private:
  struct Checkpoint {
    int64_t position = 0;
    engine::StateSnapshot state;  // recurrent state only
  };

  void promote_lost_state(const ResumePlan& plan, PrefixCache* cache, Metrics* metrics);
  int64_t resume(const ResumePlan& plan, std::span<const int32_t> prompt, PrefixCache* cache);
  bool prefill(Job& job, int64_t from, JobStats& stats, Metrics* metrics);
  JobEnd generate(Job& job, JobStats& stats, Metrics* metrics);
  void add_checkpoint(int64_t position);
  void forget_state();
  std::vector<int64_t> checkpoint_positions() const;

  const int id_;
  std::unique_ptr<engine::Session> session_;
  const SlotOptions options_;
  std::vector<int32_t> history_;         // tokens consumed: the session's KV rows
  std::vector<Checkpoint> checkpoints_;  // ascending positions, all <= history_.size()
  uint64_t last_used_ = 0;
  std::vector<float> biased_;  // logits + logit_bias, reused
};

}  // namespace rl::server
