// Synthetic models: the values of each row, and streaming the plan into a GGUF file.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <future>

#include "model/synthetic.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rl::model::synthetic {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A small deterministic generator for the float32 tensors (quant draws the quantised ones).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return state_ = splitmix(state_); }
  // Uniform in (0, 1]: 53 random bits, never 0 (log-safe).
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    return r * std::cos(6.283185307179586 * uniform());
  }

 private:
  uint64_t state_;
};

// The seed of one logical row: the same (layer, role, row) gets the same values whichever
// layout stores it.
uint64_t row_seed(uint64_t seed, int layer, Role role, int64_t row) {
  uint64_t h = splitmix(seed);
  h = splitmix(h ^ static_cast<uint64_t>(static_cast<int64_t>(layer) + 1));
  h = splitmix(h ^ static_cast<uint32_t>(role));
  return splitmix(h ^ static_cast<uint64_t>(row));
}

// Maps a stored row of a fused tensor to (role, logical row) of the split layout.
std::pair<Role, int64_t> logical_row(const Shape& h, const PlannedTensor& t, int64_t row) {
  switch (t.rows) {
    case PlannedTensor::Rows::Plain:
      return {t.role, row};
    case PlannedTensor::Rows::FusedGateUp: {
      const int64_t ff = h.expert_ff, e = row / (2 * ff), s = row % (2 * ff);
      return s < ff ? std::pair{Role::ExpGate, e * ff + s}
                    : std::pair{Role::ExpUp, e * ff + s - ff};
    }
    case PlannedTensor::Rows::FusedSsmIn: {
      // Per key head g: [q hk | k hk | v r*hv | z r*hv]; the split qkv is [q all | k all | v all].
      const int64_t hd = h.ssm_head_dim, r = h.ssm_n_v_heads / h.ssm_n_k_heads;
      const int64_t k_dim = int64_t{h.ssm_n_k_heads} * hd;
      const int64_t group = 2 * hd + 2 * r * hd, g = row / group, o = row % group;
      if (o < hd) return {Role::SsmQkv, g * hd + o};
      if (o < 2 * hd) return {Role::SsmQkv, k_dim + g * hd + (o - hd)};
      if (o < 2 * hd + r * hd) return {Role::SsmQkv, 2 * k_dim + g * r * hd + (o - 2 * hd)};
      return {Role::SsmZ, g * r * hd + (o - 2 * hd - r * hd)};
    }
  }
  return {t.role, row};
}

}  // namespace

void generate_row(const Plan& plan, const PlannedTensor& t, int64_t row, uint8_t* dst) {
  const auto [role, logical] = logical_row(plan.spec.shape, t, row);
  const uint64_t seed = row_seed(plan.spec.seed, t.layer, role, logical);
  const int64_t n = t.ne[0];
  if (t.type != gguf::TensorType::F32) {
    quant::fill_random_row(t.type, seed, t.stddev, dst, n);
    return;
  }
  Rng rng(seed);
  float* out = reinterpret_cast<float*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (t.init) {
      case Init::Normal:
        v = t.stddev * rng.normal();
        break;
      case Init::Norm:
        v = 1.0 + 0.1 * rng.normal();
        break;
      case Init::SsmA:
        v = -std::exp(std::log(0.02) + rng.uniform() * std::log(8.0 / 0.02));
        break;
      case Init::DtBias:
        v = -4.0 + 5.0 * rng.uniform();
        break;
    }
    out[i] = static_cast<float>(v);
  }
}

void write_model(const Plan& plan, const std::string& path, const Progress& progress) {
  constexpr uint64_t kPieceBytes = 16 << 20;
  const uint64_t total = plan.tensor_bytes();
  gguf::Writer writer(path);  // removes its unfinished file if anything below throws
  for (const auto& [key, value] : plan.metadata) writer.add(key, value);
  for (const auto& t : plan.tensors) {
    writer.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims));
  }
  writer.begin_data();
  ThreadPool pool(0);
  // Two pieces: the next is generated while the last is being written.
  std::array<std::vector<uint8_t>, 2> pieces;
  int current = 0;
  std::future<void> writing;
  uint64_t done = 0;
  auto wait_for_write = [&] {
    if (!writing.valid()) return;
    writing.get();
    done += pieces[current ^ 1].size();
    if (progress) progress(done, total);
  };
  for (const auto& t : plan.tensors) {
    const int64_t rows = t.n_rows();
    const uint64_t row_bytes = t.bytes / static_cast<uint64_t>(rows);
    const int64_t rows_per_piece =
        std::max<int64_t>(1, static_cast<int64_t>(kPieceBytes / row_bytes));
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_piece) {
      const int64_t n = std::min(rows_per_piece, rows - r0);
      std::vector<uint8_t>& piece = pieces[current];
      piece.resize(static_cast<size_t>(n) * row_bytes);
      pool.parallel_for(n, 64, [&](int64_t begin, int64_t end, int) {
        for (int64_t r = begin; r < end; ++r) {
          generate_row(plan, t, r0 + r, piece.data() + static_cast<size_t>(r) * row_bytes);
        }
      });
      wait_for_write();
      writing =
          std::async(std::launch::async, [&writer, &piece] { writer.write_tensor_part(piece); });
      current ^= 1;
    }
  }
  wait_for_write();
  writer.finish();
}

}  // namespace rl::model::synthetic
