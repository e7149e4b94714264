#include "cuda/layout.h"

#include <cstring>

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
    case TensorType::IQ3_XXS:
      return BlockLayout{type, 256, 98, 0, 2};  // d | qs signs
    case TensorType::IQ4_XS:
      return BlockLayout{type, 256, 136, 0, 0};  // d sh sl qs
    default:
      return std::nullopt;
  }
}

void regroup_iq2xxs(const uint8_t* file_qs, uint8_t* body) {
  for (int l = 0; l < 4; ++l) {
    uint8_t* quarter = body + 16 * l;
    uint64_t signs = 0;
    for (int s = 0; s < 8; ++s) {
      const uint8_t* sub = file_qs + 8 * s;  // grid indices | signs and scale
      const uint32_t aux =
          sub[4] | sub[5] << 8 | sub[6] << 16 | static_cast<uint32_t>(sub[7]) << 24;
      quarter[s] = sub[l];
      signs |= static_cast<uint64_t>((aux >> (7 * l)) & 127u) << (7 * s);
    }
    for (int b = 0; b < 7; ++b) quarter[8 + b] = static_cast<uint8_t>(signs >> (8 * b));
    const uint8_t* even = file_qs + 16 * l + 7;  // the top bytes of sub-blocks 2l and 2l + 1
    quarter[15] = static_cast<uint8_t>((even[0] >> 4) | (even[8] & 0xF0));
  }
}

void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail) {
  if (layout.type == TensorType::IQ2_XXS) {  // d | qs[64]
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* s = src + b * layout.block_bytes;
      std::memcpy(tail + b * layout.tail_bytes, s, 2);
      regroup_iq2xxs(s + 2, body + b * layout.body_bytes());
    }
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
