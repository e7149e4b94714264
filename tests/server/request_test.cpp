// Request parsing and validation, error bodies, and the stop-string matcher.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/reply_stream.h"
#include "server/requests.h"

namespace rl::server {
namespace {

Json body(const char* text) {
  return Json::parse(text);
}

// The status and parameter of the ApiError that f throws (or 0 if none).
template <typename F>
std::pair<int, std::string> error_of(F f) {
  try {
    f();
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, ""};
}

TEST(RequestBody, RejectsWhatIsNotAJsonObject) {
  EXPECT_EQ(error_of([] { parse_request_body(""); }).first, 400);
  EXPECT_EQ(error_of([] { parse_request_body("[1, 2]"); }).first, 400);
  EXPECT_EQ(error_of([] { parse_request_body("{\"a\": \"\xff\"}"); }).first, 400);
  EXPECT_EQ(error_of([] { parse_request_body(std::string(65, '[') + std::string(65, ']')); }).first,
            400);
  EXPECT_EQ(error_of([] { parse_request_body("{\"a\": [[[[1]]]]}"); }).first, 0);
  EXPECT_EQ(error_of([] { parse_request_body("{\"a\": 1e400}"); }).first, 400);
  try {
    parse_request_body("{\"a\": 1,}");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("line 1, column 9"), std::string::npos) << e.what();
  }
}

TEST(RequestFields, StrictTypesAndRanges) {
  const Json b = body(R"({"t": 1.5, "i": 7, "f": 7.0, "g": 7.5, "s": "x", "n": null,
                          "neg": -3, "u": 18446744073709551615})");
  EXPECT_EQ(read_number(b, "t", 0, 2), 1.5);
  EXPECT_EQ(read_number(b, "n", 0, 2), std::nullopt);
  EXPECT_EQ(read_number(b, "missing", 0, 2), std::nullopt);
  EXPECT_EQ(error_of([&] { read_number(b, "t", 0, 1); }), (std::pair<int, std::string>{400, "t"}));
  EXPECT_EQ(error_of([&] { read_number(b, "s", 0, 1); }).first, 400);
  EXPECT_EQ(read_integer(b, "i", 0, 10), 7);
  EXPECT_EQ(read_integer(b, "f", 0, 10), 7);
  EXPECT_EQ(error_of([&] { read_integer(b, "g", 0, 10); }).first, 400);
  EXPECT_EQ(error_of([&] { read_integer(b, "neg", 0, 10); }).first, 400);
  EXPECT_EQ(error_of([&] { read_integer(b, "u", 0, 10); }).first, 400);
  EXPECT_EQ(error_of([&] { read_integer(b, "i", 8, 10); }).first, 400);
  EXPECT_EQ(error_of([&] { read_bool(b, "i"); }).first, 400);
  EXPECT_EQ(error_of([&] { require_string(b, "missing"); }).first, 400);
}

TEST(OpenAIChat, NormalisesMessagesAndReadsParameters) {
  const Json b = body(R"({
    "model": "m",
    "messages": [
      {"role": "developer", "content": "rules"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "temperature": 0.2, "top_p": 0, "top_k": 5, "seed": 9, "max_completion_tokens": 33,
    "stop": "END", "logit_bias": {"3": -100}, "logprobs": true, "top_logprobs": 2,
    "stream": true, "stream_options": {"include_usage": true},
    "chat_template_kwargs": {"enable_thinking": false}, "parallel_tool_calls": false})");
  const ChatRequest r = parse_openai_chat(b, 100, /*arguments_as_objects=*/false);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["reasoning_content"], "r");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], "{\"x\": 1}");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "c1");
  EXPECT_FLOAT_EQ(r.sampling.sampler.temperature, 0.2f);
  EXPECT_EQ(r.sampling.sampler.top_k, 1);  // top_p 0: only the most likely token
  EXPECT_EQ(r.sampling.sampler.top_p, 1.0f);
  EXPECT_EQ(r.sampling.sampler.seed, 9u);
  EXPECT_EQ(r.sampling.max_tokens, 33);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  ASSERT_EQ(r.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.sampling.logit_bias[0].first, 3);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.enable_thinking, false);
  EXPECT_FALSE(r.parallel_tool_calls);
  // The Coder template walks arguments as an object.
  const ChatRequest coder = parse_openai_chat(b, 100, /*arguments_as_objects=*/true);
  EXPECT_EQ(coder.messages[2]["tool_calls"][0]["function"]["arguments"], body(R"({"x": 1})"));
}

TEST(OpenAIChat, DefaultsAreTheProjectSamplerDefaults) {
  const ChatRequest r = parse_openai_chat(
      body(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})"), 100, false);
  const engine::SamplerParams defaults;
  EXPECT_EQ(r.sampling.sampler.temperature, defaults.temperature);
  EXPECT_EQ(r.sampling.sampler.top_k, defaults.top_k);
  EXPECT_EQ(r.sampling.max_tokens, -1);
  EXPECT_EQ(r.sampling.top_logprobs, -1);
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::Auto);
  EXPECT_TRUE(r.tools.is_null());
}

TEST(OpenAIChat, RefusesWhatWouldSilentlyChangeResults) {
  const char* base = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  for (const char* extra :
       {R"("n": 2})", R"("response_format": {"type": "json_object"}})", R"("functions": []})",
        R"("max_tokens": 5, "max_completion_tokens": 6})", R"("top_logprobs": 1})",
        R"("stop": ["a", "b", "c", "d", "e"]})", R"("logit_bias": {"100": 1}})",
        R"("tool_choice": {"type": "function", "function": {"name": "f"}}})"}) {
    const std::string text = std::string(base) + extra;
    EXPECT_EQ(error_of([&] { parse_openai_chat(body(text.c_str()), 100, false); }).first, 400)
        << extra;
  }
}

TEST(OpenAICompletion, PromptForms) {
  auto r = parse_openai_completion(body(R"({"model": "m", "prompt": [[1, 2]]})"), 10);
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.sampling.max_tokens, 16);
  r = parse_openai_completion(body(R"({"model": "m", "prompt": ["hi"], "echo": true})"), 10);
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(error_of([] {
              parse_openai_completion(body(R"({"model": "m", "prompt": [1, 10]})"), 10);
            }).first,
            400);
}

TEST(Anthropic, ConvertsBlocksToTemplateMessages) {
  const Json b = body(R"({
    "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "sys"}],
    "stop_sequences": ["X"], "temperature": 0.5, "thinking": {"type": "enabled", "budget_tokens": 2000},
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": "let me see"},
                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                                   {"type": "text", "text": "and now?"}]},
      {"role": "assistant", "content": "Sure,"}]})");
  const ChatRequest r = parse_anthropic_messages(b);
  ASSERT_EQ(r.messages.size(), 5u) << r.messages.dump();
  EXPECT_EQ(r.messages[0], body(R"({"role": "system", "content": "sys"})"));
  EXPECT_EQ(r.messages[2]["reasoning_content"], "hmm");
  EXPECT_EQ(r.messages[2]["content"], "let me see");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], body(R"({"a": 1})"));
  EXPECT_EQ(r.messages[3], body(R"({"role": "tool", "content": "ok", "tool_call_id": "t1"})"));
  EXPECT_EQ(r.messages[4], body(R"({"role": "user", "content": "and now?"})"));
  EXPECT_EQ(r.assistant_prefill, "Sure,");
  EXPECT_EQ(r.tools[0]["function"]["parameters"], body(R"({"type": "object"})"));
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::Named);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.enable_thinking, true);
  EXPECT_EQ(r.sampling.max_tokens, 9);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"X"});
  EXPECT_EQ(error_of([] {
              parse_anthropic_messages(body(R"({"model": "m", "max_tokens": 1, "temperature": 1.1,
                                                 "messages": [{"role": "user", "content": "x"}]})"));
            }).first,
            400);
}

TEST(ErrorBodies, OpenAIAndAnthropicShapes) {
  ApiError e(429, "busy", "", "");
  const Json o = Json::parse(error_body(ApiStyle::OpenAI, e));
  EXPECT_EQ(o["error"]["message"], "busy");
  EXPECT_EQ(o["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(o["error"]["param"].is_null());
  EXPECT_EQ(o["error"]["code"], "rate_limit_exceeded");
  const Json a = Json::parse(error_body(ApiStyle::Anthropic, e));
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "rate_limit_error");
  const std::pair<int, const char*> anthropic_types[] = {{400, "invalid_request_error"},
                                                         {401, "authentication_error"},
                                                         {404, "not_found_error"},
                                                         {413, "request_too_large"},
                                                         {500, "api_error"},
                                                         {503, "overloaded_error"}};
  for (auto [status, type] : anthropic_types)
    EXPECT_EQ(Json::parse(anthropic_error_body(status, "m"))["error"]["type"], type) << status;
  EXPECT_EQ(Json::parse(openai_error_body(400, "bad \xff", "p", ""))["error"]["param"], "p");
}

TEST(StopMatcher, FindsStopsAcrossPiecesAndHoldsOnlyPossiblePrefixes) {
  StopMatcher m({"STOP", "<end>"});
  EXPECT_EQ(m.push("hello S"), "hello ");
  EXPECT_EQ(m.push("T"), "");
  EXPECT_EQ(m.push("ay "), "STay ");
  EXPECT_EQ(m.push("x<e"), "x");
  EXPECT_EQ(m.push("nd> tail"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.which(), "<end>");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
  StopMatcher first({"bc", "abcd"});
  EXPECT_EQ(first.push("xabcd"), "x");  // the earliest match wins
  EXPECT_EQ(first.which(), "abcd");
  StopMatcher none({"zz"});
  EXPECT_EQ(none.push("abz"), "ab");
  EXPECT_EQ(none.flush(), "z");
  StopMatcher utf8({"é!"});
  EXPECT_EQ(utf8.push("caf\xc3\xa9"), "caf");
  EXPECT_EQ(utf8.push("?"), "\xc3\xa9?");
}

}  // namespace
}  // namespace rl::server
