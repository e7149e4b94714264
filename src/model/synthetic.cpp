// Synthetic models: presets, and the plan (metadata + tensor list) of a spec.
#include "model/synthetic.h"

#include <cmath>
#include <map>
#include <tuple>

#include "model/config.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::model::synthetic {
namespace {

using gguf::Value;

// llama.cpp's general.file_type (llama_ftype) for the type of the routed experts, which hold
// almost all of the bytes. Informational.
uint32_t file_type_of(TensorType t) {
  switch (t) {
    case TensorType::F32:
      return 0;
    case TensorType::F16:
      return 1;
    case TensorType::Q4_0:
      return 2;
    case TensorType::Q8_0:
      return 7;
    case TensorType::Q2_K:
      return 10;
    case TensorType::Q3_K:
      return 12;  // Q3_K_M
    case TensorType::Q4_K:
      return 15;  // Q4_K_M
    case TensorType::Q5_K:
      return 17;  // Q5_K_M
    case TensorType::Q6_K:
      return 18;
    case TensorType::IQ2_XXS:
      return 19;
    case TensorType::IQ2_XS:
      return 20;
    case TensorType::IQ3_XXS:
      return 23;
    case TensorType::IQ4_NL:
      return 25;
    case TensorType::IQ4_XS:
      return 30;
    case TensorType::BF16:
      return 32;
    default:
      return 0;
  }
}

uint32_t block_size(TensorType t) {
  return gguf::type_traits(t)->block_size;
}

// A type for rows of n values when `wanted` does not fit them: the nearest 32-value-block type
// (as llama-quantize falls back), or F16 when even 32 does not divide n.
TensorType fitting_type(TensorType wanted, int64_t n) {
  if (n % block_size(wanted) == 0) return wanted;
  TensorType t = TensorType::F16;
  switch (wanted) {
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ3_XXS:
    case TensorType::IQ4_XS:
      t = TensorType::IQ4_NL;
      break;
    case TensorType::Q4_K:
      t = TensorType::Q4_0;
      break;
    default:
      t = TensorType::Q8_0;
      break;  // Q5_K, Q6_K
  }
  return n % block_size(t) == 0 ? t : TensorType::F16;
}

class Planner {
 public:
  explicit Planner(Plan& plan) : plan_(plan) {}

  void add(std::string name, std::vector<int64_t> ne, TensorType type, Init init, Role role,
           int layer, float gain = 1.0f, PlannedTensor::Rows rows = PlannedTensor::Rows::Plain) {
    PlannedTensor t;
    t.name = std::move(name);
    t.n_dims = static_cast<int>(ne.size());
    for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
    t.type = init == Init::Normal ? fit(t.name, type, ne[0]) : TensorType::F32;
    t.bytes = *gguf::row_bytes(t.type, ne[0]) * static_cast<uint64_t>(t.n_rows());
    t.init = init;
    t.stddev = gain / std::sqrt(static_cast<float>(ne[0]));
    t.layer = layer;
    t.role = role;
    t.rows = rows;
    plan_.tensors.push_back(std::move(t));
  }
  void norm(std::string name, int64_t n, Role role, int layer) {
    add(std::move(name), {n}, TensorType::F32, Init::Norm, role, layer);
  }

  void finish_notes() {
    for (const auto& [key, count] : fallbacks_) {
      const auto& [from, to, n] = key;
      plan_.notes.push_back(str(count, count == 1 ? " tensor" : " tensors", " with rows of ", n,
                                " values: ", gguf::type_name(from), " needs multiples of ",
                                block_size(from), ", wrote ", gguf::type_name(to), " instead (",
                                examples_[key], count > 1 ? ", ..." : "", ")"));
    }
  }

 private:
  TensorType fit(const std::string& name, TensorType wanted, int64_t n) {
    const TensorType t = fitting_type(wanted, n);
    if (t != wanted) {
      auto key = std::make_tuple(wanted, t, n);
      if (fallbacks_[key]++ == 0) examples_[key] = name;
    }
    return t;
  }

  Plan& plan_;
  std::map<std::tuple<TensorType, TensorType, int64_t>, int> fallbacks_;
  std::map<std::tuple<TensorType, TensorType, int64_t>, std::string> examples_;
};

void check_spec(const Spec& s) {
  const Shape& h = s.shape;
  std::vector<std::string> problems;
  auto positive = [&](const char* what, int64_t v, int64_t max) {
    if (v <= 0 || v > max) problems.push_back(str(what, " = ", v, " (must be in 1..", max, ")"));
  };
  constexpr int64_t kDim = int64_t{1} << 20;
  positive("layers", h.n_layer, 4096);
  positive("hidden", h.n_embd, kDim);
  positive("context", h.context_length, int64_t{1} << 32);
  positive("full-attention-interval", h.full_attention_interval, 4096);
  positive("heads", h.n_head, 4096);
  positive("kv-heads", h.n_head_kv, 4096);
  positive("head-dim", h.head_dim, 65536);
  positive("rope-dims", h.n_rot, 65536);
  positive("linear-k-heads", h.ssm_n_k_heads, 4096);
  positive("linear-v-heads", h.ssm_n_v_heads, 4096);
  positive("linear-head-dim", h.ssm_head_dim, 65536);
  positive("conv-kernel", h.ssm_conv_kernel, 64);
  positive("experts-count", h.n_expert, 65536);
  positive("experts-used", h.n_expert_used, 65536);
  positive("expert-ff", h.expert_ff, kDim);
  positive("shared-ff", h.shexp_ff, kDim);
  if (h.n_vocab < 0 || h.n_vocab > kDim * 16) problems.push_back(str("vocab = ", h.n_vocab));
  if (!std::isfinite(h.rope_theta) || h.rope_theta <= 0)
    problems.push_back("rope-theta must be > 0");
  if (!problems.empty()) {
    std::string m = "invalid model shape:";
    for (auto& p : problems) m += "\n  " + p;
    fail(m);
  }
  // The remaining consistency rules (head ratios, rope dims, ...) are read_config's, checked on
  // the finished plan.
  const TypeMix& t = s.types;
  for (TensorType type :
       {t.embed, t.output, t.expert_gate_up, t.expert_down, t.attn_q, t.attn_kv, t.attn_output,
        t.ssm_qkv, t.ssm_gate, t.ssm_ba, t.ssm_out, t.shexp_gate_up, t.shexp_down, t.router}) {
    if (!quant::is_supported(type)) {
      fail("type ", gguf::type_name(type),
           " cannot be generated: Red Lite decodes f32 f16 bf16 q8_0 q4_0 q4_K q5_K q6_K q2_K "
           "q3_K iq2_xxs iq2_xs iq3_xxs iq4_xs iq4_nl");
    }
  }
}

std::vector<std::pair<std::string, Value>> vocab_metadata(const Spec& s, int64_t& n_vocab) {
  if (s.vocab_from.empty()) {
    auto kv = builtin_vocab(s.shape.n_vocab);
    n_vocab = s.shape.n_vocab ? s.shape.n_vocab : builtin_vocab_size();
    return kv;
  }
  const gguf::File src = gguf::File::open(s.vocab_from);
  std::vector<std::pair<std::string, Value>> kv;
  for (const auto& [key, value] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) kv.emplace_back(key, value);
  }
  const gguf::Array* tokens = src.get_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->items.empty()) {
    fail(s.vocab_from, ": no tokenizer.ggml.tokens to copy a vocabulary from");
  }
  n_vocab = static_cast<int64_t>(tokens->items.size());
  if (s.shape.n_vocab != 0 && s.shape.n_vocab != n_vocab) {
    fail("--vocab ", s.shape.n_vocab, " differs from the ", n_vocab, " tokens of ", s.vocab_from);
  }
  return kv;
}

std::vector<std::pair<std::string, Value>> model_metadata(const Spec& s, int block_count) {
  const Shape& h = s.shape;
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  std::vector<std::pair<std::string, Value>> kv;
  auto add = [&](std::string key, Value v) { kv.emplace_back(std::move(key), std::move(v)); };
  add("general.architecture", Value::string("qwen3next"));
  add("general.name", Value::string(s.name));
  add("qwen3next.block_count", u32(block_count));
  add("qwen3next.context_length", u32(h.context_length));
  add("qwen3next.embedding_length", u32(h.n_embd));
  add("qwen3next.feed_forward_length", u32(h.dense_ff));
  add("qwen3next.attention.head_count", u32(h.n_head));
  add("qwen3next.attention.head_count_kv", u32(h.n_head_kv));
  add("qwen3next.rope.freq_base", Value::f32(h.rope_theta));
  add("qwen3next.attention.layer_norm_rms_epsilon", Value::f32(h.rms_eps));
  add("qwen3next.expert_count", u32(h.n_expert));
  add("qwen3next.expert_used_count", u32(h.n_expert_used));
  add("qwen3next.attention.key_length", u32(h.head_dim));
  add("qwen3next.attention.value_length", u32(h.head_dim));
  add("general.file_type", u32(file_type_of(s.types.expert_gate_up)));
  add("qwen3next.expert_feed_forward_length", u32(h.expert_ff));
  add("qwen3next.expert_shared_feed_forward_length", u32(h.shexp_ff));
  add("qwen3next.ssm.conv_kernel", u32(h.ssm_conv_kernel));
  add("qwen3next.ssm.state_size", u32(h.ssm_head_dim));
  add("qwen3next.ssm.group_count", u32(h.ssm_n_k_heads));
  add("qwen3next.ssm.time_step_rank", u32(h.ssm_n_v_heads));
  add("qwen3next.ssm.inner_size", u32(int64_t{h.ssm_n_v_heads} * h.ssm_head_dim));
  add("qwen3next.full_attention_interval", u32(h.full_attention_interval));
  add("qwen3next.rope.dimension_count", u32(h.n_rot));
  if (s.layout.mtp) add("qwen3next.nextn_predict_layers", u32(1));
  return kv;
}

// The tensors of one block; `mtp` adds the nextn.* tensors of an MTP block.
void plan_block(Planner& p, const Spec& s, int il, bool attention, bool mtp) {
  const Shape& h = s.shape;
  const TypeMix& t = s.types;
  const int64_t d = h.n_embd, q_dim = int64_t{h.n_head} * h.head_dim;
  const int64_t kv_dim = int64_t{h.n_head_kv} * h.head_dim;
  const int64_t k_dim = int64_t{h.ssm_n_k_heads} * h.ssm_head_dim;
  const int64_t v_dim = int64_t{h.ssm_n_v_heads} * h.ssm_head_dim;
  const std::string b = str("blk.", il, ".");
  using Rows = PlannedTensor::Rows;

  p.norm(b + "attn_norm.weight", d, Role::AttnNorm, il);
  p.norm(b + "post_attention_norm.weight", d, Role::PostNorm, il);
  if (attention) {
    p.add(b + "attn_q.weight", {d, 2 * q_dim}, t.attn_q, Init::Normal, Role::AttnQ, il);
    p.add(b + "attn_k.weight", {d, kv_dim}, t.attn_kv, Init::Normal, Role::AttnK, il);
    p.add(b + "attn_v.weight", {d, kv_dim}, t.attn_kv, Init::Normal, Role::AttnV, il);
    p.add(b + "attn_output.weight", {q_dim, d}, t.attn_output, Init::Normal, Role::AttnOut, il);
    p.norm(b + "attn_q_norm.weight", h.head_dim, Role::QNorm, il);
    p.norm(b + "attn_k_norm.weight", h.head_dim, Role::KNorm, il);
  } else {
    if (s.layout.fused_ssm_in) {
      p.add(b + "ssm_in.weight", {d, 2 * k_dim + 2 * v_dim}, t.ssm_qkv, Init::Normal, Role::SsmQkv,
            il, 1.0f, Rows::FusedSsmIn);
    } else {
      p.add(b + "attn_qkv.weight", {d, 2 * k_dim + v_dim}, t.ssm_qkv, Init::Normal, Role::SsmQkv,
            il);
      p.add(b + "attn_gate.weight", {d, v_dim}, t.ssm_gate, Init::Normal, Role::SsmZ, il);
    }
    p.add(b + "ssm_ba.weight", {d, 2 * int64_t{h.ssm_n_v_heads}}, t.ssm_ba, Init::Normal,
          Role::SsmBa, il);
    // Conv taps: std 0.5 whatever the fan-in (gain 0.5 * sqrt(kernel) over sqrt(kernel)).
    p.add(b + "ssm_conv1d.weight", {h.ssm_conv_kernel, 2 * k_dim + v_dim}, TensorType::F32,
          Init::Normal, Role::SsmConv, il, 0.5f * std::sqrt(static_cast<float>(h.ssm_conv_kernel)));
    p.add(b + "ssm_a", {h.ssm_n_v_heads}, TensorType::F32, Init::SsmA, Role::SsmA, il);
    p.add(b + "ssm_dt.bias", {h.ssm_n_v_heads}, TensorType::F32, Init::DtBias, Role::SsmDt, il);
    p.norm(b + "ssm_norm.weight", h.ssm_head_dim, Role::SsmNorm, il);
    p.add(b + "ssm_out.weight", {v_dim, d}, t.ssm_out, Init::Normal, Role::SsmOut, il);
  }
  const int64_t e = h.n_expert, ff = h.expert_ff, ffs = h.shexp_ff;
  p.add(b + "ffn_gate_inp.weight", {d, e}, t.router, Init::Normal, Role::Router, il, 2.0f);
  if (s.layout.fused_gate_up) {
    p.add(b + "ffn_gate_up_exps.weight", {d, 2 * ff, e}, t.expert_gate_up, Init::Normal,
          Role::ExpGate, il, 1.0f, Rows::FusedGateUp);
  } else {
    p.add(b + "ffn_gate_exps.weight", {d, ff, e}, t.expert_gate_up, Init::Normal, Role::ExpGate,
          il);
    p.add(b + "ffn_up_exps.weight", {d, ff, e}, t.expert_gate_up, Init::Normal, Role::ExpUp, il);
  }
  p.add(b + "ffn_down_exps.weight", {ff, d, e}, t.expert_down, Init::Normal, Role::ExpDown, il);
  std::vector<int64_t> shexp_gate_ne = {d};
  if (s.layout.shexp_gate_2d) shexp_gate_ne.push_back(1);
  p.add(b + "ffn_gate_inp_shexp.weight", shexp_gate_ne, t.router, Init::Normal, Role::ShexpGateInp,
        il);
  p.add(b + "ffn_gate_shexp.weight", {d, ffs}, t.shexp_gate_up, Init::Normal, Role::ShexpGate, il);
  p.add(b + "ffn_up_shexp.weight", {d, ffs}, t.shexp_gate_up, Init::Normal, Role::ShexpUp, il);
  p.add(b + "ffn_down_shexp.weight", {ffs, d}, t.shexp_down, Init::Normal, Role::ShexpDown, il);
  if (mtp) {
    p.add(b + "nextn.eh_proj.weight", {2 * d, d}, t.attn_output, Init::Normal, Role::EhProj, il);
    p.norm(b + "nextn.enorm.weight", d, Role::ENorm, il);
    p.norm(b + "nextn.hnorm.weight", d, Role::HNorm, il);
    p.norm(b + "nextn.shared_head_norm.weight", d, Role::SharedHeadNorm, il);
  }
}

}  // namespace

void TypeMix::set_dense(TensorType t) {
  attn_q = attn_kv = attn_output = ssm_qkv = ssm_gate = ssm_out = shexp_gate_up = shexp_down = t;
}

std::vector<std::string> preset_names() {
  return {"tiny", "tiny-quant", "80b-a3b"};
}

Spec preset(std::string_view name) {
  Spec s;  // the defaults are the 80b-a3b shapes and the ANCHORS.md type mix
  s.name = std::string(name);
  if (name == "80b-a3b") {
    s.shape.n_vocab = 151936;
    return s;
  }
  if (name != "tiny" && name != "tiny-quant") {
    fail("unknown preset '", name, "' (presets: tiny, tiny-quant, 80b-a3b)");
  }
  // testdata/tiny/manifest.json: real per-head dims, reduced counts.
  Shape& h = s.shape;
  h.n_vocab = 512;
  h.context_length = 4096;
  h.ssm_n_k_heads = 2;
  h.ssm_n_v_heads = 4;
  if (name == "tiny") {
    h.n_embd = 32;
    h.n_layer = 8;
    h.n_expert = 16;
    h.n_expert_used = 4;
    h.expert_ff = 32;
    h.shexp_ff = 64;
    h.dense_ff = 64;
    s.seed = 1234;
    s.layout.shexp_gate_2d = true;  // as gguf-py wrote it in tiny-f32
    TypeMix& t = s.types;
    t.embed = t.output = t.expert_gate_up = t.expert_down = t.ssm_ba = TensorType::F32;
    t.set_dense(TensorType::F32);
  } else {
    h.n_embd = 256;
    h.n_layer = 4;
    h.n_expert = 8;
    h.n_expert_used = 2;
    h.expert_ff = 256;
    h.shexp_ff = 256;
    h.dense_ff = 256;
    s.seed = 4321;
    // manifest.json quant_rules.
    TypeMix& t = s.types;
    t.embed = TensorType::Q4_K;
    t.output = TensorType::Q6_K;
    t.expert_gate_up = TensorType::IQ2_XXS;
    t.expert_down = TensorType::IQ3_XXS;
    t.attn_q = t.attn_output = t.ssm_gate = t.ssm_out = t.shexp_gate_up = t.shexp_down =
        TensorType::Q4_K;
    t.attn_kv = t.ssm_qkv = t.ssm_ba = TensorType::Q8_0;
  }
  return s;
}

uint64_t Plan::tensor_bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.bytes;
  return total;
}

std::vector<gguf::TensorInfo> Plan::tensor_infos() const {
  std::vector<gguf::TensorInfo> infos;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    gguf::TensorInfo info;
    info.name = t.name;
    info.type = t.type;
    info.n_dims = t.n_dims;
    info.ne = t.ne;
    info.offset = offset;
    info.bytes = t.bytes;
    infos.push_back(std::move(info));
    offset += (t.bytes + 31) / 32 * 32;
  }
  return infos;
}

Plan make_plan(const Spec& spec) {
  check_spec(spec);
  Plan plan;
  plan.spec = spec;
  int64_t n_vocab = 0;
  auto vocab = vocab_metadata(spec, n_vocab);
  plan.spec.shape.n_vocab = n_vocab;
  const Shape& h = plan.spec.shape;
  const int block_count = h.n_layer + (spec.layout.mtp ? 1 : 0);
  plan.metadata = model_metadata(plan.spec, block_count);
  for (auto& kv : vocab) plan.metadata.push_back(std::move(kv));

  Planner p(plan);
  const TypeMix& t = spec.types;
  p.add("token_embd.weight", {h.n_embd, n_vocab}, t.embed, Init::Normal, Role::Embed, -1,
        std::sqrt(static_cast<float>(h.n_embd)));  // std 1
  p.norm("output_norm.weight", h.n_embd, Role::OutputNorm, -1);
  if (!spec.layout.tied_output) {
    p.add("output.weight", {h.n_embd, n_vocab}, t.output, Init::Normal, Role::Output, -1, 3.0f);
  }
  for (int il = 0; il < h.n_layer; ++il) {
    plan_block(p, plan.spec, il, (il + 1) % h.full_attention_interval == 0, false);
  }
  if (spec.layout.mtp) plan_block(p, plan.spec, h.n_layer, true, true);
  p.finish_notes();

  // The plan must describe a model Red Lite loads: the same checks as for any file.
  const auto infos = plan.tensor_infos();
  const Config config = read_config(plan.metadata, infos, "synthetic model '" + spec.name + "'");
  bind_weights(infos, config, "synthetic model '" + spec.name + "'");
  return plan;
}

}  // namespace rl::model::synthetic
