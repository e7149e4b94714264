#include "cli/generation.h"

#include <cstdio>

#include "util/timer.h"

namespace rl::cli {

void SamplingFlags::add_to(CLI::App& app) {
  auto& p = params;
  app.add_option("-n,--max-tokens", max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--temp", p.temperature, "temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  app.add_option("--top-k", p.top_k, "keep the k most likely tokens (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  app.add_option("--top-p", p.top_p, "nucleus sampling mass (1: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", p.min_p, "drop tokens below min_p x the top probability (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--repeat-penalty", p.repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.01f, 100.0f));
  app.add_option("--repeat-last-n", p.repeat_last_n, "penalty window in tokens (-1: all)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 24));
  app.add_option("--presence-penalty", p.presence_penalty, "presence penalty")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--frequency-penalty", p.frequency_penalty, "frequency penalty")
      ->capture_default_str()
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--seed", p.seed, "random seed")->capture_default_str();
  app.add_option("--stop", stop, "stop when this text appears (repeatable)");
}

GenerationResult generate(engine::Session& session, const tokenizer::Tokenizer& tok,
                          engine::Sampler& sampler, const SamplingFlags& flags) {
  GenerationResult result;
  tokenizer::StreamDecoder stream(tok);
  Timer timer;
  std::span<const float> logits = session.logits();
  size_t printed = 0;  // bytes of result.text already written to stdout
  // Text that could still grow into a stop string is held back.
  size_t hold = 0;
  for (const auto& s : flags.stop) hold = std::max(hold, s.size());
  auto emit = [&](size_t upto) {
    if (upto > printed) {
      std::fwrite(result.text.data() + printed, 1, upto - printed, stdout);
      std::fflush(stdout);
      printed = upto;
    }
  };
  bool stopped = false;
  while (result.tokens < flags.max_tokens && !stopped) {
    if (session.position() >= session.max_context()) {
      std::fprintf(stderr, "\n[context full at %lld tokens]\n",
                   static_cast<long long>(session.position()));
      break;
    }
    const int32_t token = sampler.sample(logits);
    result.last_token = token;
    ++result.tokens;
    if (tok.is_end_of_generation(token)) {
      result.hit_end = true;
      break;
    }
    sampler.accept(token);
    result.text += stream.push(token);
    for (const auto& s : flags.stop) {
      const size_t at = result.text.find(s);
      if (!s.empty() && at != std::string::npos) {
        result.text.resize(at);
        stopped = true;
      }
    }
    if (!stopped) logits = session.decode(token);
    size_t upto = result.text.size();
    if (!stopped && hold > 0) {
      upto = upto > hold ? upto - hold : 0;
      // Never cut a UTF-8 character: back up over continuation bytes.
      while (upto > printed && (static_cast<unsigned char>(result.text[upto]) & 0xC0) == 0x80)
        --upto;
    }
    emit(upto);
  }
  if (!stopped) result.text += stream.flush();
  emit(result.text.size());
  result.seconds = timer.seconds();
  return result;
}

}  // namespace rl::cli
