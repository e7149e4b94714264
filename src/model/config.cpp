// Config from qwen3next.* metadata: every key read with its llama.cpp default, every problem
// collected, then one ModelError listing them all.
#include "model/config.h"

#include <cmath>
#include <optional>
#include <string_view>

namespace rl::model {
namespace {

using Metadata = std::vector<std::pair<std::string, gguf::Value>>;

constexpr std::string_view kArch = "qwen3next";
// Generous bounds that keep every product of dimensions far from int64 overflow and refuse
// absurd allocations (a fuzzed block_count of 4e9) before anything is sized from them.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxContext = int64_t{1} << 32;

std::string join_problems(const std::string& source, const std::vector<std::string>& problems) {
  std::string message = str(source, ": not a loadable qwen3next model (", problems.size(),
                            problems.size() == 1 ? " problem):" : " problems):");
  for (const auto& p : problems) message += "\n  " + p;
  return message;
}

// Typed lookups into the metadata that record a problem instead of throwing.
class KeyReader {
 public:
  KeyReader(const Metadata& metadata, std::vector<std::string>& problems)
      : metadata_(metadata), problems_(problems) {}

  const gguf::Value* find(std::string_view key) const {
    for (const auto& [k, v] : metadata_) {
      if (k == key) return &v;
    }
    return nullptr;
  }

  // An integer in [lo, hi]. llama.cpp also accepts a per-layer array for some keys
  // (head_count, head_count_kv, feed_forward_length); its non-zero entries must then agree.
  std::optional<int64_t> integer(const std::string& key, bool required, int64_t lo, int64_t hi) {
    const gguf::Value* v = find(key);
    if (!v) {
      if (required) problems_.push_back(key + ": missing");
      return std::nullopt;
    }
    std::optional<int64_t> value;
    if (const gguf::Array* arr = v->as_array()) {
      for (const auto& item : arr->items) {
        auto x = item.as_int();
        if (!x) {
          problems_.push_back(str(key, ": array of ", gguf::value_type_name(arr->element_type),
                                  ", expected integers"));
          return std::nullopt;
        }
        if (*x == 0) continue;
        if (value && *value != *x) {
          problems_.push_back(str(key, ": per-layer values differ (", *value, " and ", *x,
                                  "); Red Lite needs one value"));
          return std::nullopt;
        }
        value = *x;
      }
      if (!value) {
        problems_.push_back(key + ": array holds no non-zero value");
        return std::nullopt;
      }
    } else {
      value = v->as_int();
      if (!value) {
        problems_.push_back(
            str(key, ": has type ", gguf::value_type_name(v->type), ", expected an integer"));
        return std::nullopt;
      }
    }
    if (*value < lo || *value > hi) {
      problems_.push_back(str(key, ": ", *value, " is out of range [", lo, ", ", hi, "]"));
      return std::nullopt;
    }
    return value;
  }

  std::optional<double> number(const std::string& key) {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    auto x = v->as_float();
    if (!x || v->as_array()) {
      problems_.push_back(
          str(key, ": has type ", gguf::value_type_name(v->type), ", expected a number"));
      return std::nullopt;
    }
    if (!std::isfinite(*x) || *x <= 0) {
      problems_.push_back(str(key, ": ", *x, " must be a positive finite number"));
      return std::nullopt;
    }
    return x;
  }

 private:
  const Metadata& metadata_;
  std::vector<std::string>& problems_;
};

std::string arch_key(std::string_view suffix) {
  return str(kArch, ".", suffix);
}

const gguf::TensorInfo* find_tensor(std::span<const gguf::TensorInfo> tensors,
                                    std::string_view name) {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The vocabulary size: rows of token_embd, else the tokenizer's token count.
std::optional<int64_t> vocab_size(const KeyReader& keys, std::span<const gguf::TensorInfo> tensors,
                                  std::vector<std::string>& problems) {
  if (const auto* embd = find_tensor(tensors, "token_embd.weight")) {
    if (embd->ne[1] > 0) return embd->ne[1];
  }
  if (const gguf::Value* tokens = keys.find("tokenizer.ggml.tokens")) {
    if (const gguf::Array* arr = tokens->as_array(); arr && !arr->items.empty()) {
      return static_cast<int64_t>(arr->items.size());
    }
  }
  problems.push_back("n_vocab: no token_embd.weight and no tokenizer.ggml.tokens to take it from");
  return std::nullopt;
}

// Per-layer recurrent flags from qwen3next.attention.recurrent_layers, if present.
std::optional<std::vector<bool>> explicit_recurrent(const KeyReader& keys, int64_t block_count,
                                                    std::vector<std::string>& problems) {
  const std::string key = arch_key("attention.recurrent_layers");
  const gguf::Value* v = keys.find(key);
  if (!v) return std::nullopt;
  auto flag = [](const gguf::Value& x) -> std::optional<bool> {
    if (auto b = x.as_bool()) return b;
    if (auto i = x.as_int(); i && (*i == 0 || *i == 1)) return *i == 1;
    return std::nullopt;
  };
  std::vector<bool> flags;
  if (const gguf::Array* arr = v->as_array()) {
    if (static_cast<int64_t>(arr->items.size()) != block_count) {
      problems.push_back(
          str(key, ": has ", arr->items.size(), " entries, block_count is ", block_count));
      return std::nullopt;
    }
    for (const auto& item : arr->items) {
      auto f = flag(item);
      if (!f) {
        problems.push_back(key + ": entries must be booleans or 0/1");
        return std::nullopt;
      }
      flags.push_back(*f);
    }
  } else {
    auto f = flag(*v);
    if (!f) {
      problems.push_back(key + ": must be a boolean/0-1 array (or one such value)");
      return std::nullopt;
    }
    flags.assign(static_cast<size_t>(block_count), *f);
  }
  return flags;
}

// Callers have bounded v (at most kMaxDim or kMaxLayers) before narrowing.
int narrow(int64_t v) {
  return static_cast<int>(v);
}

}  // namespace

ModelError::ModelError(const std::string& source, std::vector<std::string> problems)
    : Error(join_problems(source, problems)), problems_(std::move(problems)) {}

int Config::n_attention_layers() const {
  int n = 0;
  for (bool r : recurrent) n += r ? 0 : 1;
  return n;
}

int Config::n_deltanet_layers() const {
  return static_cast<int>(recurrent.size()) - n_attention_layers();
}

int64_t Config::recurrent_state_bytes() const {
  const int64_t delta = int64_t{ssm_n_v_heads} * ssm_head_dim * ssm_head_dim * 4;
  const int64_t conv = int64_t{ssm_conv_kernel - 1} * ssm_conv_channels() * 4;
  return n_deltanet_layers() * (delta + conv);
}

bool is_qwen3next(const gguf::File& file) {
  const gguf::Value* v = file.find("general.architecture");
  const std::string* arch = v ? v->as_string() : nullptr;
  return arch && *arch == kArch;
}

Config read_config(const gguf::File& file) {
  return read_config(file.metadata(), file.tensors(), file.path());
}

Config read_config(const Metadata& metadata, std::span<const gguf::TensorInfo> tensors,
                   const std::string& source) {
  std::vector<std::string> problems;
  KeyReader keys(metadata, problems);

  const gguf::Value* arch_value = keys.find("general.architecture");
  const std::string* arch = arch_value ? arch_value->as_string() : nullptr;
  if (!arch) {
    throw ModelError(source, {"general.architecture: missing (this is not a model file)"});
  }
  if (*arch != kArch) {
    throw ModelError(source, {str("general.architecture is '", *arch, "', not 'qwen3next'")});
  }

  Config c;
  if (const gguf::Value* name = keys.find("general.name"); name && name->as_string()) {
    c.name = *name->as_string();
  }
  auto req = [&](std::string_view suffix, int64_t lo, int64_t hi) {
    return keys.integer(arch_key(suffix), true, lo, hi);
  };
  auto opt = [&](std::string_view suffix, int64_t lo, int64_t hi) {
    return keys.integer(arch_key(suffix), false, lo, hi);
  };

  const auto block_count = req("block_count", 1, kMaxLayers);
  const auto context = req("context_length", 1, kMaxContext);
  const auto n_embd = req("embedding_length", 1, kMaxDim);
  const auto n_head = req("attention.head_count", 1, kMaxDim);
  const auto n_head_kv = opt("attention.head_count_kv", 1, kMaxDim);
  const auto key_length = opt("attention.key_length", 1, kMaxDim);
  const auto value_length = opt("attention.value_length", 1, kMaxDim);
  const auto n_rot = opt("rope.dimension_count", 0, kMaxDim);
  const auto dense_ff = opt("feed_forward_length", 0, kMaxDim);
  const auto n_expert = req("expert_count", 1, kMaxDim);
  const auto n_expert_used = req("expert_used_count", 1, kMaxDim);
  const auto expert_ff = opt("expert_feed_forward_length", 1, kMaxDim);
  const auto shexp_ff = opt("expert_shared_feed_forward_length", 1, kMaxDim);
  const auto conv_kernel = req("ssm.conv_kernel", 1, 64);
  const auto inner_size = req("ssm.inner_size", 1, kMaxDim);
  const auto state_size = req("ssm.state_size", 1, kMaxDim);
  const auto v_heads = req("ssm.time_step_rank", 1, kMaxDim);
  const auto k_heads = req("ssm.group_count", 1, kMaxDim);
  const auto interval = opt("full_attention_interval", 1, kMaxLayers);
  const auto nextn = opt("nextn_predict_layers", 0, kMaxLayers);
  const auto theta = keys.number(arch_key("rope.freq_base"));
  const auto eps = keys.number(arch_key("attention.layer_norm_rms_epsilon"));
  const auto n_vocab = vocab_size(keys, tensors, problems);

  if (n_vocab) c.n_vocab = *n_vocab;
  if (context) c.context_length = *context;
  if (n_embd) c.n_embd = *n_embd;
  if (n_head) c.n_head = narrow(*n_head);
  c.n_head_kv = n_head_kv ? narrow(*n_head_kv) : c.n_head;
  // llama.cpp: key/value length default to n_embd / n_head, rope dims to the key length.
  if (key_length) {
    c.head_dim = narrow(*key_length);
  } else if (n_embd && n_head) {
    c.head_dim = narrow(*n_embd / *n_head);
  }
  const int64_t v_len = value_length         ? *value_length
                        : (n_embd && n_head) ? *n_embd / *n_head
                                             : c.head_dim;
  c.n_rot = n_rot ? narrow(*n_rot) : c.head_dim;
  c.rope_theta = theta ? static_cast<float>(*theta) : 10000.0f;
  if (eps) c.rms_eps = static_cast<float>(*eps);
  if (conv_kernel) c.ssm_conv_kernel = narrow(*conv_kernel);
  if (state_size) c.ssm_head_dim = narrow(*state_size);
  if (k_heads) c.ssm_n_k_heads = narrow(*k_heads);
  if (v_heads) c.ssm_n_v_heads = narrow(*v_heads);
  if (n_expert) c.n_expert = narrow(*n_expert);
  if (n_expert_used) c.n_expert_used = narrow(*n_expert_used);
  c.dense_ff = dense_ff ? *dense_ff : 0;
  if (expert_ff) {
    c.expert_ff = *expert_ff;
  } else if (c.dense_ff > 0 && c.n_expert_used > 0) {
    c.expert_ff = c.dense_ff / c.n_expert_used;
  } else {
    problems.push_back(arch_key("expert_feed_forward_length") +
                       ": missing (and no feed_forward_length to derive it from)");
  }
  if (shexp_ff) {
    c.shexp_ff = *shexp_ff;
  } else if (c.dense_ff > 0) {
    c.shexp_ff = c.dense_ff;
  } else {
    problems.push_back(arch_key("expert_shared_feed_forward_length") +
                       ": missing (and no feed_forward_length to derive it from)");
  }

  // Consistency of what was read.
  if (c.head_dim > 0 && v_len != c.head_dim) {
    problems.push_back(str("attention.value_length ", v_len, " differs from key_length ",
                           c.head_dim, " (qwen3next uses one head dim)"));
  }
  if (c.head_dim <= 0) problems.push_back("attention head dim must be positive");
  if (c.n_head > 0 && c.n_head_kv > 0 && c.n_head % c.n_head_kv != 0) {
    problems.push_back(str("attention.head_count ", c.n_head,
                           " is not a multiple of head_count_kv ", c.n_head_kv));
  }
  if (c.head_dim > 0 && (c.n_rot > c.head_dim || c.n_rot % 2 != 0 || c.n_rot <= 0)) {
    problems.push_back(str("rope.dimension_count ", c.n_rot,
                           " must be even, positive and at most the head dim ", c.head_dim));
  }
  if (c.ssm_n_k_heads > 0 && c.ssm_n_v_heads > 0 && c.ssm_n_v_heads % c.ssm_n_k_heads != 0) {
    problems.push_back(str("ssm.time_step_rank (value heads) ", c.ssm_n_v_heads,
                           " is not a multiple of ssm.group_count (key heads) ", c.ssm_n_k_heads));
  }
  if (inner_size && c.ssm_n_v_heads > 0 && c.ssm_head_dim > 0 &&
      *inner_size != int64_t{c.ssm_n_v_heads} * c.ssm_head_dim) {
    problems.push_back(str("ssm.inner_size ", *inner_size, " != time_step_rank ", c.ssm_n_v_heads,
                           " x state_size ", c.ssm_head_dim));
  }
  if (c.n_expert > 0 && c.n_expert_used > c.n_expert) {
    problems.push_back(
        str("expert_used_count ", c.n_expert_used, " exceeds expert_count ", c.n_expert));
  }
  if (c.ssm_conv_kernel > 0 && c.ssm_conv_kernel < 2) {
    problems.push_back(str("ssm.conv_kernel ", c.ssm_conv_kernel, " must be at least 2"));
  }

  // Layers: trunk + MTP, and which trunk layers are recurrent.
  if (block_count) {
    const int64_t n_next = nextn.value_or(0);
    if (n_next >= *block_count) {
      problems.push_back(str("nextn_predict_layers ", n_next, " leaves no trunk layers of ",
                             *block_count, " blocks"));
    } else {
      c.n_layer = narrow(*block_count - n_next);
      c.n_nextn = narrow(n_next);
      auto flags = explicit_recurrent(keys, *block_count, problems);
      const int64_t every = interval.value_or(4);
      c.recurrent.resize(static_cast<size_t>(c.n_layer));
      for (int i = 0; i < c.n_layer; ++i) {
        c.recurrent[i] = flags ? (*flags)[i] : (i + 1) % every != 0;
      }
    }
  }

  if (!problems.empty()) throw ModelError(source, std::move(problems));
  return c;
}

}  // namespace rl::model
