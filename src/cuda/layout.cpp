#include "cuda/layout.h"

#include <cstring>

#include "quant/iq_tables.h"
#include "util/half.h"

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

void regroup_q5k_high_bits(const uint8_t* file_qh, uint8_t* qh) {
  uint32_t words[8] = {};  // [chunk][sub-block]
  for (int sub = 0; sub < 8; ++sub)
    for (int l = 0; l < 32; ++l)
      words[sub] |= static_cast<uint32_t>((file_qh[l] >> sub) & 1) << q5k_high_bit(l);
  for (int w = 0; w < 8; ++w)
    for (int b = 0; b < 4; ++b) qh[4 * w + b] = static_cast<uint8_t>(words[w] >> (8 * b));
}

void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail) {
  if (layout.type == TensorType::Q5_K) {  // d dmin scales[12] | qh[32] | qs[128]
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* s = src + b * layout.block_bytes;
      uint8_t* d = body + b * layout.body_bytes();
      std::memcpy(d, s, layout.block_bytes);
      regroup_q5k_high_bits(s + 16, d + 16);
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

std::array<uint16_t, 2048> iq2xxs_grid_f16() {
  const auto& grid = quant::tables::iq2xxs_grid;
  static_assert(8 * grid.size() == 2048);
  std::array<uint16_t, 2048> out;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = float_to_half(static_cast<float>((grid[i / 8] >> (8 * (i % 8))) & 0xff));  // exact
  return out;
}

}  // namespace rl::cuda
