// A validated, read-only view of a GGUF (v2/v3) file over a memory map, and a streaming writer.
//
// Everything is checked when the file is opened: counts, lengths, dimensions, offsets and sizes
// against overflow and the file size; tensor data inside the data section, aligned and not
// overlapping; duplicate keys and names; unknown value and tensor types. After open() succeeds
// no accessor can read outside the file. Errors name the file, the field and the byte offset.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/types.h"
#include "util/mmap.h"

namespace rl::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType element_type = ValueType::UINT8;
  std::vector<Value> items;
};

// One metadata value. Integers keep their declared type; accessors below convert with range
// checks.
struct Value {
  ValueType type = ValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value u32(uint32_t v) { return {ValueType::UINT32, uint64_t{v}}; }
  static Value i32(int32_t v) { return {ValueType::INT32, int64_t{v}}; }
  static Value u64(uint64_t v) { return {ValueType::UINT64, v}; }
  static Value f32(float v) { return {ValueType::FLOAT32, double{v}}; }
  static Value boolean(bool v) { return {ValueType::BOOL, v}; }
  static Value string(std::string v) { return {ValueType::STRING, std::move(v)}; }
  static Value array(ValueType element_type, std::vector<Value> items) {
    return {ValueType::ARRAY, Array{element_type, std::move(items)}};
  }

  // Conversions; nullopt when the type does not fit (e.g. a string read as a number, a
  // negative number read as unsigned, a value out of range).
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_float() const;  // any numeric type
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const Array* as_array() const;
};

constexpr int kMaxDims = 4;

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // ne[0] is the contiguous axis
  uint64_t offset = 0;                           // relative to the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapped file

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const;
};

class File {
 public:
  // Maps and validates the whole file. Throws rl::Error: "<path>: <field> at byte <off>: <what>".
  static File open(const std::string& path);
  // Validates an in-memory image (used by tests and the fuzzer); `name` stands in for the path.
  static File from_bytes(std::vector<uint8_t> bytes, const std::string& name = "<memory>");

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Start of the data section: the aligned offset after the tensor infos (the file size for a
  // file without tensors that ends before that offset).
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed accessors: nullopt if absent; throw rl::Error if present with an unusable type/range.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const Array* get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  void parse();  // throws on any inconsistency
  [[noreturn]] void fail_value(std::string_view key, const std::string& what) const;

  std::string path_;
  MappedFile map_;
  std::vector<uint8_t> owned_;  // backing store for from_bytes()
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<uint64_t> kv_offsets_;  // byte offset of each metadata value, for error messages
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Streams a GGUF v3 file: metadata and tensor infos first, then each tensor's data in the order
// the infos were added, so a multi-gigabyte model never needs to be in memory.
class Writer {
 public:
  explicit Writer(const std::string& path, uint64_t alignment = 32);
  ~Writer();

  void add(std::string key, Value value);  // throws on a duplicate key
  void add_tensor(std::string name, TensorType type, std::span<const int64_t> ne);  // shape check

  // Writes the header; afterwards tensors' bytes follow in order with write_tensor_data.
  void begin_data();
  void write_tensor_data(std::span<const uint8_t> bytes);  // exactly the next tensor's size
  void finish();  // checks every tensor was written, flushes and closes

  // Size in bytes that the next tensor must have (for generators that stream in pieces).
  uint64_t next_tensor_bytes() const;
  // Appends part of the next tensor's bytes; the tensor is complete when its size is reached.
  void write_tensor_part(std::span<const uint8_t> bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serialises a complete file into memory (tests, fuzz seeds): metadata, tensors and their data.
struct TensorData {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> bytes;
};
std::vector<uint8_t> write_to_memory(const std::vector<std::pair<std::string, Value>>& metadata,
                                     const std::vector<TensorData>& tensors,
                                     uint64_t alignment = 32);

}  // namespace rl::gguf
