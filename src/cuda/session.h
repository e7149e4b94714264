// The CUDA Session. Internal to src/cuda (the benchmarks use its extras).
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <memory>

#include "cuda/buffer.h"
#include "cuda/device_model.h"
#include "cuda/forward.h"
#include "engine/engine.h"

namespace rl::cuda {

class CudaSession final : public engine::Session {
 public:
  // Checks that the KV cache and states for options.max_context fit before allocating them.
  CudaSession(const DeviceModel& model, const engine::SessionOptions& options);
  ~CudaSession() override;

  void prefill(std::span<const int32_t> tokens, const engine::Progress& progress,
               std::span<float> all_logits) override;
  std::span<const float> decode(int32_t token) override;
  std::span<const float> logits() const override;
  int64_t position() const override { return position_; }
  int64_t max_context() const override { return max_ctx_; }
  engine::StateSnapshot snapshot(bool with_kv) const override;
  void restore(const engine::StateSnapshot& snapshot) override;
  void reset() override;
  void fill_random_state(int64_t position, uint64_t seed) override;

  // Benchmarks: one step without the graph, every launch reported to the observer.
  void step_observed(int32_t token, StepObserver& observer);
  // Run steps through CUDA graphs (default) or launch by launch.
  void set_use_graphs(bool on) { use_graphs_ = on; }
  // Benchmarks: time each step on the GPU with events around its launch (the graph with its two
  // copies), so that the rest of a step's wall time (launch, wake-up) can be told apart.
  void set_time_steps(bool on) { time_steps_ = on; }
  double last_step_gpu_seconds() const { return last_step_gpu_s_; }
  cudaStream_t stream() const { return stream_; }
  const SessionBuffers& buffers() const { return *buffers_; }
  const DeviceModel& model() const { return model_; }

 private:
  void check_memory() const;
  void check_room(int64_t n) const;
  void check_token(int32_t t) const;
  cudaGraphExec_t graph_for(int split);
  void enqueue_step(int split, StepObserver* observer);
  void run_step(int32_t token);

  const DeviceModel& model_;
  int device_ = 0;  // made current on every call: sessions may be used from other threads
  int64_t max_ctx_ = 0;
  engine::KvType kv_type_ = engine::KvType::F32;
  std::unique_ptr<SessionBuffers> buffers_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;  // the step's concurrent launches (StepStreams)
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;  // set_time_steps
  bool time_steps_ = false;
  double last_step_gpu_s_ = 0;
  PinnedBuffer host_step_;                 // [token, position] read by the graph's first copy
  PinnedBuffer host_logits_;               // written by the step's head (mapped)
  std::map<int, cudaGraphExec_t> graphs_;  // by attention split size
  bool use_graphs_ = true;
  int64_t position_ = 0;
  bool has_logits_ = false;
};

}  // namespace rl::cuda
