// Opens the shared GGUF files (written by gguf-py and ggml, not by us) and checks contents that
// /work/shared/testdata/README.md states, or that follow from how the data was generated.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "util/error.h"
#include "util/half.h"

namespace rl::gguf {
namespace {

std::string shared(const std::string& rel) {
  return std::string(RL_SHARED_DIR) + "/testdata/" + rel;
}

std::vector<std::string> strings(const Array* a) {
  std::vector<std::string> out;
  if (a == nullptr) return out;
  for (const Value& v : a->items) out.push_back(v.as_string() ? *v.as_string() : "<not a string>");
  return out;
}

template <typename T>
T load(const TensorInfo& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
  return v;
}

void expect_shape(const File& f, const std::string& name, TensorType type,
                  std::vector<int64_t> ne) {
  SCOPED_TRACE(name);
  const TensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, type) << type_name(t->type);
  EXPECT_EQ(t->n_dims, static_cast<int>(ne.size()));
  ne.resize(kMaxDims, 1);
  for (int d = 0; d < kMaxDims; ++d) EXPECT_EQ(t->ne[d], ne[d]) << "dim " << d;
}

// README §1: 15 types, T.q of type T and T.deq F32, all [2048, 4]; sizes per 256 values.
TEST(SharedFiles, Quants) {
  const File f = File::open(shared("quants/quants.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.file_size(), 652960u);
  const std::vector<std::string> types = {"f32",     "f16",    "bf16",    "q8_0",   "q4_0",
                                          "q4_K",    "q5_K",   "q6_K",    "q2_K",   "q3_K",
                                          "iq2_xxs", "iq2_xs", "iq3_xxs", "iq4_xs", "iq4_nl"};
  EXPECT_EQ(strings(f.get_array("quants.types")), types);
  EXPECT_EQ(strings(f.get_array("quants.imatrix_used_for")),
            (std::vector<std::string>{"iq2_xxs", "iq2_xs"}));
  EXPECT_EQ(f.get_string("quants.imatrix_tensor"), "imatrix");
  EXPECT_EQ(f.tensors().size(), 2 + 2 * types.size());
  expect_shape(f, "src", TensorType::F32, {2048, 4});
  expect_shape(f, "imatrix", TensorType::F32, {2048});

  // Bytes per 256 values, from the README (f32/f16/bf16 from the value size).
  const std::map<std::string, uint64_t> per256 = {
      {"f32", 1024},   {"f16", 512},   {"bf16", 512},   {"q8_0", 272},   {"q4_0", 144},
      {"q4_K", 144},   {"q5_K", 176},  {"q6_K", 210},   {"q2_K", 84},    {"q3_K", 110},
      {"iq2_xxs", 66}, {"iq2_xs", 74}, {"iq3_xxs", 98}, {"iq4_xs", 136}, {"iq4_nl", 144}};
  for (const std::string& name : types) {
    const auto type = type_from_name(name);
    ASSERT_TRUE(type.has_value()) << name;
    expect_shape(f, name + ".q", *type, {2048, 4});
    expect_shape(f, name + ".deq", TensorType::F32, {2048, 4});
    EXPECT_EQ(f.find_tensor(name + ".q")->bytes, per256.at(name) * 8 * 4) << name;
  }
  EXPECT_EQ(f.find_tensor("q4_K.q")->bytes, 4608u);  // stated in the README

  // The data pointers are right if the values relate as the generator made them: f32.q and
  // f32.deq are copies of src; f16/bf16 .deq are the exact widening of .q.
  const TensorInfo& src = *f.find_tensor("src");
  const TensorInfo& f32q = *f.find_tensor("f32.q");
  const TensorInfo& f32deq = *f.find_tensor("f32.deq");
  EXPECT_EQ(std::memcmp(src.data, f32q.data, src.bytes), 0);
  EXPECT_EQ(std::memcmp(src.data, f32deq.data, src.bytes), 0);
  const TensorInfo& f16q = *f.find_tensor("f16.q");
  const TensorInfo& f16deq = *f.find_tensor("f16.deq");
  const TensorInfo& bf16q = *f.find_tensor("bf16.q");
  const TensorInfo& bf16deq = *f.find_tensor("bf16.deq");
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < src.n_elements(); ++i) {
    const float x = load<float>(src, i);
    sum += x;
    sum2 += double(x) * x;
    ASSERT_EQ(float_to_bits(load<float>(f16deq, i)),
              float_to_bits(half_to_float(load<uint16_t>(f16q, i))))
        << i;
    ASSERT_EQ(float_to_bits(load<float>(bf16deq, i)), uint32_t{load<uint16_t>(bf16q, i)} << 16)
        << i;
  }
  // N(0,1) plus a few outliers: mean near 0, second moment a little above 1.
  const double n = static_cast<double>(src.n_elements());
  EXPECT_NEAR(sum / n, 0.0, 0.1);
  EXPECT_GT(sum2 / n, 0.9);
  EXPECT_LT(sum2 / n, 1.5);
  // imatrix is U(0.1, 2.0).
  const TensorInfo& imatrix = *f.find_tensor("imatrix");
  for (int64_t i = 0; i < imatrix.n_elements(); ++i) {
    const float w = load<float>(imatrix, i);
    ASSERT_TRUE(w >= 0.1f && w <= 2.0f) << i << " " << w;
  }
}

void expect_tiny_tokenizer(const File& f) {
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  const std::vector<std::string> tokens = strings(f.get_array("tokenizer.ggml.tokens"));
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[509], "<|endoftext|>");
  EXPECT_EQ(tokens[510], "<|im_start|>");
  EXPECT_EQ(tokens[511], "<|im_end|>");
  EXPECT_EQ(strings(f.get_array("tokenizer.ggml.merges")).size(), 253u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.bos_token_id"), 509u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.padding_token_id"), 509u);
  EXPECT_EQ(f.get_uint("tokenizer.ggml.eos_token_id"), 511u);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), false);
}

// README §4.1, tiny-f32: hidden 32, 8 layers, vocab 512, 16 experts of ff 32, shared ff 64.
TEST(SharedFiles, TinyF32) {
  const File f = File::open(shared("tiny/tiny-f32.gguf"));
  EXPECT_EQ(f.file_size(), 7034016u);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3next");
  EXPECT_EQ(f.get_uint("qwen3next.block_count"), 8u);
  EXPECT_EQ(f.get_uint("qwen3next.context_length"), 4096u);
  EXPECT_EQ(f.get_uint("qwen3next.embedding_length"), 32u);
  EXPECT_EQ(f.get_uint("qwen3next.attention.head_count"), 16u);
  EXPECT_EQ(f.get_uint("qwen3next.attention.head_count_kv"), 2u);
  EXPECT_EQ(f.get_uint("qwen3next.attention.key_length"), 256u);
  EXPECT_EQ(f.get_uint("qwen3next.attention.value_length"), 256u);
  EXPECT_EQ(f.get_uint("qwen3next.expert_count"), 16u);
  EXPECT_EQ(f.get_uint("qwen3next.expert_used_count"), 4u);
  EXPECT_EQ(f.get_uint("qwen3next.ssm.conv_kernel"), 4u);
  EXPECT_EQ(f.get_uint("qwen3next.ssm.state_size"), 128u);
  EXPECT_EQ(f.get_uint("qwen3next.full_attention_interval"), 4u);
  EXPECT_EQ(f.get_uint("qwen3next.rope.dimension_count"), 64u);
  EXPECT_EQ(f.get_float("qwen3next.rope.freq_base"), 1e7);
  EXPECT_EQ(f.get_float("qwen3next.attention.layer_norm_rms_epsilon"), double{1e-6f});
  EXPECT_EQ(f.get_uint("general.file_type"), 0u);
  expect_tiny_tokenizer(f);

  for (const TensorInfo& t : f.tensors()) EXPECT_EQ(t.type, TensorType::F32) << t.name;
  expect_shape(f, "token_embd.weight", TensorType::F32, {32, 512});
  expect_shape(f, "output.weight", TensorType::F32, {32, 512});
  expect_shape(f, "output_norm.weight", TensorType::F32, {32});
  expect_shape(f, "blk.3.attn_q.weight", TensorType::F32, {32, 16 * 256 * 2});
  expect_shape(f, "blk.7.attn_k.weight", TensorType::F32, {32, 2 * 256});
  expect_shape(f, "blk.3.attn_output.weight", TensorType::F32, {16 * 256, 32});
  expect_shape(f, "blk.0.attn_qkv.weight", TensorType::F32, {32, 2 * 2 * 128 + 4 * 128});
  expect_shape(f, "blk.0.ssm_conv1d.weight", TensorType::F32, {4, 1024});
  expect_shape(f, "blk.0.ssm_ba.weight", TensorType::F32, {32, 8});
  expect_shape(f, "blk.6.ffn_gate_exps.weight", TensorType::F32, {32, 32, 16});
  expect_shape(f, "blk.6.ffn_down_exps.weight", TensorType::F32, {32, 32, 16});
  expect_shape(f, "blk.0.ffn_gate_inp_shexp.weight", TensorType::F32, {32, 1});
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight"), nullptr);  // layer 0 is DeltaNet
  EXPECT_EQ(f.find_tensor("blk.8.attn_norm.weight"), nullptr);

  // ssm_a = -A with A log-uniform on [0.02, 8].
  for (int layer : {0, 1, 2, 4, 5, 6}) {
    const TensorInfo& a = *f.find_tensor("blk." + std::to_string(layer) + ".ssm_a");
    ASSERT_EQ(a.n_elements(), 4);
    for (int i = 0; i < 4; ++i) {
      const float v = load<float>(a, i);
      EXPECT_TRUE(v <= -0.02f && v >= -8.0f) << layer << " " << v;
    }
  }
  // Norm weights are stored as 1 + N(0, 0.1): mean near 1.
  const TensorInfo& norm = *f.find_tensor("output_norm.weight");
  double mean = 0;
  for (int i = 0; i < 32; ++i) mean += load<float>(norm, i) / 32.0;
  EXPECT_NEAR(mean, 1.0, 0.1);
}

TEST(SharedFiles, TinyQuant) {
  const File f = File::open(shared("tiny/tiny-quant.gguf"));
  EXPECT_EQ(f.file_size(), 5956000u);
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3next");
  EXPECT_EQ(f.get_uint("qwen3next.block_count"), 4u);
  EXPECT_EQ(f.get_uint("qwen3next.embedding_length"), 256u);
  EXPECT_EQ(f.get_uint("qwen3next.expert_count"), 8u);
  EXPECT_EQ(f.get_uint("qwen3next.expert_used_count"), 2u);
  EXPECT_EQ(f.get_uint("general.file_type"), 19u);
  expect_tiny_tokenizer(f);
  expect_shape(f, "token_embd.weight", TensorType::Q4_K, {256, 512});
  expect_shape(f, "output.weight", TensorType::Q6_K, {256, 512});
  expect_shape(f, "blk.0.ffn_gate_exps.weight", TensorType::IQ2_XXS, {256, 256, 8});
  expect_shape(f, "blk.0.ffn_up_exps.weight", TensorType::IQ2_XXS, {256, 256, 8});
  expect_shape(f, "blk.0.ffn_down_exps.weight", TensorType::IQ3_XXS, {256, 256, 8});
  expect_shape(f, "blk.3.attn_q.weight", TensorType::Q4_K, {256, 16 * 256 * 2});
  expect_shape(f, "blk.3.attn_k.weight", TensorType::Q8_0, {256, 2 * 256});
  expect_shape(f, "blk.0.attn_qkv.weight", TensorType::Q8_0, {256, 1024});
  expect_shape(f, "blk.0.ssm_ba.weight", TensorType::Q8_0, {256, 8});
  expect_shape(f, "blk.0.ssm_out.weight", TensorType::Q4_K, {512, 256});
  expect_shape(f, "blk.0.ffn_gate_shexp.weight", TensorType::Q4_K, {256, 256});
  expect_shape(f, "blk.0.ffn_gate_inp_shexp.weight", TensorType::F32, {256});  // 1-D here
  expect_shape(f, "blk.0.ssm_conv1d.weight", TensorType::F32, {4, 1024});
  EXPECT_EQ(f.find_tensor("token_embd.weight")->bytes, 512u * 144);
  EXPECT_EQ(f.find_tensor("output.weight")->bytes, 512u * 210);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->bytes, 256u * 8 * 66);
}

// README §3: llama.cpp's vocab file, no tensors.
TEST(SharedFiles, QwenVocab) {
  const File f = File::open(shared("tokenizer/ggml-vocab-qwen2.gguf"));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  const Array* tokens = f.get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->element_type, ValueType::STRING);
  ASSERT_EQ(tokens->items.size(), 151936u);
  EXPECT_EQ(*tokens->items[0].as_string(), "!");
  EXPECT_EQ(*tokens->items[151643].as_string(), "<|endoftext|>");
  EXPECT_EQ(*tokens->items[151644].as_string(), "<|im_start|>");
  EXPECT_EQ(*tokens->items[151645].as_string(), "<|im_end|>");
  const Array* merges = f.get_array("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(merges->items.size(), 151387u);
  EXPECT_EQ(*merges->items[0].as_string(), "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.padding_token_id"}) {
    EXPECT_EQ(f.get_uint(key), 151643u) << key;
  }
  const Array* types = f.get_array("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->items.size(), 151936u);
}

TEST(SharedFiles, MissingFileIsAnErrorNamingIt) {
  const std::string path = shared("does-not-exist.gguf");
  try {
    File::open(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rl::gguf
