// The generation loop shared by `run` and `chat`: sample, stream UTF-8-safe text, stop on
// end-of-generation tokens or stop strings.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace rl::cli {

struct SamplingFlags {
  engine::SamplerParams params;
  int max_tokens = 256;
  std::vector<std::string> stop;
  void add_to(CLI::App& app);
};

struct GenerationResult {
  std::string text;
  int64_t tokens = 0;
  double seconds = 0;
  bool hit_end = false;     // an end-of-generation token ended it
  int32_t last_token = -1;  // the token sampled last (not yet fed when hit_end)
};

// Generates from the session's current logits, writing text to stdout as it comes. Each
// sampled token except an ending one is fed back into the session.
GenerationResult generate(engine::Session& session, const tokenizer::Tokenizer& tok,
                          engine::Sampler& sampler, const SamplingFlags& flags);

}  // namespace rl::cli
