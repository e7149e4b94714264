// The model as the API sees it: the engine, its tokenizer and chat family, the names clients
// may call it by, the context each session gets and the tokens that end a reply.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace rl::server {

struct ServedModel {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  chat::Family family = chat::Family::Qwen3;
  std::string id;                    // the name /v1/models reports
  std::vector<std::string> aliases;  // other accepted names; "*" accepts any
  std::string path;                  // the GGUF file
  uint64_t file_bytes = 0;
  int64_t context = 0;  // tokens per session (--ctx)
  int64_t trained_context = 0;
  std::optional<int32_t> message_start;  // <|im_start|>: where chat messages begin
  std::vector<int32_t> end_tokens;       // end-of-generation tokens
  int64_t created = 0;                   // unix time the server loaded the model

  bool answers_to(const std::string& name) const;
  int32_t n_vocab() const { return tokenizer->n_vocab(); }
};

// Fills the tokenizer-derived fields (message_start, end_tokens) from model.tokenizer.
void derive_token_fields(ServedModel& model);

struct LoadOptions {
  engine::EngineOptions engine;
  int64_t context = 0;  // 0: the trained context
  std::vector<std::string> aliases;
};

// Opens the GGUF, reads the tokenizer and chat template and starts the engine. Throws rl::Error.
ServedModel load_served_model(const std::string& path, const LoadOptions& options,
                              const engine::Progress& progress = {});

}  // namespace rl::server
