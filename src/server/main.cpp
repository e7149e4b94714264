// redlite-server: an OpenAI- and Anthropic-compatible HTTP server for one qwen3next model.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "server/http_server.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace {

using namespace rl;
using namespace rl::server;

struct Flags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int64_t ctx = 0;
  int parallel = 1;
  int queue = 16;
  std::string api_key;
  std::vector<std::string> aliases;
  std::string cache_dir;
  uint64_t cache_ram_mb = 4096;
  uint64_t cache_disk_mb = 20480;
  bool no_prefix_reuse = false;
  double timeout = 0;
  uint64_t max_body_mb = 32;
  int threads = 0;
  std::string backend = "auto";
  std::string kv_type = "f32";
  int chunk = 2048;
  bool verbose = false;
};

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("-m,--model", f.model, "qwen3next GGUF file to serve")->required();
  app.add_option("--host", f.host, "address to listen on")->capture_default_str();
  app.add_option("--port", f.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("-c,--ctx", f.ctx,
                 "context per session in tokens (0: the model's trained length; more than that "
                 "is allowed with a warning)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--parallel", f.parallel, "sessions that run requests at the same time")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--queue", f.queue,
                 "requests that may wait for a session; more are refused with 429")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--api-key", f.api_key,
                 "require this key (Authorization: Bearer or x-api-key) on every route but "
                 "/health")
      ->envname("REDLITE_API_KEY");
  app.add_option("--alias", f.aliases,
                 "another model name clients may use (repeatable; '*' accepts any name)");
  app.add_option("--cache-ram", f.cache_ram_mb,
                 "MiB of RAM for saved session states shared between sessions (0: none)")
      ->capture_default_str();
  app.add_option("--cache-dir", f.cache_dir,
                 "directory where saved states spill to disk and persist across restarts");
  app.add_option("--cache-disk", f.cache_disk_mb, "MiB of disk for saved states under --cache-dir")
      ->capture_default_str();
  app.add_flag("--no-prefix-reuse", f.no_prefix_reuse,
               "recompute every prompt from the start (no resumption from saved state)");
  app.add_option("--timeout", f.timeout,
                 "seconds a request may take, queueing included, before it is cancelled "
                 "(0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--max-body", f.max_body_mb, "largest request body in MiB (larger: 413)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{4096}));
  app.add_option("-t,--threads", f.threads, "CPU threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app.add_option("--backend", f.backend, "auto, cpu or cuda (auto: cuda when a GPU is present)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--kv-type", f.kv_type, "KV cache type: f32, bf16 or f16")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--chunk", f.chunk, "prefill chunk in tokens (cancellation is checked between)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("-v,--verbose", f.verbose, "log every request");
}

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

engine::Progress load_progress() {
  auto last = std::make_shared<int>(-1);
  return [last](int64_t done, int64_t total) {
    if (total <= 0) return;
    const int tenth = int(done * 10 / total);
    if (tenth != *last) {
      *last = tenth;
      log_info("loading: ", tenth * 10, "%");
    }
  };
}

// SIGINT/SIGTERM are blocked in every thread and taken by one waiting thread, so the handler
// can do real work (stop the server) instead of only async-signal-safe calls.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

int run(const Flags& f) {
  set_log_level(LogLevel::Info);
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that vanished mid-write is an error, not a crash

  Timer load_timer;
  LoadOptions load;
  load.engine.backend = engine::parse_backend(f.backend);
  load.engine.threads = f.threads;
  load.context = f.ctx;
  load.aliases = f.aliases;
  ServedModel model = load_served_model(f.model, load, load_progress());
  const model::Config& config = model.engine->config();
  const engine::KvType kv_type = engine::parse_kv_type(f.kv_type);
  if (model.context > model.trained_context)
    log_warn("--ctx ", model.context, " is above the model's trained context of ",
             model.trained_context, " tokens: quality past it is not guaranteed");

  const uint64_t kv_per_position =
      uint64_t(config.kv_values_per_position()) * uint64_t(engine::kv_type_bytes(kv_type));
  const uint64_t recurrent = uint64_t(config.recurrent_state_bytes());
  log_info("model ", model.path, " (", model.id, ", ", chat::family_name(model.family),
           " chat format, vocab ", model.n_vocab(), ", ", mib(model.file_bytes), ")");
  log_info("backend ", model.engine->backend_name(), ", loaded in ", load_timer.seconds(), " s");
  log_info("context ", model.context, " tokens per session (trained ", model.trained_context, "), ",
           f.parallel, " session(s), queue ", f.queue, ", KV ", engine::kv_type_name(kv_type), ": ",
           mib(kv_per_position * uint64_t(model.context)), " KV + ", mib(recurrent),
           " recurrent state per full session");

  PrefixCacheOptions cache_options;
  const bool reuse = !f.no_prefix_reuse;
  cache_options.ram_bytes = reuse ? f.cache_ram_mb << 20 : 0;
  cache_options.dir = reuse ? f.cache_dir : "";
  cache_options.disk_bytes = reuse && !f.cache_dir.empty() ? f.cache_disk_mb << 20 : 0;
  cache_options.fingerprint =
      str(model.id, "|", model.file_bytes, "|", config.n_vocab, "|", config.n_layer, "|",
          config.n_embd, "|", engine::kv_type_name(kv_type), "|", model.engine->backend_name());
  PrefixCache cache(cache_options);
  log_info("prefix reuse ", reuse ? "on" : "off",
           reuse ? str(", shared cache ", mib(cache_options.ram_bytes), " RAM",
                       cache_options.disk_bytes ? str(" + ", mib(cache_options.disk_bytes),
                                                      " disk in ", cache_options.dir)
                                                : std::string())
                 : std::string());

  SchedulerOptions sched;
  sched.slots = f.parallel;
  sched.queue_limit = f.queue;
  sched.session.max_context = model.context;
  sched.session.kv_type = kv_type;
  sched.session.prefill_chunk = f.chunk;
  sched.slot.prefix_reuse = reuse;
  sched.slot.prefill_chunk = f.chunk;
  sched.slot.kv_bytes_per_position = kv_per_position;
  Metrics metrics;
  Scheduler scheduler(*model.engine, sched, &cache, &metrics);

  ServerConfig server_config;
  server_config.host = f.host;
  server_config.port = f.port;
  server_config.api_key = f.api_key;
  server_config.request_timeout_seconds = f.timeout;
  server_config.max_body_bytes = size_t(f.max_body_mb) << 20;
  HttpServer http(model, scheduler, metrics, &cache, server_config);
  const int port = http.bind();
  if (!f.verbose) set_log_level(LogLevel::Warn);
  std::fprintf(stderr, "redlite-server: listening on http://%s:%d (API key %s)\n", f.host.c_str(),
               port, f.api_key.empty() ? "off" : "required");
  std::fflush(stderr);

  // First signal: orderly stop. Second: exit at once. SIGUSR1: the server ended by itself.
  std::thread stopper;
  std::thread signal_thread([&] {
    for (int received = 0;;) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig == SIGUSR1) return;
      if (++received > 1) {
        std::fprintf(stderr, "redlite-server: second signal, exiting now\n");
        std::_Exit(130);
      }
      std::fprintf(stderr, "redlite-server: %s received, shutting down\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      stopper = std::thread([&] { http.stop(); });
    }
  });
  http.serve();
  pthread_kill(signal_thread.native_handle(), SIGUSR1);
  signal_thread.join();
  if (stopper.joinable()) stopper.join();
  http.stop();
  scheduler.shutdown();
  std::fprintf(stderr, "redlite-server: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"redlite-server: OpenAI- and Anthropic-compatible server for a qwen3next model"};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redlite-server: %s\n", e.what());
    return 1;
  }
}
