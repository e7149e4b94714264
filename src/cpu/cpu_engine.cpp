// The CPU Engine and Session: state allocation, chunked prefill, decode, snapshots.
#include "cpu/cpu_engine.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "cpu/state.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"

namespace rl::cpu {

namespace {

using engine::KvType;

// The forward pass reads these small tensors as float32 directly.
void require_f32(const model::Tensor& t) {
  if (t.present() && t.type != gguf::TensorType::F32)
    fail(t.name, ": the CPU engine expects F32 for this tensor, found ", gguf::type_name(t.type));
}

void check_f32_tensors(const model::Weights& w) {
  require_f32(w.output_norm);
  for (const auto& L : w.layers) {
    require_f32(L.attn_norm);
    require_f32(L.post_attention_norm);
    require_f32(L.attn.q_norm);
    require_f32(L.attn.k_norm);
    require_f32(L.deltanet.conv);
    require_f32(L.deltanet.dt_bias);
    require_f32(L.deltanet.a);
    require_f32(L.deltanet.norm);
  }
}

class CpuSession final : public engine::Session {
 public:
  CpuSession(const Model& model, const engine::SessionOptions& options) : model_(model) {
    const auto& c = model.config;
    state_.max_context = options.max_context > 0 ? options.max_context : c.context_length;
    state_.kv_type = options.kv_type;
    chunk_ = std::max(1, options.prefill_chunk);
    const size_t kv_bytes =
        size_t(state_.max_context) * c.kv_dim() * engine::kv_type_bytes(state_.kv_type);
    for (int il = 0; il < c.n_layer; ++il) {
      if (c.is_attention(il)) {
        state_.kv.push_back({VirtualBuffer(kv_bytes), VirtualBuffer(kv_bytes)});
      } else {
        DeltaNetState s;
        s.conv.assign(size_t(c.ssm_conv_kernel - 1) * c.ssm_conv_channels(), 0.0f);
        s.delta.assign(size_t(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim, 0.0f);
        state_.deltanet.push_back(std::move(s));
      }
    }
    logits_.resize(c.n_vocab);
  }

  void prefill(std::span<const int32_t> tokens, const engine::Progress& progress,
               std::span<float> all_logits) override {
    const auto& c = model_.config;
    check_room(static_cast<int64_t>(tokens.size()));
    check_tokens(tokens);
    if (!all_logits.empty() && all_logits.size() < tokens.size() * size_t(c.n_vocab))
      fail("prefill: the logits buffer holds ", all_logits.size(), " values, need ",
           tokens.size() * size_t(c.n_vocab));
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int64_t done = 0; done < n;) {
      const int64_t take = std::min<int64_t>(chunk_, n - done);
      std::span<float> rows = all_logits.empty()
                                  ? std::span<float>{}
                                  : all_logits.subspan(done * c.n_vocab, take * c.n_vocab);
      forward(model_, state_, tokens.subspan(done, take), logits_, rows);
      has_logits_ = true;
      done += take;
      if (progress) progress(done, n);
    }
  }

  std::span<const float> decode(int32_t token) override {
    check_room(1);
    check_tokens({&token, 1});
    forward(model_, state_, {&token, 1}, logits_, {});
    has_logits_ = true;
    return logits_;
  }

  std::span<const float> logits() const override {
    return has_logits_ ? std::span<const float>(logits_) : std::span<const float>{};
  }
  int64_t position() const override { return state_.position; }
  int64_t max_context() const override { return state_.max_context; }

  engine::StateSnapshot snapshot(bool with_kv) const override {
    engine::StateSnapshot snap;
    snap.position = state_.position;
    for (const auto& s : state_.deltanet) {
      append(snap.recurrent, s.conv.data(), s.conv.size() * sizeof(float));
      append(snap.recurrent, s.delta.data(), s.delta.size() * sizeof(float));
    }
    if (with_kv) {
      const size_t bytes = kv_row_bytes() * state_.position;
      for (const auto& kv : state_.kv) {
        append(snap.kv, kv.k.data(), bytes);
        append(snap.kv, kv.v.data(), bytes);
      }
    }
    snap.logits.assign(logits_.begin(), logits_.end());
    snap.has_logits = has_logits_;
    return snap;
  }

  void restore(const engine::StateSnapshot& snap) override {
    size_t recurrent_bytes = 0;
    for (const auto& s : state_.deltanet)
      recurrent_bytes += (s.conv.size() + s.delta.size()) * sizeof(float);
    if (snap.recurrent.size() != recurrent_bytes)
      fail("restore: the snapshot's recurrent state has ", snap.recurrent.size(),
           " bytes, this model needs ", recurrent_bytes);
    if (snap.position < 0 || snap.position > state_.max_context)
      fail("restore: snapshot position ", snap.position, " is outside the context (",
           state_.max_context, ")");
    const size_t kv_bytes = kv_row_bytes() * snap.position;
    if (snap.kv.empty()) {
      if (snap.position > state_.position)
        fail("restore: a snapshot without KV rows must not be ahead of the session (",
             snap.position, " > ", state_.position, ")");
    } else if (snap.kv.size() != kv_bytes * 2 * state_.kv.size()) {
      fail("restore: the snapshot's KV cache has ", snap.kv.size(), " bytes, expected ",
           kv_bytes * 2 * state_.kv.size(), " (different model or KV type?)");
    }
    if (snap.logits.size() != logits_.size() && snap.has_logits)
      fail("restore: the snapshot's logits are for another vocabulary");
    size_t off = 0;
    for (auto& s : state_.deltanet) {
      off = take(snap.recurrent, off, s.conv.data(), s.conv.size() * sizeof(float));
      off = take(snap.recurrent, off, s.delta.data(), s.delta.size() * sizeof(float));
    }
    if (!snap.kv.empty()) {
      off = 0;
      for (auto& kv : state_.kv) {
        off = take(snap.kv, off, kv.k.data(), kv_bytes);
        off = take(snap.kv, off, kv.v.data(), kv_bytes);
      }
    }
    state_.position = snap.position;
    has_logits_ = snap.has_logits;
    if (has_logits_) std::copy(snap.logits.begin(), snap.logits.end(), logits_.begin());
  }

  void fill_random_state(int64_t position, uint64_t seed) override {
    if (position < 0 || position >= state_.max_context)
      fail("fill_random_state: position ", position, " is outside the context (",
           state_.max_context, ")");
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t kv_dim = model_.config.kv_dim();
    std::vector<float> row(kv_dim);
    for (auto& kv : state_.kv) {
      for (int64_t p = 0; p < position; ++p) {
        for (auto* buffer : {&kv.k, &kv.v}) {
          for (auto& x : row) x = normal(rng);
          store_kv_row(state_.kv_type, buffer->data() + p * kv_row_bytes(), row.data(), kv_dim);
        }
      }
    }
    for (auto& s : state_.deltanet) {
      for (auto& x : s.conv) x = normal(rng);
      for (auto& x : s.delta) x = 0.05f * normal(rng);
    }
    state_.position = position;
    has_logits_ = false;
  }

  void reset() override {
    for (auto& s : state_.deltanet) {
      std::fill(s.conv.begin(), s.conv.end(), 0.0f);
      std::fill(s.delta.begin(), s.delta.end(), 0.0f);
    }
    state_.position = 0;
    has_logits_ = false;
  }

 private:
  size_t kv_row_bytes() const {
    return size_t(model_.config.kv_dim()) * engine::kv_type_bytes(state_.kv_type);
  }
  static void append(std::vector<uint8_t>& out, const void* src, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    out.insert(out.end(), p, p + n);
  }
  static size_t take(const std::vector<uint8_t>& in, size_t off, void* dst, size_t n) {
    std::memcpy(dst, in.data() + off, n);
    return off + n;
  }
  void check_room(int64_t n) const {
    if (state_.position + n > state_.max_context)
      fail("context is full: ", state_.position, " tokens in context + ", n, " new > ",
           state_.max_context, " (raise --ctx or shorten the prompt)");
  }
  void check_tokens(std::span<const int32_t> tokens) const {
    for (int32_t t : tokens)
      if (t < 0 || t >= model_.config.n_vocab)
        fail("token id ", t, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")");
  }

  const Model& model_;
  SessionState state_;
  int chunk_ = 2048;
  std::vector<float> logits_;
  bool has_logits_ = false;
};

class CpuEngine final : public engine::Engine {
 public:
  explicit CpuEngine(std::unique_ptr<Model> model) : model_(std::move(model)) {}
  const model::Config& config() const override { return model_->config; }
  std::string backend_name() const override {
    return str("cpu (", model_->pool->size(), " threads, ",
               quant::cpu_has_avx2() ? "AVX2" : "scalar", ")");
  }
  std::unique_ptr<engine::Session> new_session(const engine::SessionOptions& options) override {
    return std::make_unique<CpuSession>(*model_, options);
  }

 private:
  std::unique_ptr<Model> model_;
};

}  // namespace

std::unique_ptr<engine::Engine> make_engine(const std::string& gguf_path,
                                            const engine::EngineOptions& options,
                                            const engine::Progress& progress) {
  auto model = std::make_unique<Model>();
  model->file = gguf::File::open(gguf_path);
  model->config = model::read_config(model->file);
  model->weights = model::bind_weights(model->file, model->config);
  check_f32_tensors(model->weights);
  model->pool = std::make_unique<ThreadPool>(options.threads);
  if (progress) progress(1, 1);
  return std::make_unique<CpuEngine>(std::move(model));
}

}  // namespace rl::cpu
