// `redlite selftest`: every GPU kernel against a float64 reference computed on the CPU, on fresh
// random data (never zeros), with outputs poisoned (NaN) before each launch. Plain C++.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace rl::cuda {

struct SelftestOptions {
  std::string filter;  // run only cases whose name contains this
  uint64_t seed = 1;
  int gpu = 0;
  bool quick = false;  // fewer shapes and lengths (for ctest)
};

struct SelftestResult {
  std::string name;
  double error = 0;  // worst relative error: max |gpu - ref| / max |ref| (0 when bit-exact)
  double tolerance = 0;
  bool passed = false;
  std::string detail;  // why it failed, or a note
};

// Runs the cases, printing one line per case to `out` (may be null). Throws rl::Error if no GPU.
std::vector<SelftestResult> run_selftest(const SelftestOptions& options, std::FILE* out);

}  // namespace rl::cuda
