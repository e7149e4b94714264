#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <regex>
#include <thread>
#include <vector>

#include "server/connection.h"
#include "server/routes.h"
#include "util/error.h"
#include "util/log.h"

namespace rl::server {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Helpers shared by the handlers.

void send_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, ApiStyle style, const ApiError& error) {
  res.status = error.status();
  for (const auto& [name, value] : error.headers) res.set_header(name, value);
  res.set_content(error_body(style, error), "application/json");
}

void require_model(const RouteContext& ctx, const std::string& name) {
  if (!ctx.model.answers_to(name))
    throw ApiError(
        404, str("the model '", name, "' does not exist; this server serves '", ctx.model.id, "'"),
        "model", "model_not_found");
}

GenerationRun::Clock::time_point deadline(const RouteContext& ctx) {
  const double t = ctx.config.request_timeout_seconds;
  if (t <= 0) return GenerationRun::Clock::time_point::max();
  return GenerationRun::Clock::now() + std::chrono::duration_cast<GenerationRun::Clock::duration>(
                                           std::chrono::duration<double>(t));
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kDigits[rng() % 16];
  return id;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CollectedReply collect_reply(GenerationRun& run, const httplib::Request& req) {
  const ConnectionWatch watch(req.remote_addr, req.remote_port, req.local_port);
  CollectedReply out;
  while (!run.done()) {
    GenerationRun::Step step = run.next(100ms, [&] { return watch.alive(); });
    append_delta(out.reply, std::move(step.delta));
    for (auto& t : step.tokens) out.tokens.push_back(std::move(t));
  }
  return out;
}

std::optional<ApiError> run_error(const RouteContext& ctx, const GenerationRun& run) {
  switch (run.end()) {
    case ReplyEnd::Timeout:
      return ApiError(504, str("the request did not finish within the server's timeout of ",
                               ctx.config.request_timeout_seconds, " s (--timeout)"));
    case ReplyEnd::Shutdown:
      return ApiError(503, "the server is shutting down");
    case ReplyEnd::Failed:
      return ApiError(500, "generation failed: " + run.error());
    case ReplyEnd::ClientGone:
      return ApiError(499, "the client closed the connection");
    default:
      return std::nullopt;
  }
}

void stream_reply(RouteContext& ctx, httplib::Response& res, std::unique_ptr<GenerationRun> run,
                  std::unique_ptr<SseFormat> format) {
  struct State {
    State(RouteContext& ctx, std::unique_ptr<GenerationRun> r, std::unique_ptr<SseFormat> f)
        : run(std::move(r)), format(std::move(f)), active(ctx) {}
    std::unique_ptr<GenerationRun> run;
    std::unique_ptr<SseFormat> format;
    ActiveGeneration active;
    GenerationRun::Clock::time_point last_write = GenerationRun::Clock::now();
    bool finished = false;
  };
  auto state = std::make_shared<State>(ctx, std::move(run), std::move(format));
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) -> bool {
        // Exceptions must not escape into the HTTP library, which would end the process.
        try {
          if (state->finished) {
            sink.done();
            return true;
          }
          GenerationRun& run = *state->run;
          const auto step = run.next(100ms, [&] { return sink.is_writable(); });
          std::string events = state->format->step(run, step);
          const auto now = GenerationRun::Clock::now();
          if (events.empty() && now - state->last_write > 10s) events = state->format->keepalive();
          if (!events.empty()) {
            if (!sink.write(events.data(), events.size())) {
              run.cancel(CancelReason::ClientGone);
              return false;
            }
            state->last_write = now;
          }
          if (step.done) {
            state->finished = true;
            sink.done();
          }
          return true;
        } catch (const std::exception& e) {
          log_warn("stream failed: ", e.what());
          state->run->cancel(CancelReason::ClientGone);
          return false;
        }
      },
      [state](bool) {
        // The connection is finished one way or another: never leave the job running.
        state->run->cancel(CancelReason::ClientGone);
      });
}

// ---------------------------------------------------------------------------------------------
// Routing. Every known path is registered for every method as an exact (escaped) pattern, so
// a known path with the wrong method gets 405 and anything else falls to the error handler's
// 404. Exact patterns also keep std::regex from walking long request paths.

namespace {

struct Endpoint {
  std::string method;
  Handler handler;
};

struct Route {
  std::vector<Endpoint> endpoints;
  ApiStyle style = ApiStyle::OpenAI;
  bool needs_auth = true;
  std::string metric;  // label in redlite_http_responses_total
};

ApiStyle style_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiStyle::Anthropic : ApiStyle::OpenAI;
}

std::string regex_escape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{}-/)";
  std::string out;
  for (char c : s) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// Takes the same time wherever the first difference is (the length may show).
bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
  return diff == 0;
}

void check_api_key(const RouteContext& ctx, const httplib::Request& req) {
  const std::string& key = ctx.config.api_key;
  if (key.empty()) return;
  std::string given;
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
  if (given.empty()) given = req.get_header_value("x-api-key");
  if (given.empty())
    throw ApiError(401, "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key'");
  if (!constant_time_equal(given, key)) throw ApiError(401, "invalid API key");
}

std::string allowed_methods(const Route& route) {
  std::string allow;
  for (const auto& e : route.endpoints) {
    if (!allow.empty()) allow += ", ";
    allow += e.method;
  }
  if (allow.find("GET") != std::string::npos) allow += ", HEAD";
  return allow;
}

}  // namespace

HttpServer::HttpServer(ServedModel& model, Scheduler& scheduler, Metrics& metrics,
                       PrefixCache* cache, ServerConfig config)
    : context_(std::make_unique<Context>(model, scheduler, metrics, cache, std::move(config))),
      http_(std::make_unique<httplib::Server>()) {
  const SchedulerStatus s = scheduler.status();
  const ServerConfig& cfg = context_->config;
  int threads = cfg.http_threads;
  if (threads <= 0) threads = 2 * (s.slots + s.queue_limit) + 16;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(cfg.max_body_bytes);
  http_->set_keep_alive_max_count(1000);
  // Short: an idle keep-alive connection holds an HTTP thread, and stop() waits for it.
  http_->set_keep_alive_timeout(3);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  http_->set_tcp_nodelay(true);
  register_routes();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::register_routes() {
  auto routes = std::make_shared<std::map<std::string, Route>>();
  auto add = [&](const std::string& path, const std::string& method, Handler h,
                 const std::string& metric, bool auth = true) {
    Route& r = (*routes)[path];
    r.endpoints.push_back({method, h});
    r.style = style_for_path(path);
    r.needs_auth = auth;
    r.metric = metric;
  };
  for (const std::string prefix : {"/v1", ""}) {
    add(prefix + "/chat/completions", "POST", handle_chat_completions, "/v1/chat/completions");
    add(prefix + "/completions", "POST", handle_completions, "/v1/completions");
    add(prefix + "/models", "GET", handle_models, "/v1/models");
  }
  add("/v1/messages", "POST", handle_messages, "/v1/messages");
  add("/v1/messages/count_tokens", "POST", handle_count_tokens, "/v1/messages/count_tokens");
  add("/health", "GET", handle_health, "/health", /*auth=*/false);
  add("/metrics", "GET", handle_metrics, "/metrics");
  add("/tokenize", "POST", handle_tokenize, "/tokenize");
  add("/detokenize", "POST", handle_detokenize, "/detokenize");
  std::vector<std::string> names = {context_->model.id};
  for (const auto& a : context_->model.aliases)
    if (a != "*") names.push_back(a);
  for (const auto& name : names) add("/v1/models/" + name, "GET", handle_model, "/v1/models/{id}");

  Context* ctx = context_.get();
  for (const auto& [path, route_value] : *routes) ctx->known_paths.insert(path);
  for (const auto& [path, route_value] : *routes) {
    const Route* route = &route_value;
    auto dispatch = [ctx, route, routes](const httplib::Request& req, httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      try {
        auto it = std::find_if(route->endpoints.begin(), route->endpoints.end(), [&](auto& e) {
          return e.method == req.method || (req.method == "HEAD" && e.method == "GET");
        });
        if (it == route->endpoints.end()) {
          ApiError e(405, str("method ", req.method, " is not allowed on ", req.path, "; use ",
                              allowed_methods(*route)));
          e.headers.emplace_back("Allow", allowed_methods(*route));
          throw e;
        }
        if (route->needs_auth) check_api_key(*ctx, req);
        if (ctx->stopping && it->method == "POST")
          throw ApiError(503, "the server is shutting down");
        it->handler(*ctx, req, res);
      } catch (const ApiError& e) {
        send_error(res, route->style, e);
      } catch (const Error& e) {
        send_error(res, route->style, ApiError(500, e.what()));
      } catch (const std::bad_alloc&) {
        send_error(res, route->style, ApiError(500, "out of memory while handling the request"));
      } catch (const std::exception& e) {
        send_error(res, route->style, ApiError(500, str("internal error: ", e.what())));
      }
      ctx->metrics.count_response(route->metric, res.status);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      log_info(req.method, ' ', req.path, ' ', res.status, ' ', int64_t(ms), " ms",
               res.is_chunked_content_provider_ ? " (streaming)" : "");
    };
    const std::string pattern = regex_escape(path);
    http_->Get(pattern, dispatch);
    http_->Post(pattern, dispatch);
    http_->Put(pattern, dispatch);
    http_->Patch(pattern, dispatch);
    http_->Delete(pattern, dispatch);
    http_->Options(pattern, dispatch);
  }

  // Before the body is read: a Content-Length that is malformed or far over the limit is
  // answered at once (the library would otherwise read and discard a body of any announced size
  // first), and the connection is closed since the unread body cannot be skipped.
  http_->set_pre_routing_handler([ctx](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
    const std::string length = req.get_header_value("Content-Length");
    const bool digits =
        !length.empty() && length.size() <= 19 &&
        std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; });
    int status = 0;
    std::string message;
    if (!digits || req.get_header_value_count("Content-Length") > 1 ||
        req.has_header("Transfer-Encoding")) {
      status = 400;
      message = "invalid Content-Length header";
    } else if (std::stoull(length) / 4 > ctx->config.max_body_bytes) {
      // Somewhat over the limit, the library reads and discards the body and then answers 413,
      // which clients still sending can receive; far over it, reading is not worth it.
      status = 413;
      message = str("the request body (", length, " bytes) is larger than the server's limit of ",
                    ctx->config.max_body_bytes, " bytes");
    }
    if (status == 0) return httplib::Server::HandlerResponse::Unhandled;
    res.status = status;
    res.set_header("Connection", "close");
    res.set_content(error_body(style_for_path(req.path), status, message), "application/json");
    ctx->metrics.count_response("other", status);
    return httplib::Server::HandlerResponse::Handled;
  });

  // Errors the HTTP library produced itself (unknown route, oversize body, bad request line):
  // give them the same JSON shape as ours. Responses that already have a body are ours.
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [ctx](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const ApiStyle style = style_for_path(req.path);
        std::string message;
        int status = res.status;
        if (status == 413) {
          message = str("the request body is larger than the server's limit of ",
                        ctx->config.max_body_bytes, " bytes");
        } else if ((status == 404 || status == 400) && !req.path.empty() && req.path[0] == '/' &&
                   !ctx->known_paths.count(req.path)) {
          status = 404;
          message = req.path.rfind("/v1/models/", 0) == 0
                        ? str("the model '", req.path.substr(11), "' does not exist")
                        : str("no route ", req.method, " ", req.path);
        } else if (status == 400) {
          message =
              "malformed HTTP request (bad request line, header, or body framing; each "
              "header line must be under 8 KiB)";
        } else if (status == 414) {
          message = "the request URI is too long";
        } else {
          message = str("the HTTP request could not be processed (", status_text(status), ")");
        }
        res.status = status;
        res.set_content(error_body(style, status, message), "application/json");
        ctx->metrics.count_response("other", status);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(error_body(style_for_path(req.path), 500, "internal error"),
                        "application/json");
      });
}

int HttpServer::bind() {
  if (context_->config.port == 0) {
    const int port = http_->bind_to_any_port(context_->config.host);
    if (port <= 0) fail("cannot listen on ", context_->config.host, " (any port)");
    return port;
  }
  if (!http_->bind_to_port(context_->config.host, context_->config.port))
    fail("cannot listen on ", context_->config.host, ":", context_->config.port,
         " (in use, or not an address of this machine)");
  return context_->config.port;
}

void HttpServer::serve() {
  http_->listen_after_bind();
}

void HttpServer::stop() {
  if (stopped_.exchange(true)) return;
  context_->stopping = true;
  // Running requests end with a "shutting down" error; give them a moment to be written.
  context_->scheduler.shutdown();
  for (int i = 0; i < 50 && context_->active_generations.load() > 0; ++i)
    std::this_thread::sleep_for(100ms);
  http_->stop();
}

}  // namespace rl::server
