// Every tensor of a qwen3next model, bound by name to views into the mapped GGUF file and
// checked against the Config. Nothing here computes; backends read these views.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"

namespace rl::model {

// A view of one tensor in the file. Rows run along ne[1..3]; a row holds ne[0] values.
struct Tensor {
  std::string name;
  gguf::TensorType type = gguf::TensorType::F32;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  uint64_t row_bytes = 0;

  bool present() const { return data != nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  const uint8_t* row(int64_t i) const { return data + static_cast<uint64_t>(i) * row_bytes; }
  // F32 tensors (norms, conv, biases) as floats.
  const float* f32() const { return reinterpret_cast<const float*>(data); }
};

struct AttentionWeights {
  Tensor q;       // {d, n_head * head_dim * 2}: per head [q(256) | gate(256)]
  Tensor k, v;    // {d, n_head_kv * head_dim}
  Tensor output;  // {n_head * head_dim, d}
  Tensor q_norm;  // {head_dim}, stored 1 + w
  Tensor k_norm;  // {head_dim}
};

// The two DeltaNet input layouts found in real files.
enum class DeltaNetLayout {
  Split,  // attn_qkv {d, 2*k_dim + v_dim} rows [q all | k all | v all] + attn_gate {d, v_dim} (z)
  Fused,  // ssm_in {d, 2*k_dim + 2*v_dim}: per key head [q 128 | k 128 | v r*128 | z r*128]
};

struct DeltaNetWeights {
  DeltaNetLayout layout = DeltaNetLayout::Split;
  Tensor qkv;      // Split layout
  Tensor gate;     // Split layout: z
  Tensor ssm_in;   // Fused layout
  Tensor ba;       // {d, 2 * n_v_heads}: per key head [b(r) | a(r)], r = n_v / n_k
  Tensor conv;     // {conv_kernel, channels}: ne0 = tap
  Tensor dt_bias;  // {n_v_heads}
  Tensor a;        // {n_v_heads} = -exp(A_log)
  Tensor norm;     // {ssm_head_dim}, plain weight
  Tensor out;      // {v_dim, d}
};

// Routed experts: gate/up either separate {d, ff, E} or fused {d, 2*ff, E} (gate rows first).
struct ExpertWeights {
  bool fused_gate_up = false;
  Tensor gate, up;  // separate layout
  Tensor gate_up;   // fused layout
  Tensor down;      // {ff, d, E}

  // Row r (0 <= r < ff) of expert e's gate / up projection, and row r (< d) of its down.
  const uint8_t* gate_row(int64_t e, int64_t r, int64_t ff) const;
  const uint8_t* up_row(int64_t e, int64_t r, int64_t ff) const;
  const uint8_t* down_row(int64_t e, int64_t r, int64_t d) const { return down.row(e * d + r); }
  gguf::TensorType gate_up_type() const { return fused_gate_up ? gate_up.type : gate.type; }
};

struct LayerWeights {
  Tensor attn_norm;            // {d}, stored 1 + w
  Tensor post_attention_norm;  // {d}, stored 1 + w
  bool is_attention = false;
  AttentionWeights attn;     // when is_attention
  DeltaNetWeights deltanet;  // otherwise

  Tensor router;  // ffn_gate_inp {d, E}
  ExpertWeights experts;
  Tensor shexp_gate_inp;        // {d} or {d, 1}
  Tensor shexp_gate, shexp_up;  // {d, ff_sh}
  Tensor shexp_down;            // {ff_sh, d}
};

struct Weights {
  Tensor token_embd;   // {d, vocab}
  Tensor output_norm;  // {d}
  Tensor output;       // {d, vocab}; equals token_embd when the file ties them
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  // Tensors of the MTP block(s) after the trunk, by full name, kept for speculative decoding.
  std::map<std::string, Tensor> mtp;
};

// Binds every tensor. Throws rl::Error listing all missing or mis-shaped tensors at once.
//
// Shapes are compared with trailing 1s ignored, so ffn_gate_inp_shexp may be {d} or {d, 1}.
// Every bound tensor's type must be one quant decodes; norms, ssm_conv1d, ssm_a and ssm_dt
// must be F32 (backends read them through Tensor::f32()). A DeltaNet layer with attn_qkv uses
// the Split layout, else the legacy fused ssm_in. Routed gate/up are ffn_gate_up_exps when
// present, else ffn_gate_exps + ffn_up_exps. Tensors of blocks n_layer.. are put in
// Weights::mtp unchecked; tensors the model does not use are ignored.
Weights bind_weights(const gguf::File& file, const Config& config);
// The same over tensor descriptions whose data may be absent (a synthetic model's plan): the
// views then have data == nullptr and only their sizes mean anything.
Weights bind_weights(std::span<const gguf::TensorInfo> tensors, const Config& config,
                     const std::string& source);

// Splits the outputs of a fused ssm_in projection (Fused layout) into the Split layout's
// qkv (2*k_dim + v_dim) and z (v_dim) orders.
void unfuse_ssm_in(const Config& config, const float* fused, float* qkv, float* z);

// Bytes of weights read to decode one token: one embedding row, every non-expert weight, the
// top-k experts of every trunk layer (MTP excluded).
uint64_t decode_weight_bytes(const Config& config, const Weights& weights);

// decode_weight_bytes by what the bytes are.
struct DecodeBytes {
  uint64_t embedding_row = 0;   // one row of token_embd
  uint64_t output_head = 0;     // output.weight (all of token_embd when tied)
  uint64_t routers = 0;         // ffn_gate_inp of every layer
  uint64_t routed_experts = 0;  // gate, up, down of the top-k experts of every layer
  uint64_t shared_experts = 0;  // shared expert projections and their gate
  uint64_t attention = 0;       // attention projections and q/k norms
  uint64_t deltanet = 0;        // DeltaNet projections, conv, A, dt, norm
  uint64_t norms = 0;           // attn_norm, post_attention_norm, output_norm
  uint64_t total() const {
    return embedding_row + output_head + routers + routed_experts + shared_experts + attention +
           deltanet + norms;
  }
};
DecodeBytes decode_weight_breakdown(const Config& config, const Weights& weights);

}  // namespace rl::model
