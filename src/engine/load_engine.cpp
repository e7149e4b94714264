// Placeholder until the CPU engine lands.
#include "engine/engine.h"
#include "util/error.h"

namespace rl::engine {

std::unique_ptr<Engine> load_engine(const std::string&, const EngineOptions&, const Progress&) {
  fail("no backend is built yet");
}

}  // namespace rl::engine
