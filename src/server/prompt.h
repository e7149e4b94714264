// From a validated request to what the scheduler runs: the rendered and tokenized prompt, the
// message boundaries (where prefix-reuse checkpoints go), and how to read the reply.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/job.h"
#include "server/reply_stream.h"
#include "server/requests.h"
#include "server/served_model.h"

namespace rl::server {

struct PreparedPrompt {
  std::string text;  // the rendered prompt (empty for token prompts)
  std::vector<int32_t> tokens;
  std::vector<int64_t> boundaries;
  ReplyOptions reply;
};

// Renders the chat with the model's template (tool_choice "none" renders without tools;
// "required" or a named tool opens the call in the prompt), tokenizes it and checks it fits.
PreparedPrompt prepare_chat(const ServedModel& model, const ChatRequest& request,
                            bool check_fits = true);
PreparedPrompt prepare_completion(const ServedModel& model, const CompletionRequest& request);

// Throws ApiError 400 naming the prompt length and the context when the prompt is empty or
// leaves no room for a single generated token.
void check_context(const ServedModel& model, int64_t prompt_tokens);

JobSpec make_job(const ServedModel& model, PreparedPrompt& prompt, const SamplingRequest& s);

// True when the rendered prompt ends inside an open <think> block of the assistant turn.
bool ends_inside_think(const std::string& prompt_text);

}  // namespace rl::server
