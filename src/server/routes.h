// Shared pieces of the route handlers (internal to the server module).
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/json_fields.h"

namespace rl::server {

struct HttpServer::Context {
  Context(ServedModel& m, Scheduler& s, Metrics& me, PrefixCache* c, ServerConfig cfg)
      : model(m), scheduler(s), metrics(me), cache(c), config(std::move(cfg)) {}
  ServedModel& model;
  Scheduler& scheduler;
  Metrics& metrics;
  PrefixCache* cache;
  ServerConfig config;
  std::set<std::string> known_paths;  // every routed path, to tell 404 from a malformed request
  std::atomic<int> active_generations{0};
  std::atomic<bool> stopping{false};
};
using RouteContext = HttpServer::Context;

using Handler = void (*)(RouteContext&, const httplib::Request&, httplib::Response&);

// OpenAI routes
void handle_chat_completions(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_completions(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_models(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_model(RouteContext&, const httplib::Request&, httplib::Response&);
// Anthropic routes
void handle_messages(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_count_tokens(RouteContext&, const httplib::Request&, httplib::Response&);
// Server routes
void handle_health(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_metrics(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_tokenize(RouteContext&, const httplib::Request&, httplib::Response&);
void handle_detokenize(RouteContext&, const httplib::Request&, httplib::Response&);

// --- helpers
void send_json(httplib::Response& res, const Json& body, int status = 200);
void send_error(httplib::Response& res, ApiStyle style, const ApiError& error);
void require_model(const RouteContext& ctx, const std::string& name);
GenerationRun::Clock::time_point deadline(const RouteContext& ctx);
std::string random_id(const char* prefix);
int64_t unix_time();

// Counts a generation as in flight for as long as it lives (stop() waits for them).
class ActiveGeneration {
 public:
  explicit ActiveGeneration(RouteContext& ctx) : ctx_(ctx) { ctx_.active_generations++; }
  ~ActiveGeneration() { ctx_.active_generations--; }
  ActiveGeneration(const ActiveGeneration&) = delete;
  ActiveGeneration& operator=(const ActiveGeneration&) = delete;

 private:
  RouteContext& ctx_;
};

// Runs a generation to its end in the handler's thread, cancelling it if the client leaves.
// Returns the whole reply and every token's event.
struct CollectedReply {
  chat::OutputDelta reply;
  std::vector<TokenEvent> tokens;
};
CollectedReply collect_reply(GenerationRun& run, const httplib::Request& req);

// The error a finished run ended with, if it did not end normally.
std::optional<ApiError> run_error(const RouteContext& ctx, const GenerationRun& run);

// Streams Server-Sent Events produced by `format` from each step of the run.
class SseFormat {
 public:
  virtual ~SseFormat() = default;
  // Events for one step of the run (possibly none); called until the run is done.
  virtual std::string step(GenerationRun& run, const GenerationRun::Step& step) = 0;
  // Sent when nothing else was for a while, so idle connections are not dropped.
  virtual std::string keepalive() = 0;
};
void stream_reply(RouteContext& ctx, httplib::Response& res, std::unique_ptr<GenerationRun> run,
                  std::unique_ptr<SseFormat> format);

}  // namespace rl::server
