// Runs `redlite selftest --quick` (every GPU kernel against float64) when a GPU is present.
#include <gtest/gtest.h>

#ifdef RL_HAVE_CUDA
#include "cuda/cuda_engine.h"
#include "cuda/selftest.h"

namespace rl::cuda {
namespace {

void run_group(const std::string& filter) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  SelftestOptions options;
  options.filter = filter;
  options.quick = true;
  const auto results = run_selftest(options, nullptr);
  ASSERT_FALSE(results.empty()) << filter;
  for (const auto& r : results)
    EXPECT_TRUE(r.passed) << r.name << ": error " << r.error << " (tolerance " << r.tolerance
                          << ") " << r.detail;
}

TEST(CudaSelftest, Decoders) {
  run_group("decode ");
}
TEST(CudaSelftest, Gemv) {
  run_group("gemv ");
}
TEST(CudaSelftest, Moe) {
  run_group("moe ");
}
TEST(CudaSelftest, DeltaNet) {
  run_group("deltanet ");
}
TEST(CudaSelftest, Attention) {
  run_group("attention ");
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(CudaSelftest, NotBuilt) {
  GTEST_SKIP() << "this build has no CUDA backend";
}
#endif
