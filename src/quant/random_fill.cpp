// Random rows for synthetic models. Quantised types: every quant, sub-scale, index and sign bit
// is random; only the fp16 super-block scales are set, to stddev / (the RMS the same random
// bits decode to at scale 1). That RMS is measured once per type on a sample of blocks, so the
// tables of the IQ grids need no hand-derived statistics.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "quant/kernels.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/half.h"

namespace rl::quant {
namespace {

// splitmix64: one multiply-xorshift chain per 8 random bytes, plenty for test weights.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

void fill_bytes(Rng& rng, uint8_t* p, size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t r = rng.next();
    std::memcpy(p, &r, 8);
  }
  if (n > 0) {
    const uint64_t r = rng.next();
    std::memcpy(p, &r, n);
  }
}

// Roughly normal with unit variance: the centred sum of four 16-bit uniforms (Irwin-Hall).
float unit_gaussian(uint64_t r) {
  const float sum =
      static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
  constexpr float kMean = 2.0f * 65535.0f;
  const float kInvStd = 1.0f / (65536.0f * std::sqrt(4.0f / 12.0f));
  return (sum - kMean) * kInvStd;
}

// The fp16 scales of a block: where they sit, and dmin as a multiple of d. dmin = d * (mean
// quant) keeps the decoded mean near zero, as sub-scales and mins share one distribution.
struct ScaleFields {
  int d_offset = -1;
  int dmin_offset = -1;
  float dmin_ratio = 0.f;
};
ScaleFields scale_fields(TensorType t) {
  switch (t) {
    case TensorType::Q8_0:
      return {offsetof(BlockQ8_0, d)};
    case TensorType::Q4_0:
      return {offsetof(BlockQ4_0, d)};
    case TensorType::IQ4_NL:
      return {offsetof(BlockIQ4_NL, d)};
    case TensorType::Q4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin), 7.5f};
    case TensorType::Q5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin), 15.5f};
    case TensorType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    case TensorType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin), 1.5f};
    case TensorType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case TensorType::IQ2_XXS:
      return {offsetof(BlockIQ2_XXS, d)};
    case TensorType::IQ2_XS:
      return {offsetof(BlockIQ2_XS, d)};
    case TensorType::IQ3_XXS:
      return {offsetof(BlockIQ3_XXS, d)};
    case TensorType::IQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    default:
      return {};
  }
}

void store_half(uint8_t* p, uint16_t h) {
  std::memcpy(p, &h, 2);
}

// float -> fp16 by truncation, without branches (random mantissa bits make float_to_half's
// rounding branch unpredictable, which made F16 rows ten times slower to generate). Values below
// the smallest normal half become zero and values above the largest half are clamped; both are
// irrelevant for random weights.
uint16_t truncate_to_half(float v) {
  const uint32_t x = float_to_bits(v);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = std::min(x & 0x7fffffffu, 0x477fe000u);  // 65504, the largest half
  const uint32_t magnitude = a < 0x38800000u ? 0u : (a - 0x38000000u) >> 13;
  return static_cast<uint16_t>(sign | magnitude);
}

void fill_blocks(TensorType t, Rng& rng, float d, uint8_t* dst, int64_t blocks) {
  const BlockShape shape = block_shape(t);
  const ScaleFields fields = scale_fields(t);
  const uint16_t d_half = float_to_half(d);
  const uint16_t dmin_half = float_to_half(d * fields.dmin_ratio);
  fill_bytes(rng, dst, static_cast<size_t>(blocks) * shape.block_bytes);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* block = dst + i * shape.block_bytes;
    store_half(block + fields.d_offset, d_half);
    if (fields.dmin_offset >= 0) store_half(block + fields.dmin_offset, dmin_half);
  }
}

// RMS of the values that random blocks decode to with d = 1.
float unit_rms(TensorType t) {
  constexpr int kTypes = 64;
  static const std::array<float, kTypes> rms = [] {
    std::array<float, kTypes> out{};
    for (uint32_t id = 0; id < kTypes; ++id) {
      const auto type = static_cast<TensorType>(id);
      if (block_shape(type).block_size != kQK && block_shape(type).block_size != 32) continue;
      constexpr int64_t kSample = 64 * kQK;
      std::vector<uint8_t> bytes(kSample / block_shape(type).block_size *
                                 block_shape(type).block_bytes);
      std::vector<float> values(kSample);
      Rng rng{0x5eed0000u + id};
      fill_blocks(type, rng, 1.0f, bytes.data(), kSample / block_shape(type).block_size);
      dequantize_row(type, bytes.data(), values.data(), kSample);
      double sum_sq = 0;
      for (float v : values) sum_sq += static_cast<double>(v) * v;
      out[id] = static_cast<float>(std::sqrt(sum_sq / kSample));
    }
    return out;
  }();
  return rms[static_cast<uint32_t>(t)];
}

}  // namespace

void fill_random_row(TensorType t, uint64_t seed, float stddev, void* dst, int64_t n) {
  const BlockShape shape = checked_shape(t, n, "fill_random_row");
  if (!(stddev > 0.f) || !std::isfinite(stddev)) {
    fail("fill_random_row: stddev ", stddev, " must be positive and finite");
  }
  Rng rng{seed};
  auto* out = static_cast<uint8_t*>(dst);
  switch (t) {
    case TensorType::F32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = stddev * unit_gaussian(rng.next());
        std::memcpy(out + 4 * i, &v, 4);
      }
      return;
    case TensorType::F16:
    case TensorType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const float v = stddev * unit_gaussian(rng.next());
        store_half(out + 2 * i, t == TensorType::F16 ? truncate_to_half(v) : float_to_bf16(v));
      }
      return;
    default:
      break;
  }
  const float d = stddev / unit_rms(t);
  // Every decoded value is d times a bounded integer combination; d (and dmin, a small multiple
  // of it) must survive fp16.
  const float d_rounded = half_to_float(float_to_half(d));
  const float dmin_rounded = half_to_float(float_to_half(d * scale_fields(t).dmin_ratio));
  if (d_rounded == 0.f || !std::isfinite(d_rounded) || !std::isfinite(dmin_rounded)) {
    fail("fill_random_row: stddev ", stddev, " is out of range for type ", gguf::type_name(t),
         " (its fp16 scale would be ", d_rounded, ")");
  }
  fill_blocks(t, rng, d, out, n / shape.block_size);
}

}  // namespace rl::quant
