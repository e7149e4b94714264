// redlite selftest: every GPU kernel against a float64 CPU reference on random data.
#include <cstdio>

#include "cli/common.h"
#include "util/error.h"
#ifdef RL_HAVE_CUDA
#include "cuda/selftest.h"
#endif

namespace rl::cli {

int cmd_selftest(const Args& args) {
  CLI::App app{
      "Check every GPU kernel against a float64 reference computed on the CPU, on fresh "
      "random data with poisoned outputs; prints each case's worst relative error. "
      "Exit status 1 if any case fails.",
      "selftest"};
  std::string filter;
  uint64_t seed = 1;
  int gpu = 0;
  bool quick = false;
  app.add_option("--filter", filter, "run only the cases whose name contains this text");
  app.add_option("--seed", seed, "seed of the random data")->capture_default_str();
  app.add_option("--gpu", gpu, "CUDA device index")
      ->capture_default_str()
      ->check(CLI::Range(0, 63));
  app.add_flag("--quick", quick, "fewer shapes and lengths");
  if (auto status = parse_args(app, args)) return *status;
#ifdef RL_HAVE_CUDA
  cuda::SelftestOptions options;
  options.filter = filter;
  options.seed = seed;
  options.gpu = gpu;
  options.quick = quick;
  const auto results = cuda::run_selftest(options, stdout);
  if (results.empty()) fail("selftest: no case matches --filter '", filter, "'");
  for (const auto& r : results)
    if (!r.passed) return 1;
  return 0;
#else
  fail(
      "selftest checks the GPU kernels, but this build has no CUDA backend (rebuild where nvcc "
      "is installed)");
#endif
}

}  // namespace rl::cli
