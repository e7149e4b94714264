// Writes a seed corpus for tests/fuzz/gguf_fuzz.cpp into $RL_FUZZ_SEED_DIR (scripts/test.sh sets
// it): small valid files that cover every value type, many tensor types, alignments, both
// versions and real-world tokenizer metadata, each under the fuzzer's 64 KiB input limit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace rl::gguf {
namespace {

using Metadata = std::vector<std::pair<std::string, Value>>;

// One block's worth (or a few values) of each of a range of types.
std::vector<TensorData> one_block_of_each(std::initializer_list<TensorType> types) {
  std::vector<TensorData> out;
  uint8_t fill = 1;
  for (TensorType t : types) {
    const TypeTraits traits = *type_traits(t);
    out.push_back({std::string(traits.name) + ".w",
                   t,
                   {int64_t{traits.block_size}, 2},
                   std::vector<uint8_t>(2 * traits.block_bytes, fill++)});
  }
  return out;
}

std::vector<std::vector<uint8_t>> seeds() {
  std::vector<std::vector<uint8_t>> out;
  out.push_back(write_to_memory({}, {}));
  out.push_back(write_to_memory(
      {{"u8", Value{ValueType::UINT8, uint64_t{7}}},
       {"i8", Value{ValueType::INT8, int64_t{-7}}},
       {"u16", Value{ValueType::UINT16, uint64_t{700}}},
       {"i16", Value{ValueType::INT16, int64_t{-700}}},
       {"u32", Value::u32(70000)},
       {"i32", Value::i32(-70000)},
       {"u64", Value::u64(uint64_t{1} << 40)},
       {"i64", Value{ValueType::INT64, int64_t{-1} << 40}},
       {"f32", Value::f32(0.25f)},
       {"f64", Value{ValueType::FLOAT64, 1e-300}},
       {"bool", Value::boolean(true)},
       {"str", Value::string("text")},
       {"arr", Value::array(ValueType::ARRAY,
                            {Value::array(ValueType::STRING, {Value::string("a")}),
                             Value::array(ValueType::INT32, {Value::i32(1), Value::i32(2)}),
                             Value::array(ValueType::ARRAY, {})})}},
      {{"t", TensorType::F32, {4}, std::vector<uint8_t>(16, 3)}}));
  out.push_back(write_to_memory(
      {{"general.architecture", Value::string("qwen3next")}},
      one_block_of_each({TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                         TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                         TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ2_XXS,
                         TensorType::IQ2_XS, TensorType::IQ3_XXS, TensorType::IQ4_XS,
                         TensorType::IQ4_NL, TensorType::MXFP4})));
  for (uint64_t alignment : {1u, 8u, 64u}) {
    out.push_back(
        write_to_memory({{"general.name", Value::string("aligned")}},
                        {{"a", TensorType::F16, {3, 1, 1, 2}, std::vector<uint8_t>(12, 9)},
                         {"b", TensorType::I8, {5}, std::vector<uint8_t>(5, 8)}},
                        alignment));
  }
  std::vector<uint8_t> v2 = out[1];
  v2[4] = 2;  // the version field: v2 has the same layout
  out.push_back(v2);

  // Real tokenizer metadata (512 tokens, merges) from the tiny model, with tiny tensors.
  const File tiny = File::open(std::string(RL_SHARED_DIR) + "/testdata/tiny/tiny-quant.gguf");
  out.push_back(
      write_to_memory(tiny.metadata(),
                      one_block_of_each({TensorType::Q4_K, TensorType::Q6_K, TensorType::IQ2_XXS,
                                         TensorType::IQ3_XXS, TensorType::Q8_0, TensorType::F32})));
  return out;
}

TEST(FuzzSeeds, WriteFuzzSeeds) {
  const char* dir = std::getenv("RL_FUZZ_SEED_DIR");
  const auto all = seeds();
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_LE(all[i].size(), 65536u) << i;
    EXPECT_NO_THROW(File::from_bytes(all[i], "seed")) << i;  // every seed is a valid file
  }
  if (dir == nullptr) GTEST_SKIP() << "set RL_FUZZ_SEED_DIR to write the seed corpus";
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string path = std::string(dir) + "/seed" + std::to_string(i) + ".gguf";
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(all[i].data()),
              static_cast<std::streamsize>(all[i].size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

}  // namespace
}  // namespace rl::gguf
