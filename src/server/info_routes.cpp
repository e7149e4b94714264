// GET /health, GET /metrics, POST /tokenize, POST /detokenize.
#include <httplib.h>

#include "server/requests.h"
#include "server/routes.h"

namespace rl::server {

void handle_health(RouteContext& ctx, const httplib::Request&, httplib::Response& res) {
  const SchedulerStatus s = ctx.scheduler.status();
  const bool stopping = ctx.stopping.load();
  send_json(res,
            Json{{"status", stopping ? "shutting down" : "ok"},
                 {"model", ctx.model.id},
                 {"slots", s.slots},
                 {"slots_busy", s.busy},
                 {"queued", s.queued},
                 {"queue_limit", s.queue_limit}},
            stopping ? 503 : 200);
}

void handle_metrics(RouteContext& ctx, const httplib::Request&, httplib::Response& res) {
  const PrefixCacheStats cache = ctx.cache ? ctx.cache->stats() : PrefixCacheStats{};
  res.status = 200;
  res.set_content(ctx.metrics.render(ctx.scheduler.status(), cache),
                  "text/plain; version=0.0.4; charset=utf-8");
}

void handle_tokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize(parse_request_body(req.body));
  const auto& tok = *ctx.model.tokenizer;
  const std::vector<int32_t> ids = tok.encode(r.content, r.parse_special, r.add_special);
  Json tokens = Json::array();
  for (int32_t id : ids) {
    if (r.with_pieces)
      tokens.push_back(Json{{"id", id}, {"piece", tok.token_bytes(id)}});
    else
      tokens.push_back(id);
  }
  send_json(res, Json{{"tokens", std::move(tokens)}});
}

void handle_detokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::vector<int32_t> ids =
      parse_detokenize(parse_request_body(req.body), ctx.model.n_vocab());
  send_json(res, Json{{"content", ctx.model.tokenizer->decode(ids)}});
}

}  // namespace rl::server
