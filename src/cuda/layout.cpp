#include "cuda/layout.h"

#include <cstring>

#include "quant/iq_tables.h"

namespace rl::cuda {

using gguf::TensorType;

std::optional<BlockLayout> block_layout(TensorType type) {
  switch (type) {
    case TensorType::F32:
      return BlockLayout{type, 8, 32, 0, 0};
    case TensorType::F16:
      return BlockLayout{type, 8, 16, 0, 0};
    case TensorType::BF16:
      return BlockLayout{type, 8, 16, 0, 0};
    case TensorType::Q8_0:
      return BlockLayout{type, 32, 34, 0, 2};  // d | qs[32]
    case TensorType::Q4_0:
      return BlockLayout{type, 32, 18, 0, 2};  // d | qs[16]
    case TensorType::IQ4_NL:
      return BlockLayout{type, 32, 18, 0, 2};  // d | qs[16]
    case TensorType::Q2_K:
      return BlockLayout{type, 256, 84, 80, 4};  // scales qs | d dmin
    case TensorType::Q3_K:
      return BlockLayout{type, 256, 110, 108, 2};  // hmask qs scales | d
    case TensorType::Q4_K:
      return BlockLayout{type, 256, 144, 0, 0};  // d dmin scales qs
    case TensorType::Q5_K:
      return BlockLayout{type, 256, 176, 0, 0};  // d dmin scales qh qs
    case TensorType::Q6_K:
      return BlockLayout{type, 256, 210, 208, 2};  // ql qh scales | d
    case TensorType::IQ2_XXS:
      return BlockLayout{type, 256, 66, 0, 2};  // d | qs
    case TensorType::IQ2_XS:
      return BlockLayout{type, 256, 74, 0, 2};  // d | qs scales
    case TensorType::IQ3_XXS:
      return BlockLayout{type, 256, 98, 0, 2};  // d | qs signs
    case TensorType::IQ4_XS:
      return BlockLayout{type, 256, 136, 0, 8};  // d sh sl | qs
    default:
      return std::nullopt;
  }
}

namespace {

uint32_t word_at(const uint8_t* p) {
  return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// Quarter l's sign part (8 bytes) from the eight sub-blocks' sign / scale words.
void sign_part(const uint32_t (&aux)[8], int l, uint8_t* out) {
  uint64_t signs = 0;
  for (int s = 0; s < 8; ++s) signs |= static_cast<uint64_t>((aux[s] >> (7 * l)) & 127u) << (7 * s);
  for (int b = 0; b < 7; ++b) out[b] = static_cast<uint8_t>(signs >> (8 * b));
  out[7] = static_cast<uint8_t>((aux[2 * l] >> 28) | (aux[2 * l + 1] >> 28) << 4);
}

// Value v's 4 bits in 32 values packed as Q4_0, IQ4_NL and each IQ4_XS sub-block pack them: the
// low nibble of qs byte v (v < 16), else the high nibble of byte v - 16.
int nibble_of_value(const uint8_t* qs, int v) {
  return v < 16 ? qs[v] & 15 : qs[v - 16] >> 4;
}

}  // namespace

void regroup_iq2xxs(const uint8_t* file_qs, uint8_t* body) {
  uint32_t aux[8];
  for (int s = 0; s < 8; ++s) aux[s] = word_at(file_qs + 8 * s + 4);
  for (int l = 0; l < 4; ++l) {
    for (int s = 0; s < 8; ++s) body[16 * l + s] = file_qs[8 * s + l];
    sign_part(aux, l, body + 16 * l + 8);
  }
}

void regroup_iq3xxs(const uint8_t* file_qs, uint8_t* body) {
  uint32_t aux[8];
  for (int s = 0; s < 8; ++s) aux[s] = word_at(file_qs + 64 + 4 * s);
  for (int l = 0; l < 4; ++l) {
    for (int s = 0; s < 8; ++s) {
      body[16 * l + 2 * s] = file_qs[8 * s + 2 * l];
      body[16 * l + 2 * s + 1] = file_qs[8 * s + 2 * l + 1];
    }
    sign_part(aux, l, body + 64 + 8 * l);
  }
}

void regroup_iq4xs(const uint8_t* file_block, uint8_t* body, uint8_t* tail) {
  const uint32_t scales_h = file_block[2] | file_block[3] << 8;
  const uint8_t* scales_l = file_block + 4;
  const uint8_t* qs = file_block + 8;
  auto low = [&](int s) { return (scales_l[s / 2] >> (4 * (s % 2))) & 15u; };
  auto high = [&](int s) { return (scales_h >> (2 * s)) & 3u; };
  // Nibble k of the high pairs' field holds pair kPairAt[k] (see layout.h).
  constexpr int kPairAt[4] = {0, 2, 1, 3};
  uint32_t pairs = 0;
  for (int k = 0; k < 4; ++k) pairs |= (high(kPairAt[k]) | high(kPairAt[k] + 4) << 2) << (4 * k);
  tail[0] = file_block[0], tail[1] = file_block[1];
  tail[2] = static_cast<uint8_t>(pairs), tail[3] = static_cast<uint8_t>(pairs >> 8);
  for (int k = 0; k < 4; ++k) tail[4 + k] = static_cast<uint8_t>(low(k) | low(k + 4) << 4);
  for (int l = 0; l < 4; ++l)
    for (int s = 0; s < 8; ++s)
      for (int j = 0; j < 8; j += 2)  // values 8l + j, 8l + j + 1 of sub-block s
        body[32 * l + 4 * s + j / 2] =
            static_cast<uint8_t>(nibble_of_value(qs + 16 * s, 8 * l + j) |
                                 nibble_of_value(qs + 16 * s, 8 * l + j + 1) << 4);
}

void regroup_q4_0(const uint8_t* file_qs, uint8_t* body) {
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < 4; ++k)
      body[4 * t + k] = static_cast<uint8_t>(nibble_of_value(file_qs, 8 * t + k) |
                                             nibble_of_value(file_qs, 8 * t + 4 + k) << 4);
}

void regroup_iq4nl(const uint8_t* file_qs, uint8_t* body) {
  for (int b = 0; b < 16; ++b)  // byte b: values 2b (low nibble) and 2b + 1
    body[b] = static_cast<uint8_t>(nibble_of_value(file_qs, 2 * b) |
                                   nibble_of_value(file_qs, 2 * b + 1) << 4);
}

void regroup_iq2xs(const uint8_t* file_qs, uint8_t* body) {
  for (int l = 0; l < 4; ++l)
    for (int s = 0; s < 8; ++s) {
      body[16 * l + 2 * s] = file_qs[8 * s + 2 * l];
      body[16 * l + 2 * s + 1] = file_qs[8 * s + 2 * l + 1];
    }
  std::memcpy(body + 64, file_qs + 64, 8);  // the scales
}

TcIqTables tc_iq_tables() {
  namespace qt = quant::tables;
  TcIqTables t{};
  auto code = [](uint64_t grid) {
    uint32_t c = 0;
    for (int j = 0; j < 8; ++j) {
      const uint64_t m = (grid >> (8 * j)) & 0xff;
      c |= (m == 8 ? 0u : m == 25 ? 1u : 2u) << (4 * j);
    }
    return c;
  };
  for (size_t i = 0; i < t.iq2xxs_codes.size(); ++i) t.iq2xxs_codes[i] = code(qt::iq2xxs_grid[i]);
  for (size_t i = 0; i < t.iq2xs_codes.size(); ++i) t.iq2xs_codes[i] = code(qt::iq2xs_grid[i]);
  for (size_t i = 0; i < t.sign_bytes.size(); ++i)
    for (int j = 0; j < 8; ++j)
      if ((qt::ksigns_iq2xs[i] >> j) & 1) {
        t.iq2xxs_sign_nibbles[i] |= 4u << (4 * j);
        t.sign_bytes[i] |= uint64_t{0xff} << (8 * j);
      }
  return t;
}

void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail) {
  void (*regroup)(const uint8_t*, uint8_t*) = nullptr;  // of the bytes after d
  switch (layout.type) {
    case TensorType::IQ2_XXS:
      regroup = regroup_iq2xxs;
      break;
    case TensorType::IQ2_XS:
      regroup = regroup_iq2xs;
      break;
    case TensorType::IQ3_XXS:
      regroup = regroup_iq3xxs;
      break;
    case TensorType::IQ4_NL:
      regroup = regroup_iq4nl;
      break;
    case TensorType::Q4_0:
      regroup = regroup_q4_0;
      break;
    default:
      break;
  }
  if (regroup) {  // d | the rest
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* s = src + b * layout.block_bytes;  // the tail (d) leads the block
      std::memcpy(tail + b * layout.tail_bytes, s, layout.tail_bytes);
      regroup(s + layout.tail_bytes, body + b * layout.body_bytes());
    }
    return;
  }
  if (layout.type == TensorType::IQ4_XS) {
    for (int64_t b = 0; b < n_blocks; ++b)
      regroup_iq4xs(src + b * layout.block_bytes, body + b * layout.body_bytes(),
                    tail + b * layout.tail_bytes);
    return;
  }
  if (layout.tail_bytes == 0) {
    std::memcpy(body, src, static_cast<size_t>(n_blocks) * layout.block_bytes);
    return;
  }
  const int head = layout.tail_offset;
  const int rest = layout.block_bytes - layout.tail_offset - layout.tail_bytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* s = src + b * layout.block_bytes;
    uint8_t* d = body + b * layout.body_bytes();
    std::memcpy(d, s, head);
    std::memcpy(d + head, s + head + layout.tail_bytes, rest);
    std::memcpy(tail + b * layout.tail_bytes, s + head, layout.tail_bytes);
  }
}

}  // namespace rl::cuda
