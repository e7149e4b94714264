// One decode step of the whole model on the GPU, and the per-session buffers it works on.
// Internal to src/cuda.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/device_model.h"

namespace rl::cuda {

// CTAs per KV head of decode attention (a grid that fills the GPU once), by split size: every
// size attn_splits allows for the cache type.
using AttnGrid = std::map<int, int>;
AttnGrid attention_grid(engine::KvType kv_type, int n_head_kv);
// The grid's largest CTA count (at least 1): the partials per KV head to keep room for.
int most_ctas(const AttnGrid& grid);

// A session's device memory: KV cache, recurrent states, activations. Sized once.
struct SessionBuffers {
  // logits: where the head writes them, the owner's mapped host memory (not part of storage).
  SessionBuffers(const DeviceModel& model, int64_t max_ctx, engine::KvType kv_type, float* logits);

  // Bytes these buffers take for a model and context, for planning before allocation.
  static uint64_t bytes_needed(const model::Config& c, int64_t max_ctx, engine::KvType kv_type);

  int64_t max_ctx = 0;
  engine::KvType kv_type = engine::KvType::F32;
  AttnGrid attn_grid;  // attention CTAs per KV head for each split size

  struct AttentionState {
    void* k = nullptr;  // [n_head_kv][max_ctx][head_dim]
    void* v = nullptr;
  };
  struct DeltaNetState {
    float* conv_ring = nullptr;  // [conv_kernel][channels]
    float* delta = nullptr;      // [n_v_heads][head_dim][head_dim]
  };
  std::vector<AttentionState> attention;  // per attention layer
  std::vector<DeltaNetState> deltanet;    // per DeltaNet layer

  // Activations (float32 unless noted).
  float* x = nullptr;            // residual stream [d]
  float* proj = nullptr;         // outputs of the input projections
  float* q = nullptr;            // attention queries after norm and RoPE
  float* mixed = nullptr;        // attention / DeltaNet output before the output projection
  float* mixed_sumsq = nullptr;  // [v heads][kGroupSumsqParts]: the DeltaNet output's (GroupRms)
  long long* folded = nullptr;   // [n_expert + 1]: the router's folded logits (RouterFold), zero
                                 // between a layer's experts' down and its next output projection
  int32_t* expert_ids = nullptr;
  float* expert_weights = nullptr;
  float* act = nullptr;     // [n_expert_used][expert_ff]
  float* sh_act = nullptr;  // [shexp_ff]
  float* sh_out = nullptr;  // [d]: the shared expert's output, added by the experts' down
  float* part_o = nullptr;
  float* part_ml = nullptr;
  float* logits = nullptr;  // [n_vocab]: the constructor's, in mapped host memory
  int32_t* step = nullptr;  // [token, position] of the step, copied in from host memory

  uint64_t state_bytes = 0;  // KV + recurrent
  DeviceBuffer storage;
};

// Optional observer of the launches of a step (the per-kernel breakdown of `bench decode`).
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Called after each kernel launch with what it was and the bytes it must move.
  virtual void launched(const char* what, uint64_t bytes, cudaStream_t stream) = 0;
};

// The streams a step is enqueued on. Launches that do not depend on each other (the runs of a
// projection of one input with different weight types; the shared expert beside the routed
// ones) go to `side` between a fork and a join on `main`, so they run concurrently, also inside
// the CUDA graph (as parallel branches). With side null everything runs in order on main.
struct StepStreams {
  cudaStream_t main = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

struct StepOptions {
  int split = 128;            // attention positions per split
  int64_t position_hint = 0;  // for byte counts only
};

// Enqueues one token's forward pass: reads [token, position] from buffers.step, writes logits.
// Everything is asynchronous and capturable into a CUDA graph. With an observer, every launch
// goes to streams.main (so that it can be timed on its own).
void enqueue_decode_step(const DeviceModel& m, SessionBuffers& s, const StepOptions& options,
                         const StepStreams& streams, StepObserver* observer = nullptr);

// A value of RL_ENGINE_ATTN_BLK: 0 when unset or empty, else the split size it forces (one of
// kAttnSplitSizes); anything else throws rl::Error naming the variable.
int parse_attention_split(const char* value);
// RL_ENGINE_ATTN_BLK, read and checked once.
int forced_attention_split();
// The split size for a step at `position`: the smallest whose splits each get a CTA of their own
// (so that short contexts keep as many SMs streaming as long ones), else the largest; or
// `forced` (forced_attention_split(); 0 for none), which must be one of the grid's sizes.
int attention_split_for(int64_t position, const AttnGrid& grid, int forced);

}  // namespace rl::cuda
