// A corpus of malformed files, generated here: each must be rejected with one rl::Error whose
// message names the file and a byte offset. Inputs are assembled byte by byte with RawGguf so
// that the expected offsets come from the spec, not from the reader.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "raw_gguf.h"
#include "util/error.h"

namespace rl::gguf {
namespace {

using testing::RawGguf;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
const char* const kName = "bad.gguf";

// ---- a small valid file whose every field can be replaced

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type;
  uint64_t offset;
};

struct Spec {
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors, n_kv;  // override the true counts
  std::vector<std::function<void(RawGguf&)>> kvs;
  std::vector<TensorSpec> tensors;
  uint64_t alignment = 32;  // where the data section starts (what the reader should assume)
  uint64_t data_bytes = 0;  // how many data bytes follow the padding
};

Spec base_spec() {
  Spec s;
  s.kvs = {
      [](RawGguf& r) { r.str("general.architecture").u32(8).str("test"); },
      [](RawGguf& r) { r.str("list").u32(9).u32(4).u64(3).u32(1).u32(2).u32(3); },
      [](RawGguf& r) { r.str("words").u32(9).u32(8).u64(2).str("a").str("bc"); },
  };
  s.tensors = {{"a", {64, 2}, 0, 0},             // F32, 512 bytes
               {"b", {32}, 8, 512},              // Q8_0, 34 bytes
               {"c", {256, 1, 1, 2}, 12, 576}};  // Q4_K, 288 bytes
  s.data_bytes = 864;
  return s;
}

struct Built {
  std::vector<uint8_t> bytes;
  std::map<std::string, size_t> at;  // where each field starts
  std::vector<size_t> boundaries;    // ends of header, each kv, each tensor info, padding, data
};

Built build(const Spec& s) {
  Built b;
  RawGguf r;
  r.header(s.n_tensors.value_or(s.tensors.size()), s.n_kv.value_or(s.kvs.size()), s.version);
  b.boundaries.push_back(r.size());
  for (size_t i = 0; i < s.kvs.size(); ++i) {
    b.at["kv" + std::to_string(i)] = r.size();
    s.kvs[i](r);
    b.boundaries.push_back(r.size());
  }
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorSpec& t = s.tensors[i];
    const std::string p = "t" + std::to_string(i) + ".";
    b.at[p + "name"] = r.size();
    r.str(t.name);
    b.at[p + "n_dims"] = r.size();
    r.u32(static_cast<uint32_t>(t.ne.size()));
    b.at[p + "dims"] = r.size();
    for (int64_t n : t.ne) r.i64(n);
    b.at[p + "type"] = r.size();
    r.u32(t.type);
    b.at[p + "offset"] = r.size();
    r.u64(t.offset);
    b.boundaries.push_back(r.size());
  }
  r.pad_to(s.alignment);
  b.at["data"] = r.size();
  b.boundaries.push_back(r.size());
  for (uint64_t i = 0; i < s.data_bytes; ++i) r.u8(static_cast<uint8_t>(i * 13 + 5));
  b.boundaries.push_back(r.size());
  b.bytes = r.bytes();
  return b;
}

// Parses `bytes`; returns the error message, or "" (with a test failure) if it was accepted.
std::string rejection(const std::vector<uint8_t>& bytes, const std::string& name = kName) {
  try {
    File::from_bytes(bytes, name);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(name + ": ", 0), 0u) << m;
    EXPECT_NE(m.find(" at byte "), std::string::npos) << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an rl::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "accepted a malformed file of " << bytes.size() << " bytes";
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
#define EXPECT_HAS(message, part) EXPECT_TRUE(contains(message, part)) << (message)

TEST(Malformed, BaseSpecIsValid) {
  const Built b = build(base_spec());
  const File f = File::from_bytes(b.bytes, kName);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.data_offset(), b.at.at("data"));
  EXPECT_EQ(f.tensors()[2].bytes, 288u);
  EXPECT_EQ(f.tensors()[2].data, f.tensors()[0].data + 576);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
}

TEST(Malformed, ExampleMessageNamesFileFieldAndOffset) {
  Spec s = base_spec();
  s.tensors[1].ne = {0};
  const Built b = build(s);
  EXPECT_EQ(rejection(b.bytes), "bad.gguf: tensor info 1 ('b') dims at byte " +
                                    std::to_string(b.at.at("t1.dims")) + ": dimension 0 is 0");
}

TEST(Malformed, TruncatedAnywhereBeforeTheEndOfTheData) {
  for (const Spec& s : {base_spec(), [] {
                          Spec t = base_spec();
                          t.version = 2;
                          return t;
                        }()}) {
    const Built b = build(s);
    const size_t end = b.bytes.size();
    for (size_t n = 0; n < end; ++n) {
      SCOPED_TRACE(n);
      rejection(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + n));
    }
  }
}

TEST(Malformed, TruncatedAtSectionBoundaries) {
  const Built b = build(base_spec());
  for (size_t n : b.boundaries) {
    if (n >= b.bytes.size()) continue;
    const std::string m = rejection(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + n));
    EXPECT_HAS(m, "byte ");
  }
  // The truncation error points at where the missing field starts.
  const std::string m =
      rejection(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + b.at.at("t1.type") + 2));
  EXPECT_HAS(m, "tensor info 1 ('b') type at byte " + std::to_string(b.at.at("t1.type")));
}

TEST(Malformed, TruncatedVocabAndModel) {
  // Real files: llama.cpp's vocab (metadata only) and the tiny quantised model.
  for (const char* rel : {"tokenizer/ggml-vocab-qwen2.gguf", "tiny/tiny-quant.gguf"}) {
    const std::string path = std::string(RL_SHARED_DIR) + "/testdata/" + rel;
    const File whole = File::open(path);
    MappedFile map(path);
    // The last byte that matters: the end of the metadata or of the last tensor's data.
    uint64_t needed = whole.data_offset();
    for (const TensorInfo& t : whole.tensors()) {
      needed = std::max(needed, whole.data_offset() + t.offset + t.bytes);
    }
    std::mt19937_64 rng(42);
    std::vector<uint64_t> cuts = {0, 3, 4, 8, 15, 16, 23, 24, 25, 100, needed - 1};
    for (int i = 0; i < 12; ++i) cuts.push_back(rng() % needed);
    for (uint64_t n : cuts) {
      SCOPED_TRACE(std::string(rel) + " cut at " + std::to_string(n));
      rejection(std::vector<uint8_t>(map.data(), map.data() + n), rel);
    }
  }
}

TEST(Malformed, HeaderFields) {
  EXPECT_HAS(rejection({}), "magic at byte 0");
  EXPECT_HAS(rejection({'G', 'G', 'U', 'G', 3, 0, 0, 0}), "not a GGUF file");
  Spec s = base_spec();
  s.version = 1;
  EXPECT_HAS(rejection(build(s).bytes), "version at byte 4: GGUF version 1 is not supported");
  for (uint32_t v : {0u, 4u, 0xffffffffu}) {
    s.version = v;
    EXPECT_HAS(rejection(build(s).bytes), "unsupported GGUF version");
  }
  s.version = 0x03000000u;
  EXPECT_HAS(rejection(build(s).bytes), "big-endian");
}

// Counts and lengths near the limits of 64-bit and 32-bit integers, and just past the file.
std::vector<uint64_t> huge_counts(uint64_t file_size) {
  return {kU64Max,
          kU64Max - 1,
          uint64_t{1} << 63,
          (uint64_t{1} << 63) - 1,
          (uint64_t{1} << 63) + 1,
          uint64_t{1} << 62,
          (uint64_t{1} << 60) + 3,
          uint64_t{1} << 32,
          (uint64_t{1} << 32) - 1,
          (uint64_t{1} << 32) + 1,
          file_size,
          file_size + 1,
          kU64Max / 8 + 1,
          kU64Max / 12 + 1,
          kU64Max / 13 + 1};
}

TEST(Malformed, HugeCountsAndLengths) {
  const size_t size = build(base_spec()).bytes.size();
  for (uint64_t n : huge_counts(size)) {
    SCOPED_TRACE(n);
    Spec s = base_spec();
    s.n_tensors = n;
    EXPECT_HAS(rejection(build(s).bytes), "byte ");
    s = base_spec();
    s.n_kv = n;
    EXPECT_HAS(rejection(build(s).bytes), "byte ");
    // A key length, a string value's length, array lengths of 1-byte, string and array items.
    s = base_spec();
    s.kvs.push_back([n](RawGguf& r) { r.u64(n).u32(4).u32(0); });
    EXPECT_HAS(rejection(build(s).bytes), "metadata 3 key at byte");
    s = base_spec();
    s.kvs.push_back([n](RawGguf& r) { r.str("k").u32(8).u64(n).u8('x'); });
    EXPECT_HAS(rejection(build(s).bytes), "metadata 3 ('k') value at byte");
    for (uint32_t element : {0u, 7u, 8u, 9u, 10u}) {
      s = base_spec();
      s.kvs.push_back([n, element](RawGguf& r) { r.str("k").u32(9).u32(element).u64(n).u64(0); });
      EXPECT_HAS(rejection(build(s).bytes), "metadata 3 ('k') value at byte");
    }
    // Nested: the inner array's length is huge.
    s = base_spec();
    s.kvs.push_back([n](RawGguf& r) { r.str("k").u32(9).u32(9).u64(1).u32(8).u64(n); });
    EXPECT_HAS(rejection(build(s).bytes), "('k') value[0] at byte");
    // A tensor name's length.
    s = base_spec();
    const Built b = build(s);
    std::vector<uint8_t> bytes = b.bytes;
    std::memcpy(bytes.data() + b.at.at("t2.name"), &n, 8);
    EXPECT_HAS(rejection(bytes),
               "tensor info 2 name at byte " + std::to_string(b.at.at("t2.name")));
  }
}

TEST(Malformed, TensorOffsets) {
  const auto with_offset = [](size_t tensor, uint64_t offset) {
    Spec s = base_spec();
    s.tensors[tensor].offset = offset;
    return rejection(build(s).bytes);
  };
  // Outside the file, or overflowing when the size is added.
  for (uint64_t off : {uint64_t{864}, uint64_t{896}, uint64_t{1} << 32, uint64_t{1} << 63,
                       kU64Max - 31, kU64Max - 63, kU64Max & ~uint64_t{31}}) {
    EXPECT_HAS(with_offset(2, off), "tensor info 2 ('c') offset at byte");
    EXPECT_HAS(with_offset(0, off), "tensor info 0 ('a') offset at byte");
  }
  EXPECT_HAS(with_offset(2, 608), "extends past the end of the file");  // last 32 bytes missing
  // Misaligned.
  for (uint64_t off : {uint64_t{1}, uint64_t{16}, uint64_t{31}, uint64_t{513}, kU64Max}) {
    EXPECT_HAS(with_offset(1, off), "is not a multiple of the alignment 32");
  }
  // Overlapping.
  EXPECT_HAS(with_offset(1, 0), "overlaps tensor 'a'");
  EXPECT_HAS(with_offset(1, 480), "overlaps tensor 'a'");
  EXPECT_HAS(with_offset(2, 544), "overlaps tensor 'b'");
  EXPECT_HAS(with_offset(2, 512), "tensor info 2 ('c') offset at byte");
  EXPECT_HAS(with_offset(2, 512), "overlaps tensor 'b'");
}

TEST(Malformed, DataSectionPastTheEnd) {
  Spec s = base_spec();
  s.data_bytes = 0;
  s.alignment = 1;  // not even the padding
  const Built b = build(s);
  ASSERT_NE(b.bytes.size() % 32, 0u);
  EXPECT_HAS(rejection(b.bytes), "data section start at byte " + std::to_string(b.bytes.size()));
}

TEST(Malformed, TensorTypeIds) {
  for (uint32_t type :
       {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0x80000000u, 0xffffffffu}) {
    Spec s = base_spec();
    s.tensors[1].type = type;
    const Built b = build(s);
    EXPECT_EQ(rejection(b.bytes), "bad.gguf: tensor info 1 ('b') type at byte " +
                                      std::to_string(b.at.at("t1.type")) +
                                      ": unknown tensor type " + std::to_string(type));
  }
}

TEST(Malformed, ValueTypeIds) {
  for (uint32_t type : {13u, 14u, 255u, 0xffffffffu}) {
    Spec s = base_spec();
    s.kvs.push_back([type](RawGguf& r) { r.str("k").u32(type).u32(0); });
    EXPECT_HAS(rejection(build(s).bytes), "metadata 3 ('k') value type at byte");
    s = base_spec();
    s.kvs.push_back([type](RawGguf& r) { r.str("k").u32(9).u32(type).u64(1).u32(0); });
    EXPECT_HAS(rejection(build(s).bytes), "unknown array element type");
    s = base_spec();  // inside a nested array
    s.kvs.push_back(
        [type](RawGguf& r) { r.str("k").u32(9).u32(9).u64(2).u32(0).u64(0).u32(type).u64(0); });
    EXPECT_HAS(rejection(build(s).bytes), "('k') value[1] at byte");
  }
}

TEST(Malformed, BadBool) {
  for (uint8_t v : {2, 255}) {
    Spec s = base_spec();
    s.kvs.push_back([v](RawGguf& r) { r.str("flag").u32(7).u8(v); });
    EXPECT_HAS(rejection(build(s).bytes), "bool value is");
    s = base_spec();
    s.kvs.push_back([v](RawGguf& r) { r.str("flags").u32(9).u32(7).u64(3).u8(0).u8(1).u8(v); });
    EXPECT_HAS(rejection(build(s).bytes), "('flags') value[2] at byte");
  }
}

TEST(Malformed, Duplicates) {
  Spec s = base_spec();
  s.kvs.push_back([](RawGguf& r) { r.str("list").u32(4).u32(1); });
  EXPECT_HAS(rejection(build(s).bytes), "duplicate key");
  s = base_spec();
  s.tensors[2].name = "a";
  EXPECT_HAS(rejection(build(s).bytes), "tensor info 2 name at byte");
  EXPECT_HAS(rejection(build(s).bytes), "duplicate tensor name");
}

TEST(Malformed, NamesInMessagesAreEscapedAndShortened) {
  Spec s = base_spec();
  s.tensors[1].name = std::string("nul\0'name\n", 10);
  s.tensors[1].type = 4;
  EXPECT_HAS(rejection(build(s).bytes), "tensor info 1 ('nul\\x00\\x27name\\x0a') type at byte");
  s = base_spec();
  s.tensors[1].name = std::string(5000, 'n');
  s.tensors[1].type = 4;
  const std::string m = rejection(build(s).bytes);
  EXPECT_HAS(m, "... (5000 bytes)') type at byte");
  EXPECT_LT(m.size(), 300u);
}

TEST(Malformed, Dimensions) {
  const auto with_dims = [](std::vector<int64_t> ne, uint32_t type = 0) {
    Spec s = base_spec();
    s.tensors[0].ne = std::move(ne);
    s.tensors[0].type = type;
    return rejection(build(s).bytes);
  };
  for (int64_t bad : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    EXPECT_HAS(with_dims({bad}), "dimension 0 is");
    EXPECT_HAS(with_dims({64, bad}), "dimension 1 is");
    EXPECT_HAS(with_dims({64, 1, 1, bad}), "dimension 3 is");
  }
  EXPECT_HAS(with_dims({}), "n_dims is 0");
  EXPECT_HAS(with_dims({1, 1, 1, 1, 1}), "n_dims is 5");
  // n_dims far larger than the file: rejected before reading any dimension.
  Spec s = base_spec();
  const Built b = build(s);
  std::vector<uint8_t> bytes = b.bytes;
  const uint32_t n_dims = 0xffffffffu;
  std::memcpy(bytes.data() + b.at.at("t0.n_dims"), &n_dims, 4);
  EXPECT_HAS(rejection(bytes), "n_dims is 4294967295");
  // The element count overflows int64.
  EXPECT_HAS(with_dims({int64_t{1} << 32, int64_t{1} << 32}), "element count overflows");
  EXPECT_HAS(with_dims({2, kI64Max}), "element count overflows");
  EXPECT_HAS(with_dims({kI64Max, 1, 1, 2}), "element count overflows");
  EXPECT_HAS(with_dims({int64_t{1} << 21, int64_t{1} << 21, int64_t{1} << 21, 2}),
             "element count overflows");
  // The element count fits but the byte size does not, or is far beyond the file.
  EXPECT_HAS(with_dims({int64_t{1} << 62, 1}, 0), "overflows");     // 2^64 bytes of F32
  EXPECT_HAS(with_dims({int64_t{1} << 61, 1}, 0), "past the end");  // 2^63 bytes
  EXPECT_HAS(with_dims({int64_t{1} << 40}, 27), "past the end");    // I64
  // A row that is not whole blocks.
  EXPECT_HAS(with_dims({128, 2}, 12), "row length 128 is not a multiple of q4_K's block size 256");
  EXPECT_HAS(with_dims({33}, 8), "not a multiple of q8_0's block size 32");
}

TEST(Malformed, Alignment) {
  const auto with_alignment = [](std::function<void(RawGguf&)> kv, uint64_t data_alignment) {
    Spec s = base_spec();
    s.kvs.push_back(std::move(kv));
    s.alignment = data_alignment;
    return rejection(build(s).bytes);
  };
  for (uint32_t a : {0u, 3u, 24u, 48u, 0x80000001u, 0xffffffffu}) {
    EXPECT_HAS(with_alignment([a](RawGguf& r) { r.str("general.alignment").u32(4).u32(a); }, 32),
               "('general.alignment') value at byte");
  }
  EXPECT_HAS(with_alignment([](RawGguf& r) { r.str("general.alignment").u32(8).str("32"); }, 32),
             "must be an unsigned integer");
  EXPECT_HAS(with_alignment([](RawGguf& r) { r.str("general.alignment").u32(5).u32(-32); }, 32),
             "must be an unsigned integer");
  EXPECT_HAS(
      with_alignment([](RawGguf& r) { r.str("general.alignment").u32(10).u64(kU64Max); }, 32),
      "not a nonzero power of two");
  // A power of two so large that the data section would start past the end (one tensor at 0).
  for (uint64_t huge : {uint64_t{1} << 31, uint64_t{1} << 63}) {
    Spec s = base_spec();
    s.tensors.resize(1);
    s.kvs.push_back([huge](RawGguf& r) { r.str("general.alignment").u32(10).u64(huge); });
    EXPECT_HAS(rejection(build(s).bytes), "data section start");
  }
  // A valid alignment that the offsets do not honour: c at 576 is not a multiple of 128.
  EXPECT_HAS(with_alignment([](RawGguf& r) { r.str("general.alignment").u32(4).u32(128); }, 128),
             "tensor info 2 ('c') offset");
  // And one that works: 16, with the data section starting at the 16-aligned offset.
  Spec s = base_spec();
  s.kvs.push_back([](RawGguf& r) { r.str("general.alignment").u32(4).u32(16); });
  s.alignment = 16;
  const Built b = build(s);
  EXPECT_EQ(File::from_bytes(b.bytes, kName).data_offset(), b.at.at("data"));
}

TEST(Malformed, NestingBombs) {
  const auto nested = [](int levels, uint64_t inner_count) {
    return [levels, inner_count](RawGguf& r) {
      r.str("bomb").u32(9);
      for (int i = 1; i < levels; ++i) r.u32(9).u64(1);
      r.u32(0).u64(inner_count);
      for (uint64_t i = 0; i < inner_count; ++i) r.u8(1);
    };
  };
  Spec s = base_spec();
  s.kvs.push_back(nested(64, 2));  // the deepest allowed
  const File f = File::from_bytes(build(s).bytes, kName);
  const Value* v = f.find("bomb");
  for (int i = 1; i < 64; ++i) v = &v->as_array()->items.at(0);
  EXPECT_EQ(v->as_array()->items.size(), 2u);

  for (int levels : {65, 100, 10000}) {
    s = base_spec();
    s.kvs.push_back(nested(levels, 0));
    EXPECT_HAS(rejection(build(s).bytes), "nested more than 64 deep");
  }
  // Very deep and truncated: the depth limit or the end of file, never the stack.
  RawGguf r;
  r.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 200000; ++i) r.u32(9).u64(1);
  EXPECT_HAS(rejection(r.bytes()), "nested more than 64 deep");
  // Wide: many empty arrays is fine as long as they fit; a count that cannot fit is not.
  RawGguf wide;
  wide.header(0, 1).str("k").u32(9).u32(9).u64(1000);
  for (int i = 0; i < 1000; ++i) wide.u32(0).u64(0);
  EXPECT_EQ(File::from_bytes(wide.bytes(), kName).get_array("k")->items.size(), 1000u);
  RawGguf wider;
  wider.header(0, 1).str("k").u32(9).u32(9).u64(1001);
  for (int i = 0; i < 1000; ++i) wider.u32(0).u64(0);
  EXPECT_HAS(rejection(wider.bytes()), "array length 1001 cannot fit");
}

TEST(Malformed, TooManyArrayElementsInTotal) {
  // The bytes are there, but 2^24 + 1 elements are refused before memory is reserved for them:
  // in one array, and in an array nested in another (1 + 2^24). The offset is the count's.
  const uint64_t limit = uint64_t{1} << 24;
  RawGguf flat;
  flat.header(0, 1).str("k").u32(9).u32(0).u64(limit + 1).zeros(limit + 1);
  EXPECT_HAS(rejection(flat.bytes()), "metadata 0 ('k') value at byte 41: more than 16777216");
  RawGguf nested;
  nested.header(0, 1).str("k").u32(9).u32(9).u64(1).u32(0).u64(limit).zeros(limit);
  EXPECT_HAS(rejection(nested.bytes()), "('k') value[0] at byte 53: more than 16777216");
}

// Walks everything a valid file exposes, so that ASan sees any read out of bounds.
uint64_t touch_everything(const File& f) {
  uint64_t sum = f.version() + f.alignment() + f.data_offset() + f.file_size();
  std::function<void(const Value&)> walk = [&](const Value& v) {
    if (auto s = v.as_string()) sum += s->size();
    if (auto a = v.as_array()) {
      for (const Value& item : a->items) walk(item);
    }
    sum += v.as_uint().value_or(1) + static_cast<uint64_t>(v.as_bool().value_or(false));
  };
  for (const auto& [key, value] : f.metadata()) {
    walk(value);
    EXPECT_EQ(f.find(key), &value);
  }
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(f.find_tensor(t.name), &t);
    EXPECT_EQ(t.bytes, t.row_bytes() * static_cast<uint64_t>(t.n_rows()));
    EXPECT_LE(f.data_offset() + t.offset + t.bytes, f.file_size());
    for (uint64_t i = 0; i < t.bytes; ++i) sum += t.data[i];
  }
  return sum;
}

TEST(Malformed, RandomByteFlipsNeverCrash) {
  std::vector<std::vector<uint8_t>> images = {build(base_spec()).bytes};
  {
    Spec s = base_spec();
    s.version = 2;
    images.push_back(build(s).bytes);
  }
  images.push_back(write_to_memory(
      {{"s", Value::string("abc")},
       {"n",
        Value::array(ValueType::ARRAY, {Value::array(ValueType::INT16, {}),
                                        Value::array(ValueType::STRING, {Value::string("x")})})},
       {"f", Value::f32(1.0f)},
       {"general.alignment", Value::u32(8)}},
      {{"x", TensorType::Q4_0, {32, 2}, std::vector<uint8_t>(36, 1)},
       {"y", TensorType::F16, {3}, std::vector<uint8_t>(6, 2)}},
      8));
  std::mt19937_64 rng(20240601);
  int accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 900; ++iteration) {
    std::vector<uint8_t> bytes = images[iteration % images.size()];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % bytes.size();
      switch (rng() % 3) {
        case 0:
          bytes[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          bytes[pos] = static_cast<uint8_t>(rng());
          break;
        default:
          bytes[pos] = (rng() % 2) ? 0xff : 0x00;
          break;
      }
    }
    SCOPED_TRACE(iteration);
    try {
      const File f = File::from_bytes(bytes, kName);
      touch_everything(f);
      ++accepted;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("bad.gguf: ", 0), 0u) << m;
      EXPECT_HAS(m, " at byte ");
      ++rejected;
    }
  }
  // Both outcomes occur: flips in tensor data are harmless, flips in the header mostly not.
  EXPECT_GT(accepted, 50);
  EXPECT_GT(rejected, 300);
}

TEST(Malformed, ByteFlipsInARealHeader) {
  const std::string path = std::string(RL_SHARED_DIR) + "/testdata/quants/quants.gguf";
  const File whole = File::open(path);
  MappedFile map(path);
  const std::vector<uint8_t> original(map.data(), map.data() + map.size());
  std::mt19937_64 rng(7);
  for (int iteration = 0; iteration < 120; ++iteration) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) bytes[rng() % whole.data_offset()] ^= 1u << (rng() % 8);
    SCOPED_TRACE(iteration);
    try {
      touch_everything(File::from_bytes(std::move(bytes), "quants.gguf"));
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("quants.gguf: ", 0), 0u) << e.what();
      EXPECT_HAS(std::string(e.what()), " at byte ");
    }
  }
}

}  // namespace
}  // namespace rl::gguf
