// redlite run: generate text from a prompt, streaming it, with timing at the end.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli/common.h"
#include "cli/demo_model.h"
#include "cli/engine_flags.h"
#include "cli/generation.h"
#include "gguf/gguf.h"
#include "tokenizer/chat.h"
#include "util/error.h"
#include "util/timer.h"

namespace rl::cli {

int cmd_run(const Args& args) {
  CLI::App app{
      "Generate text from a prompt. Without -m it uses a small demo model with random "
      "weights (generated once and cached): the output is gibberish; pass -m your.gguf "
      "for a real model.",
      "run"};
  EngineFlags flags;
  flags.add_to(app, false);
  SamplingFlags sampling;
  sampling.add_to(app);
  std::string prompt = "The quick brown fox", prompt_file, system;
  bool chat = false, no_think = false;
  app.add_option("-p,--prompt", prompt, "the prompt text")->capture_default_str();
  app.add_option("-f,--file", prompt_file, "read the prompt from a file ('-' for stdin)");
  app.add_flag("--chat", chat, "wrap the prompt as a user turn in the model's chat template");
  app.add_option("--system", system, "system message (with --chat)");
  app.add_flag("--no-think", no_think, "with --chat: ask a thinking model not to think");
  if (auto status = parse_args(app, args)) return *status;

  if (!prompt_file.empty()) {
    std::string text;
    if (prompt_file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      std::ifstream in(prompt_file, std::ios::binary);
      if (!in) fail(prompt_file, ": cannot open the prompt file");
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    prompt = std::move(text);
  }
  if (flags.model.empty()) flags.model = demo_model_path(!flags.quiet);

  auto engine = load_with_progress(flags);
  const auto file = gguf::File::open(flags.model);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);

  std::string text = prompt;
  if (chat) {
    const auto family =
        chat::detect_family(file.get_string("tokenizer.chat_template").value_or(""));
    chat::Json messages = chat::Json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    chat::RenderOptions ro;
    if (no_think) ro.enable_thinking = false;
    text = chat::render(family, messages, nullptr, ro);
  }
  const auto tokens = tok.encode(text, /*parse_special=*/true, /*add_bos=*/true);
  if (tokens.empty()) fail("the prompt is empty");

  auto session = engine->new_session(flags.session_options());
  if (static_cast<int64_t>(tokens.size()) >= session->max_context())
    fail("the prompt has ", tokens.size(), " tokens but the context holds ", session->max_context(),
         " (raise --ctx or shorten the prompt)");
  Timer prefill_timer;
  session->prefill(tokens, prefill_progress(!flags.quiet));
  const double prefill_s = prefill_timer.seconds();

  engine::Sampler sampler(sampling.params);
  for (int32_t t : tokens) sampler.accept(t);
  if (!chat) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  const auto result = generate(*session, tok, sampler, sampling);
  std::printf("\n");
  std::fflush(stdout);
  if (!flags.quiet)
    std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s | generation: %lld tokens, %.1f tok/s\n",
                 tokens.size(), tokens.size() / std::max(1e-9, prefill_s),
                 static_cast<long long>(result.tokens),
                 result.tokens / std::max(1e-9, result.seconds));
  return 0;
}

}  // namespace rl::cli
