// The HTTP layer end to end over loopback, with the deterministic fake engine (tests only) and
// the tiny model's real tokenizer. The fake is scripted by the prompt: a user message holding
// SAY[[text]] makes the "model" write exactly that text, then <|im_end|>. This is how these
// tests get tool calls, reasoning and multi-byte characters out of a model whose weights are
// random; the real engine is exercised by tests/server/*.mjs and *.py.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "fake_engine.h"
#include "gguf/gguf.h"
#include "server/http_server.h"
#include "server/json_fields.h"
#include "util/log.h"

namespace rl::server {
namespace {

using namespace std::chrono_literals;

const char* kTinyModel = RL_SHARED_DIR "/testdata/tiny/tiny-f32.gguf";

// The next token of the scripted reply, or nullopt when the prompt holds no script.
std::optional<int32_t> scripted_next(const tokenizer::Tokenizer& tok,
                                     std::span<const int32_t> history) {
  const std::string text = tok.decode(history);
  const size_t turn = text.rfind("<|im_start|>assistant\n");
  if (turn == std::string::npos) return std::nullopt;
  const size_t open = text.rfind("SAY[[", turn);
  if (open == std::string::npos) return std::nullopt;
  const size_t close = text.find("]]", open);
  if (close == std::string::npos || close > turn) return std::nullopt;
  const std::string target = text.substr(open + 5, close - open - 5);
  const std::string said = text.substr(turn + 22);
  if (said.size() > target.size() || target.compare(0, said.size(), said) != 0) return 511;
  if (said.size() == target.size()) return 511;  // <|im_end|>
  return tok.encode(target.substr(said.size()), /*parse_special=*/false).front();
}

class HttpTest : public ::testing::Test {
 protected:
  void start(int slots = 1, int queue = 4, std::chrono::microseconds delay = 0us,
             double timeout = 0, std::string api_key = {}) {
    set_log_level(LogLevel::Warn);
    const gguf::File file = gguf::File::open(kTinyModel);
    model_.tokenizer =
        std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
    testing::FakeEngineOptions fo;
    fo.n_vocab = 512;
    fo.token_delay = delay;
    fo.never_sampled = {509, 510, 511};  // replies end only where a script says so
    const tokenizer::Tokenizer* tok = model_.tokenizer.get();
    fo.script = [tok](std::span<const int32_t> h) { return scripted_next(*tok, h); };
    model_.engine = std::make_unique<testing::FakeEngine>(fo);
    model_.id = "tiny";
    model_.context = 4096;
    model_.trained_context = 4096;
    derive_token_fields(model_);
    // Random logits must not end replies early by chance: end only when scripted.
    SchedulerOptions so;
    so.slots = slots;
    so.queue_limit = queue;
    so.session.max_context = 4096;
    scheduler_ = std::make_unique<Scheduler>(*model_.engine, so, &cache_, &metrics_);
    ServerConfig config;
    config.port = 0;
    config.request_timeout_seconds = timeout;
    config.api_key = api_key;
    config.max_body_bytes = 1 << 20;
    http_ = std::make_unique<HttpServer>(model_, *scheduler_, metrics_, &cache_, config);
    port_ = http_->bind();
    thread_ = std::thread([this] { http_->serve(); });
  }

  void TearDown() override {
    if (http_) http_->stop();
    if (thread_.joinable()) thread_.join();
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(20, 0);
    return c;
  }

  httplib::Result post(const std::string& path, const Json& body,
                       const httplib::Headers& headers = {}) {
    return client().Post(path.c_str(), headers, dump_json(body), "application/json");
  }

  static Json chat(const std::string& user, Json extra = Json::object()) {
    Json body = {{"model", "tiny"},
                 {"messages", Json::array({{{"role", "user"}, {"content", user}}})},
                 {"max_tokens", 200}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return body;
  }

  // The data payloads of an SSE body, in order.
  static std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      const size_t end = body.find("\n\n", pos);
      out.push_back(body.substr(pos + 6, end - pos - 6));
      pos = end;
    }
    return out;
  }

  ServedModel model_;
  PrefixCache cache_{PrefixCacheOptions{1 << 20, 0, "", "fake"}};
  Metrics metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(HttpTest, ChatReturnsTheScriptedTextWithUsage) {
  start();
  const std::string said = "Hello, wörld! 🎉 ok";
  auto r = post("/v1/chat/completions", chat("SAY[[" + said + "]]"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], said);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const auto tokens = model_.tokenizer->encode(said, false);
  EXPECT_EQ(j["usage"]["completion_tokens"], tokens.size() + 1);  // + <|im_end|>
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(HttpTest, StreamNeverSplitsACharacterAndEqualsTheFullAnswer) {
  start();
  const std::string said = "añb€c😀d 日本語 end";  // 2-, 3- and 4-byte characters, byte tokens
  auto full = post("/v1/chat/completions", chat("SAY[[" + said + "]]"));
  ASSERT_EQ(full->status, 200);
  auto r = post("/v1/chat/completions",
                chat("SAY[[" + said + "]]",
                     {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto events = sse_data(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string content;
  Json usage;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json c = Json::parse(events[i]);  // throws on invalid UTF-8
    if (c["choices"].empty()) {
      usage = c["usage"];
      continue;
    }
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, said);
  EXPECT_EQ(content, Json::parse(full->body)["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(usage["completion_tokens"], Json::parse(full->body)["usage"]["completion_tokens"]);
  // The same prompt again resumed from saved state.
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(HttpTest, ToolCallsInBothDialectsStreamedAndNot) {
  start();
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const std::string json_call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const std::string xml_call =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
      "</tool_call>";
  for (const std::string& call : {json_call, xml_call}) {
    auto r = post("/v1/chat/completions", chat("SAY[[" + call + "]]", {{"tools", tools}}));
    ASSERT_EQ(r->status, 200) << r->body;
    const Json j = Json::parse(r->body);
    const Json& m = j["choices"][0]["message"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r->body;
    ASSERT_EQ(m["tool_calls"].size(), 1u) << r->body;
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(Json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              Json::parse(R"({"city": "Paris"})"));

    auto s = post("/v1/chat/completions",
                  chat("SAY[[" + call + "]]", {{"tools", tools}, {"stream", true}}));
    ASSERT_EQ(s->status, 200);
    int calls = 0;
    std::string finish;
    for (const auto& e : sse_data(s->body)) {
      if (e == "[DONE]") continue;
      const Json c = Json::parse(e);
      const Json& d = c["choices"][0]["delta"];
      if (d.contains("tool_calls")) {
        ++calls;
        EXPECT_EQ(d["tool_calls"][0]["index"], 0);
        EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "get_weather");
      }
      if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(finish, "tool_calls");
  }
}

TEST_F(HttpTest, MalformedToolCallComesBackAsContent) {
  start();
  const Json tools = Json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  const std::string broken = "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}\n</tool_call>";
  auto r = post("/v1/chat/completions", chat("SAY[[" + broken + "]]", {{"tools", tools}}));
  ASSERT_EQ(r->status, 200);
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(j["choices"][0]["message"]["content"].get<std::string>().find("{oops}"),
            std::string::npos);
}

TEST_F(HttpTest, ReasoningIsSplitFromContent) {
  start();
  auto r =
      post("/v1/chat/completions", chat("SAY[[<think>\nfirst, plan\n</think>\n\nThe answer]]"));
  ASSERT_EQ(r->status, 200);
  const Json m = Json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "first, plan");
  EXPECT_EQ(m["content"], "The answer");
}

TEST_F(HttpTest, StopStringsEndTheReplyBeforeThem) {
  start();
  auto r = post("/v1/chat/completions", chat("SAY[[one two three]]", {{"stop", {"two", "xyz"}}}));
  ASSERT_EQ(r->status, 200);
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto a = post("/v1/messages",
                Json{{"model", "tiny"},
                     {"max_tokens", 100},
                     {"stop_sequences", {"three"}},
                     {"messages", {{{"role", "user"}, {"content", "SAY[[one two three]]"}}}}});
  ASSERT_EQ(a->status, 200) << a->body;
  const Json aj = Json::parse(a->body);
  EXPECT_EQ(aj["stop_reason"], "stop_sequence");
  EXPECT_EQ(aj["stop_sequence"], "three");
  EXPECT_EQ(aj["content"][0]["text"], "one two ");
}

TEST_F(HttpTest, ToolChoiceRequiredOpensTheCallInThePrompt) {
  start();
  const Json tools = Json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  // The prompt already holds "<tool_call>\n"; the script (seen from the turn start) includes it.
  auto r = post("/v1/chat/completions",
                chat("SAY[[<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>]]",
                     {{"tools", tools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls") << r->body;
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "f");
}

TEST_F(HttpTest, AnthropicMessagesWithToolsStreamedAndNot) {
  start();
  const Json tools = Json::parse(R"([{"name": "get_weather", "description": "Weather",
      "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  const std::string say =
      "SAY[[<think>\nhmm\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>]]";
  Json messages = Json::parse(R"([{"role": "user", "content": "earlier"},
      {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
        "content": "sunny"}, {"type": "text", "text": ""}]}])");
  messages[2]["content"][1]["text"] = say;
  Json body = {{"model", "tiny"},
               {"max_tokens", 300},
               {"tools", tools},
               {"system", "Be brief."},
               {"messages", messages}};
  auto r = post("/v1/messages", body);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 3u) << r->body;
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  EXPECT_EQ(j["content"][0]["thinking"], "hmm");
  EXPECT_EQ(j["content"][1]["text"], "Checking.");
  EXPECT_EQ(j["content"][2]["type"], "tool_use");
  EXPECT_EQ(j["content"][2]["input"], Json::parse(R"({"city": "Oslo"})"));
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 0);

  body["stream"] = true;
  auto s = post("/v1/messages", body);
  ASSERT_EQ(s->status, 200);
  std::vector<std::string> names;
  std::string json_args, text;
  Json final_usage;
  size_t pos = 0;
  while ((pos = s->body.find("event: ", pos)) != std::string::npos) {
    const size_t nl = s->body.find('\n', pos);
    names.push_back(s->body.substr(pos + 7, nl - pos - 7));
    const size_t end = s->body.find("\n\n", nl);
    const Json data = Json::parse(s->body.substr(nl + 7, end - nl - 7));
    EXPECT_EQ(data["type"], names.back());
    if (names.back() == "content_block_delta") {
      if (data["delta"]["type"] == "input_json_delta")
        json_args += data["delta"]["partial_json"].get<std::string>();
      if (data["delta"]["type"] == "text_delta") text += data["delta"]["text"].get<std::string>();
    }
    if (names.back() == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "tool_use");
      final_usage = data["usage"];
    }
    pos = end;
  }
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(text, "Checking.");
  EXPECT_EQ(Json::parse(json_args), Json::parse(R"({"city": "Oslo"})"));
  // The same request again resumed from saved state.
  EXPECT_GT(final_usage["cache_read_input_tokens"].get<int>(), 0);
  EXPECT_EQ(
      final_usage["input_tokens"].get<int>() + final_usage["cache_read_input_tokens"].get<int>(),
      Json::parse(client()
                      .Post("/v1/messages/count_tokens", dump_json(body), "application/json")
                      ->body)["input_tokens"]
          .get<int>());
}

TEST_F(HttpTest, CompletionsWithTokenPromptEchoAndLogprobs) {
  start();
  auto r = post("/v1/completions", Json{{"model", "tiny"},
                                        {"prompt", {1, 2, 3, 4}},
                                        {"max_tokens", 5},
                                        {"temperature", 0},
                                        {"logprobs", 2},
                                        {"logit_bias", {{"65", 100}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "bbbbb");  // token 65 is "b" in the tiny vocabulary
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), 5u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
  auto e = post("/v1/completions",
                Json{{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", 0}, {"echo", true}});
  ASSERT_EQ(e->status, 200) << e->body;
  EXPECT_EQ(Json::parse(e->body)["choices"][0]["text"], "abc");
}

TEST_F(HttpTest, TokenizeDetokenizeHealthMetricsModels) {
  start();
  auto t = post("/tokenize", Json{{"content", "hello<|im_end|>"}});
  ASSERT_EQ(t->status, 200);
  const Json tokens = Json::parse(t->body)["tokens"];
  EXPECT_EQ(tokens.back(), 511);
  auto d = post("/detokenize", Json{{"tokens", tokens}});
  EXPECT_EQ(Json::parse(d->body)["content"], "hello<|im_end|>");
  auto h = client().Get("/health");
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(Json::parse(h->body)["status"], "ok");
  auto m = client().Get("/metrics");
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("# TYPE redlite_queue_depth gauge"), std::string::npos);
  EXPECT_NE(m->body.find("redlite_http_responses_total{route=\"/tokenize\",status=\"200\"} 1"),
            std::string::npos);
  auto models = client().Get("/v1/models");
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "tiny");
}

struct BadRequest {
  std::string method, path, body;
  int status;
};

TEST_F(HttpTest, BadRequestsGetTheRightStatusAndErrorShape) {
  start();
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<BadRequest> cases = {
      {"POST", "/v1/chat/completions", "", 400},
      {"POST", "/v1/chat/completions", "{", 400},
      {"POST", "/v1/chat/completions", "null", 400},
      {"POST", "/v1/chat/completions", "[1]", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny"})", 400},
      {"POST", "/v1/chat/completions", R"({)" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": 5, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "other", )" + ok_messages + "}", 404},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "messages": "hi"})", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "messages": []})", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "x", "content": "a"}]})", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user"}]})", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": 5}]})", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "temperature": 2.5, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "temperature": "hot", )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "top_p": -0.1, )" + ok_messages + "}",
       400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "min_p": 1.5, )" + ok_messages + "}",
       400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "presence_penalty": 3, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "frequency_penalty": -2.01, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "max_tokens": 0, )" + ok_messages + "}",
       400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "max_tokens": 1.5, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "max_tokens": 1e300, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "max_tokens": 99999999999999999999999, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "n": 2, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "response_format": {"type": "json_object"}, )" + ok_messages + "}",
       400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "logit_bias": {"999999": 1}, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "logit_bias": {"5": 101}, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "top_logprobs": 3, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "stop": ["a","b","c","d","e"], )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "stop": 7, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", R"({"model": "tiny", "stream": "yes", )" + ok_messages + "}",
       400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "stream_options": {"include_usage": true}, )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "tools": [{"type": "function"}], )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "tool_choice": "required", )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "tool_choice": "sometimes", )" + ok_messages + "}", 400},
      {"POST", "/v1/chat/completions", std::string(100, '[') + std::string(100, ']'), 400},
      {"POST", "/v1/chat/completions",
       R"({"model": "tiny", "messages": [{"role": "user", "content": ")" + std::string(20000, 'a') +
           R"("}]})",
       400},
      {"POST", "/v1/completions", R"({"model": "tiny"})", 400},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": [1, 99999]})", 400},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": ["a", "b"]})", 400},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": "", "max_tokens": 1})", 400},
      {"POST", "/v1/completions", R"({"model": "tiny", "prompt": "a", "suffix": "b"})", 400},
      {"POST", "/v1/messages",
       R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}]})", 400},
      {"POST", "/v1/messages",
       R"({"model": "tiny", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})",
       400},
      {"POST", "/v1/messages",
       R"({"model": "tiny", "max_tokens": 5, "temperature": 1.5, "messages": [{"role": "user", "content": "x"}]})",
       400},
      {"POST", "/v1/messages",
       R"({"model": "tiny", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
       400},
      {"POST", "/v1/messages",
       R"({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})",
       404},
      {"POST", "/tokenize", R"({"content": 5})", 400},
      {"POST", "/detokenize", R"({"tokens": [-1]})", 400},
      {"POST", "/detokenize", R"({"tokens": ["a"]})", 400},
      {"GET", "/v1/chat/completions", "", 405},
      {"PUT", "/v1/models", "", 405},
      {"DELETE", "/health", "", 405},
      {"GET", "/nope", "", 404},
      {"POST", "/nope", "{}", 404},
      {"GET", "/v1/models/other", "", 404},
  };
  auto c = client();
  for (const BadRequest& t : cases) {
    httplib::Request req;
    req.method = t.method;
    req.path = t.path;
    req.body = t.body;
    req.set_header("Content-Type", "application/json");
    auto r = c.send(req);
    ASSERT_TRUE(r) << t.path << " " << t.body.substr(0, 80);
    EXPECT_EQ(r->status, t.status)
        << t.method << " " << t.path << " " << t.body.substr(0, 120) << "\n-> " << r->body;
    const Json j = Json::parse(r->body, nullptr, false);
    if (t.path.rfind("/v1/messages", 0) == 0) {
      EXPECT_EQ(j["type"], "error") << r->body;
      EXPECT_TRUE(j["error"]["message"].is_string()) << r->body;
    } else {
      EXPECT_TRUE(j["error"]["message"].is_string()) << r->body;
      EXPECT_TRUE(j["error"]["type"].is_string()) << r->body;
    }
  }
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(HttpTest, ApiKeyIsRequiredExceptForHealth) {
  start(1, 4, 0us, 0, "k3y");
  auto c = client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer nope"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer k3y"}})->status, 200);
  EXPECT_EQ(c.Get("/v1/models", {{"x-api-key", "k3y"}})->status, 200);
  auto a = c.Post("/v1/messages", "{}", "application/json");
  EXPECT_EQ(a->status, 401);
  EXPECT_EQ(Json::parse(a->body)["error"]["type"], "authentication_error");
}

TEST_F(HttpTest, OversizeBodyIs413) {
  start();
  auto r = client().Post("/v1/chat/completions", std::string(2 << 20, 'x'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(Json::parse(r->body)["error"]["message"].is_string());
}

TEST_F(HttpTest, FullQueueAnswers429WithRetryAfter) {
  start(1, 0, 2ms);
  std::thread busy([&] { post("/v1/chat/completions", chat("long", {{"max_tokens", 300}})); });
  while (scheduler_->status().busy == 0) std::this_thread::sleep_for(1ms);
  auto r = post("/v1/chat/completions", chat("hi"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  EXPECT_EQ(Json::parse(r->body)["error"]["type"], "rate_limit_error");
  busy.join();
}

TEST_F(HttpTest, ClientThatLeavesFreesItsSlot) {
  start(1, 4, 2ms);
  for (bool stream : {false, true}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(0, 200000);  // the non-streaming client gives up after 0.2 s
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = dump_json(chat("long", {{"max_tokens", 100000}, {"stream", stream}}));
    req.set_header("Content-Type", "application/json");
    int chunks = 0;  // the streaming client hangs up after a few chunks
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 4; };
    auto r = c.send(req);
    EXPECT_FALSE(r) << "stream=" << stream;
    c.stop();
    const auto start_wait = std::chrono::steady_clock::now();
    while (scheduler_->status().busy > 0 && std::chrono::steady_clock::now() - start_wait < 3s)
      std::this_thread::sleep_for(1ms);
    EXPECT_EQ(scheduler_->status().busy, 0) << "stream=" << stream;
    EXPECT_LT(std::chrono::steady_clock::now() - start_wait, 1500ms) << "stream=" << stream;
  }
  auto ok = post("/v1/chat/completions", chat("SAY[[fine]]"));
  EXPECT_EQ(Json::parse(ok->body)["choices"][0]["message"]["content"], "fine");
}

TEST_F(HttpTest, TimeoutEndsTheRequestWith504OrAnErrorEvent) {
  start(1, 4, 2ms, /*timeout=*/0.3);
  auto r = post("/v1/chat/completions", chat("long", {{"max_tokens", 100000}}));
  EXPECT_EQ(r->status, 504);
  auto s = post("/v1/chat/completions", chat("long", {{"max_tokens", 100000}, {"stream", true}}));
  EXPECT_EQ(s->status, 200);
  const auto events = sse_data(s->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(Json::parse(events.back())["error"]["type"], "timeout_error");
  EXPECT_EQ(scheduler_->status().busy, 0);
}

TEST_F(HttpTest, ShutdownEndsStreamsWithAnErrorEvent) {
  start(1, 4, 2ms);
  std::string body;
  std::thread t([&] {
    auto r = post("/v1/chat/completions", chat("long", {{"max_tokens", 100000}, {"stream", true}}));
    if (r) body = r->body;
  });
  while (scheduler_->status().busy == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);
  http_->stop();
  t.join();
  const auto events = sse_data(body);
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back().find("shutting down"), std::string::npos) << events.back();
}

}  // namespace
}  // namespace rl::server
