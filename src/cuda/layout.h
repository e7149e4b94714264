// How quantised blocks are laid out in GPU memory. Host-only (no CUDA headers).
//
// A GGUF block mixes 2-byte fp16 scales with the quantised bytes, which leaves many block types
// (Q8_0 34 B, Q6_K 210 B, IQ2_XXS 66 B, IQ3_XXS 98 B) only 2-byte aligned: a kernel could not
// use 16-byte loads on them. At upload each block is split into its "body" (the bytes without
// the scale fields) and its "tail" (the scale fields), stored in two arrays with the same block
// order. Values and byte counts are unchanged; the bodies of most types become 16-byte aligned.
// Six types' bodies are also reordered, Q4_0's, IQ2_XXS's, IQ2_XS's, IQ3_XXS's, IQ4_XS's and
// IQ4_NL's (regroup_*), so that each lane of a tensor-core item loads its own part with few wide
// loads.
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

// IQ2_XXS's 64 body bytes (after d) in the order the CUDA decoders read them (fmt::iq2xxs). In
// the file, sub-block s (values 32s .. 32s + 31) is a word of four grid indices (byte l: its
// 8-value group l) and a word of four 7-bit sign fields (bits 7l ..) with the 4-bit scale in bits
// 28-31. The tensor cores take a sub-block per k-step, each lane of a quad one group of it, so
// quarter l (bytes 16l .. 16l + 15) holds group l of all eight sub-blocks: bytes 0-7 the grid
// indices (sub-block s at byte s) and bytes 8-15 the sign part: a 56-bit field of the sign bits
// (s at bit 7s) and a byte with the scales of sub-blocks 2l (low nibble) and 2l + 1. Bytes are
// moved, not changed.
void regroup_iq2xxs(const uint8_t* file_qs, uint8_t* body);
// IQ3_XXS's 96 body bytes likewise (fmt::iq3xxs). In the file, bytes 8s .. 8s + 7 are sub-block
// s's eight grid indices (4 values each; group l: 2l, 2l + 1) and bytes 64 + 4s .. the word of
// its sign fields and scale, as IQ2_XXS's. Quarter l: bytes 16l .. 16l + 15 the two indices of
// group l of each sub-block (s at 2s, 2s + 1), and bytes 64 + 8l .. 64 + 8l + 7 its sign part.
void regroup_iq3xxs(const uint8_t* file_qs, uint8_t* body);
// An IQ4_XS file block (d, scales_h, scales_l[4], qs[128]) as its 128-byte body and 8-byte tail
// (fmt::Format<IQ4_XS>). In the file, sub-block s's 32 indices are the low (values 0-15) and high
// (16-31) nibbles of qs bytes 16s .. 16s + 15, and its 6-bit scale is nibble s % 2 of scales_l
// byte s / 2 with bits 2s, 2s + 1 of scales_h on top. Body: quarter l (bytes 32l .. 32l + 31)
// holds the indices of values 8l .. 8l + 7 of each sub-block, sub-block s in word s (value 8l + j
// at nibble j). Tail: d; a 16-bit field of the scales' high bits, nibble k holding those of
// sub-blocks p and p + 4 (bits 0-1 and 2-3) for p = 0, 2, 1, 3 in turn; then 4 bytes of their low
// bits, byte k holding sub-block k (low nibble) and k + 4. The tensor-core decoder unpacks a row's
// eight scales from that with a few masks and shifts (tc_gemv.cuh). Bits are moved, not changed.
void regroup_iq4xs(const uint8_t* file_block, uint8_t* body, uint8_t* tail);
// Q4_0's 16 bytes of nibbles (after d). In the file, value v is the low nibble of byte v (v < 16)
// or the high nibble of byte v - 16. Body: byte 4t + k holds value 8t + k (low nibble) and 8t + 4 +
// k (high), so that word t is the eight values a tensor-core lane t takes, values 8t .. 8t + 3 in
// the low nibbles (fmt::Format<Q4_0>).
void regroup_q4_0(const uint8_t* file_qs, uint8_t* body);
// IQ4_NL's 16 index bytes (after d). In the file, value v's index is the low nibble of byte v
// (v < 16) or the high nibble of byte v - 16. Body: value v at nibble v (byte v / 2, low nibble
// for even v), so word l holds values 8l .. 8l + 7 as IQ4_XS's body words do (fmt::Format<IQ4_NL>).
void regroup_iq4nl(const uint8_t* file_qs, uint8_t* body);
// IQ2_XS's 72 bytes after d (qs, scales). In the file, the u16 qs[4s + l] (bytes 8s + 2l, + 1) is
// group l (values 8l .. 8l + 7) of sub-block s: a 9-bit grid index and a 7-bit sign field. Body:
// quarter l (bytes 16l .. 16l + 15) holds group l of sub-blocks 0-7 (s at bytes 2s, 2s + 1), as
// IQ3_XXS's quarters hold their indices; the 8 scale bytes follow unchanged (fmt::iq2xs).
void regroup_iq2xs(const uint8_t* file_qs, uint8_t* body);

// The lookup tables of the tensor-core IQ decoders (tc_gemv.cuh), built here once and uploaded
// with the grids (device_tables). IQ2_XXS's grid holds only the magnitudes 8, 25 and 43, so a
// byte permute from {8, 25, 43, 0} and their negatives yields its signed weights: the selector of
// weight j is nibble j of codes[grid index] | sign_nibbles[sign field]. IQ3_XXS's weights are
// (g ^ m) + (m & 1) per byte, with m = 0xFF where negative: byte j of sign_bytes[sign field].
// IQ2_XS's grid holds the same three magnitudes and its sign fields are IQ2_XXS's: its codes
// table, with the same sign nibbles.
// The two words the IQ2_XXS and IQ2_XS byte permutes pick from: the magnitudes {8, 25, 43, 0} and
// their negatives, as signed bytes.
constexpr uint32_t kIq2Magnitudes = 0x002B1908u, kIq2Negated = 0x00D5E7F8u;
struct TcIqTables {
  std::array<uint32_t, 256> iq2xxs_codes;         // nibble j: 0, 1, 2 for 8, 25, 43
  std::array<uint32_t, 512> iq2xs_codes;          // likewise for IQ2_XS's grid
  std::array<uint32_t, 128> iq2xxs_sign_nibbles;  // nibble j: 4 where weight j is negative
  std::array<uint64_t, 128> sign_bytes;           // byte j: 0xFF where weight j is negative
};
TcIqTables tc_iq_tables();

// Splits n_blocks consecutive file blocks into n_blocks bodies and n_blocks tails.
void split_blocks(const BlockLayout& layout, const uint8_t* src, int64_t n_blocks, uint8_t* body,
                  uint8_t* tail);

}  // namespace rl::cuda
