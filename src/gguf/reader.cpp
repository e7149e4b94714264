// The GGUF reader. Every number taken from the file is checked before it is used: against the
// bytes left (so a declared count can never size an allocation beyond what the file could hold),
// against overflow, and against the rules of the format. Errors name the file, the field being
// read and the byte offset where that field starts.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "gguf/gguf.h"
#include "util/error.h"

namespace rl::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 64;  // nested arrays deeper than this are rejected (stack safety)
// A Value takes ~48 bytes for a 1-byte array element in the file: capping the number of array
// elements bounds memory (~1 GiB) however large the file. Real vocabularies need a few million
// (tokens, merges, scores and types of a 262k vocab).
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 24;

// Smallest encoding of one value of each type: a bound on how many could fit in the bytes left.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;  // the length
    case ValueType::ARRAY:
      return 12;  // element type + count
  }
  return 1;
}

// A key or tensor name as it appears in an error message: control bytes, quotes and backslashes
// escaped (a NUL would cut the message short), and long names shortened.
std::string printable(std::string_view s) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      static const char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxShown) out += str("... (", s.size(), " bytes)");
  return out;
}

bool is_known_value_type(uint32_t id) {
  return id <= static_cast<uint32_t>(ValueType::FLOAT64);
}

// Reads little-endian fields from [data, data + size) with bounds checks. It also tracks what is
// being read (section, index, name, part, array element path) so that an error can say where.
class Parser {
 public:
  Parser(const std::string& file, const uint8_t* data, uint64_t size)
      : file_(file), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  // Describes the field read next. `name` must outlive the reads it describes.
  void at(std::string_view section, std::string_view part, uint64_t index = kNoIndex,
          std::string_view name = {}) {
    section_ = section;
    part_ = part;
    index_ = index;
    name_ = name;
    field_start_ = pos_;
    element_path_.clear();
  }
  void mark_field_start() { field_start_ = pos_; }
  uint64_t field_start() const { return field_start_; }

  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
    std::string field(section_);
    if (index_ != kNoIndex) field += str(" ", index_);
    if (!name_.empty()) field += str(" ('", printable(name_), "')");
    if (!part_.empty()) field += str(" ", part_);
    for (uint64_t i : element_path_) field += str("[", i, "]");
    fail(file_, ": ", field, " at byte ", offset, ": ", what);
  }
  [[noreturn]] void fail_here(const std::string& what) const { fail_at(field_start_, what); }

  void push_element(uint64_t i) { element_path_.push_back(i); }
  void set_element(uint64_t i) { element_path_.back() = i; }
  void pop_element() { element_path_.pop_back(); }

  const uint8_t* take(uint64_t n) {
    if (n > left()) {
      fail_at(pos_, str("needs ", n, " bytes but the file ends at byte ", size_));
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read() {
    T v;
    std::memcpy(&v, take(sizeof(T)),
                sizeof(T));  // GGUF is little-endian, as is every host we run on
    return v;
  }
  uint8_t u8() { return read<uint8_t>(); }
  uint32_t u32() { return read<uint32_t>(); }
  uint64_t u64() { return read<uint64_t>(); }
  int64_t i64() { return read<int64_t>(); }

  std::string string() {
    const uint64_t length_at = pos_;
    const uint64_t n = u64();
    if (n > left()) {
      fail_at(length_at, str("string length ", n, " exceeds the ", left(), " bytes left"));
    }
    const uint8_t* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

  // Checks that `count` items of at least `min_size` bytes each could fit in what is left.
  void check_count_fits(uint64_t count, uint64_t min_size, uint64_t count_at,
                        std::string_view what) const {
    if (count > left() / min_size) {
      fail_at(count_at, str(what, " ", count, " cannot fit in the ", left(),
                            " bytes left (each needs at least ", min_size, ")"));
    }
  }

  void count_array_elements(uint64_t count, uint64_t count_at) {
    array_elements_ += count;  // no overflow: each count was checked against the file size
    if (array_elements_ > kMaxArrayElements) {
      fail_at(count_at, str("more than ", kMaxArrayElements, " array elements in the metadata"));
    }
  }

  static constexpr uint64_t kNoIndex = std::numeric_limits<uint64_t>::max();

 private:
  const std::string& file_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string_view section_;
  std::string_view part_;
  uint64_t index_ = kNoIndex;
  std::string_view name_;
  uint64_t field_start_ = 0;
  std::vector<uint64_t> element_path_;
  uint64_t array_elements_ = 0;
};

Value read_value(Parser& p, ValueType type, int depth);

Array read_array(Parser& p, int depth) {
  const uint64_t type_at = p.pos();
  const uint32_t element_id = p.u32();
  if (!is_known_value_type(element_id)) {
    p.fail_at(type_at, str("unknown array element type ", element_id));
  }
  const auto element_type = static_cast<ValueType>(element_id);
  if (element_type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
    p.fail_at(type_at, str("arrays nested more than ", kMaxArrayDepth, " deep"));
  }
  const uint64_t count_at = p.pos();
  const uint64_t count = p.u64();
  p.check_count_fits(count, min_encoded_size(element_type), count_at, "array length");
  p.count_array_elements(count, count_at);
  Array array{element_type, {}};
  array.items.reserve(count);
  p.push_element(0);
  for (uint64_t i = 0; i < count; ++i) {
    p.set_element(i);
    array.items.push_back(read_value(p, element_type, depth + 1));
  }
  p.pop_element();
  return array;
}

Value read_value(Parser& p, ValueType type, int depth) {
  const uint64_t at = p.pos();
  switch (type) {
    case ValueType::UINT8:
      return {type, uint64_t{p.u8()}};
    case ValueType::INT8:
      return {type, int64_t{p.read<int8_t>()}};
    case ValueType::UINT16:
      return {type, uint64_t{p.read<uint16_t>()}};
    case ValueType::INT16:
      return {type, int64_t{p.read<int16_t>()}};
    case ValueType::UINT32:
      return {type, uint64_t{p.u32()}};
    case ValueType::INT32:
      return {type, int64_t{p.read<int32_t>()}};
    case ValueType::UINT64:
      return {type, p.u64()};
    case ValueType::INT64:
      return {type, p.i64()};
    case ValueType::FLOAT32:
      return {type, double{p.read<float>()}};
    case ValueType::FLOAT64:
      return {type, p.read<double>()};
    case ValueType::BOOL: {
      const uint8_t b = p.u8();
      if (b > 1) p.fail_at(at, str("bool value is ", int{b}, " (must be 0 or 1)"));
      return {type, b == 1};
    }
    case ValueType::STRING:
      return {type, p.string()};
    case ValueType::ARRAY:
      return {type, read_array(p, depth)};
  }
  p.fail_at(at, "unknown value type");  // unreachable: callers check the id
}

uint64_t align_up(uint64_t x, uint64_t alignment, bool* overflow) {
  const uint64_t rem = x % alignment;
  if (rem == 0) return x;
  const uint64_t pad = alignment - rem;
  *overflow = x > std::numeric_limits<uint64_t>::max() - pad;
  return *overflow ? 0 : x + pad;
}

}  // namespace

File File::open(const std::string& path) {
  File f;
  f.path_ = path;
  f.map_ = MappedFile(path);
  f.base_ = f.map_.data();
  f.size_ = f.map_.size();
  f.parse();
  return f;
}

File File::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  File f;
  f.path_ = name;
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

void File::parse() {
  Parser p(path_, base_, size_);

  // ---- header
  p.at("header", "magic");
  const uint8_t* magic = p.take(4);
  if (std::memcmp(magic, "GGUF", 4) != 0) p.fail_here("not a GGUF file (bad magic)");
  p.at("header", "version");
  version_ = p.u32();
  if (version_ == 1) {
    p.fail_here("GGUF version 1 is not supported (only v2 and v3); convert the model again");
  }
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000u || version_ == 0x03000000u;
    p.fail_here(swapped ? std::string("big-endian GGUF files are not supported")
                        : str("unsupported GGUF version ", version_, " (expected 2 or 3)"));
  }
  p.at("header", "tensor count");
  const uint64_t tensor_count_at = p.pos();
  const uint64_t n_tensors = p.u64();
  p.at("header", "metadata count");
  const uint64_t kv_count_at = p.pos();
  const uint64_t n_kv = p.u64();
  // A key (8-byte length), a type (4) and a value (>= 1); a name (8), n_dims (4), one dim (8),
  // a type (4) and an offset (8).
  p.check_count_fits(n_kv, 13, kv_count_at, "metadata count");
  p.at("header", "tensor count");
  p.check_count_fits(n_tensors, 32, tensor_count_at, "tensor count");

  // ---- metadata
  kv_.reserve(n_kv);
  kv_offsets_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    p.at("metadata", "key", i);
    std::string key = p.string();
    p.at("metadata", "value type", i, key);
    const uint32_t type_id = p.u32();
    if (!is_known_value_type(type_id)) p.fail_here(str("unknown value type ", type_id));
    if (auto it = kv_index_.find(key); it != kv_index_.end()) {
      p.fail_here(str("duplicate key (first defined by metadata ", it->second, ")"));
    }
    p.at("metadata", "value", i, key);
    const uint64_t value_at = p.pos();
    Value value = read_value(p, static_cast<ValueType>(type_id), 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
    kv_offsets_.push_back(value_at);
  }

  if (auto it = kv_index_.find("general.alignment"); it != kv_index_.end()) {
    const auto alignment = kv_[it->second].second.as_uint();
    const uint64_t at = kv_offsets_[it->second];
    p.at("metadata", "value", it->second, "general.alignment");
    if (!alignment) p.fail_at(at, "must be an unsigned integer");
    if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0) {
      p.fail_at(at, str("alignment ", *alignment, " is not a nonzero power of two"));
    }
    alignment_ = *alignment;
  } else {
    alignment_ = kDefaultAlignment;
  }

  // ---- tensor infos
  tensors_.reserve(n_tensors);
  std::vector<uint64_t> offset_fields;  // where each tensor's offset field is, for errors
  offset_fields.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    p.at("tensor info", "name", i);
    t.name = p.string();
    if (auto it = tensor_index_.find(t.name); it != tensor_index_.end()) {
      p.fail_here(str("duplicate tensor name (first used by tensor info ", it->second, ")"));
    }
    p.at("tensor info", "n_dims", i, t.name);
    const uint32_t n_dims = p.u32();
    if (n_dims == 0 || n_dims > kMaxDims) {
      p.fail_here(str("n_dims is ", n_dims, " (must be 1..", kMaxDims, ")"));
    }
    t.n_dims = static_cast<int>(n_dims);
    p.at("tensor info", "dims", i, t.name);
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const int64_t ne = p.i64();
      if (ne <= 0) p.fail_here(str("dimension ", d, " is ", ne));
      if (elements > std::numeric_limits<int64_t>::max() / ne) {
        p.fail_here(str("the element count overflows at dimension ", d));
      }
      elements *= ne;
      t.ne[d] = ne;
    }
    p.at("tensor info", "type", i, t.name);
    const uint32_t type_id = p.u32();
    const auto traits = type_traits(type_id);
    if (!traits) p.fail_here(str("unknown tensor type ", type_id));
    t.type = static_cast<TensorType>(type_id);
    if (t.ne[0] % traits->block_size != 0) {
      p.fail_here(str("row length ", t.ne[0], " is not a multiple of ", traits->name,
                      "'s block size ", traits->block_size));
    }
    const auto row = gguf::row_bytes(t.type, t.ne[0]);
    const auto rows = static_cast<uint64_t>(t.n_rows());  // <= the element count: no overflow
    if (!row || rows > std::numeric_limits<uint64_t>::max() / *row) {
      p.fail_here("the byte size overflows");
    }
    t.bytes = *row * rows;
    p.at("tensor info", "offset", i, t.name);
    offset_fields.push_back(p.pos());
    t.offset = p.u64();
    if (t.offset % alignment_ != 0) {
      p.fail_here(str("offset ", t.offset, " is not a multiple of the alignment ", alignment_));
    }
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // ---- data section
  bool overflow = false;
  data_offset_ = align_up(p.pos(), alignment_, &overflow);
  p.at("data section", "start");
  if (overflow) p.fail_here(str("aligning to ", alignment_, " overflows"));
  if (tensors_.empty()) {
    // Writers do not pad a file without tensors (llama.cpp's vocab files end right after the
    // metadata): the data section is then empty, at the end of the file.
    data_offset_ = std::min(data_offset_, size_);
    return;
  }
  if (data_offset_ > size_) {
    p.fail_here(str("the data section would start at byte ", data_offset_,
                    " but the file has only ", size_, " bytes"));
  }
  const uint64_t data_size = size_ - data_offset_;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      p.at("tensor info", "offset", i, t.name);
      p.fail_at(offset_fields[i], str("data of ", t.bytes, " bytes at data offset ", t.offset,
                                      " extends past the end of the file (data section holds ",
                                      data_size, " bytes from byte ", data_offset_, ")"));
    }
    t.data = base_ + data_offset_ + t.offset;
  }
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    return std::pair(tensors_[a].offset, a) < std::pair(tensors_[b].offset, b);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (cur.offset < prev.offset + prev.bytes) {
      p.at("tensor info", "offset", order[k], cur.name);
      p.fail_at(offset_fields[order[k]], str("data [", cur.offset, ", ", cur.offset + cur.bytes,
                                             ") overlaps tensor '", printable(prev.name), "' at [",
                                             prev.offset, ", ", prev.offset + prev.bytes, ")"));
    }
  }
}

// ---- accessors

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void File::fail_value(std::string_view key, const std::string& what) const {
  auto it = kv_index_.find(key);
  const size_t i = it->second;
  fail(path_, ": metadata ", i, " ('", printable(key), "') value at byte ", kv_offsets_[i], ": ",
       value_type_name(kv_[i].second.type), " ", what);
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (const std::string* s = v->as_string()) return *s;
  fail_value(key, "is not a string");
}

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto i = v->as_int()) return i;
  fail_value(key, "is not an integer in the range of int64");
}

std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto u = v->as_uint()) return u;
  fail_value(key, "is not a non-negative integer");
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto d = v->as_float()) return d;
  fail_value(key, "is not a number");
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (auto b = v->as_bool()) return b;
  fail_value(key, "is not a bool");
}

const Array* File::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return nullptr;
  if (const Array* a = v->as_array()) return a;
  fail_value(key, "is not an array");
}

uint64_t TensorInfo::row_bytes() const {
  return gguf::row_bytes(type, ne[0]).value_or(0);
}

}  // namespace rl::gguf
