// The HTTP front: routes, API-key check, error bodies, and orderly shutdown. Handlers parse and
// validate on the HTTP thread, then hand model work to the Scheduler and only read its output.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "server/metrics.h"
#include "server/prefix_cache.h"
#include "server/scheduler.h"
#include "server/served_model.h"

namespace httplib {
class Server;
}

namespace rl::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (see HttpServer::bind)
  std::string api_key;                 // empty: no authentication
  double request_timeout_seconds = 0;  // 0: none
  size_t max_body_bytes = 32u << 20;
  int http_threads = 0;  // 0: enough for every slot and queue place, plus spare
};

class HttpServer {
 public:
  HttpServer(ServedModel& model, Scheduler& scheduler, Metrics& metrics, PrefixCache* cache,
             ServerConfig config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int bind();    // binds host:port and returns the port; throws rl::Error if it cannot
  void serve();  // answers requests until stop()
  // Refuses new work, ends running requests with an error event or response, waits briefly for
  // them to be written, then closes the listener. Safe from any thread, more than once.
  void stop();

  struct Context;  // what handlers need (routes.h)

 private:
  void register_routes();

  std::unique_ptr<Context> context_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopped_{false};
};

}  // namespace rl::server
