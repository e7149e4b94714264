#include "engine/engine.h"
#include "util/error.h"

namespace rl::engine {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32:
      return "f32";
    case KvType::F16:
      return "f16";
    case KvType::BF16:
      return "bf16";
  }
  return "?";
}

KvType parse_kv_type(const std::string& name) {
  if (name == "f32") return KvType::F32;
  if (name == "f16") return KvType::F16;
  if (name == "bf16") return KvType::BF16;
  fail("unknown KV cache type '", name, "' (expected f32, f16 or bf16)");
}

void Session::fill_random_state(int64_t, uint64_t) {
  fail("this backend cannot fill its state with random values");
}

int kv_type_bytes(KvType t) {
  return t == KvType::F32 ? 4 : 2;
}

Backend parse_backend(const std::string& name) {
  if (name == "auto") return Backend::Auto;
  if (name == "cpu") return Backend::Cpu;
  if (name == "cuda") return Backend::Cuda;
  fail("unknown backend '", name, "' (expected auto, cpu or cuda)");
}

}  // namespace rl::engine
