// POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/{id}].
#include <httplib.h>

#include "server/prompt.h"
#include "server/requests.h"
#include "server/routes.h"
#include "util/error.h"

namespace rl::server {
namespace {

// The bytes of a token; empty for embedding rows beyond the vocabulary (padding), which can
// appear among the top alternatives of the raw distribution.
std::string piece_of(const tokenizer::Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.n_vocab() ? tok.token_bytes(id) : std::string();
}

Json token_logprob(const tokenizer::Tokenizer& tok, int32_t id, float logprob) {
  const std::string piece = piece_of(tok, id);
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return Json{{"token", piece}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

// choices[].logprobs of a chat completion for some tokens.
Json chat_logprobs(const tokenizer::Tokenizer& tok, const std::vector<TokenEvent>& tokens) {
  Json content = Json::array();
  for (const TokenEvent& e : tokens) {
    Json entry = token_logprob(tok, e.token, e.logprob);
    Json top = Json::array();
    for (const auto& alt : e.top) top.push_back(token_logprob(tok, alt.token, alt.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return Json{{"content", std::move(content)}};
}

Json usage_json(const GenerationRun& run) {
  const int64_t prompt = run.prompt_tokens(), completion = run.completion_tokens();
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", run.cached_tokens().value_or(0)}}}};
}

const char* chat_finish_reason(const GenerationRun& run) {
  if (run.end() == ReplyEnd::Length) return "length";
  return run.tool_calls() > 0 ? "tool_calls" : "stop";
}

Json tool_call_json(const chat::ToolCall& call, int index, bool with_index) {
  Json j = Json::object();
  if (with_index) j["index"] = index;
  j["id"] = random_id("call_");
  j["type"] = "function";
  j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return j;
}

std::string sse_data(const Json& j) {
  return "data: " + dump_json(j) + "\n\n";
}

// What follows the final chunk of a stream: a usage chunk (no choices) when the client asked for
// it with stream_options.include_usage, then [DONE]. `chunk_base` carries id, object, model.
std::string stream_end(Json chunk_base, const GenerationRun& run, bool include_usage) {
  std::string out;
  if (include_usage) {
    chunk_base["choices"] = Json::array();
    chunk_base["usage"] = usage_json(run);
    out += sse_data(chunk_base);
  }
  return out + "data: [DONE]\n\n";
}

class ChatStream : public SseFormat {
 public:
  ChatStream(const RouteContext& ctx, bool include_usage, bool logprobs)
      : ctx_(ctx),
        include_usage_(include_usage),
        logprobs_(logprobs),
        id_(random_id("chatcmpl-")),
        created_(unix_time()) {}

  std::string step(GenerationRun& run, const GenerationRun::Step& step) override {
    std::string out;
    if (!sent_role_) {
      out += chunk(Json{{"role", "assistant"}, {"content", ""}});
      sent_role_ = true;
    }
    if (logprobs_)
      pending_tokens_.insert(pending_tokens_.end(), step.tokens.begin(), step.tokens.end());
    const auto& d = step.delta;
    if (!d.reasoning.empty()) out += chunk(Json{{"reasoning_content", d.reasoning}});
    if (!d.content.empty()) out += chunk(Json{{"content", d.content}});
    for (const auto& call : d.tool_calls) {
      out += chunk(Json{{"tool_calls", Json::array({tool_call_json(call, tool_index_, true)})}});
      ++tool_index_;
    }
    if (!step.done) return out;
    if (auto error = run_error(ctx_, run)) {
      out += sse_data(Json::parse(error_body(ApiStyle::OpenAI, *error)));
      return out;
    }
    out += chunk(Json::object(), chat_finish_reason(run));
    return out + stream_end(base(), run, include_usage_);
  }

  std::string keepalive() override { return ": keep-alive\n\n"; }

 private:
  Json base() const {
    return Json{{"id", id_},
                {"object", "chat.completion.chunk"},
                {"created", created_},
                {"model", ctx_.model.id},
                {"system_fingerprint", "redlite"}};
  }

  std::string chunk(Json delta, const char* finish_reason = nullptr) {
    Json c = base();
    Json choice = {{"index", 0},
                   {"delta", std::move(delta)},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason ? Json(finish_reason) : Json(nullptr)}};
    if (logprobs_ && !pending_tokens_.empty()) {
      choice["logprobs"] = chat_logprobs(*ctx_.model.tokenizer, pending_tokens_);
      pending_tokens_.clear();
    }
    c["choices"] = Json::array({std::move(choice)});
    if (include_usage_) c["usage"] = nullptr;
    return sse_data(c);
  }

  const RouteContext& ctx_;
  const bool include_usage_, logprobs_;
  const std::string id_;
  const int64_t created_;
  bool sent_role_ = false;
  int tool_index_ = 0;
  std::vector<TokenEvent> pending_tokens_;
};

Json chat_response(const RouteContext& ctx, const GenerationRun& run, const CollectedReply& r,
                   bool logprobs) {
  Json message = {{"role", "assistant"}};
  const bool has_calls = !r.reply.tool_calls.empty();
  message["content"] = has_calls && r.reply.content.empty() ? Json(nullptr) : Json(r.reply.content);
  if (!r.reply.reasoning.empty()) message["reasoning_content"] = r.reply.reasoning;
  if (has_calls) {
    Json calls = Json::array();
    for (size_t i = 0; i < r.reply.tool_calls.size(); ++i)
      calls.push_back(tool_call_json(r.reply.tool_calls[i], int(i), false));
    message["tool_calls"] = std::move(calls);
  }
  Json choice = {{"index", 0},
                 {"message", std::move(message)},
                 {"logprobs", logprobs ? chat_logprobs(*ctx.model.tokenizer, r.tokens) : Json()},
                 {"finish_reason", chat_finish_reason(run)}};
  return Json{{"id", random_id("chatcmpl-")},    {"object", "chat.completion"},
              {"created", unix_time()},          {"model", ctx.model.id},
              {"system_fingerprint", "redlite"}, {"choices", Json::array({std::move(choice)})},
              {"usage", usage_json(run)}};
}

// --- /v1/completions

Json completion_logprobs(const tokenizer::Tokenizer& tok, const std::vector<TokenEvent>& tokens,
                         size_t& text_offset) {
  Json pieces = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  for (const TokenEvent& e : tokens) {
    const std::string piece = piece_of(tok, e.token);
    pieces.push_back(piece);
    lps.push_back(e.logprob);
    Json top = Json::object();
    for (const auto& alt : e.top) top[piece_of(tok, alt.token)] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return Json{{"tokens", std::move(pieces)},
              {"token_logprobs", std::move(lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

const char* completion_finish_reason(const GenerationRun& run) {
  return run.end() == ReplyEnd::Length ? "length" : "stop";
}

class CompletionStream : public SseFormat {
 public:
  CompletionStream(const RouteContext& ctx, bool include_usage, bool logprobs, std::string echo)
      : ctx_(ctx),
        include_usage_(include_usage),
        logprobs_(logprobs),
        echo_(std::move(echo)),
        id_(random_id("cmpl-")),
        created_(unix_time()) {}

  std::string step(GenerationRun& run, const GenerationRun::Step& step) override {
    std::string out;
    std::string text = std::move(echo_);
    echo_.clear();
    text += step.delta.content;
    if (logprobs_)
      pending_tokens_.insert(pending_tokens_.end(), step.tokens.begin(), step.tokens.end());
    if (!text.empty()) out += chunk(text, nullptr);
    if (!step.done) return out;
    if (auto error = run_error(ctx_, run)) {
      out += sse_data(Json::parse(error_body(ApiStyle::OpenAI, *error)));
      return out;
    }
    out += chunk("", completion_finish_reason(run));
    return out + stream_end(base(), run, include_usage_);
  }

  std::string keepalive() override { return ": keep-alive\n\n"; }

 private:
  Json base() const {
    return Json{{"id", id_},
                {"object", "text_completion"},
                {"created", created_},
                {"model", ctx_.model.id},
                {"system_fingerprint", "redlite"}};
  }

  std::string chunk(const std::string& text, const char* finish_reason) {
    Json c = base();
    Json choice = {{"text", text},
                   {"index", 0},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason ? Json(finish_reason) : Json(nullptr)}};
    if (logprobs_ && !pending_tokens_.empty()) {
      choice["logprobs"] = completion_logprobs(*ctx_.model.tokenizer, pending_tokens_, offset_);
      pending_tokens_.clear();
    }
    c["choices"] = Json::array({std::move(choice)});
    if (include_usage_) c["usage"] = nullptr;
    return sse_data(c);
  }

  const RouteContext& ctx_;
  const bool include_usage_, logprobs_;
  std::string echo_;
  const std::string id_;
  const int64_t created_;
  std::vector<TokenEvent> pending_tokens_;
  size_t offset_ = 0;
};

Json model_json(const RouteContext& ctx) {
  return Json{{"id", ctx.model.id},
              {"object", "model"},
              {"created", ctx.model.created},
              {"owned_by", "redlite"},
              {"context_length", ctx.model.context},
              {"aliases", ctx.model.aliases}};
}

}  // namespace

void handle_chat_completions(RouteContext& ctx, const httplib::Request& req,
                             httplib::Response& res) {
  const Json body = parse_request_body(req.body);
  const ChatRequest chat =
      parse_openai_chat(body, ctx.model.n_vocab(), ctx.model.family == chat::Family::Qwen3Coder);
  require_model(ctx, chat.model);
  PreparedPrompt prompt = prepare_chat(ctx.model, chat);
  ReplyOptions reply = std::move(prompt.reply);
  auto job = ctx.scheduler.submit(make_job(ctx.model, prompt, chat.sampling));
  auto run = std::make_unique<GenerationRun>(job, *ctx.model.tokenizer, std::move(reply),
                                             deadline(ctx), chat.parallel_tool_calls ? -1 : 1);
  const bool logprobs = chat.sampling.top_logprobs >= 0;
  if (chat.stream) {
    stream_reply(ctx, res, std::move(run),
                 std::make_unique<ChatStream>(ctx, chat.include_usage, logprobs));
    return;
  }
  ActiveGeneration active(ctx);
  const CollectedReply reply_text = collect_reply(*run, req);
  if (auto error = run_error(ctx, *run)) throw *error;
  send_json(res, chat_response(ctx, *run, reply_text, logprobs));
}

void handle_completions(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_request_body(req.body);
  const CompletionRequest completion = parse_openai_completion(body, ctx.model.n_vocab());
  require_model(ctx, completion.model);
  PreparedPrompt prompt = prepare_completion(ctx.model, completion);
  std::string echo;
  if (completion.echo)
    echo = completion.prompt_is_tokens ? ctx.model.tokenizer->decode(prompt.tokens) : prompt.text;
  ReplyOptions reply = std::move(prompt.reply);
  auto job = ctx.scheduler.submit(make_job(ctx.model, prompt, completion.sampling));
  auto run =
      std::make_unique<GenerationRun>(job, *ctx.model.tokenizer, std::move(reply), deadline(ctx));
  const bool logprobs = completion.sampling.top_logprobs >= 0;
  if (completion.stream) {
    stream_reply(ctx, res, std::move(run),
                 std::make_unique<CompletionStream>(ctx, completion.include_usage, logprobs,
                                                    std::move(echo)));
    return;
  }
  ActiveGeneration active(ctx);
  const CollectedReply r = collect_reply(*run, req);
  if (auto error = run_error(ctx, *run)) throw *error;
  size_t offset = 0;
  Json choice = {
      {"text", echo + r.reply.content},
      {"index", 0},
      {"logprobs", logprobs ? completion_logprobs(*ctx.model.tokenizer, r.tokens, offset) : Json()},
      {"finish_reason", completion_finish_reason(*run)}};
  send_json(res, Json{{"id", random_id("cmpl-")},
                      {"object", "text_completion"},
                      {"created", unix_time()},
                      {"model", ctx.model.id},
                      {"system_fingerprint", "redlite"},
                      {"choices", Json::array({std::move(choice)})},
                      {"usage", usage_json(*run)}});
}

void handle_models(RouteContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, Json{{"object", "list"}, {"data", Json::array({model_json(ctx)})}});
}

void handle_model(RouteContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, model_json(ctx));
}

}  // namespace rl::server
