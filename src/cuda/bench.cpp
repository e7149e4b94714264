#include "cuda/bench.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/cuda_engine.h"
#include "cuda/device.h"
#include "cuda/forward.h"
#include "cuda/kernels.h"
#include "cuda/session.h"
#include "util/error.h"
#include "util/line_fit.h"

namespace rl::cuda {

namespace {

using engine::KvType;

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Stats s;
  if (v.empty()) return s;
  s.min = v.front();
  s.max = v.back();
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

class Event {
 public:
  Event() { RL_CUDA(cudaEventCreate(&e_)); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s) { RL_CUDA(cudaEventRecord(e_, s)); }
  float ms_since(const Event& start) const {
    float ms = 0;
    RL_CUDA(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Times `launch` (enqueueing work on `stream`) `repeats` times after 3 warm-ups; ms each.
template <class F>
std::vector<double> time_launches(cudaStream_t stream, int repeats, F&& launch) {
  for (int i = 0; i < 3; ++i) launch();
  RL_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  Event a, b;
  for (int i = 0; i < repeats; ++i) {
    a.record(stream);
    launch();
    b.record(stream);
    RL_CUDA(cudaEventSynchronize(b.get()));
    ms.push_back(b.ms_since(a));
  }
  return ms;
}

double gb(double bytes) {
  return bytes / 1e9;
}

// Records an event after every launch of a step (the per-kernel breakdown).
class EventObserver final : public StepObserver {
 public:
  struct Mark {
    std::string what;
    uint64_t bytes;
    cudaEvent_t event;
  };
  explicit EventObserver(cudaStream_t s) { marks_.push_back({"start", 0, make(s)}); }
  ~EventObserver() override {
    for (auto& m : marks_) cudaEventDestroy(m.event);
  }
  void launched(const char* what, uint64_t bytes, cudaStream_t s) override {
    marks_.push_back({what, bytes, make(s)});
  }
  const std::vector<Mark>& marks() const { return marks_; }

 private:
  static cudaEvent_t make(cudaStream_t s) {
    cudaEvent_t e;
    RL_CUDA(cudaEventCreate(&e));
    RL_CUDA(cudaEventRecord(e, s));
    return e;
  }
  std::vector<Mark> marks_;
};

void print_breakdown(const EventObserver& obs, double copy_bw, std::FILE* out) {
  struct Row {
    int count = 0;
    double ms = 0;
    uint64_t bytes = 0;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> order;
  const auto& m = obs.marks();
  double total = 0;
  for (size_t i = 1; i < m.size(); ++i) {
    float ms = 0;
    RL_CUDA(cudaEventElapsedTime(&ms, m[i - 1].event, m[i].event));
    if (!rows.count(m[i].what)) order.push_back(m[i].what);
    Row& r = rows[m[i].what];
    r.count += 1;
    r.ms += ms;
    r.bytes += m[i].bytes;
    total += ms;
  }
  std::fprintf(
      out,
      "    per-kernel breakdown of one step (launched one by one, events between launches):\n"
      "    %-52s %6s %10s %10s %9s %8s %7s\n",
      "kernel", "count", "total us", "MB", "GB/s", "% copy", "% step");
  for (const auto& name : order) {
    const Row& r = rows[name];
    const double bw = r.bytes / (r.ms * 1e-3);
    std::fprintf(out, "    %-52s %6d %10.1f %10.2f %9.1f %7.1f%% %6.1f%%\n", name.c_str(), r.count,
                 r.ms * 1e3, r.bytes / 1e6, gb(bw), r.bytes ? 100.0 * bw / copy_bw : 0.0,
                 100.0 * r.ms / total);
  }
  std::fprintf(out, "    %-52s %6zu %10.1f\n", "sum", m.size() - 1, total * 1e3);
}

}  // namespace

double measure_copy_bandwidth(int repeats) {
  size_t free_bytes = 0, total = 0;
  RL_CUDA(cudaMemGetInfo(&free_bytes, &total));
  size_t bytes = size_t{4} << 30;
  while (2 * bytes + (size_t{1} << 30) > free_bytes && bytes > (size_t{64} << 20)) bytes /= 2;
  DeviceBuffer a(bytes), b(bytes);
  cudaStream_t s;
  RL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fill_random(a.data(), KvType::F32, static_cast<int64_t>(bytes / 4), 99, 1.0f, s);
  const auto ms = time_launches(s, repeats, [&] {
    RL_CUDA(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  RL_CUDA(cudaStreamDestroy(s));
  return 2.0 * bytes / (stats_of(ms).median * 1e-3);  // bytes read + written per second
}

void bench_kernel(const KernelBenchOptions& o, std::FILE* out) {
  const DeviceInfo& dev = use_device(o.gpu);
  const double copy_bw = measure_copy_bandwidth();
  std::fprintf(out, "bench kernel: decode attention (split-K + merge), 12 KV buffer pairs, %s\n",
               dev.name.c_str());
  std::fprintf(out, "device-to-device copy bandwidth (read + written): %.1f GB/s\n", gb(copy_bw));
  std::fprintf(out, "%-9s %-5s %6s %5s %12s %12s %9s %9s\n", "positions", "kv", "split", "ctas",
               "us / layer", "(min..max)", "GB/s", "% copy");
  constexpr int kLayers = 12, kKv = 2, kHeads = 16;
  constexpr int64_t kFitFrom = 32768;
  const int64_t max_p = *std::max_element(o.positions.begin(), o.positions.end());
  cudaStream_t s;
  RL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (KvType kv : o.kv_types) {
    std::vector<double> fit_bytes, fit_us;  // the long lengths' layers, for the line below
    const int eb = engine::kv_type_bytes(kv);
    const int64_t values = int64_t{kKv} * max_p * kAttnHeadDim;
    std::vector<DeviceBuffer> k, v;
    for (int l = 0; l < kLayers; ++l) {
      k.emplace_back(values * eb);
      v.emplace_back(values * eb);
      fill_random(k.back().data(), kv, values, 2 * l + 1, 1.0f, s);
      fill_random(v.back().data(), kv, values, 2 * l + 2, 1.0f, s);
    }
    const AttnGrid grid = attention_grid(kv, kKv);
    const int max_ctas = most_ctas(grid);
    DeviceBuffer q(kHeads * kAttnHeadDim * 4), qg(kHeads * 2 * kAttnHeadDim * 4),
        outb(kHeads * kAttnHeadDim * 4), pos(4);
    DeviceBuffer part_o(int64_t{kKv} * max_ctas * kAttnGroup * kAttnHeadDim * 4);
    DeviceBuffer part_ml(int64_t{kKv} * max_ctas * kAttnGroup * 2 * 4);
    fill_random(q.data(), KvType::F32, kHeads * kAttnHeadDim, 7, 0.1f, s);
    fill_random(qg.data(), KvType::F32, kHeads * 2 * kAttnHeadDim, 8, 1.0f, s);
    for (int64_t P : o.positions) {
      const int32_t last = static_cast<int32_t>(P - 1);
      RL_CUDA(cudaMemcpyAsync(pos.data(), &last, 4, cudaMemcpyHostToDevice, s));
      RL_CUDA(cudaStreamSynchronize(s));
      const int split = attention_split_for(P - 1, grid, forced_attention_split());
      const int ctas = grid.at(split);
      // The 12 layers' attention as one graph, as in a decode step.
      cudaGraph_t graph;
      RL_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < kLayers; ++l) {
        AttnArgs a;
        a.q = q.as<float>(), a.k_cache = k[l].data(), a.v_cache = v[l].data(), a.kv_type = kv;
        a.max_ctx = max_p, a.pos = pos.as<int32_t>(), a.n_head_kv = kKv, a.split = split;
        a.ctas = ctas, a.part_o = part_o.as<float>(), a.part_ml = part_ml.as<float>();
        attn_decode(a, s);
        AttnMergeArgs m;
        m.part_o = a.part_o, m.part_ml = a.part_ml, m.ctas = ctas;
        m.pos = a.pos, m.qg = qg.as<float>(), m.out = outb.as<float>(), m.n_head = kHeads;
        m.n_head_kv = kKv;
        attn_merge(m, s);
      }
      RL_CUDA(cudaStreamEndCapture(s, &graph));
      cudaGraphExec_t exec;
      RL_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      const auto ms = time_launches(s, o.repeats, [&] { RL_CUDA(cudaGraphLaunch(exec, s)); });
      RL_CUDA(cudaGraphExecDestroy(exec));
      RL_CUDA(cudaGraphDestroy(graph));
      const Stats st = stats_of(ms);
      const double bytes = 2.0 * kKv * P * kAttnHeadDim * eb;  // K and V rows of one layer
      const double t = st.median * 1e-3 / kLayers;
      std::fprintf(out, "%-9lld %-5s %6d %5d %12.1f %5.1f..%-6.1f %9.1f %8.1f%%\n",
                   static_cast<long long>(P), engine::kv_type_name(kv), split, ctas, t * 1e6,
                   st.min * 1e3 / kLayers, st.max * 1e3 / kLayers, gb(bytes / t),
                   100.0 * bytes / t / copy_bw);
      std::fflush(out);
      if (P >= kFitFrom) fit_bytes.push_back(bytes), fit_us.push_back(t * 1e6);
    }
    // A layer's time as a fixed part plus its bytes at one rate: from 32K positions on, the
    // bytes take most of it, so the line separates what the stream costs from what every layer
    // pays however long (the CTAs' start and fold, the merge, the next layer's release).
    const LineFit f = fit_line(fit_bytes, fit_us);
    if (f.ok && f.slope > 0)
      std::fprintf(out,
                   "%s: us / layer = %.1f + the K and V bytes at %.1f GB/s (least squares, %zu "
                   "lengths from %lld)\n",
                   engine::kv_type_name(kv), f.intercept, 1e-3 / f.slope, fit_bytes.size(),
                   static_cast<long long>(kFitFrom));
  }
  RL_CUDA(cudaStreamDestroy(s));
}

void bench_decode(const DecodeBenchOptions& o, std::FILE* out) {
  const DeviceInfo& dev = use_device(o.gpu);
  const double copy_bw = measure_copy_bandwidth();
  engine::EngineOptions eo;
  eo.backend = engine::Backend::Cuda;
  eo.gpu = o.gpu;
  const auto t_load = std::chrono::steady_clock::now();
  auto engine = make_engine(o.model_path, eo);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const auto& c = engine->config();
  std::fprintf(out, "bench decode: %s on %s (loaded in %.1f s)\n", o.model_path.c_str(),
               dev.name.c_str(), load_s);
  std::fprintf(out, "device-to-device copy bandwidth (read + written): %.1f GB/s\n", gb(copy_bw));
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.n_vocab - 1));
  bool header = false;
  for (KvType kv : o.kv_types) {
    for (int64_t P : o.positions) {
      constexpr int kWarmupSteps = 16;  // graph capture, warm-up, clocks
      engine::SessionOptions so;
      // Room for the warm-up and the timed steps, each from P (fewer timed steps than warm-up
      // ones, as in --tokens 4, overran a context sized by the timed steps alone).
      so.max_context = P + std::max(o.tokens, kWarmupSteps) + 8;
      so.kv_type = kv;
      auto session = engine->new_session(so);
      auto* cs = dynamic_cast<CudaSession*>(session.get());
      if (!cs) fail("bench decode: not a CUDA session");
      cs->set_use_graphs(o.graphs);
      const uint64_t weight_bytes = decode_step_weight_bytes(cs->model());
      const uint64_t kv_bytes =
          static_cast<uint64_t>(c.kv_bytes_per_position(engine::kv_type_bytes(kv))) * P;
      const uint64_t state_bytes =
          2ull * c.n_deltanet_layers() *
          (uint64_t(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim * 4);
      const double bytes = double(weight_bytes + kv_bytes + state_bytes);
      if (!header) {
        std::fprintf(out,
                     "weights read per token: %.1f MB (top-%d experts); recurrent states read + "
                     "written: %.1f MB\n",
                     weight_bytes / 1e6, c.n_expert_used, state_bytes / 1e6);
        std::fprintf(out, "%-9s %-5s %10s %17s %9s %10s %11s %9s\n", "position", "kv", "tok/s",
                     "(min..max)", "ms/tok", "MB/tok", "limit tok/s", "% limit");
        header = true;
      }
      cs->fill_random_state(P, 42);
      for (int i = 0; i < kWarmupSteps; ++i) cs->decode(token(rng));
      cs->fill_random_state(P, 42);
      cs->set_time_steps(true);
      std::vector<double> secs, gpu_secs;
      for (int i = 0; i < o.tokens; ++i) {
        const int32_t t = token(rng);
        const auto t0 = std::chrono::steady_clock::now();
        cs->decode(t);
        secs.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        gpu_secs.push_back(cs->last_step_gpu_seconds());
      }
      cs->set_time_steps(false);
      const Stats st = stats_of(secs);
      const double limit = copy_bw / bytes;
      std::fprintf(out, "%-9lld %-5s %10.1f %8.1f..%-8.1f %9.3f %10.1f %11.1f %8.1f%%\n",
                   static_cast<long long>(P), engine::kv_type_name(kv), 1.0 / st.median,
                   1.0 / st.max, 1.0 / st.min, st.median * 1e3, bytes / 1e6, limit,
                   100.0 * (1.0 / st.median) / limit);
      const Stats gpu = stats_of(gpu_secs);
      std::fprintf(out,
                   "    on the GPU (events around the step, its input copy included): %.3f ms "
                   "(%.3f..%.3f); the rest of the wall time (launch, wake-up): %.1f us\n",
                   gpu.median * 1e3, gpu.min * 1e3, gpu.max * 1e3, (st.median - gpu.median) * 1e6);
      std::fflush(out);
      if (o.breakdown) {
        cs->fill_random_state(P, 42);
        EventObserver obs(cs->stream());
        cs->step_observed(token(rng), obs);
        print_breakdown(obs, copy_bw, out);
      }
    }
  }
}

}  // namespace rl::cuda
