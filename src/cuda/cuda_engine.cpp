// The CUDA Engine and Session: memory planning, the decode step as a CUDA graph, prefill token
// by token through it, snapshots in the CPU engine's format.
#include "cuda/cuda_engine.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/forward.h"
#include "cuda/kernels.h"
#include "cuda/session.h"
#include "gguf/gguf.h"
#include "util/log.h"

namespace rl::cuda {

namespace {

using engine::KvType;

double gib(uint64_t b) {
  return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0);
}

class CudaEngine final : public engine::Engine {
 public:
  CudaEngine(gguf::File file, model::Config config, DeviceModel model, int gpu)
      : file_(std::move(file)), config_(std::move(config)), model_(std::move(model)), gpu_(gpu) {}

  const model::Config& config() const override { return config_; }
  std::string backend_name() const override { return str("cuda (", current_device().name, ")"); }
  std::unique_ptr<engine::Session> new_session(const engine::SessionOptions& options) override {
    use_device(gpu_);
    return std::make_unique<CudaSession>(model_, options);
  }

 private:
  gguf::File file_;  // kept mapped: nothing reads it after upload, but it is cheap to keep
  model::Config config_;
  DeviceModel model_;
  int gpu_ = 0;
};

}  // namespace

// ---- CudaSession -------------------------------------------------------------------------------

CudaSession::CudaSession(const DeviceModel& model, const engine::SessionOptions& options)
    : model_(model) {
  RL_CUDA(cudaGetDevice(&device_));
  const auto& c = model.config;
  max_ctx_ = options.max_context > 0 ? options.max_context : c.context_length;
  if (max_ctx_ > (int64_t{1} << 30))
    fail("context ", max_ctx_, " is too large for the CUDA backend");
  kv_type_ = options.kv_type;
  check_memory();
  // The head writes the logits straight into host memory, over PCIe while it runs, instead of a
  // 14 us copy after it (+0.5 to +0.75 % at 4K on two H100s, CUDA_DECODE.md, forty-seventh pass).
  host_logits_ = PinnedBuffer(static_cast<size_t>(c.n_vocab) * sizeof(float));
  buffers_ = std::make_unique<SessionBuffers>(model, max_ctx_, kv_type_,
                                              device_view(host_logits_.as<float>()));
  RL_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RL_CUDA(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  RL_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  RL_CUDA(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  RL_CUDA(cudaEventCreate(&step_begin_));
  RL_CUDA(cudaEventCreate(&step_end_));
  host_step_ = PinnedBuffer(2 * sizeof(int32_t));
  device_tables();  // uploads the lookup tables now, outside any graph capture
  read_switches();
}

CudaSession::~CudaSession() {
  for (auto& [split, exec] : graphs_) cudaGraphExecDestroy(exec);
  if (fork_) cudaEventDestroy(fork_);
  if (join_) cudaEventDestroy(join_);
  if (step_begin_) cudaEventDestroy(step_begin_);
  if (step_end_) cudaEventDestroy(step_end_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaSession::check_memory() const {
  const auto& c = model_.config;
  const uint64_t need = SessionBuffers::bytes_needed(c, max_ctx_, kv_type_);
  size_t free_bytes = 0, total_bytes = 0;
  RL_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const uint64_t reserve = 256ull << 20;
  if (need + reserve <= free_bytes) return;
  // The largest context that fits for each KV type, to say what to change.
  auto fits = [&](KvType t) {
    int64_t lo = 0, hi = max_ctx_;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (SessionBuffers::bytes_needed(c, mid, t) + reserve <= free_bytes)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  const uint64_t kv =
      static_cast<uint64_t>(c.kv_bytes_per_position(engine::kv_type_bytes(kv_type_))) * max_ctx_;
  fail("a session with --ctx ", max_ctx_, " and --kv-type ", engine::kv_type_name(kv_type_),
       " needs ", gib(need), " GiB of GPU memory (KV cache ", gib(kv), " GiB), but only ",
       gib(free_bytes), " GiB are free after the weights. The largest context that fits is ",
       fits(KvType::F32), " with --kv-type f32 and ", fits(KvType::BF16),
       " with --kv-type bf16: lower --ctx or use --kv-type bf16");
}

void CudaSession::check_room(int64_t n) const {
  if (position_ + n > max_ctx_)
    fail("context is full: ", position_, " tokens in context + ", n, " new > ", max_ctx_,
         " (raise --ctx or shorten the prompt)");
}

void CudaSession::check_token(int32_t t) const {
  if (t < 0 || t >= model_.config.n_vocab)
    fail("token id ", t, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")");
}

cudaGraphExec_t CudaSession::graph_for(int split) {
  auto it = graphs_.find(split);
  if (it != graphs_.end()) return it->second;
  cudaGraph_t graph = nullptr;
  RL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_step(split, nullptr);
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  RL_CUDA(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RL_CUDA(e);
  graphs_[split] = exec;
  return exec;
}

void CudaSession::enqueue_step(int split, StepObserver* observer) {
  SessionBuffers& s = *buffers_;
  RL_CUDA(cudaMemcpyAsync(s.step, host_step_.data(), 2 * sizeof(int32_t), cudaMemcpyHostToDevice,
                          stream_));
  StepOptions opt;
  opt.split = split;
  opt.position_hint = position_;
  const StepStreams streams{stream_, side_stream_enabled() ? side_stream_ : nullptr, fork_, join_};
  enqueue_decode_step(model_, s, opt, streams, observer);
}

void CudaSession::run_step(int32_t token) {
  RL_CUDA(cudaSetDevice(device_));
  auto* in = host_step_.as<int32_t>();
  in[0] = token;
  in[1] = static_cast<int32_t>(position_);
  const int split = attention_split_for(position_, buffers_->attn_grid, forced_attention_split());
  const cudaGraphExec_t graph = use_graphs_ ? graph_for(split) : nullptr;  // captured untimed
  if (time_steps_) RL_CUDA(cudaEventRecord(step_begin_, stream_));
  if (graph) {
    RL_CUDA(cudaGraphLaunch(graph, stream_));
  } else {
    enqueue_step(split, nullptr);
  }
  if (time_steps_) RL_CUDA(cudaEventRecord(step_end_, stream_));
  RL_CUDA(cudaStreamSynchronize(stream_));
  if (time_steps_) {
    float ms = 0;
    RL_CUDA(cudaEventElapsedTime(&ms, step_begin_, step_end_));
    last_step_gpu_s_ = ms * 1e-3;
  }
  ++position_;
  has_logits_ = true;
}

void CudaSession::step_observed(int32_t token, StepObserver& observer) {
  RL_CUDA(cudaSetDevice(device_));
  auto* in = host_step_.as<int32_t>();
  in[0] = token;
  in[1] = static_cast<int32_t>(position_);
  enqueue_step(attention_split_for(position_, buffers_->attn_grid, forced_attention_split()),
               &observer);
  RL_CUDA(cudaStreamSynchronize(stream_));
  ++position_;
  has_logits_ = true;
}

void CudaSession::prefill(std::span<const int32_t> tokens, const engine::Progress& progress,
                          std::span<float> all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t vocab = model_.config.n_vocab;
  check_room(n);
  for (int32_t t : tokens) check_token(t);
  if (!all_logits.empty() && all_logits.size() < static_cast<size_t>(n * vocab))
    fail("prefill: the logits buffer holds ", all_logits.size(), " values, need ", n * vocab);
  for (int64_t i = 0; i < n; ++i) {
    run_step(tokens[i]);
    if (!all_logits.empty())
      std::memcpy(all_logits.data() + i * vocab, host_logits_.data(), vocab * sizeof(float));
    if (progress && ((i + 1) % 64 == 0 || i + 1 == n)) progress(i + 1, n);
  }
}

std::span<const float> CudaSession::decode(int32_t token) {
  check_room(1);
  check_token(token);
  run_step(token);
  return logits();
}

std::span<const float> CudaSession::logits() const {
  if (!has_logits_) return {};
  return {host_logits_.as<const float>(), static_cast<size_t>(model_.config.n_vocab)};
}

// Snapshot layout (the CPU engine's): per DeltaNet layer the conv inputs [K-1][channels], oldest
// first, then the delta state [heads][k][v]; per attention layer K rows [0, position) as
// [position][n_head_kv * head_dim] in the cache type, then the V rows.
engine::StateSnapshot CudaSession::snapshot(bool with_kv) const {
  RL_CUDA(cudaSetDevice(device_));
  const auto& c = model_.config;
  const SessionBuffers& s = *buffers_;
  engine::StateSnapshot snap;
  snap.position = position_;
  const int K = c.ssm_conv_kernel;
  const size_t channels = static_cast<size_t>(c.ssm_conv_channels());
  const size_t delta_bytes =
      static_cast<size_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim * 4;
  std::vector<float> ring(K * channels);
  for (const auto& d : s.deltanet) {
    RL_CUDA(cudaMemcpy(ring.data(), d.conv_ring, ring.size() * 4, cudaMemcpyDeviceToHost));
    for (int j = 0; j < K - 1; ++j) {  // positions p-K+1 .. p-1
      const int64_t slot = ((position_ - (K - 1) + j) % K + K) % K;
      const auto* src = reinterpret_cast<const uint8_t*>(ring.data() + slot * channels);
      snap.recurrent.insert(snap.recurrent.end(), src, src + channels * 4);
    }
    const size_t at = snap.recurrent.size();
    snap.recurrent.resize(at + delta_bytes);
    RL_CUDA(cudaMemcpy(snap.recurrent.data() + at, d.delta, delta_bytes, cudaMemcpyDeviceToHost));
  }
  if (with_kv) {
    const size_t eb = engine::kv_type_bytes(kv_type_), hd = c.head_dim;
    const size_t row = static_cast<size_t>(c.kv_dim()) * eb;
    const size_t bytes = row * position_;
    for (const auto& a : s.attention) {
      for (const void* cache : {a.k, a.v}) {
        const size_t at = snap.kv.size();
        snap.kv.resize(at + bytes);
        if (position_ == 0) continue;
        for (int g = 0; g < c.n_head_kv; ++g)
          RL_CUDA(cudaMemcpy2D(snap.kv.data() + at + g * hd * eb, row,
                               static_cast<const uint8_t*>(cache) + g * max_ctx_ * hd * eb, hd * eb,
                               hd * eb, position_, cudaMemcpyDeviceToHost));
      }
    }
  }
  if (has_logits_) snap.logits.assign(logits().begin(), logits().end());
  snap.has_logits = has_logits_;
  return snap;
}

void CudaSession::restore(const engine::StateSnapshot& snap) {
  RL_CUDA(cudaSetDevice(device_));
  const auto& c = model_.config;
  SessionBuffers& s = *buffers_;
  const int K = c.ssm_conv_kernel;
  const size_t channels = static_cast<size_t>(c.ssm_conv_channels());
  const size_t conv_bytes = (K - 1) * channels * 4;
  const size_t delta_bytes =
      static_cast<size_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim * 4;
  if (snap.recurrent.size() != s.deltanet.size() * (conv_bytes + delta_bytes))
    fail("restore: the snapshot's recurrent state has ", snap.recurrent.size(),
         " bytes, this model needs ", s.deltanet.size() * (conv_bytes + delta_bytes));
  if (snap.position < 0 || snap.position > max_ctx_)
    fail("restore: snapshot position ", snap.position, " is outside the context (", max_ctx_, ")");
  const size_t eb = engine::kv_type_bytes(kv_type_), hd = c.head_dim;
  const size_t row = static_cast<size_t>(c.kv_dim()) * eb;
  const size_t kv_bytes = row * snap.position;
  if (snap.kv.empty()) {
    if (snap.position > position_)
      fail("restore: a snapshot without KV rows must not be ahead of the session (", snap.position,
           " > ", position_, ")");
  } else if (snap.kv.size() != kv_bytes * 2 * s.attention.size()) {
    fail("restore: the snapshot's KV cache has ", snap.kv.size(), " bytes, expected ",
         kv_bytes * 2 * s.attention.size(), " (different model or KV type?)");
  }
  if (snap.has_logits && snap.logits.size() != static_cast<size_t>(c.n_vocab))
    fail("restore: the snapshot's logits are for another vocabulary");
  size_t off = 0;
  std::vector<float> ring(K * channels, 0.0f);
  for (const auto& d : s.deltanet) {
    for (int j = 0; j < K - 1; ++j) {
      const int64_t slot = ((snap.position - (K - 1) + j) % K + K) % K;
      std::memcpy(ring.data() + slot * channels, snap.recurrent.data() + off, channels * 4);
      off += channels * 4;
    }
    RL_CUDA(cudaMemcpy(d.conv_ring, ring.data(), ring.size() * 4, cudaMemcpyHostToDevice));
    RL_CUDA(cudaMemcpy(d.delta, snap.recurrent.data() + off, delta_bytes, cudaMemcpyHostToDevice));
    off += delta_bytes;
  }
  if (!snap.kv.empty() && snap.position > 0) {
    off = 0;
    for (const auto& a : s.attention) {
      for (void* cache : {a.k, a.v}) {
        for (int g = 0; g < c.n_head_kv; ++g)
          RL_CUDA(cudaMemcpy2D(static_cast<uint8_t*>(cache) + g * max_ctx_ * hd * eb, hd * eb,
                               snap.kv.data() + off + g * hd * eb, row, hd * eb, snap.position,
                               cudaMemcpyHostToDevice));
        off += kv_bytes;
      }
    }
  }
  position_ = snap.position;
  has_logits_ = snap.has_logits;
  if (has_logits_) std::memcpy(host_logits_.data(), snap.logits.data(), c.n_vocab * sizeof(float));
}

void CudaSession::reset() {
  RL_CUDA(cudaSetDevice(device_));
  for (const auto& d : buffers_->deltanet) {
    RL_CUDA(cudaMemsetAsync(
        d.conv_ring, 0,
        static_cast<size_t>(model_.config.ssm_conv_kernel) * model_.config.ssm_conv_channels() * 4,
        stream_));
    RL_CUDA(cudaMemsetAsync(d.delta, 0,
                            static_cast<size_t>(model_.config.ssm_n_v_heads) *
                                model_.config.ssm_head_dim * model_.config.ssm_head_dim * 4,
                            stream_));
  }
  RL_CUDA(cudaStreamSynchronize(stream_));
  position_ = 0;
  has_logits_ = false;
}

void CudaSession::fill_random_state(int64_t position, uint64_t seed) {
  RL_CUDA(cudaSetDevice(device_));
  const auto& c = model_.config;
  if (position < 0 || position >= max_ctx_)
    fail("fill_random_state: position ", position, " is outside the context (", max_ctx_, ")");
  const int64_t kv_values = c.kv_dim() * max_ctx_;
  uint64_t salt = seed * 1000003ull;
  for (const auto& a : buffers_->attention) {
    fill_random(a.k, kv_type_, kv_values, ++salt, 1.0f, stream_);
    fill_random(a.v, kv_type_, kv_values, ++salt, 1.0f, stream_);
  }
  for (const auto& d : buffers_->deltanet) {
    fill_random(d.conv_ring, KvType::F32, int64_t{c.ssm_conv_kernel} * c.ssm_conv_channels(),
                ++salt, 1.0f, stream_);
    fill_random(d.delta, KvType::F32, int64_t{c.ssm_n_v_heads} * c.ssm_head_dim * c.ssm_head_dim,
                ++salt, 0.05f, stream_);
  }
  RL_CUDA(cudaStreamSynchronize(stream_));
  position_ = position;
  has_logits_ = false;
}

// ---- Entry points
// --------------------------------------------------------------------------------

std::unique_ptr<engine::Engine> make_engine(const std::string& gguf_path,
                                            const engine::EngineOptions& options,
                                            const engine::Progress& progress) {
  const DeviceInfo& dev = use_device(options.gpu);
  gguf::File file = gguf::File::open(gguf_path);
  model::Config config = model::read_config(file);
  model::Weights weights = model::bind_weights(file, config);
  if (config.n_attention_layers() > 0 &&
      (config.head_dim != kAttnHeadDim || config.n_head != kAttnGroup * config.n_head_kv))
    fail(gguf_path, ": the CUDA attention kernels need head_dim ", kAttnHeadDim, " and ",
         kAttnGroup, " query heads per KV head (the model has ", config.head_dim, " and ",
         config.n_head / std::max(1, config.n_head_kv), "); use --backend cpu");
  log_info("cuda: ", dev.name, " (", dev.sm_count, " SMs, ", gib(dev.total_memory),
           " GiB); uploading ", gib(planned_weight_bytes(config, weights)), " GiB of weights");
  DeviceModel model = upload_model(config, weights, progress);
  return std::make_unique<CudaEngine>(std::move(file), std::move(config), std::move(model),
                                      options.gpu);
}

}  // namespace rl::cuda
