// The validated, API-independent form of a generation request. The OpenAI and Anthropic
// parsers (openai_request.cpp, anthropic_request.cpp) produce these; everything after them
// (prompt building, scheduling, output) works on this form only.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "server/json_fields.h"

namespace rl::server {

struct SamplingRequest {
  engine::SamplerParams sampler;  // seed always set (random when the client gave none)
  int64_t max_tokens = -1;        // -1: until end of generation or the context is full
  std::vector<std::string> stop;  // stop strings: the output ends before the first match
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits before sampling
  int top_logprobs = -1;  // -1: no log-probabilities; else how many alternatives (0..20)
};

enum class ToolChoiceMode { Auto, None, Required, Named };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::Auto;
  std::string name;  // for Named
};

struct ChatRequest {
  std::string model;
  Json messages = Json::array();  // normalised OpenAI-style messages for chat::render
  Json tools = nullptr;           // OpenAI tool definitions, or null
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  std::optional<bool> enable_thinking;
  // Anthropic: a final assistant message is continued rather than closed; its text ends the
  // prompt and is not repeated in the reply.
  std::string assistant_prefill;
  SamplingRequest sampling;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct CompletionRequest {
  std::string model;
  std::string prompt_text;             // when the prompt was text
  std::vector<int32_t> prompt_tokens;  // when the prompt was token ids
  bool prompt_is_tokens = false;
  bool echo = false;
  SamplingRequest sampling;
  bool stream = false;
  bool include_usage = false;
};

struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // BOS where the model wants one
  bool parse_special = true;  // "<|im_start|>" in the text becomes its control token
  bool with_pieces = false;
};

// Parsers. n_vocab bounds token ids (logit_bias keys, token prompts). Throw ApiError 400.
ChatRequest parse_openai_chat(const Json& body, int32_t n_vocab, bool arguments_as_objects);
CompletionRequest parse_openai_completion(const Json& body, int32_t n_vocab);
ChatRequest parse_anthropic_messages(const Json& body);
// /v1/messages/count_tokens: the same body without max_tokens.
ChatRequest parse_anthropic_count_tokens(const Json& body);
TokenizeRequest parse_tokenize(const Json& body);
std::vector<int32_t> parse_detokenize(const Json& body, int32_t n_vocab);

// Shared pieces, exposed for the tests.
std::vector<std::string> parse_stop(const Json& body, std::string_view key, size_t max_count,
                                    bool allow_string);
std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& body, int32_t n_vocab);
uint64_t random_seed();

}  // namespace rl::server
