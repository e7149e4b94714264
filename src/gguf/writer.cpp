// The GGUF v3 writer: a header (metadata + tensor infos, padded to the alignment) followed by
// each tensor's bytes, each padded to the alignment. Writer streams the data to a file;
// write_to_memory() builds the same image in memory. Everything a writer is given is checked
// so that it never produces a file the reader would reject.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "gguf/gguf.h"
#include "util/error.h"

namespace rl::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 64;  // the reader's limit

struct PlannedTensor {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // relative to the data section
};

void check_alignment(const std::string& where, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
      alignment > std::numeric_limits<uint32_t>::max()) {
    fail(where, ": alignment ", alignment, " is not a power of two that fits in 32 bits");
  }
}

uint64_t padding_for(uint64_t size, uint64_t alignment) {
  return (alignment - size % alignment) % alignment;
}

// Removes a partly written file, but never a device or pipe that the caller asked us to write to.
void discard_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
}

// Validates a shape and type and computes the tensor's size in bytes.
PlannedTensor plan_tensor(const std::string& where, std::string name, TensorType type,
                          std::span<const int64_t> ne) {
  const auto traits = type_traits(type);
  if (!traits) fail(where, ": tensor '", name, "': unknown type ", static_cast<uint32_t>(type));
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    fail(where, ": tensor '", name, "': ", ne.size(), " dimensions (must be 1..", kMaxDims, ")");
  }
  int64_t rows = 1;
  int64_t elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) fail(where, ": tensor '", name, "': dimension ", d, " is ", ne[d]);
    if (elements > std::numeric_limits<int64_t>::max() / ne[d]) {
      fail(where, ": tensor '", name, "': the element count overflows");
    }
    elements *= ne[d];
    if (d > 0) rows *= ne[d];
  }
  const auto row = row_bytes(type, ne[0]);
  if (!row) {
    fail(where, ": tensor '", name, "': row length ", ne[0], " is not a multiple of ", traits->name,
         "'s block size ", traits->block_size);
  }
  if (static_cast<uint64_t>(rows) > std::numeric_limits<uint64_t>::max() / *row) {
    fail(where, ": tensor '", name, "': the byte size overflows");
  }
  return PlannedTensor{
      std::move(name), type, {ne.begin(), ne.end()}, *row * static_cast<uint64_t>(rows), 0};
}

// Appends little-endian encodings to a byte vector.
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void zeros(uint64_t n) { out_.insert(out_.end(), n, uint8_t{0}); }

 private:
  std::vector<uint8_t>& out_;
};

// Encodes `v`, checking that its payload matches its declared type and fits its range.
// `fail_with` throws with the context of the key being written.
template <typename Fail>
void encode_value(Encoder& e, const Value& v, int depth, const Fail& fail_with) {
  auto uint_in = [&](uint64_t max) {
    const auto u = v.as_uint();
    if (!u || *u > max) fail_with(str(value_type_name(v.type), " value out of range"));
    return *u;
  };
  auto int_in = [&](int64_t min, int64_t max) {
    const auto i = v.as_int();
    if (!i || *i < min || *i > max) fail_with(str(value_type_name(v.type), " value out of range"));
    return *i;
  };
  auto number = [&] {
    if (!std::holds_alternative<double>(v.data)) fail_with("float value is not a double");
    return std::get<double>(v.data);
  };
  switch (v.type) {
    case ValueType::UINT8:
      return e.put<uint8_t>(uint_in(UINT8_MAX));
    case ValueType::UINT16:
      return e.put<uint16_t>(uint_in(UINT16_MAX));
    case ValueType::UINT32:
      return e.put<uint32_t>(uint_in(UINT32_MAX));
    case ValueType::UINT64:
      return e.put<uint64_t>(uint_in(UINT64_MAX));
    case ValueType::INT8:
      return e.put<int8_t>(int_in(INT8_MIN, INT8_MAX));
    case ValueType::INT16:
      return e.put<int16_t>(int_in(INT16_MIN, INT16_MAX));
    case ValueType::INT32:
      return e.put<int32_t>(int_in(INT32_MIN, INT32_MAX));
    case ValueType::INT64:
      return e.put<int64_t>(int_in(INT64_MIN, INT64_MAX));
    case ValueType::FLOAT32:
      return e.put<float>(static_cast<float>(number()));
    case ValueType::FLOAT64:
      return e.put<double>(number());
    case ValueType::BOOL: {
      const auto b = v.as_bool();
      if (!b) fail_with("bool value is not a bool");
      return e.put<uint8_t>(*b ? 1 : 0);
    }
    case ValueType::STRING: {
      const std::string* s = v.as_string();
      if (s == nullptr) fail_with("string value is not a string");
      return e.string(*s);
    }
    case ValueType::ARRAY: {
      const Array* a = v.as_array();
      if (a == nullptr) fail_with("array value is not an array");
      if (static_cast<uint32_t>(a->element_type) > static_cast<uint32_t>(ValueType::FLOAT64)) {
        fail_with(str("unknown array element type ", static_cast<uint32_t>(a->element_type)));
      }
      if (a->element_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
        fail_with(str("arrays nested more than ", kMaxArrayDepth, " deep"));
      }
      e.put<uint32_t>(static_cast<uint32_t>(a->element_type));
      e.put<uint64_t>(a->items.size());
      for (const Value& item : a->items) {
        if (item.type != a->element_type) {
          fail_with(str("array of ", value_type_name(a->element_type), " holds a ",
                        value_type_name(item.type)));
        }
        encode_value(e, item, depth + 1, fail_with);
      }
      return;
    }
  }
  fail_with(str("unknown value type ", static_cast<uint32_t>(v.type)));
}

void encode_metadata(Encoder& e, const std::string& where, const std::string& key,
                     const Value& value) {
  auto fail_with = [&](const std::string& what) { fail(where, ": metadata '", key, "': ", what); };
  e.string(key);
  e.put<uint32_t>(static_cast<uint32_t>(value.type));
  encode_value(e, value, 0, fail_with);
}

// Ensures general.alignment is present when it differs from the default, and agrees otherwise.
void reconcile_alignment(const std::string& where,
                         std::vector<std::pair<std::string, Value>>& metadata, uint64_t alignment) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    if (value.as_uint() != alignment) {
      fail(where, ": metadata 'general.alignment' disagrees with the writer's alignment ",
           alignment);
    }
    return;
  }
  if (alignment != kDefaultAlignment) {
    metadata.emplace_back("general.alignment", Value::u32(static_cast<uint32_t>(alignment)));
  }
}

// Assigns each tensor its aligned offset in the data section.
void assign_offsets(const std::string& where, std::vector<PlannedTensor>& tensors,
                    uint64_t alignment) {
  uint64_t next = 0;
  for (PlannedTensor& t : tensors) {
    t.offset = next;
    const uint64_t end = next + t.bytes;
    if (end < next || end + padding_for(end, alignment) < end) {
      fail(where, ": tensor '", t.name, "': the data section size overflows");
    }
    next = end + padding_for(end, alignment);
  }
}

// The header: magic, version, counts, metadata, tensor infos, padding to the alignment.
std::vector<uint8_t> encode_header(const std::string& where,
                                   const std::vector<std::pair<std::string, Value>>& metadata,
                                   const std::vector<PlannedTensor>& tensors, uint64_t alignment) {
  std::vector<uint8_t> out;
  Encoder e(out);
  e.put<uint32_t>(0x46554747u);  // "GGUF"
  e.put<uint32_t>(kVersion);
  e.put<uint64_t>(tensors.size());
  e.put<uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) encode_metadata(e, where, key, value);
  for (const PlannedTensor& t : tensors) {
    e.string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) e.put<int64_t>(n);
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(t.offset);
  }
  e.zeros(padding_for(out.size(), alignment));
  return out;
}

}  // namespace

// ---- Writer

struct Writer::Impl {
  enum class State { kAdding, kWriting, kFinished };

  std::string path;
  uint64_t alignment;
  std::FILE* file = nullptr;
  State state = State::kAdding;
  std::vector<std::pair<std::string, Value>> metadata;
  std::set<std::string, std::less<>> keys;
  std::vector<PlannedTensor> tensors;
  std::set<std::string, std::less<>> tensor_names;
  size_t current = 0;         // index of the tensor being written
  uint64_t current_done = 0;  // bytes of it written so far

  void write(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, file) != n) {
      fail(path, ": write failed: ", std::strerror(errno));
    }
  }
  void write_zeros(uint64_t n) {
    static const uint8_t kZeros[256] = {};
    while (n > 0) {
      const size_t k = n < sizeof(kZeros) ? static_cast<size_t>(n) : sizeof(kZeros);
      write(kZeros, k);
      n -= k;
    }
  }
};

Writer::Writer(const std::string& path, uint64_t alignment) : impl_(std::make_unique<Impl>()) {
  check_alignment(path, alignment);
  impl_->path = path;
  impl_->alignment = alignment;
  impl_->file = std::fopen(path.c_str(), "wb");
  if (impl_->file == nullptr) fail(path, ": cannot create: ", std::strerror(errno));
}

Writer::~Writer() {
  // An unfinished file is not a valid GGUF; do not leave it behind to be mistaken for one.
  if (impl_ && impl_->file != nullptr) {
    std::fclose(impl_->file);
    discard_file(impl_->path);
  }
}

void Writer::add(std::string key, Value value) {
  Impl& w = *impl_;
  if (w.state != Impl::State::kAdding)
    fail(w.path, ": metadata '", key, "' added after begin_data()");
  if (w.keys.count(key) != 0) fail(w.path, ": duplicate metadata key '", key, "'");
  std::vector<uint8_t> scratch;  // validates the value now, so the error points at this call
  Encoder e(scratch);
  encode_metadata(e, w.path, key, value);
  w.keys.insert(key);
  w.metadata.emplace_back(std::move(key), std::move(value));
}

void Writer::add_tensor(std::string name, TensorType type, std::span<const int64_t> ne) {
  Impl& w = *impl_;
  if (w.state != Impl::State::kAdding)
    fail(w.path, ": tensor '", name, "' added after begin_data()");
  if (w.tensor_names.count(name) != 0) fail(w.path, ": duplicate tensor name '", name, "'");
  w.tensor_names.insert(name);
  w.tensors.push_back(plan_tensor(w.path, std::move(name), type, ne));
}

void Writer::begin_data() {
  Impl& w = *impl_;
  if (w.state != Impl::State::kAdding) fail(w.path, ": begin_data() called twice");
  reconcile_alignment(w.path, w.metadata, w.alignment);
  assign_offsets(w.path, w.tensors, w.alignment);
  const std::vector<uint8_t> header = encode_header(w.path, w.metadata, w.tensors, w.alignment);
  w.write(header.data(), header.size());
  w.state = Impl::State::kWriting;
}

uint64_t Writer::next_tensor_bytes() const {
  const Impl& w = *impl_;
  if (w.current >= w.tensors.size())
    fail(w.path, ": all ", w.tensors.size(), " tensors are written");
  return w.tensors[w.current].bytes;
}

void Writer::write_tensor_part(std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (w.state == Impl::State::kAdding) begin_data();
  if (w.state == Impl::State::kFinished) fail(w.path, ": tensor data written after finish()");
  if (w.current >= w.tensors.size()) {
    fail(w.path, ": ", bytes.size(), " more bytes of tensor data but all ", w.tensors.size(),
         " tensors are written");
  }
  const PlannedTensor& t = w.tensors[w.current];
  const uint64_t left = t.bytes - w.current_done;
  if (bytes.size() > left) {
    fail(w.path, ": tensor '", t.name, "': ", bytes.size(), " bytes given but only ", left,
         " of its ", t.bytes, " are left to write");
  }
  w.write(bytes.data(), bytes.size());
  w.current_done += bytes.size();
  if (w.current_done == t.bytes) {
    w.write_zeros(padding_for(t.bytes, w.alignment));
    ++w.current;
    w.current_done = 0;
  }
}

void Writer::write_tensor_data(std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (w.state == Impl::State::kAdding) begin_data();
  if (w.current < w.tensors.size()) {
    const PlannedTensor& t = w.tensors[w.current];
    if (w.current_done != 0 || bytes.size() != t.bytes) {
      fail(w.path, ": tensor '", t.name, "' needs exactly ", t.bytes - w.current_done,
           " more bytes, got ", bytes.size());
    }
  }
  write_tensor_part(bytes);
}

void Writer::finish() {
  Impl& w = *impl_;
  if (w.state == Impl::State::kFinished) fail(w.path, ": finish() called twice");
  if (w.state == Impl::State::kAdding) begin_data();
  if (w.current < w.tensors.size()) {
    const PlannedTensor& t = w.tensors[w.current];
    fail(w.path, ": finish() with ", w.tensors.size() - w.current, " of ", w.tensors.size(),
         " tensors incomplete; tensor '", t.name, "' has ", w.current_done, " of ", t.bytes,
         " bytes");
  }
  std::FILE* f = std::exchange(w.file, nullptr);
  const bool flushed = std::fflush(f) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) {
    discard_file(w.path);
    fail(w.path, ": write failed: ", std::strerror(flushed ? errno : flush_errno));
  }
  w.state = Impl::State::kFinished;
}

// ---- in memory

std::vector<uint8_t> write_to_memory(const std::vector<std::pair<std::string, Value>>& metadata,
                                     const std::vector<TensorData>& tensors, uint64_t alignment) {
  const std::string where = "<memory>";
  check_alignment(where, alignment);
  std::set<std::string, std::less<>> keys;
  for (const auto& kv : metadata) {
    if (!keys.insert(kv.first).second) fail(where, ": duplicate metadata key '", kv.first, "'");
  }
  std::vector<PlannedTensor> planned;
  std::set<std::string, std::less<>> names;
  for (const TensorData& t : tensors) {
    if (!names.insert(t.name).second) fail(where, ": duplicate tensor name '", t.name, "'");
    planned.push_back(plan_tensor(where, t.name, t.type, t.ne));
    if (planned.back().bytes != t.bytes.size()) {
      fail(where, ": tensor '", t.name, "' needs ", planned.back().bytes, " bytes, got ",
           t.bytes.size());
    }
  }
  auto meta = metadata;
  reconcile_alignment(where, meta, alignment);
  assign_offsets(where, planned, alignment);
  std::vector<uint8_t> out = encode_header(where, meta, planned, alignment);
  for (const TensorData& t : tensors) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    out.insert(out.end(), padding_for(out.size(), alignment), uint8_t{0});
  }
  return out;
}

}  // namespace rl::gguf
