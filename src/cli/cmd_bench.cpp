// redlite bench kernel | decode: the decode-attention kernel alone, and full decode steps at a
// given position with a randomly filled state.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/common.h"
#include "cli/engine_flags.h"
#include "util/error.h"
#ifdef RL_HAVE_CUDA
#include "cuda/bench.h"
#include "cuda/cuda_engine.h"
#endif

namespace rl::cli {

namespace {

// "4096", "4K" / "4k" (x 1024) or "1M" (x 1048576).
int64_t parse_count(const std::string& s) {
  if (s.empty()) fail("empty position");
  int64_t scale = 1;
  std::string digits = s;
  const char last = s.back();
  if (last == 'k' || last == 'K') scale = 1024, digits.pop_back();
  if (last == 'm' || last == 'M') scale = 1024 * 1024, digits.pop_back();
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != digits.size() || v < 0 || v > (int64_t{1} << 30) / scale)
    fail("'", s, "' is not a position (a count such as 4096 or 32K)");
  return v * scale;
}

std::vector<int64_t> parse_counts(const std::vector<std::string>& list) {
  std::vector<int64_t> v;
  for (const auto& s : list) v.push_back(parse_count(s));
  return v;
}

std::vector<engine::KvType> parse_kv_types(const std::vector<std::string>& list) {
  std::vector<engine::KvType> v;
  for (const auto& s : list) v.push_back(engine::parse_kv_type(s));
  return v;
}

// Any backend through the Engine interface: median tok/s of decode steps at a position.
void bench_decode_generic(const EngineFlags& flags, const std::vector<int64_t>& positions,
                          const std::vector<engine::KvType>& kv_types, int tokens) {
  auto engine = load_with_progress(flags);
  const auto& c = engine->config();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.n_vocab - 1));
  std::printf("bench decode on %s\n%-9s %-5s %10s %17s %9s\n", engine->backend_name().c_str(),
              "position", "kv", "tok/s", "(min..max)", "ms/tok");
  for (auto kv : kv_types)
    for (int64_t p : positions) {
      engine::SessionOptions so = flags.session_options();
      so.max_context = p + tokens + 8;
      so.kv_type = kv;
      auto session = engine->new_session(so);
      session->fill_random_state(p, 42);
      session->decode(token(rng));
      std::vector<double> secs;
      for (int i = 0; i < tokens; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        session->decode(token(rng));
        secs.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(secs.begin(), secs.end());
      const double med = secs[secs.size() / 2];
      std::printf("%-9lld %-5s %10.2f %8.2f..%-8.2f %9.2f\n", static_cast<long long>(p),
                  engine::kv_type_name(kv), 1.0 / med, 1.0 / secs.back(), 1.0 / secs.front(),
                  med * 1e3);
      std::fflush(stdout);
    }
}

// Any backend: median tok/s of prefilling `tokens` random tokens after `depth` positions of
// randomly filled state (llama-bench's pp at depth), only the last logits computed.
void bench_prefill(const EngineFlags& flags, const std::vector<int64_t>& depths, int64_t tokens,
                   int repeats) {
  auto engine = load_with_progress(flags);
  const auto& c = engine->config();
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(c.n_vocab - 1));
  std::vector<int32_t> prompt(tokens);
  for (auto& t : prompt) t = token(rng);
  std::printf("bench prefill on %s, %lld tokens, chunk %d\n%-9s %10s %19s %9s\n",
              engine->backend_name().c_str(), static_cast<long long>(tokens), flags.chunk, "depth",
              "tok/s", "(min..max)", "s");
  for (int64_t depth : depths) {
    engine::SessionOptions so = flags.session_options();
    so.max_context = depth + tokens + 8;
    auto session = engine->new_session(so);
    std::vector<double> secs;
    for (int r = 0; r < repeats; ++r) {
      if (depth > 0)
        session->fill_random_state(depth, 42);
      else
        session->reset();
      const auto t0 = std::chrono::steady_clock::now();
      session->prefill(prompt);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    const double med = secs[secs.size() / 2];
    std::printf("%-9lld %10.1f %9.1f..%-9.1f %9.3f\n", static_cast<long long>(depth), tokens / med,
                tokens / secs.back(), tokens / secs.front(), med);
    std::fflush(stdout);
  }
}

}  // namespace

int cmd_bench(const Args& args) {
  CLI::App app{
      "Benchmarks (tools, not tests): medians with min..max, against the GPU's measured "
      "copy bandwidth.",
      "bench"};
  app.require_subcommand(1);
  auto* kernel = app.add_subcommand(
      "kernel", "decode attention alone (split-K + merge) over 12 KV buffer pairs at positions");
  std::vector<std::string> k_positions = {"4K", "32K", "64K", "128K", "256K"};
  std::vector<std::string> k_kv = {"f32", "bf16"};
  int k_repeats = 20, gpu = 0;
  kernel->add_option("--positions", k_positions, "positions in context")
      ->delimiter(',')
      ->capture_default_str();
  kernel->add_option("--kv-types,--kv-type", k_kv, "KV cache types")
      ->delimiter(',')
      ->capture_default_str();
  kernel->add_option("--repeats", k_repeats, "timed repeats (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  kernel->add_option("--gpu", gpu, "CUDA device index")->capture_default_str();

  auto* decode = app.add_subcommand(
      "decode", "full decode steps at a position with the KV cache and states filled randomly");
  EngineFlags flags;
  flags.add_to(*decode, true);
  std::vector<std::string> d_positions = {"4K"};
  std::vector<std::string> d_kv;
  int d_tokens = 32;
  bool breakdown = false, no_graph = false;
  decode
      ->add_option("--position,--positions", d_positions, "positions in context (e.g. 4K,32K,128K)")
      ->delimiter(',')
      ->capture_default_str();
  decode->add_option("--kv-types", d_kv, "KV cache types to run (default: --kv-type)")
      ->delimiter(',');
  decode->add_option("--tokens", d_tokens, "timed decode steps per position (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  decode->add_flag("--breakdown", breakdown, "CUDA: also time every kernel of one step");
  decode->add_flag("--no-graph", no_graph, "CUDA: launch kernel by kernel instead of a CUDA graph");
  decode->add_option("--gpu", gpu, "CUDA device index")->capture_default_str();

  auto* prefill = app.add_subcommand(
      "prefill", "prefill throughput at a depth (positions already in context, filled randomly)");
  EngineFlags p_flags;
  p_flags.add_to(*prefill, true);
  std::vector<std::string> p_depths = {"0"};
  int64_t p_tokens = 512;
  int p_repeats = 3;
  prefill->add_option("--depth,--depths", p_depths, "positions already in context (e.g. 0,4K)")
      ->delimiter(',')
      ->capture_default_str();
  prefill->add_option("--tokens", p_tokens, "prompt tokens per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 22));
  prefill->add_option("--repeats", p_repeats, "timed runs (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  if (auto status = parse_args(app, args)) return *status;

  if (kernel->parsed()) {
#ifdef RL_HAVE_CUDA
    cuda::KernelBenchOptions o;
    o.positions = parse_counts(k_positions);
    o.kv_types = parse_kv_types(k_kv);
    o.repeats = k_repeats;
    o.gpu = gpu;
    cuda::bench_kernel(o, stdout);
    return 0;
#else
    fail("bench kernel times GPU kernels, but this build has no CUDA backend");
#endif
  }
  if (decode->parsed()) {
    const auto positions = parse_counts(d_positions);
    const auto kv_types =
        parse_kv_types(d_kv.empty() ? std::vector<std::string>{flags.kv_type} : d_kv);
#ifdef RL_HAVE_CUDA
    const bool cuda = flags.backend == "cuda" || (flags.backend == "auto" && cuda::gpu_available());
    if (cuda) {
      cuda::DecodeBenchOptions o;
      o.model_path = flags.model;
      o.positions = positions;
      o.kv_types = kv_types;
      o.tokens = d_tokens;
      o.gpu = gpu;
      o.breakdown = breakdown;
      o.graphs = !no_graph;
      cuda::bench_decode(o, stdout);
      return 0;
    }
#endif
    bench_decode_generic(flags, positions, kv_types, d_tokens);
    return 0;
  }
  bench_prefill(p_flags, parse_counts(p_depths), p_tokens, p_repeats);
  return 0;
}

}  // namespace rl::cli
