// redlite chat: an interactive multi-turn chat. The conversation lives in the engine session:
// each turn prefills only the new user message, never the history again.
#include <unistd.h>
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "cli/demo_model.h"
#include "cli/engine_flags.h"
#include "cli/generation.h"
#include "gguf/gguf.h"
#include "tokenizer/chat.h"
#include "util/error.h"
#include "util/timer.h"

namespace rl::cli {

int cmd_chat(const Args& args) {
  CLI::App app{
      "Interactive chat with the model's chat template. Type a message and press Enter; "
      "/reset starts over, /quit (or end of input) leaves.",
      "chat"};
  EngineFlags flags;
  flags.add_to(app, false);
  SamplingFlags sampling;
  sampling.max_tokens = 1024;
  sampling.add_to(app);
  std::string system;
  bool no_think = false;
  app.add_option("--system", system, "system message");
  app.add_flag("--no-think", no_think, "ask a thinking model not to think");
  if (auto status = parse_args(app, args)) return *status;
  if (flags.model.empty()) flags.model = demo_model_path(!flags.quiet);

  auto engine = load_with_progress(flags);
  const auto file = gguf::File::open(flags.model);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const auto family = chat::detect_family(file.get_string("tokenizer.chat_template").value_or(""));
  auto session = engine->new_session(flags.session_options());
  engine::Sampler sampler(sampling.params);
  const bool interactive = ::isatty(0);

  bool first_turn = true;
  int32_t pending_end = -1;  // the end-of-turn token sampled last turn, fed with the next one
  for (;;) {
    if (interactive) {
      std::printf("\n> ");
      std::fflush(stdout);
    }
    std::string line;
    if (!std::getline(std::cin, line) || line == "/quit" || line == "/exit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      session->reset();
      sampler.reset();
      first_turn = true;
      pending_end = -1;
      std::printf("[conversation cleared]\n");
      continue;
    }
    chat::Json messages = chat::Json::array();
    if (first_turn && !system.empty())
      messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", line}});
    chat::RenderOptions ro;
    if (no_think) ro.enable_thinking = false;
    std::string text = chat::render(family, messages, nullptr, ro);
    std::vector<int32_t> tokens;
    if (pending_end >= 0) {
      // Close the previous assistant turn exactly as the template does: "<|im_end|>\n".
      tokens.push_back(pending_end);
      const auto nl = tok.encode("\n", false);
      tokens.insert(tokens.end(), nl.begin(), nl.end());
    }
    const auto turn = tok.encode(text, /*parse_special=*/true);
    tokens.insert(tokens.end(), turn.begin(), turn.end());
    if (session->position() + static_cast<int64_t>(tokens.size()) >= session->max_context()) {
      std::fprintf(stderr, "[the context is full (%lld tokens); /reset to start over]\n",
                   static_cast<long long>(session->position()));
      continue;
    }
    Timer t;
    session->prefill(tokens, prefill_progress(!flags.quiet));
    const double prefill_s = t.seconds();
    for (int32_t id : tokens) sampler.accept(id);
    const auto result = generate(*session, tok, sampler, sampling);
    pending_end = result.hit_end ? result.last_token : -1;
    if (!result.hit_end && result.last_token >= 0) {
      // Cut off by the token limit: the last sampled token was not fed yet; close the turn.
      if (auto im_end = tok.find_token("<|im_end|>")) pending_end = *im_end;
    }
    first_turn = false;
    std::printf("\n");
    if (!flags.quiet)
      std::fprintf(
          stderr, "[%zu prompt tokens %.1f tok/s | %lld generated %.1f tok/s | context %lld]\n",
          tokens.size(), tokens.size() / std::max(1e-9, prefill_s),
          static_cast<long long>(result.tokens), result.tokens / std::max(1e-9, result.seconds),
          static_cast<long long>(session->position()));
  }
  return 0;
}

}  // namespace rl::cli
