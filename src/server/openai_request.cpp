// Validation of OpenAI /v1/chat/completions and /v1/completions bodies into the internal form.
// Every parameter that would change what the client gets is honoured or refused with a 400.
#include <limits>

#include "server/api_error.h"
#include "server/requests.h"
#include "util/error.h"

namespace rl::server {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

void refuse_unless(bool ok, const std::string& param, const std::string& message) {
  if (!ok) bad_request(message, param);
}

// The sampling parameters both OpenAI endpoints share (top_k, min_p and repetition_penalty are
// the usual extensions of local servers).
SamplingRequest parse_openai_sampling(const Json& body, int32_t n_vocab) {
  SamplingRequest s;
  auto& p = s.sampler;
  if (auto v = read_number(body, "temperature", 0.0, 2.0)) p.temperature = float(*v);
  if (auto v = read_integer(body, "top_k", 0, kMaxInt32)) p.top_k = int(*v);
  if (auto v = read_number(body, "top_p", 0.0, 1.0)) {
    // top_p 0 keeps just the most likely token; the sampler wants (0, 1].
    p.top_p = *v == 0.0 ? 1.0f : float(*v);
    if (*v == 0.0) p.top_k = 1;
  }
  if (auto v = read_number(body, "min_p", 0.0, 1.0)) p.min_p = float(*v);
  if (auto v = read_number(body, "presence_penalty", -2.0, 2.0)) p.presence_penalty = float(*v);
  if (auto v = read_number(body, "frequency_penalty", -2.0, 2.0)) p.frequency_penalty = float(*v);
  if (auto v = read_number(body, "repetition_penalty", 0.0, 10.0)) {
    refuse_unless(*v > 0.0, "repetition_penalty", "'repetition_penalty' must be greater than 0");
    p.repeat_penalty = float(*v);
  }
  // OpenAI's penalties count every token generated so far.
  p.repeat_last_n = -1;
  const auto seed = read_integer(body, "seed", std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max());
  p.seed = seed ? static_cast<uint64_t>(*seed) : random_seed();
  s.logit_bias = parse_logit_bias(body, n_vocab);

  const auto n = read_integer(body, "n", 1, kMaxInt32);
  refuse_unless(!n || *n == 1, "n", "'n' must be 1: this server returns one choice per request");
  if (const Json* rf = read_object(body, "response_format")) {
    const std::string type = require_string(*rf, "type", "response_format");
    refuse_unless(type == "text", "response_format",
                  str("'response_format' type '", type,
                      "' is not supported; only 'text' is (no constrained decoding)"));
  }
  refuse_unless(!find_field(body, "functions") && !find_field(body, "function_call"), "functions",
                "'functions' and 'function_call' are not supported; use 'tools' and "
                "'tool_choice'");
  refuse_unless(!find_field(body, "prediction"), "prediction",
                "'prediction' (predicted outputs) is not supported");
  refuse_unless(!find_field(body, "audio") && !find_field(body, "modalities"), "modalities",
                "audio output is not supported");
  return s;
}

void parse_stream(const Json& body, bool& stream, bool& include_usage) {
  stream = read_bool(body, "stream").value_or(false);
  if (const Json* so = read_object(body, "stream_options")) {
    refuse_unless(stream, "stream_options", "'stream_options' is only allowed with 'stream': true");
    include_usage = read_bool(*so, "include_usage", "stream_options").value_or(false);
  }
}

// Text of a message's content: a string or an array of text parts (joined with newlines, as
// other servers do). Other part types (images, audio, files) are refused.
std::string content_text(const Json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(str("'", where, "' must be a string or an array of content parts, not ",
                    json_type_name(content)),
                where);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = index_path(where, i);
    const Json& part = content[i];
    if (!part.is_object())
      bad_request(str("'", part_path, "' must be an object, not ", json_type_name(part)),
                  part_path);
    const std::string type = require_string(part, "type", part_path);
    std::string piece;
    if (type == "text") {
      piece = require_string(part, "text", part_path);
    } else if (type == "refusal") {
      piece = require_string(part, "refusal", part_path);
    } else {
      bad_request(str("'", part_path, "' has type '", type,
                      "'; only text content is supported by this model"),
                  part_path);
    }
    if (i > 0) text += '\n';
    text += piece;
  }
  return text;
}

Json parse_tool_calls(const Json& calls, const std::string& where, bool arguments_as_objects) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_path = index_path(where, i);
    const Json& call = calls[i];
    if (!call.is_object())
      bad_request(str("'", call_path, "' must be an object, not ", json_type_name(call)),
                  call_path);
    const std::string type = read_string(call, "type", call_path).value_or("function");
    refuse_unless(type == "function", call_path,
                  str("'", call_path, ".type' must be 'function', got '", type, "'"));
    const Json* fn = read_object(call, "function", call_path);
    if (!fn) bad_request(str("missing required parameter '", call_path, ".function'"), call_path);
    const std::string fn_path = call_path + ".function";
    const std::string name = require_string(*fn, "name", fn_path);
    Json arguments = Json::object();
    if (const Json* a = find_field(*fn, "arguments")) {
      if (a->is_string()) {
        arguments = *a;
        if (arguments_as_objects) {
          // The Coder template walks the arguments as an object.
          Json parsed = Json::parse(a->get<std::string>(), nullptr, false);
          if (!parsed.is_object())
            bad_request(str("'", fn_path, ".arguments' must be a JSON object encoded as a string"),
                        fn_path + ".arguments");
          arguments = std::move(parsed);
        }
      } else if (a->is_object()) {
        arguments = *a;
      } else {
        bad_request(str("'", fn_path, ".arguments' must be a string, not ", json_type_name(*a)),
                    fn_path + ".arguments");
      }
    }
    Json normal = {{"id", read_string(call, "id", call_path).value_or(str("call_", i))},
                   {"type", "function"},
                   {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
    out.push_back(std::move(normal));
  }
  return out;
}

Json parse_messages(const Json& body, bool arguments_as_objects) {
  const Json& messages = require_array(body, "messages");
  if (messages.empty()) bad_request("'messages' must contain at least one message", "messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string path = index_path("messages", i);
    const Json& m = messages[i];
    if (!m.is_object())
      bad_request(str("'", path, "' must be an object, not ", json_type_name(m)), path);
    std::string role = require_string(m, "role", path);
    if (role == "developer") role = "system";
    const Json* content = find_field(m, "content");
    Json normal = {{"role", role}};
    if (role == "system" || role == "user" || role == "tool") {
      if (!content)
        bad_request(str("missing required parameter '", path, ".content'"), path + ".content");
      normal["content"] = content_text(*content, path + ".content");
      if (role == "tool") {
        if (auto id = read_string(m, "tool_call_id", path)) normal["tool_call_id"] = *id;
      }
    } else if (role == "assistant") {
      normal["content"] = content ? content_text(*content, path + ".content") : std::string();
      if (auto r = read_string(m, "reasoning_content", path)) normal["reasoning_content"] = *r;
      if (const Json* calls = read_array(m, "tool_calls", path)) {
        if (!calls->empty())
          normal["tool_calls"] =
              parse_tool_calls(*calls, path + ".tool_calls", arguments_as_objects);
      }
    } else {
      bad_request(str("'", path,
                      ".role' must be one of system, developer, user, assistant, "
                      "tool; got '",
                      role, "'"),
                  path + ".role");
    }
    out.push_back(std::move(normal));
  }
  return out;
}

Json parse_tools(const Json& body) {
  const Json* tools = read_array(body, "tools");
  if (!tools || tools->empty()) return nullptr;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string path = index_path("tools", i);
    const Json& t = (*tools)[i];
    if (!t.is_object())
      bad_request(str("'", path, "' must be an object, not ", json_type_name(t)), path);
    const std::string type = require_string(t, "type", path);
    refuse_unless(type == "function", path,
                  str("'", path, ".type' must be 'function', got '", type, "'"));
    const Json* fn = read_object(t, "function", path);
    if (!fn) bad_request(str("missing required parameter '", path, ".function'"), path);
    const std::string fn_path = path + ".function";
    const std::string name = require_string(*fn, "name", fn_path);
    if (name.empty() || name.size() > 128)
      bad_request(str("'", fn_path, ".name' must be 1 to 128 characters"), fn_path + ".name");
    read_string(*fn, "description", fn_path);
    read_object(*fn, "parameters", fn_path);
    read_bool(*fn, "strict", fn_path);
  }
  return *tools;
}

ToolChoice parse_tool_choice(const Json& body, const Json& tools) {
  ToolChoice choice;
  const Json* v = find_field(body, "tool_choice");
  if (!v) return choice;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "auto")
      choice.mode = ToolChoiceMode::Auto;
    else if (s == "none")
      choice.mode = ToolChoiceMode::None;
    else if (s == "required")
      choice.mode = ToolChoiceMode::Required;
    else
      bad_request(str("'tool_choice' must be 'none', 'auto', 'required' or an object naming a "
                      "function; got '",
                      s, "'"),
                  "tool_choice");
  } else if (v->is_object()) {
    const std::string type = require_string(*v, "type", "tool_choice");
    refuse_unless(type == "function", "tool_choice", "'tool_choice.type' must be 'function'");
    const Json* fn = read_object(*v, "function", "tool_choice");
    if (!fn) bad_request("missing required parameter 'tool_choice.function'", "tool_choice");
    choice.mode = ToolChoiceMode::Named;
    choice.name = require_string(*fn, "name", "tool_choice.function");
  } else {
    bad_request(str("'tool_choice' must be a string or an object, not ", json_type_name(*v)),
                "tool_choice");
  }
  if (choice.mode == ToolChoiceMode::Required || choice.mode == ToolChoiceMode::Named) {
    refuse_unless(tools.is_array(), "tool_choice",
                  "'tool_choice' requires a tool but the request has no 'tools'");
  }
  if (choice.mode == ToolChoiceMode::Named) {
    bool found = false;
    for (const Json& t : tools) found = found || t["function"]["name"] == choice.name;
    refuse_unless(found, "tool_choice",
                  str("'tool_choice' names function '", choice.name, "', which is not in 'tools'"));
  }
  return choice;
}

}  // namespace

ChatRequest parse_openai_chat(const Json& body, int32_t n_vocab, bool arguments_as_objects) {
  ChatRequest r;
  r.model = require_string(body, "model");
  r.messages = parse_messages(body, arguments_as_objects);
  r.tools = parse_tools(body);
  r.tool_choice = parse_tool_choice(body, r.tools);
  r.parallel_tool_calls = read_bool(body, "parallel_tool_calls").value_or(true);
  r.sampling = parse_openai_sampling(body, n_vocab);
  const auto max_tokens = read_integer(body, "max_tokens", 1, kMaxInt32);
  const auto max_completion = read_integer(body, "max_completion_tokens", 1, kMaxInt32);
  refuse_unless(!max_tokens || !max_completion || *max_tokens == *max_completion,
                "max_completion_tokens",
                "'max_tokens' and 'max_completion_tokens' disagree; give one of them");
  r.sampling.max_tokens = max_completion ? *max_completion : max_tokens.value_or(-1);
  r.sampling.stop = parse_stop(body, "stop", 4, /*allow_string=*/true);

  const bool logprobs = read_bool(body, "logprobs").value_or(false);
  const auto top = read_integer(body, "top_logprobs", 0, 20);
  refuse_unless(!top || logprobs, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
  if (logprobs) r.sampling.top_logprobs = int(top.value_or(0));

  if (const Json* kwargs = read_object(body, "chat_template_kwargs")) {
    if (auto t = read_bool(*kwargs, "enable_thinking", "chat_template_kwargs"))
      r.enable_thinking = *t;
  }
  parse_stream(body, r.stream, r.include_usage);
  return r;
}

CompletionRequest parse_openai_completion(const Json& body, int32_t n_vocab) {
  CompletionRequest r;
  r.model = require_string(body, "model");
  const Json* prompt = find_field(body, "prompt");
  if (!prompt) bad_request("missing required parameter 'prompt'", "prompt");
  // A string, one token array, or an array holding exactly one of those.
  const Json* single = prompt;
  if (prompt->is_array() && !prompt->empty() &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    refuse_unless(prompt->size() == 1, "prompt",
                  "'prompt' holds several prompts; this server completes one per request");
    single = &(*prompt)[0];
  }
  if (single->is_string()) {
    r.prompt_text = single->get<std::string>();
  } else if (single->is_array()) {
    r.prompt_is_tokens = true;
    for (size_t i = 0; i < single->size(); ++i) {
      const Json& t = (*single)[i];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
        bad_request(str("'prompt' token ", i, " must be a token id from 0 to ", n_vocab - 1,
                        ", got ", brief_json(t)),
                    "prompt");
      r.prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  } else {
    bad_request(
        str("'prompt' must be a string or an array of token ids, not ", json_type_name(*single)),
        "prompt");
  }
  r.sampling = parse_openai_sampling(body, n_vocab);
  // OpenAI's default for this endpoint is 16 tokens.
  r.sampling.max_tokens = read_integer(body, "max_tokens", 0, kMaxInt32).value_or(16);
  r.sampling.stop = parse_stop(body, "stop", 4, /*allow_string=*/true);
  if (auto lp = read_integer(body, "logprobs", 0, 5)) r.sampling.top_logprobs = int(*lp);
  r.echo = read_bool(body, "echo").value_or(false);
  refuse_unless(!(r.echo && r.sampling.top_logprobs >= 0), "echo",
                "'echo' together with 'logprobs' (log-probabilities of the prompt) is not "
                "supported");
  const auto best_of = read_integer(body, "best_of", 1, kMaxInt32);
  refuse_unless(!best_of || *best_of == 1, "best_of", "'best_of' must be 1");
  const auto suffix = read_string(body, "suffix");
  refuse_unless(!suffix || suffix->empty(), "suffix", "'suffix' (insertion) is not supported");
  parse_stream(body, r.stream, r.include_usage);
  return r;
}

}  // namespace rl::server
