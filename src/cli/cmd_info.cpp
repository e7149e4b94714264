// redlite info: describes any valid GGUF file (metadata, tensors) and, for a qwen3next model,
// its hyperparameters, layouts, bytes read per decoded token and cache sizes; or dumps one
// tensor as float32.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/common.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "util/error.h"

namespace rl::cli {
namespace {

using Json = nlohmann::ordered_json;
constexpr size_t kMaxString = 80;

// The first max bytes of s, cut at a UTF-8 character boundary.
std::string utf8_prefix(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

Json scalar_json(const gguf::Value& v) {
  if (const std::string* s = v.as_string()) return utf8_prefix(*s, kMaxString);
  if (v.type == gguf::ValueType::BOOL) return v.as_bool().value_or(false);
  if (v.type == gguf::ValueType::FLOAT32 || v.type == gguf::ValueType::FLOAT64) {
    return v.as_float().value_or(0);
  }
  if (auto i = v.as_int()) return *i;
  if (auto u = v.as_uint()) return *u;
  return nullptr;
}

Json metadata_json(const gguf::File& file) {
  Json list = Json::array();
  for (const auto& [key, value] : file.metadata()) {
    Json e = {{"key", key}, {"type", gguf::value_type_name(value.type)}};
    if (const gguf::Array* arr = value.as_array()) {
      e["element_type"] = gguf::value_type_name(arr->element_type);
      e["length"] = arr->items.size();
    } else {
      e["value"] = scalar_json(value);
      if (const std::string* s = value.as_string(); s && s->size() > kMaxString) {
        e["truncated_from"] = s->size();
      }
    }
    list.push_back(std::move(e));
  }
  return list;
}

Json tensors_json(const gguf::File& file, bool list_all) {
  uint64_t total = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // name -> (count, bytes)
  Json all = Json::array();
  for (const auto& t : file.tensors()) {
    total += t.bytes;
    auto& [count, bytes] = by_type[std::string(gguf::type_name(t.type))];
    ++count;
    bytes += t.bytes;
    if (list_all) {
      all.push_back({{"name", t.name},
                     {"type", gguf::type_name(t.type)},
                     {"ne", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                     {"bytes", t.bytes}});
    }
  }
  Json types = Json::object();
  for (const auto& [name, cb] : by_type) types[name] = {{"count", cb.first}, {"bytes", cb.second}};
  Json j = {{"count", file.tensors().size()}, {"bytes", total}, {"by_type", types}};
  if (list_all) j["list"] = std::move(all);
  return j;
}

Json config_json(const model::Config& c) {
  std::vector<int> attention;
  for (int i = 0; i < c.n_layer; ++i) {
    if (c.is_attention(i)) attention.push_back(i);
  }
  return {{"name", c.name},
          {"n_vocab", c.n_vocab},
          {"n_embd", c.n_embd},
          {"n_layer", c.n_layer},
          {"n_nextn", c.n_nextn},
          {"context_length", c.context_length},
          {"attention_layers", attention},
          {"n_deltanet_layers", c.n_deltanet_layers()},
          {"n_head", c.n_head},
          {"n_head_kv", c.n_head_kv},
          {"head_dim", c.head_dim},
          {"n_rot", c.n_rot},
          {"rope_theta", c.rope_theta},
          {"rms_eps", c.rms_eps},
          {"ssm_conv_kernel", c.ssm_conv_kernel},
          {"ssm_head_dim", c.ssm_head_dim},
          {"ssm_n_k_heads", c.ssm_n_k_heads},
          {"ssm_n_v_heads", c.ssm_n_v_heads},
          {"n_expert", c.n_expert},
          {"n_expert_used", c.n_expert_used},
          {"expert_ff", c.expert_ff},
          {"shexp_ff", c.shexp_ff},
          {"dense_ff", c.dense_ff}};
}

Json layout_json(const model::Weights& w) {
  std::string deltanet = "none", gate_up = "separate";
  for (const auto& l : w.layers) {
    if (!l.is_attention) {
      deltanet = l.deltanet.layout == model::DeltaNetLayout::Split ? "split attn_qkv + attn_gate"
                                                                   : "fused ssm_in (legacy)";
    }
    if (l.experts.fused_gate_up) gate_up = "fused ffn_gate_up_exps";
  }
  return {{"deltanet", deltanet},
          {"experts_gate_up", gate_up},
          {"output", w.tied_output ? "tied to token_embd" : "separate output.weight"},
          {"mtp_tensors", w.mtp.size()}};
}

Json model_json(const gguf::File& file) {
  Json j;
  const gguf::Value* arch = file.find("general.architecture");
  j["architecture"] = arch && arch->as_string() ? Json(*arch->as_string()) : Json(nullptr);
  std::optional<model::Config> config;
  try {
    config = model::read_config(file);
  } catch (const model::ModelError& e) {
    j["loadable"] = false;
    j["problems"] = e.problems();
    return j;
  }
  const model::Config& c = *config;
  j["config"] = config_json(c);
  j["kv_cache_bytes_per_position"] = {{"f32", c.kv_bytes_per_position(4)},
                                      {"bf16", c.kv_bytes_per_position(2)}};
  j["deltanet_state_bytes"] = c.recurrent_state_bytes();
  try {
    const model::Weights w = model::bind_weights(file, c);
    const model::DecodeBytes b = model::decode_weight_breakdown(c, w);
    j["loadable"] = true;
    j["layout"] = layout_json(w);
    j["decode_weight_bytes_per_token"] = {{"total", b.total()},
                                          {"embedding_row", b.embedding_row},
                                          {"output_head", b.output_head},
                                          {"routers", b.routers},
                                          {"routed_experts", b.routed_experts},
                                          {"shared_experts", b.shared_experts},
                                          {"attention", b.attention},
                                          {"deltanet", b.deltanet},
                                          {"norms", b.norms}};
  } catch (const model::ModelError& e) {
    j["loadable"] = false;
    j["problems"] = e.problems();
  }
  return j;
}

// ---- text rendering of the JSON summary ---------------------------------------------------

std::string human(uint64_t bytes) {
  char buf[64];
  if (bytes < 10000) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < 10'000'000) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  } else if (bytes < 10'000'000'000ull) {
    std::snprintf(buf, sizeof buf, "%.1f MB (%.1f MiB)", bytes / 1e6, bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB (%.2f GiB)", bytes / 1e9, bytes / 1073741824.0);
  }
  return buf;
}

// The shortest decimal that reads back as the same float32 (1e-06, not 9.99999997e-07).
std::string shortest_float(float v) {
  char buf[32];
  for (int precision = 6; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch < 0x20)
      out += '?';
    else
      out += static_cast<char>(ch);
  }
  return out;
}

void print_text(const Json& j) {
  std::printf("file       %s\n", j["file"].get<std::string>().c_str());
  std::printf("           %s, GGUF v%d, alignment %d\n", human(j["size"]).c_str(),
              j["version"].get<int>(), j["alignment"].get<int>());
  std::printf("metadata   %zu keys\n", j["metadata"].size());
  for (const Json& e : j["metadata"]) {
    std::string value;
    if (e.contains("length")) {
      value = "[" + e["element_type"].get<std::string>() + " x " +
              std::to_string(e["length"].get<uint64_t>()) + "]";
    } else if (e["value"].is_string()) {
      value = printable(e["value"].get<std::string>());
      if (e.contains("truncated_from")) {
        value += "... (" + std::to_string(e["truncated_from"].get<uint64_t>()) + " bytes)";
      }
    } else if (e["type"] == "float32") {
      value = shortest_float(e["value"].get<float>());
    } else {
      value = e["value"].dump();
    }
    std::printf("  %-46s %-8s %s\n", e["key"].get<std::string>().c_str(),
                e["type"].get<std::string>().c_str(), value.c_str());
  }
  const Json& t = j["tensors"];
  std::printf("tensors    %zu, %s\n", t["count"].get<size_t>(), human(t["bytes"]).c_str());
  for (const auto& [type, cb] : t["by_type"].items()) {
    std::printf("  %-8s %6llu  %s\n", type.c_str(), cb["count"].get<unsigned long long>(),
                human(cb["bytes"]).c_str());
  }
  if (t.contains("list")) {
    for (const Json& e : t["list"]) {
      std::string shape;
      for (const auto& n : e["ne"]) shape += (shape.empty() ? "" : ", ") + n.dump();
      std::printf("  %-44s %-8s {%s} %s\n", e["name"].get<std::string>().c_str(),
                  e["type"].get<std::string>().c_str(), shape.c_str(), human(e["bytes"]).c_str());
    }
  }
  const Json& m = j["model"];
  if (!m["loadable"].get<bool>()) {
    std::printf("model      not a loadable qwen3next model:\n");
    for (const Json& p : m["problems"]) std::printf("  %s\n", p.get<std::string>().c_str());
  } else {
    std::printf("model      loadable qwen3next model\n");
  }
  if (!m.contains("config")) return;
  const Json& c = m["config"];
  auto i = [&](const char* k) { return c[k].get<long long>(); };
  std::string attn;
  for (const auto& l : c["attention_layers"]) attn += (attn.empty() ? "" : ",") + l.dump();
  std::printf("  name         %s\n", c["name"].get<std::string>().c_str());
  std::printf("  layers       %lld: attention at %s, %lld Gated DeltaNet; MTP blocks %lld\n",
              i("n_layer"), attn.c_str(), i("n_deltanet_layers"), i("n_nextn"));
  std::printf("  sizes        hidden %lld, vocab %lld, context %lld\n", i("n_embd"), i("n_vocab"),
              i("context_length"));
  std::printf(
      "  attention    %lld q heads, %lld kv heads, head dim %lld, rope %lld dims theta %g, "
      "rms eps %g\n",
      i("n_head"), i("n_head_kv"), i("head_dim"), i("n_rot"), c["rope_theta"].get<double>(),
      c["rms_eps"].get<double>());
  std::printf("  deltanet     %lld key heads, %lld value heads, head dim %lld, conv kernel %lld\n",
              i("ssm_n_k_heads"), i("ssm_n_v_heads"), i("ssm_head_dim"), i("ssm_conv_kernel"));
  std::printf("  moe          %lld experts, top-%lld, expert ff %lld, shared expert ff %lld\n",
              i("n_expert"), i("n_expert_used"), i("expert_ff"), i("shexp_ff"));
  if (m.contains("layout")) {
    const Json& l = m["layout"];
    std::printf("  layout       DeltaNet %s; routed gate/up %s; output %s; %zu MTP tensors\n",
                l["deltanet"].get<std::string>().c_str(),
                l["experts_gate_up"].get<std::string>().c_str(),
                l["output"].get<std::string>().c_str(), l["mtp_tensors"].get<size_t>());
  }
  const Json& kv = m["kv_cache_bytes_per_position"];
  std::printf("  KV cache     %s per position in f32, %s in bf16\n", human(kv["f32"]).c_str(),
              human(kv["bf16"]).c_str());
  std::printf("  DeltaNet     state %s (delta + conv, f32)\n",
              human(m["deltanet_state_bytes"]).c_str());
  if (m.contains("decode_weight_bytes_per_token")) {
    const Json& b = m["decode_weight_bytes_per_token"];
    std::printf("  decode       %s of weights read per token (%llu B):\n",
                human(b["total"]).c_str(), b["total"].get<unsigned long long>());
    for (const auto& [k, v] : b.items()) {
      if (k != "total") std::printf("    %-16s %s\n", k.c_str(), human(v).c_str());
    }
  }
}

// Writes one tensor as float32, row by row.
void dump_tensor(const gguf::File& file, const std::string& name, const std::string& out) {
  const gguf::TensorInfo* t = file.find_tensor(name);
  if (!t) fail("no tensor '", name, "' in ", file.path(), " (redlite info --tensors lists them)");
  if (!quant::is_supported(t->type)) {
    fail("tensor ", name, " has type ", gguf::type_name(t->type), ", which Red Lite cannot decode");
  }
  const auto row_bytes = gguf::row_bytes(t->type, t->ne[0]);
  if (!row_bytes) fail("tensor ", name, ": rows do not fit type ", gguf::type_name(t->type));
  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) fail(out, ": cannot open for writing: ", std::strerror(errno));
  std::vector<float> row(static_cast<size_t>(t->ne[0]));
  bool ok = true;
  for (int64_t r = 0; r < t->n_rows() && ok; ++r) {
    quant::dequantize_row(t->type, t->data + static_cast<uint64_t>(r) * *row_bytes, row.data(),
                          t->ne[0]);
    ok = std::fwrite(row.data(), sizeof(float), row.size(), f) == row.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) fail(out, ": write failed: ", std::strerror(errno));
  std::fprintf(stderr, "wrote %s: %lld float32 values (%s, %lld rows of %lld) to %s\n",
               name.c_str(), static_cast<long long>(t->n_elements()),
               std::string(gguf::type_name(t->type)).c_str(), static_cast<long long>(t->n_rows()),
               static_cast<long long>(t->ne[0]), out.c_str());
}

}  // namespace

int cmd_info(const Args& args) {
  CLI::App app{
      "Describes a GGUF file: metadata, tensors and, for a qwen3next model, its "
      "hyperparameters, bytes read per decoded token and cache sizes.",
      "info"};
  std::string path, dump, out;
  bool json = false, list_tensors = false;
  app.add_option("file", path, "the GGUF file")->required();
  app.add_flag("--json", json, "print the summary as JSON");
  app.add_flag("--tensors", list_tensors, "list every tensor (name, type, shape, bytes)");
  auto* dump_opt = app.add_option(
      "--dump", dump, "write tensor TENSOR dequantised to float32 (raw little-endian, ggml order)");
  auto* out_opt = app.add_option("--out", out, "the file --dump writes");
  dump_opt->needs(out_opt);
  out_opt->needs(dump_opt);
  if (auto rc = parse_args(app, args)) return *rc;

  const gguf::File file = gguf::File::open(path);
  if (!dump.empty()) {
    dump_tensor(file, dump, out);
    return 0;
  }
  Json j = {{"file", path},
            {"size", file.file_size()},
            {"version", file.version()},
            {"alignment", file.alignment()},
            {"metadata", metadata_json(file)},
            {"tensors", tensors_json(file, list_tensors)},
            {"model", model_json(file)}};
  if (json) {
    std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    print_text(j);
  }
  return 0;
}

}  // namespace rl::cli
