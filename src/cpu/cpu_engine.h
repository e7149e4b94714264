// The CPU backend: Red Lite's reference forward pass, and the fallback without a GPU.
#pragma once
#include <memory>
#include <string>

#include "engine/engine.h"

namespace rl::cpu {

std::unique_ptr<engine::Engine> make_engine(const std::string& gguf_path,
                                            const engine::EngineOptions& options,
                                            const engine::Progress& progress);

}  // namespace rl::cpu
