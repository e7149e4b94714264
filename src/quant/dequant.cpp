// Reference dequantisation, bit-exact with ggml's CPU dequantisers. Each expression keeps
// ggml's float operation order (for example Q6_K is (d * sc) * q, IQ2 scales are
// (d * (0.5f + s)) * 0.25f), because a different order can change the last bit.
#include "quant/kernels.h"

#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::quant {
namespace {

using tables::iq2xs_grid;
using tables::iq2xxs_grid;
using tables::iq3xxs_grid;
using tables::kmask_iq2xs;
using tables::ksigns_iq2xs;
using tables::kvalues_iq4nl;

void block_q8_0(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ8_0*>(src);
  const float d = load_half(b.d);
  for (int j = 0; j < 32; ++j) y[j] = b.qs[j] * d;
}

void block_q4_0(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ4_0*>(src);
  const float d = load_half(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = ((b.qs[j] & 0xF) - 8) * d;
    y[j + 16] = ((b.qs[j] >> 4) - 8) * d;
  }
}

void block_iq4_nl(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockIQ4_NL*>(src);
  const float d = load_half(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kvalues_iq4nl[b.qs[j] & 0xF];
    y[j + 16] = d * kvalues_iq4nl[b.qs[j] >> 4];
  }
}

void block_q4_k(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ4_K*>(src);
  const float d = load_half(b.d);
  const float dmin = load_half(b.dmin);
  for (int pair = 0; pair < 4; ++pair) {
    const uint8_t* q = b.qs + 32 * pair;
    const ScaleMin lo = k4_scale_min(b.scales, 2 * pair);
    const ScaleMin hi = k4_scale_min(b.scales, 2 * pair + 1);
    const float d1 = d * lo.scale, m1 = dmin * lo.min;
    const float d2 = d * hi.scale, m2 = dmin * hi.min;
    for (int l = 0; l < 32; ++l) y[l] = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * (q[l] >> 4) - m2;
    y += 64;
  }
}

void block_q5_k(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ5_K*>(src);
  const float d = load_half(b.d);
  const float dmin = load_half(b.dmin);
  for (int pair = 0; pair < 4; ++pair) {
    const uint8_t* q = b.qs + 32 * pair;
    const ScaleMin lo = k4_scale_min(b.scales, 2 * pair);
    const ScaleMin hi = k4_scale_min(b.scales, 2 * pair + 1);
    const float d1 = d * lo.scale, m1 = dmin * lo.min;
    const float d2 = d * hi.scale, m2 = dmin * hi.min;
    const uint8_t bit_lo = 1u << (2 * pair), bit_hi = 2u << (2 * pair);
    for (int l = 0; l < 32; ++l) y[l] = d1 * ((q[l] & 0xF) + (b.qh[l] & bit_lo ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * ((q[l] >> 4) + (b.qh[l] & bit_hi ? 16 : 0)) - m2;
    y += 64;
  }
}

void block_q6_k(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ6_K*>(src);
  const float d = load_half(b.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    const int8_t* sc = b.scales + 8 * half;
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[s] * q1;
      y[l + 32] = d * sc[s + 2] * q2;
      y[l + 64] = d * sc[s + 4] * q3;
      y[l + 96] = d * sc[s + 6] * q4;
    }
    y += 128;
  }
}

void block_q2_k(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ2_K*>(src);
  const float d = load_half(b.d);
  const float dmin = load_half(b.dmin);
  int s = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part, ++s) {
        const float dl = d * (b.scales[s] & 0xF);
        const float ml = dmin * (b.scales[s] >> 4);
        for (int l = 0; l < 16; ++l) y[l] = dl * ((q[l + 16 * part] >> shift) & 3) - ml;
        y += 16;
      }
    }
  }
}

void block_q3_k(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockQ3_K*>(src);
  const float d = load_half(b.d);
  const std::array<int8_t, 16> scales = q3k_scales(b.scales);
  int s = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int j = 0; j < 4; ++j) {
      const int shift = 2 * j;
      const uint8_t hbit = 1u << (4 * half + j);
      for (int part = 0; part < 2; ++part, ++s) {
        const float dl = d * scales[s];
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          *y++ = dl * (((q[l] >> shift) & 3) - (b.hmask[l] & hbit ? 0 : 4));
        }
      }
    }
  }
}

// ggml's sign factor: -1.f where the sign byte has bit j set (kmask_iq2xs[j] == 1 << j), else
// 1.f. Looked up rather than branched on: random signs defeat branch prediction.
inline float sign_factor(uint8_t signs, int j) {
  static constexpr float kFactor[2] = {1.f, -1.f};
  return kFactor[(signs & kmask_iq2xs[j]) != 0];
}

// Eight grid magnitudes times db, negated where the sign byte has its bit set.
inline void signed_grid8(const uint8_t* grid, float db, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = db * grid[j] * sign_factor(signs, j);
}

void block_iq2_xxs(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockIQ2_XXS*>(src);
  const float d = load_half(b.d);
  for (int g = 0; g < 8; ++g) {
    const uint8_t* idx = b.qs + 8 * g;
    const uint32_t aux = load_u32(b.qs + 8 * g + 4);
    const float db = d * (0.5f + (aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l) {
      const auto* grid = reinterpret_cast<const uint8_t*>(&iq2xxs_grid[idx[l]]);
      signed_grid8(grid, db, ksigns_iq2xs[(aux >> (7 * l)) & 127], y);
      y += 8;
    }
  }
}

void block_iq2_xs(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockIQ2_XS*>(src);
  const float d = load_half(b.d);
  for (int g = 0; g < 8; ++g) {
    const float db[2] = {d * (0.5f + (b.scales[g] & 0xF)) * 0.25f,
                         d * (0.5f + (b.scales[g] >> 4)) * 0.25f};
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = load_u16(b.qs + 2 * (4 * g + l));
      const auto* grid = reinterpret_cast<const uint8_t*>(&iq2xs_grid[q & 511]);
      signed_grid8(grid, db[l / 2], ksigns_iq2xs[q >> 9], y);
      y += 8;
    }
  }
}

void block_iq3_xxs(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockIQ3_XXS*>(src);
  const float d = load_half(b.d);
  for (int g = 0; g < 8; ++g) {
    const uint8_t* idx = b.qs + 8 * g;
    const uint32_t aux = load_u32(b.qs + 64 + 4 * g);
    const float db = d * (0.5f + (aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
      const auto* grid1 = reinterpret_cast<const uint8_t*>(&iq3xxs_grid[idx[2 * l]]);
      const auto* grid2 = reinterpret_cast<const uint8_t*>(&iq3xxs_grid[idx[2 * l + 1]]);
      for (int j = 0; j < 4; ++j) {
        y[j] = db * grid1[j] * sign_factor(signs, j);
        y[j + 4] = db * grid2[j] * sign_factor(signs, j + 4);
      }
      y += 8;
    }
  }
}

void block_iq4_xs(const uint8_t* src, float* y) {
  const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(src);
  const float d = load_half(b.d);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * iq4xs_scale(b, j);
    const uint8_t* q = b.qs + 16 * j;
    for (int l = 0; l < 16; ++l) {
      y[l] = dl * kvalues_iq4nl[q[l] & 0xF];
      y[l + 16] = dl * kvalues_iq4nl[q[l] >> 4];
    }
    y += 32;
  }
}

void block_f32(const uint8_t* src, float* y) {
  std::memcpy(y, src, 4);
}
void block_f16(const uint8_t* src, float* y) {
  *y = load_half(src);
}
void block_bf16(const uint8_t* src, float* y) {
  *y = bf16_to_float(load_u16(src));
}

}  // namespace

BlockDecoder block_decoder(TensorType t) {
  switch (t) {
    case TensorType::F32:
      return block_f32;
    case TensorType::F16:
      return block_f16;
    case TensorType::BF16:
      return block_bf16;
    case TensorType::Q8_0:
      return block_q8_0;
    case TensorType::Q4_0:
      return block_q4_0;
    case TensorType::IQ4_NL:
      return block_iq4_nl;
    case TensorType::Q4_K:
      return block_q4_k;
    case TensorType::Q5_K:
      return block_q5_k;
    case TensorType::Q6_K:
      return block_q6_k;
    case TensorType::Q2_K:
      return block_q2_k;
    case TensorType::Q3_K:
      return block_q3_k;
    case TensorType::IQ2_XXS:
      return block_iq2_xxs;
    case TensorType::IQ2_XS:
      return block_iq2_xs;
    case TensorType::IQ3_XXS:
      return block_iq3_xxs;
    case TensorType::IQ4_XS:
      return block_iq4_xs;
    default:
      return nullptr;
  }
}

bool is_supported(TensorType t) {
  return block_decoder(t) != nullptr;
}

BlockShape checked_shape(TensorType t, int64_t n, const char* what) {
  const BlockShape shape = block_shape(t);
  if (shape.block_size == 0) {
    fail(what, ": tensor type ", gguf::type_name(t), " (id ", static_cast<uint32_t>(t),
         ") is not supported");
  }
  if (n < 0 || n % shape.block_size != 0) {
    fail(what, ": ", n, " values of type ", gguf::type_name(t),
         " are not a whole number of blocks of ", shape.block_size);
  }
  return shape;
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
  const BlockShape shape = checked_shape(t, n, "dequantize_row");
  const BlockDecoder decode = block_decoder(t);
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t blocks = n / shape.block_size;
  if (t == TensorType::F32) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  for (int64_t i = 0; i < blocks; ++i) {
    decode(bytes + i * shape.block_bytes, dst + i * shape.block_size);
  }
}

}  // namespace rl::quant
