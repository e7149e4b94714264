// The one place that knows every backend: picks one and starts the model on it.
#include "cpu/cpu_engine.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/log.h"

#ifdef RL_HAVE_CUDA
#include "cuda/cuda_engine.h"
#endif

namespace rl::engine {

std::unique_ptr<Engine> load_engine(const std::string& gguf_path, const EngineOptions& options,
                                    const Progress& progress) {
  Backend backend = options.backend;
#ifdef RL_HAVE_CUDA
  if (backend == Backend::Auto) backend = cuda::gpu_available() ? Backend::Cuda : Backend::Cpu;
  if (backend == Backend::Cuda) return cuda::make_engine(gguf_path, options, progress);
#else
  if (backend == Backend::Cuda)
    fail(
        "this build of Red Lite has no CUDA backend (rebuild on a machine with nvcc, or use "
        "--backend cpu)");
#endif
  return cpu::make_engine(gguf_path, options, progress);
}

}  // namespace rl::engine
