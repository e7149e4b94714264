// libFuzzer target for the GGUF reader: any input must either parse into a File whose every
// accessor and tensor stays inside the buffer, or throw rl::Error. Anything else (a crash, a
// sanitizer report, another exception type, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "util/error.h"

namespace {

using rl::gguf::Array;
using rl::gguf::File;
using rl::gguf::Value;

uint64_t walk(const Value& v) {
  uint64_t sum = static_cast<uint64_t>(v.type);
  sum += v.as_int().value_or(0) + v.as_uint().value_or(0);
  sum += static_cast<uint64_t>(v.as_float().value_or(0.0) != 0.0) + v.as_bool().value_or(false);
  if (const std::string* s = v.as_string()) {
    for (char c : *s) sum += static_cast<unsigned char>(c);
  }
  if (const Array* a = v.as_array()) {
    for (const Value& item : a->items) {
      if (item.type != a->element_type) __builtin_trap();
      sum += walk(item);
    }
  }
  return sum;
}

// Calls a typed accessor; an rl::Error for a value of another type is expected.
template <typename F>
void try_accessor(const F& f) {
  try {
    f();
  } catch (const rl::Error&) {
  }
}

void touch(const File& f) {
  volatile uint64_t sink = f.version() + f.alignment() + f.data_offset() + f.file_size();
  for (const auto& kv : f.metadata()) {
    const std::string& key = kv.first;
    if (f.find(key) != &kv.second) __builtin_trap();
    sink = sink + walk(kv.second);
    try_accessor([&] { sink = sink + f.get_string(key).value_or("").size(); });
    try_accessor([&] { sink = sink + f.get_int(key).value_or(0); });
    try_accessor([&] { sink = sink + f.get_uint(key).value_or(0); });
    try_accessor([&] { sink = sink + (f.get_float(key).value_or(0) > 0); });
    try_accessor([&] { sink = sink + f.get_bool(key).value_or(false); });
    try_accessor([&] { sink = sink + (f.get_array(key) != nullptr); });
  }
  for (const rl::gguf::TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    if (t.n_dims < 1 || t.n_dims > rl::gguf::kMaxDims || t.n_elements() <= 0) __builtin_trap();
    if (t.bytes != t.row_bytes() * static_cast<uint64_t>(t.n_rows())) __builtin_trap();
    if (t.offset % f.alignment() != 0) __builtin_trap();
    uint64_t sum = rl::gguf::type_name(t.type).size();
    for (uint64_t i = 0; i < t.bytes; ++i) sum += t.data[i];  // ASan checks every byte
    sink = sink + sum;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const File f = File::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    touch(f);
  } catch (const rl::Error&) {
  }
  return 0;
}
