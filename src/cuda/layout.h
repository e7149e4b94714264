// How quantised blocks are laid out in GPU memory. Host-only (no CUDA headers).
//
// A GGUF block mixes 2-byte fp16 scales with the quantised bytes, which leaves many block types
// (Q8_0 34 B, Q6_K 210 B, IQ2_XXS 66 B, IQ3_XXS 98 B) only 2-byte aligned: a kernel could not
// use 16-byte loads on them. At upload each block is split into its "body" (the bytes without
// the scale fields) and its "tail" (the scale fields), stored in two arrays with the same block
// order. Values and byte counts are unchanged; the bodies of most types become 16-byte aligned.
// One type's body is also reordered: Q5_K's 32 bytes of high bits (qh) are regrouped so that the
// 64 high bits of each 64-value chunk lie together (regroup_q5k_high_bits), and a decoder of a
// chunk loads 8 bytes of them instead of all 32.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "gguf/types.h"

namespace rl::cuda {

struct BlockLayout {
  gguf::TensorType type{};
  int values = 0;       // values per block
  int block_bytes = 0;  // bytes per block in the file
  int tail_offset = 0;  // the bytes [tail_offset, tail_offset + tail_bytes) go to the tail array
  int tail_bytes = 0;
  int body_bytes() const { return block_bytes - tail_bytes; }
};

// The layout of a type the CUDA kernels decode; nullopt for other types. Float types (F32, F16,
// BF16) are treated as blocks of 8 values.
std::optional<BlockLayout> block_layout(gguf::TensorType type);

// Q5_K's high bits in the order the CUDA decoders read them. Chunk t (values 64t .. 64t + 63,
// sub-blocks 2t and 2t + 1) owns bytes 8t .. 8t + 7 of the regrouped qh, as two little-endian
// words, one per sub-block. In the word of a sub-block, bit j < 16 is the high bit of its value
// 4 (j / 2) + j % 2 and bit 16 + j that of the value 2 further on: the two values whose 4-bit
// parts sit in one byte pair (bytes j % 2 and j % 2 + 2 of word j / 2 of the chunk's qs), so the
// tensor-core decoder builds that f16 pair's two high bits with one shift and one mask. In the
// file, bit k of qh byte l is the high bit of value 32k + l.
void regroup_q5k_high_bits(const uint8_t* file_qh, uint8_t* qh);
// The bit of value l (< 32) of a sub-block in its regrouped word.
constexpr int q5k_high_bit(int l) {
  return 2 * (l / 4) + l % 2 + (l % 4 >= 2 ? 16 : 0);
}

// Splits n_blocks consecutive file blocks into n_blocks bodies and n_blocks tails.
void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail);

// IQ2_XXS's grid for the tensor-core decoder: entry i's 8 magnitudes (byte j of
// quant::tables::iq2xxs_grid[i]) as f16 bits at [8 i + j]. The magnitudes are small integers,
// exact in f16, so one 16-byte lookup gives the decoder its f16 pairs with no conversion.
std::array<uint16_t, 2048> iq2xxs_grid_f16();

}  // namespace rl::cuda
