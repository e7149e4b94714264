#include "server/prompt.h"

#include <cmath>

#include "server/api_error.h"
#include "util/error.h"

namespace rl::server {

bool ends_inside_think(const std::string& text) {
  const size_t turn = text.rfind("<|im_start|>assistant");
  if (turn == std::string::npos) return false;
  const size_t open = text.rfind("<think>");
  if (open == std::string::npos || open < turn) return false;
  const size_t close = text.rfind("</think>");
  return close == std::string::npos || close < open;
}

void check_context(const ServedModel& model, int64_t prompt_tokens) {
  if (prompt_tokens == 0) bad_request("the prompt is empty", "prompt");
  if (prompt_tokens >= model.context)
    throw ApiError(
        400,
        str("the prompt is ", prompt_tokens, " tokens but this server's context is ", model.context,
            " tokens (--ctx); at least one token must be left for the "
            "reply"),
        "messages", "context_length_exceeded");
}

namespace {

std::vector<int64_t> message_boundaries(const ServedModel& model,
                                        const std::vector<int32_t>& tokens) {
  std::vector<int64_t> b;
  if (!model.message_start) return b;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == *model.message_start) b.push_back(int64_t(i));
  return b;
}

// The text that makes the model's reply start inside a tool call.
std::string forced_tool_opening(const ServedModel& model, const ToolChoice& choice) {
  if (choice.mode == ToolChoiceMode::Required) return "<tool_call>\n";
  if (choice.mode != ToolChoiceMode::Named) return {};
  if (model.family == chat::Family::Qwen3Coder)
    return "<tool_call>\n<function=" + choice.name + ">\n";
  return "<tool_call>\n{\"name\": " + dump_json(Json(choice.name)) + ", \"arguments\": ";
}

}  // namespace

PreparedPrompt prepare_chat(const ServedModel& model, const ChatRequest& request, bool check_fits) {
  PreparedPrompt p;
  const bool use_tools =
      request.tools.is_array() && request.tool_choice.mode != ToolChoiceMode::None;
  chat::RenderOptions options;
  options.add_generation_prompt = true;
  options.enable_thinking = request.enable_thinking;
  try {
    p.text = chat::render(model.family, request.messages, use_tools ? request.tools : Json(nullptr),
                          options);
  } catch (const Error& e) {
    bad_request(str("the chat template rejected the messages: ", e.what()), "messages");
  } catch (const Json::exception& e) {
    // A value of an unexpected shape deep inside a tool schema or message.
    bad_request(str("the chat template could not render the request: ", e.what()), "messages");
  }
  p.text += request.assistant_prefill;
  // Where the reply starts inside <think> (a thinking template's generation prompt), a forced
  // tool call first closes the reasoning.
  const bool thinking = ends_inside_think(p.text);
  std::string forced = forced_tool_opening(model, request.tool_choice);
  if (!forced.empty() && thinking) forced = "\n</think>\n\n" + forced;
  p.text += forced;
  p.tokens = model.tokenizer->encode(p.text, /*parse_special=*/true, /*add_bos=*/true);
  if (check_fits) check_context(model, int64_t(p.tokens.size()));
  p.boundaries = message_boundaries(model, p.tokens);

  p.reply.stop = request.sampling.stop;
  p.reply.parse = true;
  p.reply.parser.family = model.family;
  p.reply.parser.parse_tool_calls = use_tools;
  p.reply.parser.parse_reasoning = true;
  p.reply.parser.starts_in_reasoning = thinking;
  p.reply.parser.tools = use_tools ? request.tools : Json(nullptr);
  p.reply.forced_prefix = forced;
  return p;
}

PreparedPrompt prepare_completion(const ServedModel& model, const CompletionRequest& request) {
  PreparedPrompt p;
  if (request.prompt_is_tokens) {
    p.tokens = request.prompt_tokens;
  } else {
    p.text = request.prompt_text;
    p.tokens = model.tokenizer->encode(p.text, /*parse_special=*/true, /*add_bos=*/true);
  }
  check_context(model, int64_t(p.tokens.size()));
  // No message structure: checkpoints at fixed strides let a longer prompt that shares a long
  // start resume part-way.
  constexpr int64_t kStride = 4096;
  for (int64_t b = kStride; b < int64_t(p.tokens.size()); b += kStride) p.boundaries.push_back(b);
  p.reply.stop = request.sampling.stop;
  p.reply.parse = false;
  return p;
}

JobSpec make_job(const ServedModel& model, PreparedPrompt& prompt, const SamplingRequest& s) {
  JobSpec spec;
  spec.prompt = std::move(prompt.tokens);
  spec.boundaries = std::move(prompt.boundaries);
  spec.max_tokens = s.max_tokens;
  spec.sampler = s.sampler;
  spec.logit_bias = s.logit_bias;
  spec.top_logprobs = s.top_logprobs;
  spec.end_tokens = model.end_tokens;
  // Embedding rows beyond the tokenizer's vocabulary (padding) have no text: never sample them.
  const int64_t rows = model.engine->config().n_vocab;
  for (int64_t id = model.n_vocab(); id < rows; ++id)
    spec.logit_bias.emplace_back(int32_t(id), -INFINITY);
  return spec;
}

}  // namespace rl::server
