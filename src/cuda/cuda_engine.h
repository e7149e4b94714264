// The CUDA backend's entry points. Plain C++: no CUDA types, so load_engine can include it.
#pragma once
#include <memory>
#include <string>

#include "engine/engine.h"

namespace rl::cuda {

// True if the CUDA runtime finds at least one GPU.
bool gpu_available();

// Loads the GGUF and uploads its weights to GPU options.gpu. Throws rl::Error if the model does
// not fit (saying how much memory it needs) or uses a tensor type the kernels do not decode.
std::unique_ptr<engine::Engine> make_engine(const std::string& gguf_path,
                                            const engine::EngineOptions& options,
                                            const engine::Progress& progress = {});

}  // namespace rl::cuda
