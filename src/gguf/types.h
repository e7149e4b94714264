// ggml tensor types as stored in GGUF files: ids, block sizes and bytes per block.
// These are facts of the file format; which types can be decoded is quant's business.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace rl::gguf {

enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct TypeTraits {
  std::string_view name;  // ggml's lowercase name: "q4_K", "iq2_xxs", "f32"
  uint32_t block_size;    // values per block
  uint32_t block_bytes;   // bytes per block
};

// Traits of a known type id; nullopt for ids that are not ggml types (the reader rejects them).
std::optional<TypeTraits> type_traits(uint32_t type_id);
inline std::optional<TypeTraits> type_traits(TensorType t) {
  return type_traits(static_cast<uint32_t>(t));
}
std::string_view type_name(TensorType t);  // "?" for unknown ids
// Parses ggml's name ("q4_K", case-insensitive) into a type.
std::optional<TensorType> type_from_name(std::string_view name);

// Bytes of one row of n values; nullopt if n is not a multiple of the block size or overflows.
std::optional<uint64_t> row_bytes(TensorType t, int64_t n);

}  // namespace rl::gguf
