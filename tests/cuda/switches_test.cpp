// The RL_CUDA_* diagnostic switches' values (host logic; no GPU needed): unset or empty means the
// default (on), "1" on, "0" off, and anything else is an error that names the variable.
#include <gtest/gtest.h>

#ifdef RL_HAVE_CUDA
#include <string>

#include "cuda/device.h"
#include "util/error.h"

namespace rl::cuda {
namespace {

TEST(CudaSwitches, OnUnlessZero) {
  EXPECT_TRUE(switch_on("RL_CUDA_PDL", nullptr));
  EXPECT_TRUE(switch_on("RL_CUDA_PDL", ""));
  EXPECT_TRUE(switch_on("RL_CUDA_PDL", "1"));
  EXPECT_FALSE(switch_on("RL_CUDA_PDL", "0"));
}

TEST(CudaSwitches, OtherValuesNameTheVariable) {
  for (const char* bad : {"off", "false", "00", " 0", "2", "yes"}) {
    try {
      switch_on("RL_CUDA_TC", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RL_CUDA_TC"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace rl::cuda

#else
TEST(CudaSwitches, NotBuilt) {
  GTEST_SKIP() << "built without CUDA";
}
#endif
