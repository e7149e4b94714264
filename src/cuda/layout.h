// How quantised blocks are laid out in GPU memory. Host-only (no CUDA headers).
//
// A GGUF block mixes 2-byte fp16 scales with the quantised bytes, which leaves many block types
// (Q8_0 34 B, Q6_K 210 B, IQ2_XXS 66 B, IQ3_XXS 98 B) only 2-byte aligned: a kernel could not
// use 16-byte loads on them. At upload each block is split into its "body" (the bytes without
// the scale fields) and its "tail" (the scale fields), stored in two arrays with the same block
// order. Values and byte counts are unchanged; the bodies of most types become 16-byte aligned.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "gguf/types.h"

namespace rl::cuda {

struct BlockLayout {
  int values = 0;       // values per block
  int block_bytes = 0;  // bytes per block in the file
  int tail_offset = 0;  // the bytes [tail_offset, tail_offset + tail_bytes) go to the tail array
  int tail_bytes = 0;
  int body_bytes() const { return block_bytes - tail_bytes; }
};

// The layout of a type the CUDA kernels decode; nullopt for other types. Float types (F32, F16,
// BF16) are treated as blocks of 8 values.
std::optional<BlockLayout> block_layout(gguf::TensorType type);

// Splits n_blocks consecutive file blocks into n_blocks bodies and n_blocks tails.
void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail);

// IQ2_XXS's grid for the tensor-core decoder: entry i's 8 magnitudes (byte j of
// quant::tables::iq2xxs_grid[i]) as f16 bits at [8 i + j]. The magnitudes are small integers,
// exact in f16, so one 16-byte lookup gives the decoder its f16 pairs with no conversion.
std::array<uint16_t, 2048> iq2xxs_grid_f16();

}  // namespace rl::cuda
