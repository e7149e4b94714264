// ggml's block layouts, byte for byte, and the scale unpacking shared by the scalar and AVX2
// decoders. Every member is a byte array so blocks may sit at any address (a Q4_0 block is 18
// bytes); multi-byte fields are read with memcpy (little-endian hosts only, as ggml).
#pragma once
#include <array>
#include <cstdint>
#include <cstring>

#include "gguf/types.h"
#include "util/half.h"

namespace rl::quant {

inline constexpr int kQK = 256;  // values per K-quant / IQ super-block (ggml's QK_K)

struct BlockQ8_0 {  // w = d * q
  uint8_t d[2];
  int8_t qs[32];
};
struct BlockQ4_0 {  // w = d * (q - 8); byte j holds values j (low nibble) and j + 16 (high)
  uint8_t d[2];
  uint8_t qs[16];
};
struct BlockIQ4_NL {  // w = d * kvalues_iq4nl[q]; nibbles as in Q4_0
  uint8_t d[2];
  uint8_t qs[16];
};
// 8 sub-blocks of 32 with 6-bit scale and min each; w = d*sc * q - dmin*m. Byte j of each
// 32-byte run of qs holds value j of one sub-block (low nibble) and of the next (high nibble).
struct BlockQ4_K {
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {  // as Q4_K plus a fifth bit: qh[l] bit 2i / 2i+1 for sub-blocks 2i / 2i+1
  uint8_t d[2];
  uint8_t dmin[2];
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {  // 16 sub-blocks of 16 with an int8 scale; w = d*sc * (q - 32)
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint8_t d[2];
};
struct BlockQ2_K {  // 16 sub-blocks of 16; scales byte = 4-bit scale | 4-bit min << 4
  uint8_t scales[16];
  uint8_t qs[64];
  uint8_t d[2];
  uint8_t dmin[2];
};
struct BlockQ3_K {  // 16 sub-blocks of 16 with 6-bit scales; w = d*(sc-32) * (q - (hbit ? 0 : 4))
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint8_t d[2];
};
// 8 groups of 32: u16 qs[4g..4g+3] hold 4 grid indices (low bytes of u32 #0) and u32 #1 holds
// four 7-bit sign indices and the 4-bit scale in its top bits.
struct BlockIQ2_XXS {
  uint8_t d[2];
  uint8_t qs[64];
};
struct BlockIQ2_XS {  // u16 qs[i] = 9-bit grid index | 7-bit sign index << 9; 4-bit scales
  uint8_t d[2];
  uint8_t qs[64];
  uint8_t scales[8];
};
// qs[0..63]: grid indices (two per 8 values); qs[64..95]: one u32 per group of 32 with four
// 7-bit sign indices and the 4-bit scale on top.
struct BlockIQ3_XXS {
  uint8_t d[2];
  uint8_t qs[96];
};
struct BlockIQ4_XS {  // 8 sub-blocks of 32 with a 6-bit scale (low 4 bits + high 2 bits)
  uint8_t d[2];
  uint8_t scales_h[2];
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ4_XS) == 136);

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Values per block and bytes per block of the supported types; {0, 0} for the others.
struct BlockShape {
  int block_size;
  int block_bytes;
};
constexpr BlockShape block_shape(gguf::TensorType t) {
  using T = gguf::TensorType;
  switch (t) {
    case T::F32:
      return {1, 4};
    case T::F16:
      return {1, 2};
    case T::BF16:
      return {1, 2};
    case T::Q8_0:
      return {32, sizeof(BlockQ8_0)};
    case T::Q4_0:
      return {32, sizeof(BlockQ4_0)};
    case T::IQ4_NL:
      return {32, sizeof(BlockIQ4_NL)};
    case T::Q4_K:
      return {kQK, sizeof(BlockQ4_K)};
    case T::Q5_K:
      return {kQK, sizeof(BlockQ5_K)};
    case T::Q6_K:
      return {kQK, sizeof(BlockQ6_K)};
    case T::Q2_K:
      return {kQK, sizeof(BlockQ2_K)};
    case T::Q3_K:
      return {kQK, sizeof(BlockQ3_K)};
    case T::IQ2_XXS:
      return {kQK, sizeof(BlockIQ2_XXS)};
    case T::IQ2_XS:
      return {kQK, sizeof(BlockIQ2_XS)};
    case T::IQ3_XXS:
      return {kQK, sizeof(BlockIQ3_XXS)};
    case T::IQ4_XS:
      return {kQK, sizeof(BlockIQ4_XS)};
    default:
      return {0, 0};
  }
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. Bytes
// 0..3 hold scales 0..3, bytes 4..7 mins 0..3 (low 6 bits each); sub-blocks 4..7 take their low
// 4 bits from the nibbles of bytes 8..11 and their top 2 bits from the spare bits of 0..7.
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
inline ScaleMin k4_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {static_cast<uint8_t>(s[j] & 63), static_cast<uint8_t>(s[j + 4] & 63)};
  return {static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4))};
}

// Q3_K: the 16 signed scales (sc - 32). Scale j takes its low 4 bits from byte j % 8 (low
// nibble for j < 8, high nibble after) and its top 2 bits from byte 8 + j % 4, bits 2*(j/4).
inline std::array<int8_t, 16> q3k_scales(const uint8_t* s) {
  std::array<int8_t, 16> out;
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
  return out;
}

// IQ4_XS: the signed scale (ls - 32) of sub-block j (0..7).
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  const int high = (load_u16(b.scales_h) >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace rl::quant
