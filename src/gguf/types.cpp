#include "gguf/types.h"

#include <array>
#include <cstddef>
#include <limits>

namespace rl::gguf {
namespace {

// Indexed by ggml type id. Ids 4, 5 (Q4_2/Q4_3), 31..33 (Q4_0_4_4...) and 36..38 (IQ4_NL_4_4...)
// were removed from ggml and never appear in valid files: their entries stay empty.
// Bytes per block follow the block structs in ggml-common.h, e.g. block_q4_K = fp16 d, fp16 dmin,
// 12 scale bytes, 128 quant bytes = 144.
constexpr size_t kTypeCount = 40;
constexpr std::array<TypeTraits, kTypeCount> make_table() {
  std::array<TypeTraits, kTypeCount> t{};
  auto set = [&t](TensorType type, std::string_view name, uint32_t block, uint32_t bytes) {
    t[static_cast<uint32_t>(type)] = TypeTraits{name, block, bytes};
  };
  set(TensorType::F32, "f32", 1, 4);
  set(TensorType::F16, "f16", 1, 2);
  set(TensorType::Q4_0, "q4_0", 32, 18);
  set(TensorType::Q4_1, "q4_1", 32, 20);
  set(TensorType::Q5_0, "q5_0", 32, 22);
  set(TensorType::Q5_1, "q5_1", 32, 24);
  set(TensorType::Q8_0, "q8_0", 32, 34);
  set(TensorType::Q8_1, "q8_1", 32, 36);
  set(TensorType::Q2_K, "q2_K", 256, 84);
  set(TensorType::Q3_K, "q3_K", 256, 110);
  set(TensorType::Q4_K, "q4_K", 256, 144);
  set(TensorType::Q5_K, "q5_K", 256, 176);
  set(TensorType::Q6_K, "q6_K", 256, 210);
  set(TensorType::Q8_K, "q8_K", 256, 292);
  set(TensorType::IQ2_XXS, "iq2_xxs", 256, 66);
  set(TensorType::IQ2_XS, "iq2_xs", 256, 74);
  set(TensorType::IQ3_XXS, "iq3_xxs", 256, 98);
  set(TensorType::IQ1_S, "iq1_s", 256, 50);
  set(TensorType::IQ4_NL, "iq4_nl", 32, 18);
  set(TensorType::IQ3_S, "iq3_s", 256, 110);
  set(TensorType::IQ2_S, "iq2_s", 256, 82);
  set(TensorType::IQ4_XS, "iq4_xs", 256, 136);
  set(TensorType::I8, "i8", 1, 1);
  set(TensorType::I16, "i16", 1, 2);
  set(TensorType::I32, "i32", 1, 4);
  set(TensorType::I64, "i64", 1, 8);
  set(TensorType::F64, "f64", 1, 8);
  set(TensorType::IQ1_M, "iq1_m", 256, 56);
  set(TensorType::BF16, "bf16", 1, 2);
  set(TensorType::TQ1_0, "tq1_0", 256, 54);
  set(TensorType::TQ2_0, "tq2_0", 256, 66);
  set(TensorType::MXFP4, "mxfp4", 32, 17);
  return t;
}
constexpr std::array<TypeTraits, kTypeCount> kTypes = make_table();

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t type_id) {
  if (type_id >= kTypeCount || kTypes[type_id].block_size == 0) return std::nullopt;
  return kTypes[type_id];
}

std::string_view type_name(TensorType t) {
  auto traits = type_traits(t);
  return traits ? traits->name : std::string_view("?");
}

std::optional<TensorType> type_from_name(std::string_view name) {
  for (uint32_t id = 0; id < kTypeCount; ++id) {
    if (kTypes[id].block_size != 0 && equal_ignoring_case(kTypes[id].name, name)) {
      return static_cast<TensorType>(id);
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(TensorType t, int64_t n) {
  auto traits = type_traits(t);
  if (!traits || n < 0 || n % traits->block_size != 0) return std::nullopt;
  const uint64_t blocks = static_cast<uint64_t>(n) / traits->block_size;
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) return std::nullopt;
  return blocks * traits->block_bytes;
}

}  // namespace rl::gguf
