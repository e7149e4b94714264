// Synthetic qwen3next models: random but valid weights of any shape and type mix, planned
// tensor by tensor and streamed to a GGUF file (memory stays small even at full size).
//
// Values follow the tiny test models' recipe: linear weights N(0, gain/sqrt(fan_in)) (gain 3 for
// the output head, 2 for routers, 1 otherwise), embedding std 1, zero-centred norms stored as
// 1 + N(0, 0.1) (ssm_norm likewise), ssm_a = -A with A log-uniform on [0.02, 8], ssm_dt.bias
// U(-4, 1), conv taps std 0.5. Every row's values depend only on (seed, layer, role, logical
// row), so the fused layouts (ssm_in, ffn_gate_up_exps) hold exactly the rows of the split ones.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf.h"

namespace rl::model::synthetic {

using gguf::TensorType;

struct Shape {
  int64_t n_vocab = 0;  // 0: the vocabulary's own size
  int64_t n_embd = 2048;
  int n_layer = 48;  // trunk layers
  int64_t context_length = 262144;
  int full_attention_interval = 4;
  int n_head = 16;
  int n_head_kv = 2;
  int head_dim = 256;
  int n_rot = 64;
  float rope_theta = 1e7f;
  float rms_eps = 1e-6f;
  int ssm_n_k_heads = 16;
  int ssm_n_v_heads = 32;
  int ssm_head_dim = 128;
  int ssm_conv_kernel = 4;
  int n_expert = 512;
  int n_expert_used = 10;
  int64_t expert_ff = 512;
  int64_t shexp_ff = 512;
  int64_t dense_ff = 5120;  // feed_forward_length (informational)
};

// The type of each group of tensors. Norms, conv taps, ssm_a and ssm_dt are always F32.
struct TypeMix {
  TensorType embed = TensorType::Q4_K;
  TensorType output = TensorType::Q6_K;
  TensorType expert_gate_up = TensorType::IQ2_XXS;
  TensorType expert_down = TensorType::IQ2_XXS;
  TensorType attn_q = TensorType::Q4_K;
  TensorType attn_kv = TensorType::Q4_K;  // attn_k, attn_v
  TensorType attn_output = TensorType::Q4_K;
  TensorType ssm_qkv = TensorType::Q4_K;   // attn_qkv, or the fused ssm_in
  TensorType ssm_gate = TensorType::Q4_K;  // attn_gate (z)
  TensorType ssm_ba = TensorType::Q8_0;
  TensorType ssm_out = TensorType::Q4_K;
  TensorType shexp_gate_up = TensorType::Q4_K;  // ffn_gate_shexp, ffn_up_shexp
  TensorType shexp_down = TensorType::Q4_K;     // ffn_down_shexp
  TensorType router = TensorType::F32;          // ffn_gate_inp and ffn_gate_inp_shexp

  // `--dense`: every attention, DeltaNet (except ssm_ba) and shared-expert projection.
  void set_dense(TensorType t);
};

struct Layout {
  bool fused_ssm_in = false;   // legacy ssm_in instead of attn_qkv + attn_gate
  bool fused_gate_up = false;  // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
  bool tied_output = false;    // no output.weight
  bool mtp = false;            // one MTP block after the trunk (nextn_predict_layers = 1)
  bool shexp_gate_2d = false;  // ffn_gate_inp_shexp as {d, 1} instead of {d}
};

struct Spec {
  std::string name = "synthetic";
  Shape shape;
  TypeMix types;
  Layout layout;
  uint64_t seed = 1;
  std::string vocab_from;  // a GGUF whose tokenizer.* metadata is copied; empty: built-in vocab
};

// "tiny" (tiny-f32's config), "tiny-quant" (tiny-quant's config and type rules), "80b-a3b" (the
// real shapes with the ANCHORS.md type mix). Throws rl::Error for other names.
Spec preset(std::string_view name);
std::vector<std::string> preset_names();

// How a tensor's values are drawn.
enum class Init { Normal, Norm, SsmA, DtBias };

// What a tensor's rows are; with the layer and the logical row it seeds the row's values.
enum class Role : uint32_t {
  Embed = 1,
  Output,
  OutputNorm,
  AttnNorm,
  PostNorm,
  AttnQ,
  AttnK,
  AttnV,
  AttnOut,
  QNorm,
  KNorm,
  SsmQkv,
  SsmZ,
  SsmBa,
  SsmConv,
  SsmDt,
  SsmA,
  SsmNorm,
  SsmOut,
  Router,
  ExpGate,
  ExpUp,
  ExpDown,
  ShexpGateInp,
  ShexpGate,
  ShexpUp,
  ShexpDown,
  EhProj,
  ENorm,
  HNorm,
  SharedHeadNorm,
};

struct PlannedTensor {
  std::string name;
  TensorType type = TensorType::F32;
  int n_dims = 1;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint64_t bytes = 0;
  Init init = Init::Normal;
  float stddev = 0;  // Init::Normal
  int layer = -1;    // -1 for global tensors
  // Which logical rows the stored rows are (fused layouts interleave two roles).
  enum class Rows { Plain, FusedSsmIn, FusedGateUp } rows = Rows::Plain;
  Role role = Role::Embed;
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

struct Plan {
  Spec spec;
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<PlannedTensor> tensors;
  std::vector<std::string> notes;  // types replaced where rows did not fit their blocks

  uint64_t tensor_bytes() const;
  // Descriptions for read_config / bind_weights (data == nullptr, offsets as written).
  std::vector<gguf::TensorInfo> tensor_infos() const;
};

// Resolves the spec into metadata and the tensor list. Reads spec.vocab_from if set. Throws
// rl::Error for inconsistent shapes or types quant cannot produce.
Plan make_plan(const Spec& spec);

// Called after each piece written: bytes of tensor data so far, and in all.
using Progress = std::function<void(uint64_t done, uint64_t total)>;

// Streams the plan to `path` through gguf::Writer, generating rows in parallel.
void write_model(const Plan& plan, const std::string& path, const Progress& progress = {});

// The stored values of row `row` of a planned tensor, as generated (tests; F32/F16/BF16 or any
// quantised type: the block bytes). dst holds the row's bytes.
void generate_row(const Plan& plan, const PlannedTensor& t, int64_t row, uint8_t* dst);

// The built-in byte-level vocabulary: tokenizer.* metadata for n_vocab tokens (padded with
// [PAD<i>] tokens of type UNUSED), or its natural size when n_vocab is 0.
std::vector<std::pair<std::string, gguf::Value>> builtin_vocab(int64_t n_vocab);
int64_t builtin_vocab_size();

}  // namespace rl::model::synthetic
