// The qwen3next hyperparameters, read from GGUF metadata and checked for consistency.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "util/error.h"

namespace rl::model {

// Thrown by read_config and bind_weights: every problem found, one entry each, and a message
// that lists them all ("<source>: not a loadable qwen3next model (N problems):" + one per line).
class ModelError : public Error {
 public:
  ModelError(const std::string& source, std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

struct Config {
  std::string name;            // general.name, if any
  int64_t n_vocab = 0;         // rows of token_embd
  int64_t n_embd = 0;          // hidden size d
  int n_layer = 0;             // main (trunk) layers, MTP block excluded
  int n_nextn = 0;             // extra MTP layers after the trunk (qwen3next.nextn_predict_layers)
  int64_t context_length = 0;  // trained context

  // Full attention.
  int n_head = 0;        // query heads (16)
  int n_head_kv = 0;     // KV heads (2)
  int head_dim = 0;      // key/value length per head (256)
  int n_rot = 0;         // rotary dims (64)
  float rope_theta = 0;  // rope.freq_base
  float rms_eps = 1e-6f;

  // Gated DeltaNet.
  int ssm_conv_kernel = 0;  // 4
  int ssm_head_dim = 0;     // ssm.state_size (128): key and value head dim
  int ssm_n_k_heads = 0;    // ssm.group_count (16)
  int ssm_n_v_heads = 0;    // ssm.time_step_rank (32)

  // MoE.
  int n_expert = 0;       // 512
  int n_expert_used = 0;  // 10
  int64_t expert_ff = 0;  // 512
  int64_t shexp_ff = 0;   // 512
  int64_t dense_ff = 0;   // feed_forward_length (informational)

  std::vector<bool> recurrent;  // per trunk layer: true = Gated DeltaNet, false = attention

  bool is_attention(int layer) const { return !recurrent[layer]; }
  int n_attention_layers() const;
  int n_deltanet_layers() const;
  int64_t q_dim() const { return int64_t{n_head} * head_dim; }                 // 4096
  int64_t kv_dim() const { return int64_t{n_head_kv} * head_dim; }             // 512
  int64_t ssm_k_dim() const { return int64_t{ssm_n_k_heads} * ssm_head_dim; }  // 2048
  int64_t ssm_v_dim() const { return int64_t{ssm_n_v_heads} * ssm_head_dim; }  // 4096
  int64_t ssm_conv_channels() const { return 2 * ssm_k_dim() + ssm_v_dim(); }  // 8192

  // Per position, float32 values of K and V over all attention layers (12288 for the 80B).
  int64_t kv_values_per_position() const { return 2 * kv_dim() * n_attention_layers(); }
  // float32 bytes of the recurrent state (delta + conv) of all DeltaNet layers.
  int64_t recurrent_state_bytes() const;
  // Bytes of the KV cache per position for a given bytes per value (4 f32, 2 bf16/f16).
  int64_t kv_bytes_per_position(int bytes_per_value) const {
    return kv_values_per_position() * bytes_per_value;
  }
};

// Reads and checks the config. Throws rl::Error listing every problem found (wrong
// architecture, missing keys, inconsistent head counts, a layer pattern that does not fit).
//
// Defaults follow llama.cpp where it has them: head_count_kv = head_count, key/value_length =
// embedding_length / head_count, rope.dimension_count = key_length, rope.freq_base = 10000,
// full_attention_interval = 4, expert_feed_forward_length = feed_forward_length /
// expert_used_count, expert_shared_feed_forward_length = feed_forward_length. llama.cpp requires
// attention.layer_norm_rms_epsilon; here it defaults to Qwen3-Next's 1e-6. An explicit
// qwen3next.attention.recurrent_layers (bool or integer array over block_count, or one scalar)
// wins over the interval. n_vocab is the row count of token_embd.weight (else the length of
// tokenizer.ggml.tokens). qwen3next.nextn_predict_layers = N makes the last N of block_count
// blocks the MTP block(s): n_layer = block_count - N.
Config read_config(const gguf::File& file);
// The same from metadata and tensor descriptions that need not be backed by data (for example
// a synthetic model's plan). `source` names them in messages.
Config read_config(const std::vector<std::pair<std::string, gguf::Value>>& metadata,
                   std::span<const gguf::TensorInfo> tensors, const std::string& source);

// True if the file declares general.architecture = "qwen3next".
bool is_qwen3next(const gguf::File& file);

}  // namespace rl::model
