// The interface every backend implements: an Engine is one loaded model on one device; a
// Session is one conversation's state on it (KV cache, DeltaNet states, position).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"

namespace rl::engine {

enum class KvType { F32, F16, BF16 };
const char* kv_type_name(KvType t);
KvType parse_kv_type(const std::string& name);  // "f32" | "f16" | "bf16"; throws rl::Error
int kv_type_bytes(KvType t);

enum class Backend { Auto, Cpu, Cuda };
Backend parse_backend(const std::string& name);  // "auto" | "cpu" | "cuda"; throws rl::Error

// Called with (tokens done, tokens total) during long work.
using Progress = std::function<void(int64_t done, int64_t total)>;

struct SessionOptions {
  int64_t max_context = 0;  // 0: the model's trained context
  KvType kv_type = KvType::F32;
  int prefill_chunk = 2048;  // tokens per prefill step
};

// A copy of a session's state at some position. `recurrent` always holds the conv and delta
// states of every DeltaNet layer. `kv` holds the K/V rows [0, position) of every attention layer,
// or is empty: then restore() relies on the session's own cache still holding those rows (the
// server's prefix reuse within one slot), which is valid when position <= the session's position
// and the tokens agree.
struct StateSnapshot {
  int64_t position = 0;
  std::vector<uint8_t> recurrent;
  std::vector<uint8_t> kv;
  std::vector<float> logits;  // logits after the last consumed token, so decoding can go on
  bool has_logits = false;
  size_t bytes() const { return recurrent.size() + kv.size() + logits.size() * sizeof(float); }
};

class Session {
 public:
  virtual ~Session() = default;

  // Consumes tokens at positions [position(), position() + n). If all_logits is not empty it
  // receives n rows of n_vocab logits (row i after token i); the last row is always available
  // from logits(). Throws rl::Error if the context would overflow (nothing is consumed then).
  virtual void prefill(std::span<const int32_t> tokens, const Progress& progress = {},
                       std::span<float> all_logits = {}) = 0;
  // Consumes one token and returns the logits for the next (valid until the next call).
  virtual std::span<const float> decode(int32_t token) = 0;
  // Logits after the last consumed token (empty before any).
  virtual std::span<const float> logits() const = 0;

  virtual int64_t position() const = 0;
  virtual int64_t max_context() const = 0;

  virtual StateSnapshot snapshot(bool with_kv = true) const = 0;
  virtual void restore(const StateSnapshot& snapshot) = 0;  // throws on a mismatched snapshot
  virtual void reset() = 0;                                 // back to position 0

  // Benchmarks only: jump to `position` with the KV rows [0, position) and the recurrent states
  // filled with random values of realistic magnitude, so decode speed at 256K positions can be
  // measured without a 256K-token prefill. The logits are meaningless afterwards.
  virtual void fill_random_state(int64_t position, uint64_t seed);
};

struct EngineOptions {
  Backend backend = Backend::Auto;
  int threads = 0;  // CPU threads; 0 = all cores
  int gpu = 0;      // CUDA device index
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const model::Config& config() const = 0;
  virtual std::string backend_name() const = 0;  // "cpu" or "cuda (<device name>)"
  virtual std::unique_ptr<Session> new_session(const SessionOptions& options) = 0;
};

// Opens the GGUF, reads and binds the model and starts it on the requested backend (Auto: CUDA
// when a GPU is present and the build has CUDA, else CPU). Reports load progress in bytes.
std::unique_ptr<Engine> load_engine(const std::string& gguf_path, const EngineOptions& options,
                                    const Progress& progress = {});

}  // namespace rl::engine
