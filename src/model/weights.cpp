// Binding every qwen3next tensor by name, with shape and type checks that report all problems
// at once.
#include "model/weights.h"

#include <charconv>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "quant/quant.h"

namespace rl::model {
namespace {

using Shape = std::vector<int64_t>;

std::string shape_string(std::span<const int64_t> ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// ne with trailing 1s dropped (at least one dimension kept).
Shape trimmed(std::span<const int64_t> ne) {
  Shape s(ne.begin(), ne.end());
  while (s.size() > 1 && s.back() == 1) s.pop_back();
  return s;
}

enum class Need { AnyDecodable, F32 };

Tensor view_of(const gguf::TensorInfo& info) {
  Tensor t;
  t.name = info.name;
  t.type = info.type;
  t.ne = info.ne;
  t.data = info.data;
  t.bytes = info.bytes;
  t.row_bytes = gguf::row_bytes(info.type, info.ne[0]).value_or(0);
  return t;
}

class Binder {
 public:
  explicit Binder(std::span<const gguf::TensorInfo> tensors) {
    for (const auto& t : tensors) index_.emplace(t.name, &t);
  }

  bool has(const std::string& name) const { return index_.count(name) != 0; }

  Tensor get(const std::string& name, const Shape& expected, Need need) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      problems.push_back(str(name, ": missing (expected shape ", shape_string(expected), ")"));
      return {};
    }
    const gguf::TensorInfo& info = *it->second;
    Tensor t = view_of(info);
    if (trimmed(info.ne) != trimmed(expected)) {
      problems.push_back(str(name, ": expected shape ", shape_string(expected), ", found ",
                             shape_string(trimmed(info.ne))));
    }
    if (need == Need::F32 && info.type != gguf::TensorType::F32) {
      problems.push_back(str(name, ": type ", gguf::type_name(info.type), ", expected f32"));
    } else if (!quant::is_supported(info.type)) {
      problems.push_back(str(name, ": type ", gguf::type_name(info.type),
                             " is not supported by Red Lite's decoders"));
    } else if (t.row_bytes == 0) {
      problems.push_back(str(name, ": rows of ", info.ne[0], " values do not fit type ",
                             gguf::type_name(info.type)));
    }
    return t;
  }

  std::vector<std::string> problems;

 private:
  std::unordered_map<std::string_view, const gguf::TensorInfo*> index_;
};

// The block index of "blk.<N>.<rest>", or -1.
int64_t block_index(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  const char* first = name.data() + 4;
  const char* last = name.data() + name.size();
  int64_t n = -1;
  auto [end, ec] = std::from_chars(first, last, n);
  if (ec != std::errc() || end == first || end == last || *end != '.') return -1;
  return n;
}

void bind_attention(Binder& b, const Config& c, const std::string& p, AttentionWeights& a) {
  const int64_t d = c.n_embd;
  a.q = b.get(p + "attn_q.weight", {d, c.q_dim() * 2}, Need::AnyDecodable);
  a.k = b.get(p + "attn_k.weight", {d, c.kv_dim()}, Need::AnyDecodable);
  a.v = b.get(p + "attn_v.weight", {d, c.kv_dim()}, Need::AnyDecodable);
  a.output = b.get(p + "attn_output.weight", {c.q_dim(), d}, Need::AnyDecodable);
  a.q_norm = b.get(p + "attn_q_norm.weight", {c.head_dim}, Need::F32);
  a.k_norm = b.get(p + "attn_k_norm.weight", {c.head_dim}, Need::F32);
}

void bind_deltanet(Binder& b, const Config& c, const std::string& p, DeltaNetWeights& n) {
  const int64_t d = c.n_embd;
  if (b.has(p + "attn_qkv.weight") || !b.has(p + "ssm_in.weight")) {
    n.layout = DeltaNetLayout::Split;
    n.qkv = b.get(p + "attn_qkv.weight", {d, c.ssm_conv_channels()}, Need::AnyDecodable);
    n.gate = b.get(p + "attn_gate.weight", {d, c.ssm_v_dim()}, Need::AnyDecodable);
  } else {
    n.layout = DeltaNetLayout::Fused;
    n.ssm_in =
        b.get(p + "ssm_in.weight", {d, 2 * c.ssm_k_dim() + 2 * c.ssm_v_dim()}, Need::AnyDecodable);
  }
  n.ba = b.get(p + "ssm_ba.weight", {d, 2 * int64_t{c.ssm_n_v_heads}}, Need::AnyDecodable);
  n.conv = b.get(p + "ssm_conv1d.weight", {c.ssm_conv_kernel, c.ssm_conv_channels()}, Need::F32);
  n.dt_bias = b.get(p + "ssm_dt.bias", {c.ssm_n_v_heads}, Need::F32);
  n.a = b.get(p + "ssm_a", {c.ssm_n_v_heads}, Need::F32);
  n.norm = b.get(p + "ssm_norm.weight", {c.ssm_head_dim}, Need::F32);
  n.out = b.get(p + "ssm_out.weight", {c.ssm_v_dim(), d}, Need::AnyDecodable);
}

void bind_moe(Binder& b, const Config& c, const std::string& p, LayerWeights& l) {
  const int64_t d = c.n_embd, ff = c.expert_ff, e = c.n_expert, ffs = c.shexp_ff;
  l.router = b.get(p + "ffn_gate_inp.weight", {d, e}, Need::AnyDecodable);
  ExpertWeights& x = l.experts;
  x.fused_gate_up = b.has(p + "ffn_gate_up_exps.weight");
  if (x.fused_gate_up) {
    x.gate_up = b.get(p + "ffn_gate_up_exps.weight", {d, 2 * ff, e}, Need::AnyDecodable);
  } else {
    x.gate = b.get(p + "ffn_gate_exps.weight", {d, ff, e}, Need::AnyDecodable);
    x.up = b.get(p + "ffn_up_exps.weight", {d, ff, e}, Need::AnyDecodable);
  }
  x.down = b.get(p + "ffn_down_exps.weight", {ff, d, e}, Need::AnyDecodable);
  l.shexp_gate_inp = b.get(p + "ffn_gate_inp_shexp.weight", {d}, Need::AnyDecodable);
  l.shexp_gate = b.get(p + "ffn_gate_shexp.weight", {d, ffs}, Need::AnyDecodable);
  l.shexp_up = b.get(p + "ffn_up_shexp.weight", {d, ffs}, Need::AnyDecodable);
  l.shexp_down = b.get(p + "ffn_down_shexp.weight", {ffs, d}, Need::AnyDecodable);
}

}  // namespace

const uint8_t* ExpertWeights::gate_row(int64_t e, int64_t r, int64_t ff) const {
  // Fused: per expert 2*ff rows, gate rows first (llama.cpp views the first half as gate).
  return fused_gate_up ? gate_up.row(e * 2 * ff + r) : gate.row(e * ff + r);
}

const uint8_t* ExpertWeights::up_row(int64_t e, int64_t r, int64_t ff) const {
  return fused_gate_up ? gate_up.row(e * 2 * ff + ff + r) : up.row(e * ff + r);
}

Weights bind_weights(const gguf::File& file, const Config& config) {
  return bind_weights(file.tensors(), config, file.path());
}

Weights bind_weights(std::span<const gguf::TensorInfo> tensors, const Config& c,
                     const std::string& source) {
  if (tensors.empty())
    throw ModelError(source, {"no tensors (a metadata- or vocabulary-only file)"});
  Binder b(tensors);
  Weights w;
  const int64_t d = c.n_embd;
  w.token_embd = b.get("token_embd.weight", {d, c.n_vocab}, Need::AnyDecodable);
  w.output_norm = b.get("output_norm.weight", {d}, Need::F32);
  if (b.has("output.weight")) {
    w.output = b.get("output.weight", {d, c.n_vocab}, Need::AnyDecodable);
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }

  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) {
    LayerWeights& l = w.layers[il];
    const std::string p = str("blk.", il, ".");
    l.attn_norm = b.get(p + "attn_norm.weight", {d}, Need::F32);
    l.post_attention_norm = b.get(p + "post_attention_norm.weight", {d}, Need::F32);
    l.is_attention = c.is_attention(il);
    if (l.is_attention) {
      bind_attention(b, c, p, l.attn);
    } else {
      bind_deltanet(b, c, p, l.deltanet);
    }
    bind_moe(b, c, p, l);
  }

  for (const auto& t : tensors) {
    const int64_t blk = block_index(t.name);
    if (blk >= c.n_layer && blk < int64_t{c.n_layer} + c.n_nextn) w.mtp.emplace(t.name, view_of(t));
  }

  if (!b.problems.empty()) throw ModelError(source, std::move(b.problems));
  return w;
}

void unfuse_ssm_in(const Config& c, const float* fused, float* qkv, float* z) {
  const int64_t hk = c.ssm_head_dim, hv = c.ssm_head_dim;
  const int64_t r = c.ssm_n_v_heads / c.ssm_n_k_heads;
  const int64_t k_dim = c.ssm_k_dim();
  const int64_t group = 2 * hk + 2 * r * hv;  // per key head: [q | k | v (r heads) | z (r heads)]
  for (int64_t g = 0; g < c.ssm_n_k_heads; ++g) {
    const float* src = fused + g * group;
    std::memcpy(qkv + g * hk, src, sizeof(float) * hk);
    std::memcpy(qkv + k_dim + g * hk, src + hk, sizeof(float) * hk);
    std::memcpy(qkv + 2 * k_dim + g * r * hv, src + 2 * hk, sizeof(float) * r * hv);
    std::memcpy(z + g * r * hv, src + 2 * hk + r * hv, sizeof(float) * r * hv);
  }
}

DecodeBytes decode_weight_breakdown(const Config& c, const Weights& w) {
  DecodeBytes b;
  b.embedding_row = w.token_embd.row_bytes;
  b.output_head = w.output.bytes;
  b.norms = w.output_norm.bytes;
  // Each expert's share of a {cols, rows, E} tensor is bytes / E.
  auto per_expert = [&](const Tensor& t) { return c.n_expert > 0 ? t.bytes / c.n_expert : 0; };
  for (const LayerWeights& l : w.layers) {
    b.norms += l.attn_norm.bytes + l.post_attention_norm.bytes;
    b.routers += l.router.bytes;
    const ExpertWeights& x = l.experts;
    const uint64_t one_expert =
        (x.fused_gate_up ? per_expert(x.gate_up) : per_expert(x.gate) + per_expert(x.up)) +
        per_expert(x.down);
    b.routed_experts += one_expert * static_cast<uint64_t>(c.n_expert_used);
    b.shared_experts +=
        l.shexp_gate_inp.bytes + l.shexp_gate.bytes + l.shexp_up.bytes + l.shexp_down.bytes;
    if (l.is_attention) {
      const AttentionWeights& a = l.attn;
      b.attention +=
          a.q.bytes + a.k.bytes + a.v.bytes + a.output.bytes + a.q_norm.bytes + a.k_norm.bytes;
    } else {
      const DeltaNetWeights& n = l.deltanet;
      b.deltanet += n.qkv.bytes + n.gate.bytes + n.ssm_in.bytes + n.ba.bytes + n.conv.bytes +
                    n.dt_bias.bytes + n.a.bytes + n.norm.bytes + n.out.bytes;
    }
  }
  return b;
}

uint64_t decode_weight_bytes(const Config& config, const Weights& weights) {
  return decode_weight_breakdown(config, weights).total();
}

}  // namespace rl::model
