// Type traits against ggml's block layouts, and the typed metadata accessors' conversions.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "util/error.h"

namespace rl::gguf {
namespace {

struct Expected {
  uint32_t id;
  const char* name;
  uint32_t block_size;
  uint32_t block_bytes;
};

// From ggml.h (type ids) and ggml-common.h (block structs), written out independently.
constexpr Expected kExpected[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
};

TEST(Types, TraitsMatchGgml) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    const auto t = type_traits(e.id);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_size, e.block_size);
    EXPECT_EQ(t->block_bytes, e.block_bytes);
    EXPECT_EQ(type_name(static_cast<TensorType>(e.id)), e.name);
    EXPECT_EQ(type_from_name(e.name), static_cast<TensorType>(e.id));
  }
}

TEST(Types, RemovedAndUnknownIdsHaveNoTraits) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 41u, 1000u, 0xffffffffu}) {
    EXPECT_FALSE(type_traits(id).has_value()) << id;
    EXPECT_EQ(type_name(static_cast<TensorType>(id)), "?");
  }
  size_t known = 0;
  for (uint32_t id = 0; id < 64; ++id) known += type_traits(id).has_value();
  EXPECT_EQ(known, std::size(kExpected));
}

TEST(Types, NamesParseCaseInsensitively) {
  EXPECT_EQ(type_from_name("Q4_K"), TensorType::Q4_K);
  EXPECT_EQ(type_from_name("q4_k"), TensorType::Q4_K);
  EXPECT_EQ(type_from_name("IQ2_XXS"), TensorType::IQ2_XXS);
  EXPECT_EQ(type_from_name("BF16"), TensorType::BF16);
  EXPECT_FALSE(type_from_name("q4_2").has_value());
  EXPECT_FALSE(type_from_name("").has_value());
  EXPECT_FALSE(type_from_name("f32 ").has_value());
}

TEST(Types, RowBytes) {
  EXPECT_EQ(row_bytes(TensorType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 2048), 8u * 144);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 0), 0u);
  EXPECT_FALSE(row_bytes(TensorType::Q4_K, 255).has_value());
  EXPECT_FALSE(row_bytes(TensorType::Q8_0, -32).has_value());
  EXPECT_FALSE(row_bytes(static_cast<TensorType>(5), 32).has_value());
  // 2^62 values of f32 would be 2^64 bytes.
  EXPECT_FALSE(row_bytes(TensorType::F32, int64_t{1} << 62).has_value());
  EXPECT_EQ(row_bytes(TensorType::I8, std::numeric_limits<int64_t>::max()),
            uint64_t(std::numeric_limits<int64_t>::max()));
}

TEST(Values, Conversions) {
  EXPECT_EQ(Value::u64(std::numeric_limits<uint64_t>::max()).as_int(), std::nullopt);
  EXPECT_EQ(Value::u64(5).as_int(), 5);
  EXPECT_EQ(Value::i32(-5).as_uint(), std::nullopt);
  EXPECT_EQ(Value::i32(-5).as_int(), -5);
  EXPECT_EQ(Value::i32(5).as_uint(), 5u);
  EXPECT_EQ(Value::i32(-5).as_float(), -5.0);
  EXPECT_EQ(Value::f32(0.5f).as_float(), 0.5);
  EXPECT_EQ(Value::f32(0.5f).as_int(), std::nullopt);
  EXPECT_EQ(Value::boolean(true).as_bool(), true);
  EXPECT_EQ(Value::boolean(true).as_int(), std::nullopt);
  EXPECT_EQ(Value::u32(1).as_bool(), std::nullopt);
  EXPECT_EQ(Value::u32(1).as_string(), nullptr);
  EXPECT_EQ(*Value::string("s").as_string(), "s");
  EXPECT_EQ(Value::string("s").as_array(), nullptr);
  EXPECT_EQ(Value::array(ValueType::UINT8, {}).as_array()->element_type, ValueType::UINT8);
  EXPECT_EQ(value_type_name(ValueType::FLOAT64), "float64");
  EXPECT_EQ(value_type_name(ValueType::ARRAY), "array");
}

// Expects `f` to throw an rl::Error whose message has the file name, the key and "byte".
template <typename F>
void expect_accessor_error(const F& f, const std::string& key) {
  try {
    f();
    ADD_FAILURE() << "no error for " << key;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("acc.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find(key), std::string::npos) << m;
    EXPECT_NE(m.find("byte"), std::string::npos) << m;
  }
}

TEST(Values, FileAccessors) {
  const File f =
      File::from_bytes(write_to_memory({{"s", Value::string("text")},
                                        {"n", Value::i32(-3)},
                                        {"big", Value::u64(std::numeric_limits<uint64_t>::max())},
                                        {"x", Value::f32(2.5f)},
                                        {"b", Value::boolean(true)},
                                        {"a", Value::array(ValueType::UINT32, {Value::u32(9)})}},
                                       {}),
                       "acc.gguf");
  EXPECT_EQ(f.get_string("s"), "text");
  EXPECT_EQ(f.get_int("n"), -3);
  EXPECT_EQ(f.get_float("n"), -3.0);
  EXPECT_EQ(f.get_uint("big"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_float("x"), 2.5);
  EXPECT_EQ(f.get_bool("b"), true);
  ASSERT_NE(f.get_array("a"), nullptr);
  EXPECT_EQ(f.get_array("a")->items.at(0).as_uint(), 9u);
  EXPECT_EQ(f.get_string("absent"), std::nullopt);
  EXPECT_EQ(f.get_int("absent"), std::nullopt);
  EXPECT_EQ(f.get_uint("absent"), std::nullopt);
  EXPECT_EQ(f.get_float("absent"), std::nullopt);
  EXPECT_EQ(f.get_bool("absent"), std::nullopt);
  EXPECT_EQ(f.get_array("absent"), nullptr);
  EXPECT_EQ(f.find("absent"), nullptr);

  expect_accessor_error([&] { f.get_string("n"); }, "'n'");
  expect_accessor_error([&] { f.get_int("s"); }, "'s'");
  expect_accessor_error([&] { f.get_int("big"); }, "'big'");
  expect_accessor_error([&] { f.get_uint("n"); }, "'n'");
  expect_accessor_error([&] { f.get_float("b"); }, "'b'");
  expect_accessor_error([&] { f.get_bool("n"); }, "'n'");
  expect_accessor_error([&] { f.get_array("s"); }, "'s'");
}

}  // namespace
}  // namespace rl::gguf
