#include "cli/engine_flags.h"

#include <unistd.h>
#include <cstdio>

#include "util/timer.h"

namespace rl::cli {

void EngineFlags::add_to(CLI::App& app, bool model_required) {
  auto* m = app.add_option("-m,--model", model, "qwen3next GGUF file");
  if (model_required) m->required();
  app.add_option("--backend", backend, "auto, cpu or cuda (auto: cuda when a GPU is present)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("-t,--threads", threads, "CPU threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx", ctx, "context length in tokens (0: the model's trained length)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--kv-type", kv_type, "KV cache type: f32, bf16 or f16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--chunk", chunk, "prefill chunk size in tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("-q,--quiet", quiet, "no progress or timing lines on stderr");
}

engine::EngineOptions EngineFlags::engine_options() const {
  engine::EngineOptions o;
  o.backend = engine::parse_backend(backend);
  o.threads = threads;
  return o;
}

engine::SessionOptions EngineFlags::session_options() const {
  engine::SessionOptions o;
  o.max_context = ctx;
  o.kv_type = engine::parse_kv_type(kv_type);
  o.prefill_chunk = chunk;
  return o;
}

std::unique_ptr<engine::Engine> load_with_progress(const EngineFlags& flags) {
  Timer timer;
  auto engine = engine::load_engine(flags.model, flags.engine_options(), {});
  if (!flags.quiet) {
    const auto& c = engine->config();
    std::fprintf(stderr,
                 "loaded %s: %d layers, d=%lld, %d experts (top %d), vocab %lld on %s in %.2f s\n",
                 flags.model.c_str(), c.n_layer, static_cast<long long>(c.n_embd), c.n_expert,
                 c.n_expert_used, static_cast<long long>(c.n_vocab), engine->backend_name().c_str(),
                 timer.seconds());
  }
  return engine;
}

engine::Progress prefill_progress(bool enabled) {
  if (!enabled) return {};
  auto timer = std::make_shared<Timer>();
  const bool tty = ::isatty(2);
  return [timer, tty](int64_t done, int64_t total) {
    if (total < 512) return;  // short prompts finish before a line would help
    const double rate = done / std::max(1e-9, timer->seconds());
    std::fprintf(stderr, "%sprefill %lld/%lld tokens, %.0f tok/s%s", tty ? "\r" : "",
                 static_cast<long long>(done), static_cast<long long>(total), rate,
                 (!tty || done == total) ? "\n" : "");
    std::fflush(stderr);
  };
}

}  // namespace rl::cli
