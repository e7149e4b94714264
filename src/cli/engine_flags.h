// Flags shared by the commands that load a model: -m, --backend, -t, --ctx, --kv-type, --chunk.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace rl::cli {

struct EngineFlags {
  std::string model;
  std::string backend = "auto";
  int threads = 0;
  int64_t ctx = 0;
  std::string kv_type = "f32";
  int chunk = 2048;
  bool quiet = false;

  void add_to(CLI::App& app, bool model_required);
  engine::EngineOptions engine_options() const;
  engine::SessionOptions session_options() const;
};

// Loads the model, printing load progress and a one-line summary on stderr unless quiet.
std::unique_ptr<engine::Engine> load_with_progress(const EngineFlags& flags);

// Prefill progress on stderr ("prefill 4096/65536 tokens, 812 tok/s"), shown for long prompts.
engine::Progress prefill_progress(bool enabled);

}  // namespace rl::cli
