// The demo model `run` and `chat` use without -m: a tiny synthetic qwen3next model with random
// weights, generated once and cached.
#pragma once
#include <string>

namespace rl::cli {

// Path of the cached demo model, generating it first if needed. Says so on stderr if verbose.
std::string demo_model_path(bool verbose);

}  // namespace rl::cli
