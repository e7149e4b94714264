// POST /v1/messages (Anthropic Messages API) and POST /v1/messages/count_tokens.
#include <httplib.h>

#include "server/prompt.h"
#include "server/requests.h"
#include "server/routes.h"
#include "util/error.h"

namespace rl::server {
namespace {

const char* stop_reason(const GenerationRun& run) {
  if (run.end() == ReplyEnd::Length) return "max_tokens";
  if (run.end() == ReplyEnd::StopString) return "stop_sequence";
  return run.tool_calls() > 0 ? "tool_use" : "end_turn";
}

Json stop_sequence(const GenerationRun& run) {
  return run.end() == ReplyEnd::StopString ? Json(run.stop_string()) : Json(nullptr);
}

// Anthropic counts input in three parts; input_tokens is the part that was computed afresh.
Json usage_json(const GenerationRun& run, bool with_output) {
  const int64_t cached = run.cached_tokens().value_or(0);
  Json u = {{"input_tokens", run.prompt_tokens() - cached},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached}};
  if (with_output) u["output_tokens"] = run.completion_tokens();
  return u;
}

// A tool call's arguments as the object Anthropic's "input" holds.
Json tool_input(const chat::ToolCall& call) {
  Json input = Json::parse(call.arguments, nullptr, false);
  return input.is_object() ? input : Json::object();
}

std::string event(const char* name, const Json& data) {
  return str("event: ", name, "\ndata: ", dump_json(data), "\n\n");
}

class MessagesStream : public SseFormat {
 public:
  MessagesStream(const RouteContext& ctx, std::string model)
      : ctx_(ctx), model_(std::move(model)), id_(random_id("msg_")) {}

  std::string step(GenerationRun& run, const GenerationRun::Step& step) override {
    std::string out;
    // message_start carries the input usage, known once a slot has taken the request.
    if (!started_ && (run.cached_tokens() || step.done)) out += message_start(run);
    if (!started_) return out;
    const auto& d = step.delta;
    if (!d.reasoning.empty()) {
      out += open_block("thinking", Json{{"type", "thinking"}, {"thinking", ""}});
      out += delta(Json{{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += open_block("text", Json{{"type", "text"}, {"text", ""}});
      out += delta(Json{{"type", "text_delta"}, {"text", d.content}});
    }
    for (const auto& call : d.tool_calls) {
      out += close_block();
      out += open_block("tool_use", Json{{"type", "tool_use"},
                                         {"id", random_id("toolu_")},
                                         {"name", call.name},
                                         {"input", Json::object()}});
      out +=
          delta(Json{{"type", "input_json_delta"}, {"partial_json", dump_json(tool_input(call))}});
      out += close_block();
    }
    if (!step.done) return out;
    out += close_block();
    if (auto error = run_error(ctx_, run)) {
      out += event("error", Json::parse(error_body(ApiStyle::Anthropic, *error)));
      return out;
    }
    Json usage = usage_json(run, true);
    out += event(
        "message_delta",
        Json{{"type", "message_delta"},
             {"delta", {{"stop_reason", stop_reason(run)}, {"stop_sequence", stop_sequence(run)}}},
             {"usage", std::move(usage)}});
    out += event("message_stop", Json{{"type", "message_stop"}});
    return out;
  }

  std::string keepalive() override { return event("ping", Json{{"type", "ping"}}); }

 private:
  std::string message_start(const GenerationRun& run) {
    started_ = true;
    Json usage = usage_json(run, false);
    usage["output_tokens"] = 0;
    Json message = {{"id", id_},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", model_},
                    {"content", Json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage", std::move(usage)}};
    return event("message_start", Json{{"type", "message_start"}, {"message", std::move(message)}});
  }

  std::string open_block(const std::string& type, Json block) {
    if (open_ == type) return {};
    std::string out = close_block();
    open_ = type;
    out += event("content_block_start", Json{{"type", "content_block_start"},
                                             {"index", index_},
                                             {"content_block", std::move(block)}});
    return out;
  }

  std::string delta(Json d) {
    return event("content_block_delta",
                 Json{{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
  }

  std::string close_block() {
    if (open_.empty()) return {};
    std::string out;
    if (open_ == "thinking") out += delta(Json{{"type", "signature_delta"}, {"signature", ""}});
    out += event("content_block_stop", Json{{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
    return out;
  }

  const RouteContext& ctx_;
  const std::string model_;
  const std::string id_;
  bool started_ = false;
  std::string open_;  // type of the open content block, empty if none
  int index_ = 0;
};

Json messages_response(const GenerationRun& run, const CollectedReply& r,
                       const std::string& model) {
  Json content = Json::array();
  if (!r.reply.reasoning.empty())
    content.push_back(
        Json{{"type", "thinking"}, {"thinking", r.reply.reasoning}, {"signature", ""}});
  if (!r.reply.content.empty())
    content.push_back(Json{{"type", "text"}, {"text", r.reply.content}});
  for (const auto& call : r.reply.tool_calls)
    content.push_back(Json{{"type", "tool_use"},
                           {"id", random_id("toolu_")},
                           {"name", call.name},
                           {"input", tool_input(call)}});
  return Json{{"id", random_id("msg_")},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", std::move(content)},
              {"stop_reason", stop_reason(run)},
              {"stop_sequence", stop_sequence(run)},
              {"usage", usage_json(run, true)}};
}

}  // namespace

void handle_messages(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_request_body(req.body);
  const ChatRequest chat = parse_anthropic_messages(body);
  require_model(ctx, chat.model);
  PreparedPrompt prompt = prepare_chat(ctx.model, chat);
  ReplyOptions reply = std::move(prompt.reply);
  auto job = ctx.scheduler.submit(make_job(ctx.model, prompt, chat.sampling));
  auto run = std::make_unique<GenerationRun>(job, *ctx.model.tokenizer, std::move(reply),
                                             deadline(ctx), chat.parallel_tool_calls ? -1 : 1);
  if (chat.stream) {
    stream_reply(ctx, res, std::move(run), std::make_unique<MessagesStream>(ctx, chat.model));
    return;
  }
  ActiveGeneration active(ctx);
  const CollectedReply r = collect_reply(*run, req);
  if (auto error = run_error(ctx, *run)) throw *error;
  send_json(res, messages_response(*run, r, chat.model));
}

void handle_count_tokens(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_request_body(req.body);
  const ChatRequest chat = parse_anthropic_count_tokens(body);
  require_model(ctx, chat.model);
  const PreparedPrompt prompt = prepare_chat(ctx.model, chat, /*check_fits=*/false);
  send_json(res, Json{{"input_tokens", prompt.tokens.size()}});
}

}  // namespace rl::server
