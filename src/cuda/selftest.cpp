#include "cuda/selftest.h"

#include <algorithm>

#include "cuda/cuda_engine.h"
#include "cuda/device.h"
#include "cuda/layout.h"
#include "cuda/selftest_util.h"
#include "quant/quant.h"

namespace rl::cuda {

namespace st {

TestMatrix::TestMatrix(gguf::TensorType type, int64_t rows, int64_t cols, uint64_t seed,
                       float stddev) {
  const BlockLayout layout = *block_layout(type);
  const int64_t blocks_per_row = cols / layout.values;
  const uint64_t row_bytes = blocks_per_row * layout.block_bytes;
  blocks.resize(row_bytes * rows);
  values.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    quant::fill_random_row(type, seed * 7919 + r, stddev, blocks.data() + r * row_bytes, cols);
    quant::dequantize_row(type, blocks.data() + r * row_bytes, values.data() + r * cols, cols);
  }
  std::vector<uint8_t> bodies(blocks_per_row * rows * layout.body_bytes());
  std::vector<uint8_t> tails(blocks_per_row * rows * layout.tail_bytes);
  split_blocks(layout, blocks.data(), blocks_per_row * rows, bodies.data(), tails.data());
  body = DeviceBuffer(std::max<size_t>(bodies.size(), 16));
  tail = DeviceBuffer(std::max<size_t>(tails.size(), 16));
  RL_CUDA(cudaMemcpy(body.data(), bodies.data(), bodies.size(), cudaMemcpyHostToDevice));
  if (!tails.empty())
    RL_CUDA(cudaMemcpy(tail.data(), tails.data(), tails.size(), cudaMemcpyHostToDevice));
  m.type = type;
  m.body = body.as<uint8_t>();
  m.tail = tail.as<uint8_t>();
  m.cols = cols;
  m.rows = rows;
  m.expert_rows = rows;
}

std::vector<float> Rng::normal(size_t n, float stddev, float mean) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(gen);
    while (x == 0.0f);
  }
  return v;
}

std::vector<float> Rng::uniform(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = d(gen);
    while (x == 0.0f);
  }
  return v;
}

double worst_relative(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    max_err = std::max(max_err, std::abs(static_cast<double>(got[i]) - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

void Reporter::check(const std::string& name, double error, double tolerance,
                     const std::string& note) {
  SelftestResult res{name, error, tolerance, error <= tolerance, note};
  if (out_)
    std::fprintf(out_, "  %-58s worst rel err %9.2e  (tol %.0e)  %s%s%s\n", name.c_str(), error,
                 tolerance, res.passed ? "ok" : "FAIL", note.empty() ? "" : "  ", note.c_str());
  results.push_back(std::move(res));
}

void Reporter::verdict(const std::string& name, bool passed, const std::string& detail) {
  SelftestResult res{name, passed ? 0.0 : INFINITY, 0.0, passed, detail};
  if (out_)
    std::fprintf(out_, "  %-58s %-34s %s\n", name.c_str(), detail.c_str(), passed ? "ok" : "FAIL");
  results.push_back(std::move(res));
}

}  // namespace st

std::vector<SelftestResult> run_selftest(const SelftestOptions& options, std::FILE* out) {
  if (!gpu_available()) fail("selftest: no CUDA GPU is available");
  const DeviceInfo& dev = use_device(options.gpu);
  if (out)
    std::fprintf(out, "redlite selftest on %s (%d SMs, compute %d.%d), seed %llu%s\n",
                 dev.name.c_str(), dev.sm_count, dev.cc_major, dev.cc_minor,
                 static_cast<unsigned long long>(options.seed), options.quick ? ", quick" : "");
  st::Reporter r(options, out);
  struct Group {
    const char* name;
    void (*run)(st::Reporter&, uint64_t);
  };
  const Group groups[] = {{"decoders (bit-exact vs rl::quant)", st::test_decoders},
                          {"GEMV (float64 reference)", st::test_gemv},
                          {"MoE", st::test_moe},
                          {"Gated DeltaNet step", st::test_deltanet},
                          {"attention", st::test_attention}};
  uint64_t seed = options.seed;
  for (const Group& g : groups) {
    if (out) std::fprintf(out, "%s\n", g.name);
    g.run(r, seed++ * 1000003);
    RL_CUDA(cudaDeviceSynchronize());
  }
  int failed = 0;
  for (const auto& res : r.results) failed += !res.passed;
  if (out) std::fprintf(out, "selftest: %zu cases, %d failed\n", r.results.size(), failed);
  return r.results;
}

}  // namespace rl::cuda
