// Helpers shared by the self-test files: device copies of host data, test matrices with their
// exact float values, comparison against float64. Internal to src/cuda.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/selftest.h"

namespace rl::cuda::st {

// A device copy of a host vector.
template <typename T>
struct Dev {
  DeviceBuffer buf;
  size_t n = 0;
  Dev() = default;
  explicit Dev(size_t count) : buf(std::max<size_t>(count, 1) * sizeof(T)), n(count) {}
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) { upload(v); }
  T* get() const { return buf.as<T>(); }
  void upload(const std::vector<T>& v) {
    RL_CUDA(cudaMemcpy(get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    RL_CUDA(cudaMemcpy(v.data(), get(), n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// A random quantised matrix on the device and the exact values of its weights.
struct TestMatrix {
  Matrix m;
  DeviceBuffer body, tail;
  std::vector<float> values;    // rows * cols, decoded by rl::quant (the reference)
  std::vector<uint8_t> blocks;  // the file bytes
  TestMatrix(gguf::TensorType type, int64_t rows, int64_t cols, uint64_t seed, float stddev);
};

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  // Normal values, never exactly zero.
  std::vector<float> normal(size_t n, float stddev = 1.0f, float mean = 0.0f);
  std::vector<float> uniform(size_t n, float lo, float hi);
};

// Worst relative error of got against ref: max |got - ref| / max |ref|; a non-finite value in
// got (an unwritten, NaN-poisoned output) makes it infinite.
double worst_relative(const std::vector<float>& got, const std::vector<double>& ref);

// Collects the results and prints one line per case.
class Reporter {
 public:
  Reporter(const SelftestOptions& options, std::FILE* out) : options_(options), out_(out) {}
  bool wanted(const std::string& name) const {
    return options_.filter.empty() || name.find(options_.filter) != std::string::npos;
  }
  // Records a case measured by relative error.
  void check(const std::string& name, double error, double tolerance, const std::string& note = {});
  // Records a pass/fail case (bit-exactness, expert choice).
  void verdict(const std::string& name, bool passed, const std::string& detail);
  const SelftestOptions& options() const { return options_; }
  std::vector<SelftestResult> results;

 private:
  const SelftestOptions& options_;
  std::FILE* out_;
};

// The groups of cases (selftest_*.cpp).
void test_decoders(Reporter& r, uint64_t seed);
void test_gemv(Reporter& r, uint64_t seed);
void test_moe(Reporter& r, uint64_t seed);
void test_deltanet(Reporter& r, uint64_t seed);
void test_attention(Reporter& r, uint64_t seed);

inline double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
inline double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace rl::cuda::st
