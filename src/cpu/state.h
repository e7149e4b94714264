// What the CPU forward pass reads and writes: the loaded model, one session's recurrent state
// and KV cache, and reusable activation buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cpu/ops.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "util/thread_pool.h"
#include "util/virtual_buffer.h"

namespace rl::cpu {

struct Model {
  gguf::File file;  // owns the mapping the weights point into
  model::Config config;
  model::Weights weights;
  std::unique_ptr<ThreadPool> pool;
};

// K and V rows of one attention layer: [position][n_head_kv * head_dim] in the session's type.
struct KvLayer {
  VirtualBuffer k, v;
};

// Conv and delta-rule state of one DeltaNet layer, float32.
struct DeltaNetState {
  std::vector<float> conv;   // [conv_kernel - 1][channels]: the last inputs, oldest first
  std::vector<float> delta;  // [n_v_heads][head_dim k][head_dim v]
};

// Activations of one chunk of tokens, grown to the largest chunk seen and then reused.
struct Workspace {
  int64_t capacity = 0;                                              // tokens
  std::vector<float> x, h, mix;                                      // [T][d]
  std::vector<float> qg, q, k, v, o;                                 // attention
  std::vector<float> qkv, z, ba, conv, core, fused;                  // DeltaNet
  std::vector<float> router;                                         // [T][E]
  std::vector<int32_t> expert_ids;                                   // [T][k]
  std::vector<float> expert_weights;                                 // [T][k]
  std::vector<int32_t> expert_order;                                 // [E]: router ranking scratch
  std::vector<std::vector<std::pair<int64_t, float>>> expert_users;  // [E]: (token, weight)
  std::vector<float> ex_in, ex_gu, ex_act, ex_out;    // per-expert gathered activations
  std::vector<float> sh_gu, sh_act, sh_out, sh_gate;  // shared expert
  std::vector<std::vector<float>> scores;             // per thread: attention scores over positions
  Scratch scratch;
};

struct SessionState {
  int64_t position = 0;
  int64_t max_context = 0;
  engine::KvType kv_type = engine::KvType::F32;
  std::vector<KvLayer> kv;              // one per attention layer, in layer order
  std::vector<DeltaNetState> deltanet;  // one per DeltaNet layer, in layer order
  Workspace ws;
};

// Stores one K or V row of n values in the cache's type.
void store_kv_row(engine::KvType type, uint8_t* dst, const float* src, int64_t n);

// Runs the model over tokens at positions [state.position, +n) and advances the position.
// Writes the logits of the last token to last_logits (n_vocab) and, if all_logits is not empty,
// the logits of every token (n * n_vocab).
void forward(const Model& model, SessionState& state, std::span<const int32_t> tokens,
             std::span<float> last_logits, std::span<float> all_logits);

}  // namespace rl::cpu
