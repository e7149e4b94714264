// Writer and reader together: the bytes written match a hand-assembled image of the spec, every
// value type survives a round trip, tensors land aligned with their data, and the streaming
// writer produces the same file as write_to_memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "raw_gguf.h"
#include "util/error.h"

namespace rl::gguf {
namespace {

using testing::RawGguf;
using testing::same_value;
using Metadata = std::vector<std::pair<std::string, Value>>;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed())))
      .string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(RoundTrip, WriterMatchesHandAssembledSpecBytes) {
  const std::vector<uint8_t> data = pattern(24, 1);
  const std::vector<uint8_t> image = write_to_memory(
      {{"a", Value::u32(7)}, {"s", Value::string("hi")}}, {{"t", TensorType::F32, {2, 3}, data}});
  RawGguf expected;
  expected.header(1, 2).kv_u32("a", 7).str("s").u32(8).str("hi");
  expected.tensor("t", {2, 3}, 0, 0).pad_to(32).raw(data).pad_to(32);
  EXPECT_EQ(image, expected.bytes());
}

Metadata every_value_type() {
  Metadata m;
  m.emplace_back("u8", Value{ValueType::UINT8, uint64_t{255}});
  m.emplace_back("i8", Value{ValueType::INT8, int64_t{-128}});
  m.emplace_back("u16", Value{ValueType::UINT16, uint64_t{65535}});
  m.emplace_back("i16", Value{ValueType::INT16, int64_t{-32768}});
  m.emplace_back("u32", Value::u32(4294967295u));
  m.emplace_back("i32", Value::i32(std::numeric_limits<int32_t>::min()));
  m.emplace_back("u64", Value::u64(std::numeric_limits<uint64_t>::max()));
  m.emplace_back("i64", Value{ValueType::INT64, std::numeric_limits<int64_t>::min()});
  m.emplace_back("f32", Value::f32(-1.5e-7f));
  m.emplace_back("f32.nan", Value::f32(std::numeric_limits<float>::quiet_NaN()));
  m.emplace_back("f32.negzero", Value::f32(-0.0f));
  m.emplace_back("f64", Value{ValueType::FLOAT64, 3.141592653589793});
  m.emplace_back("f64.inf", Value{ValueType::FLOAT64, -std::numeric_limits<double>::infinity()});
  m.emplace_back("true", Value::boolean(true));
  m.emplace_back("false", Value::boolean(false));
  m.emplace_back("str", Value::string("héllo \xe2\x9c\x93"));
  m.emplace_back("str.empty", Value::string(""));
  m.emplace_back("str.nul", Value::string(std::string("a\0b", 3)));
  m.emplace_back("", Value::string("empty key"));
  m.emplace_back("arr.empty.u8", Value::array(ValueType::UINT8, {}));
  m.emplace_back("arr.empty.str", Value::array(ValueType::STRING, {}));
  m.emplace_back("arr.empty.arr", Value::array(ValueType::ARRAY, {}));
  m.emplace_back("arr.i32", Value::array(ValueType::INT32, {Value::i32(1), Value::i32(-2)}));
  m.emplace_back("arr.str", Value::array(ValueType::STRING, {Value::string("x"), Value::string(""),
                                                             Value::string("zz")}));
  m.emplace_back("arr.bool",
                 Value::array(ValueType::BOOL, {Value::boolean(false), Value::boolean(true)}));
  m.emplace_back("arr.f64", Value::array(ValueType::FLOAT64, {Value{ValueType::FLOAT64, 0.5}}));
  m.emplace_back("arr.u64", Value::array(ValueType::UINT64, {Value::u64(1), Value::u64(0)}));
  // Nested: [[1, 2], [], [[]]] is not uniform in depth, so use arrays of arrays of u16 and a
  // separate deeper nest.
  m.emplace_back(
      "arr.nested",
      Value::array(ValueType::ARRAY,
                   {Value::array(ValueType::UINT16, {Value{ValueType::UINT16, uint64_t{1}},
                                                     Value{ValueType::UINT16, uint64_t{2}}}),
                    Value::array(ValueType::STRING, {}),
                    Value::array(ValueType::ARRAY, {Value::array(ValueType::INT8, {})})}));
  Value deep = Value::array(ValueType::STRING, {Value::string("bottom")});
  for (int i = 0; i < 63; ++i) deep = Value::array(ValueType::ARRAY, {deep});  // 64 levels
  m.emplace_back("arr.deep", deep);
  return m;
}

TEST(RoundTrip, EveryValueType) {
  const Metadata m = every_value_type();
  const File f = File::from_bytes(write_to_memory(m, {}), "values.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.path(), "values.gguf");
  ASSERT_EQ(f.metadata().size(), m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, m[i].first);
    EXPECT_TRUE(same_value(f.metadata()[i].second, m[i].second)) << m[i].first;
    const Value* found = f.find(m[i].first);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found, &f.metadata()[i].second);
  }
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.data_offset(), f.file_size());
}

TEST(RoundTrip, ArraysNestedTooDeepAreRefusedByTheWriter) {
  Value deep = Value::array(ValueType::UINT8, {});
  for (int i = 0; i < 64; ++i) deep = Value::array(ValueType::ARRAY, {deep});  // 65 levels
  EXPECT_THROW(write_to_memory({{"deep", deep}}, {}), Error);
}

TEST(RoundTrip, WriterRefusesInconsistentValues) {
  EXPECT_THROW(write_to_memory({{"k", Value{ValueType::UINT8, uint64_t{256}}}}, {}), Error);
  EXPECT_THROW(write_to_memory({{"k", Value{ValueType::INT8, int64_t{-129}}}}, {}), Error);
  EXPECT_THROW(write_to_memory({{"k", Value{ValueType::UINT32, std::string("x")}}}, {}), Error);
  EXPECT_THROW(write_to_memory({{"k", Value{ValueType::STRING, uint64_t{1}}}}, {}), Error);
  EXPECT_THROW(write_to_memory({{"k", Value::array(ValueType::INT32, {Value::u32(1)})}}, {}),
               Error);
  EXPECT_THROW(write_to_memory({{"k", Value{static_cast<ValueType>(13), uint64_t{1}}}}, {}), Error);
  EXPECT_THROW(write_to_memory({{"k", Value::u32(1)}, {"k", Value::u32(2)}}, {}), Error);
}

TEST(RoundTrip, TensorsOfManyTypesAndAlignments) {
  for (uint64_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
    std::vector<TensorData> tensors = {
        {"a", TensorType::F32, {3}, pattern(12, 1)},
        {"b", TensorType::Q4_K, {512, 2}, pattern(2 * 2 * 144, 2)},
        {"c", TensorType::Q8_0, {32, 1, 2, 3}, pattern(6 * 34, 3)},
        {"d", TensorType::F16, {5, 7}, pattern(70, 4)},
        {"e", TensorType::IQ2_XXS, {256, 3, 1}, pattern(3 * 66, 5)},
        {"f", TensorType::MXFP4, {64}, pattern(34, 6)},
    };
    const std::string name = "t" + std::to_string(alignment) + ".gguf";
    const File f =
        File::from_bytes(write_to_memory({{"x", Value::u32(1)}}, tensors, alignment), name);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    EXPECT_EQ(f.get_uint("general.alignment"),
              alignment == 32 ? std::nullopt : std::optional<uint64_t>(alignment));
    ASSERT_EQ(f.tensors().size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorInfo& t = f.tensors()[i];
      SCOPED_TRACE(name + " " + t.name);
      EXPECT_EQ(t.name, tensors[i].name);
      EXPECT_EQ(t.type, tensors[i].type);
      EXPECT_EQ(t.n_dims, static_cast<int>(tensors[i].ne.size()));
      for (int d = 0; d < kMaxDims; ++d) {
        EXPECT_EQ(t.ne[d], d < t.n_dims ? tensors[i].ne[d] : 1);
      }
      EXPECT_EQ(t.bytes, tensors[i].bytes.size());
      EXPECT_EQ(t.offset % alignment, 0u);
      ASSERT_NE(t.data, nullptr);
      EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.bytes), tensors[i].bytes);
      EXPECT_EQ(f.find_tensor(t.name), &t);
    }
    EXPECT_EQ(f.find_tensor("missing"), nullptr);
  }
}

TEST(RoundTrip, WriterRefusesBadTensors) {
  auto one = [](TensorData t) { return write_to_memory({}, {std::move(t)}); };
  EXPECT_THROW(one({"t", TensorType::Q4_K, {128}, pattern(72, 0)}), Error);  // not whole blocks
  EXPECT_THROW(one({"t", TensorType::F32, {0}, {}}), Error);
  EXPECT_THROW(one({"t", TensorType::F32, {-1}, {}}), Error);
  EXPECT_THROW(one({"t", TensorType::F32, {1, 1, 1, 1, 1}, pattern(4, 0)}), Error);
  EXPECT_THROW(one({"t", TensorType::F32, {}, pattern(4, 0)}), Error);
  EXPECT_THROW(one({"t", TensorType::F32, {2}, pattern(4, 0)}), Error);  // size mismatch
  EXPECT_THROW(one({"t", static_cast<TensorType>(4), {1}, pattern(4, 0)}), Error);
  EXPECT_THROW(one({"t", TensorType::F32, {1LL << 40, 1LL << 40}, {}}), Error);  // overflow
  EXPECT_THROW(write_to_memory({}, {{"t", TensorType::F32, {1}, pattern(4, 0)},
                                    {"t", TensorType::F32, {1}, pattern(4, 0)}}),
               Error);
  EXPECT_THROW(write_to_memory({}, {}, 48), Error);  // not a power of two
  EXPECT_THROW(write_to_memory({}, {}, 0), Error);
  EXPECT_THROW(write_to_memory({{"general.alignment", Value::u32(64)}}, {}, 32), Error);
}

TEST(RoundTrip, StreamingWriterMatchesMemoryImage) {
  const Metadata m = every_value_type();
  const std::vector<TensorData> tensors = {
      {"big", TensorType::Q6_K, {256, 40}, pattern(40 * 210, 9)},
      {"small", TensorType::F32, {1}, pattern(4, 3)},
      {"mid", TensorType::BF16, {33, 3}, pattern(198, 5)},
  };
  const std::string path = temp_path("rl_gguf_stream.gguf");
  {
    Writer w(path, 64);
    for (const auto& [k, v] : m) w.add(k, v);
    for (const TensorData& t : tensors) w.add_tensor(t.name, t.type, t.ne);
    w.begin_data();
    // The first tensor in uneven pieces, the others whole.
    EXPECT_EQ(w.next_tensor_bytes(), tensors[0].bytes.size());
    const std::span<const uint8_t> big(tensors[0].bytes);
    size_t done = 0;
    for (size_t piece = 1; done < big.size(); piece = piece * 3 + 1) {
      const size_t n = std::min(piece, big.size() - done);
      w.write_tensor_part(big.subspan(done, n));
      done += n;
    }
    EXPECT_EQ(w.next_tensor_bytes(), 4u);
    w.write_tensor_data(tensors[1].bytes);
    w.write_tensor_data(tensors[2].bytes);
    w.finish();
  }
  EXPECT_EQ(read_all(path), write_to_memory(m, tensors, 64));
  const File f = File::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(std::vector<uint8_t>(f.tensors()[0].data, f.tensors()[0].data + f.tensors()[0].bytes),
            tensors[0].bytes);
  std::remove(path.c_str());
}

// Runs `body` against a fresh writer with tensors "a" (F32 [4], 16 bytes) and "b" (F32 [2]);
// expects it to throw an rl::Error naming the path.
template <typename Body>
void expect_writer_error(const Body& body) {
  const std::string path = temp_path("rl_gguf_err.gguf");
  {
    Writer w(path);
    w.add("k", Value::u32(1));
    w.add_tensor("a", TensorType::F32, std::vector<int64_t>{4});
    w.add_tensor("b", TensorType::F32, std::vector<int64_t>{2});
    try {
      body(w);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // An unfinished file is removed when the writer goes away.
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RoundTrip, WriterMisuseIsAnErrorNamingThePath) {
  const std::vector<uint8_t> b16 = pattern(16, 0), b8 = pattern(8, 0);
  expect_writer_error([](Writer& w) { w.add("k", Value::u32(2)); });
  expect_writer_error(
      [](Writer& w) { w.add_tensor("a", TensorType::F32, std::vector<int64_t>{4}); });
  expect_writer_error([&](Writer& w) { w.write_tensor_data(b8); });  // wrong size
  expect_writer_error([&](Writer& w) {                               // too many bytes
    w.write_tensor_part(b8);
    w.write_tensor_part(b16);
  });
  expect_writer_error([&](Writer& w) { w.finish(); });  // nothing written
  expect_writer_error([&](Writer& w) {                  // b missing
    w.write_tensor_data(b16);
    w.finish();
  });
  expect_writer_error([&](Writer& w) {  // after the last
    w.write_tensor_data(b16);
    w.write_tensor_data(b8);
    w.write_tensor_part(b8);
  });
  expect_writer_error([&](Writer& w) {
    w.begin_data();
    w.add("late", Value::u32(1));
  });
  expect_writer_error([&](Writer& w) {
    w.begin_data();
    w.begin_data();
  });
}

TEST(RoundTrip, UnwritablePathIsAnErrorNamingIt) {
  const std::string path = "/nonexistent-dir-rl/x.gguf";
  try {
    Writer w(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(RoundTrip, WriteFailureIsAnErrorNamingThePath) {
  const std::string path = "/dev/full";  // every write fails with ENOSPC
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no /dev/full here";
  try {
    Writer w(path);
    w.add("k", Value::string(std::string(1 << 16, 'x')));
    w.add_tensor("t", TensorType::F32, std::vector<int64_t>{1 << 16});
    const std::vector<uint8_t> data(4 << 16);
    w.write_tensor_data(data);
    w.finish();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: write failed"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(path));  // a device is never removed
}

TEST(RoundTrip, WriterWithoutTensors) {
  const std::string path = temp_path("rl_gguf_empty.gguf");
  {
    Writer w(path);
    w.add("only", Value::string("metadata"));
    w.finish();
  }
  const File f = File::open(path);
  EXPECT_EQ(f.get_string("only"), "metadata");
  EXPECT_TRUE(f.tensors().empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace rl::gguf
