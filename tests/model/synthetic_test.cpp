// Synthetic models: presets reproduce the shared tiny models' layout, the 80b-a3b plan has the
// byte counts of MODEL.md / ANCHORS.md, files round-trip through the reader, values are
// deterministic and sane, and rows that do not fit a type fall back with a note.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "model/weights.h"
#include "model_test_util.h"
#include "quant/quant.h"

namespace rl::model {
namespace {

using gguf::TensorType;
using test::shared_path;
using ::testing::HasSubstr;

Weights bind_plan(const synthetic::Plan& plan, Config* config_out = nullptr) {
  const auto infos = plan.tensor_infos();
  const Config c = read_config(plan.metadata, infos, "plan");
  if (config_out) *config_out = c;
  return bind_weights(infos, c, "plan");
}

// The presets lay out exactly the tensors of the models the shared goldens were made with.
void expect_same_tensor_list(const synthetic::Plan& plan, const std::string& file_name) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/" + file_name));
  ASSERT_EQ(plan.tensors.size(), file.tensors().size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& p = plan.tensors[i];
    const auto& f = file.tensors()[i];
    EXPECT_EQ(p.name, f.name);
    EXPECT_EQ(p.type, f.type) << f.name;
    EXPECT_EQ(p.ne, f.ne) << f.name;
    EXPECT_EQ(p.n_dims, f.n_dims) << f.name;
    EXPECT_EQ(p.bytes, f.bytes) << f.name;
  }
  // And the hyperparameters read back are the same.
  Config from_plan;
  bind_plan(plan, &from_plan);
  const Config from_file = read_config(file);
  EXPECT_EQ(from_plan.n_vocab, from_file.n_vocab);
  EXPECT_EQ(from_plan.n_embd, from_file.n_embd);
  EXPECT_EQ(from_plan.recurrent, from_file.recurrent);
  EXPECT_EQ(from_plan.context_length, from_file.context_length);
  EXPECT_EQ(from_plan.dense_ff, from_file.dense_ff);
  EXPECT_FLOAT_EQ(from_plan.rope_theta, from_file.rope_theta);
  EXPECT_FLOAT_EQ(from_plan.rms_eps, from_file.rms_eps);
}

TEST(Synthetic, TinyPresetHasTheLayoutOfTinyF32) {
  expect_same_tensor_list(synthetic::make_plan(synthetic::preset("tiny")), "tiny-f32.gguf");
}

TEST(Synthetic, TinyQuantPresetHasTheLayoutAndTypesOfTinyQuant) {
  expect_same_tensor_list(synthetic::make_plan(synthetic::preset("tiny-quant")), "tiny-quant.gguf");
}

// MODEL.md / ANCHORS.md numbers for Qwen3-Next-80B-A3B with the ANCHORS type mix, written out
// from the block sizes (q4_K 144 B, q6_K 210 B, iq2_xxs 66 B per 256 values; q8_0 34 B per 32).
TEST(Synthetic, Plan80bA3bMatchesTheAnchors) {
  const auto plan = synthetic::make_plan(synthetic::preset("80b-a3b"));
  Config c;
  const Weights w = bind_plan(plan, &c);
  EXPECT_EQ(c.n_layer, 48);
  EXPECT_EQ(c.n_attention_layers(), 12);
  EXPECT_EQ(c.n_vocab, 151936);
  EXPECT_EQ(c.kv_bytes_per_position(4), 48 * 1024);  // 48 KiB per position in f32
  EXPECT_EQ(c.kv_bytes_per_position(2), 24 * 1024);  // 24 KiB in bf16
  // 36 DeltaNet layers x (32 x 128 x 128 f32 + 3 x 8192 f32).
  EXPECT_EQ(c.recurrent_state_bytes(), 36 * (2 * 1024 * 1024 + 3 * 8192 * 4));

  const DecodeBytes b = decode_weight_breakdown(c, w);
  const uint64_t q4k_row_2048 = 8 * 144, q4k_row_4096 = 16 * 144, q4k_row_512 = 2 * 144;
  EXPECT_EQ(b.embedding_row, q4k_row_2048);
  EXPECT_EQ(b.output_head, 151936ull * 8 * 210);                                 // 255 MB
  EXPECT_EQ(b.routers, 48ull * 2048 * 512 * 4);                                  // 202 MB
  EXPECT_EQ(b.routed_experts, 48ull * 10 * (2 * 512 * 8 * 66 + 2048 * 2 * 66));  // 389 MB
  EXPECT_EQ(b.attention,
            12 * ((8192 + 512 + 512) * q4k_row_2048 + 2048 * q4k_row_4096 + 2 * 256 * 4));
  EXPECT_EQ(b.deltanet, 36 * ((8192 + 4096) * q4k_row_2048 + 64 * 64 * 34 + 4 * 8192 * 4 +
                              2 * 32 * 4 + 128 * 4 + 2048 * q4k_row_4096));
  EXPECT_EQ(b.shared_experts, 48 * (2048 * 4 + 2 * 512 * q4k_row_2048 + 2048 * q4k_row_512));
  EXPECT_EQ(b.norms, 48 * 2 * 2048 * 4 + 2048 * 4);
  EXPECT_EQ(decode_weight_bytes(c, w), b.total());
  // ANCHORS.md: 1805 MB of weights per token (389 experts, 255 head, 202 routers).
  EXPECT_NEAR(b.total() / 1e6, 1805.0, 0.5);
  EXPECT_NEAR(b.routed_experts / 1e6, 389.0, 0.5);
  EXPECT_NEAR(b.output_head / 1e6, 255.0, 0.5);
  EXPECT_NEAR(b.routers / 1e6, 201.3, 0.1);
  // The ANCHORS file is 20.05 GiB with the real tokenizer's ~5 MB of metadata.
  EXPECT_NEAR(plan.tensor_bytes() / 1073741824.0, 20.04, 0.01);
  EXPECT_TRUE(plan.notes.empty());
}

TEST(Synthetic, IssueExampleTypeMix) {
  // redlite mkmodel --preset 80b-a3b --experts iq2_xxs --down iq3_xxs --dense q4_k --embed q4_k
  //   --output q6_k
  auto s = synthetic::preset("80b-a3b");
  s.types.expert_gate_up = s.types.expert_down = TensorType::IQ2_XXS;
  s.types.expert_down = TensorType::IQ3_XXS;
  s.types.set_dense(TensorType::Q4_K);
  const auto plan = synthetic::make_plan(s);
  Config c;
  const Weights w = bind_plan(plan, &c);
  EXPECT_EQ(w.layers[0].experts.down.type, TensorType::IQ3_XXS);
  EXPECT_EQ(w.layers[0].experts.gate.type, TensorType::IQ2_XXS);
  EXPECT_EQ(w.layers[0].deltanet.ba.type, TensorType::Q8_0);  // --dense leaves ssm_ba alone
  const DecodeBytes b = decode_weight_breakdown(c, w);
  EXPECT_EQ(b.routed_experts, 48ull * 10 * (2 * 512 * 8 * 66 + 2048 * 2 * 98));
}

TEST(Synthetic, SharedDownTypeOfItsOwn) {
  // redlite mkmodel --preset 80b-a3b --experts q4_K --down q6_K --dense q4_K --shexp-down q6_K:
  // the layers where llama.cpp's Q4_K_M recipe gives both downs Q6_K.
  auto s = synthetic::preset("80b-a3b");
  s.types.expert_gate_up = s.types.expert_down = TensorType::Q4_K;
  s.types.expert_down = TensorType::Q6_K;
  s.types.set_dense(TensorType::Q4_K);
  s.types.shexp_down = TensorType::Q6_K;
  const auto plan = synthetic::make_plan(s);
  Config c;
  const Weights w = bind_plan(plan, &c);
  const auto& layer = w.layers[5];
  EXPECT_EQ(layer.shexp_down.type, TensorType::Q6_K);
  EXPECT_EQ(layer.shexp_gate.type, TensorType::Q4_K);
  EXPECT_EQ(layer.shexp_up.type, TensorType::Q4_K);
  EXPECT_EQ(layer.experts.down.type, TensorType::Q6_K);
  // Per layer: the shared gate and up in Q4_K (144 bytes per 256 values), the shared down in Q6_K
  // (210), and the shared expert's float32 gate vector.
  EXPECT_EQ(decode_weight_breakdown(c, w).shared_experts,
            48ull * (2 * 512 * 8 * 144 + 2048 * 2 * 210 + 2048 * 4));
}

TEST(Synthetic, RowsThatDoNotFitFallBackWithANote) {
  auto s = synthetic::preset("tiny");  // d = 32: 256-value blocks do not fit
  s.types.expert_gate_up = TensorType::IQ2_XXS;
  s.types.set_dense(TensorType::Q4_K);
  s.types.output = TensorType::Q6_K;
  const auto plan = synthetic::make_plan(s);
  Config c;
  const Weights w = bind_plan(plan, &c);
  EXPECT_EQ(w.layers[0].experts.gate.type, TensorType::IQ4_NL);
  EXPECT_EQ(w.layers[0].deltanet.qkv.type, TensorType::Q4_0);
  EXPECT_EQ(w.output.type, TensorType::Q8_0);
  // attn_output and ssm_out have rows of 4096 and 512 values: q4_K fits them and stays.
  EXPECT_EQ(w.layers[3].attn.output.type, TensorType::Q4_K);
  EXPECT_EQ(w.layers[0].deltanet.out.type, TensorType::Q4_K);
  const std::string notes = ::testing::PrintToString(plan.notes);
  EXPECT_THAT(notes, HasSubstr("iq2_xxs needs multiples of 256, wrote iq4_nl"));
  EXPECT_THAT(notes, HasSubstr("q4_K needs multiples of 256, wrote q4_0"));
  EXPECT_THAT(notes, HasSubstr("q6_K needs multiples of 256, wrote q8_0"));

  s.shape.n_embd = 24;  // not even a multiple of 32: f16
  s.shape.n_vocab = 512;
  const auto odd = synthetic::make_plan(s);
  EXPECT_EQ(bind_plan(odd).layers[0].experts.gate.type, TensorType::F16);
}

TEST(Synthetic, BadSpecsAreRefusedClearly) {
  auto s = synthetic::preset("tiny");
  s.shape.n_head_kv = 3;
  EXPECT_THROW(synthetic::make_plan(s), ModelError);
  s = synthetic::preset("tiny");
  s.shape.n_layer = 0;
  EXPECT_THROW(synthetic::make_plan(s), Error);
  s = synthetic::preset("tiny");
  s.types.attn_q = TensorType::Q4_1;
  try {
    synthetic::make_plan(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("q4_1"));
  }
  EXPECT_THROW(synthetic::preset("70b"), Error);
  s = synthetic::preset("tiny");
  s.shape.n_vocab = 100;  // smaller than the built-in vocabulary
  EXPECT_THROW(synthetic::make_plan(s), Error);
}

TEST(Synthetic, FileRoundTripsThroughTheReader) {
  auto s = synthetic::preset("tiny");
  s.layout.mtp = true;
  s.types.embed = TensorType::Q8_0;
  s.types.expert_down = TensorType::IQ4_NL;
  const auto plan = synthetic::make_plan(s);
  const std::string path = ::testing::TempDir() + "/redlite_synthetic_roundtrip.gguf";
  uint64_t last_done = 0, calls = 0;
  synthetic::write_model(plan, path, [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    EXPECT_EQ(total, plan.tensor_bytes());
    last_done = done;
    ++calls;
  });
  EXPECT_EQ(last_done, plan.tensor_bytes());
  EXPECT_GT(calls, 0u);
  {
    const auto file = gguf::File::open(path);
    ASSERT_EQ(file.metadata().size(), plan.metadata.size());
    for (size_t i = 0; i < plan.metadata.size(); ++i) {
      EXPECT_EQ(file.metadata()[i].first, plan.metadata[i].first);
    }
    EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(file.get_uint("qwen3next.nextn_predict_layers"), 1u);
    const auto expected = test::plan_tensors(plan);
    ASSERT_EQ(file.tensors().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const auto& t = file.tensors()[i];
      ASSERT_EQ(t.name, expected[i].name);
      ASSERT_EQ(t.bytes, expected[i].bytes.size());
      ASSERT_EQ(0, std::memcmp(t.data, expected[i].bytes.data(), t.bytes)) << t.name;
    }
    const Config c = read_config(file);
    const Weights w = bind_weights(file, c);
    EXPECT_EQ(c.n_nextn, 1);
    EXPECT_FALSE(w.mtp.empty());
  }
  std::filesystem::remove(path);
}

TEST(Synthetic, ValuesAreDeterministicAndFollowTheRecipe) {
  const auto a = synthetic::make_plan(synthetic::preset("tiny"));
  auto s = synthetic::preset("tiny");
  s.seed = 99;
  const auto b = synthetic::make_plan(s);
  const auto ta = test::plan_tensors(a), ta2 = test::plan_tensors(a), tb = test::plan_tensors(b);
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].bytes, ta2[i].bytes) << ta[i].name;
    EXPECT_NE(ta[i].bytes, tb[i].bytes) << ta[i].name;
  }
  auto floats = [&](const std::string& name) {
    const auto& t = test::tensor_named(const_cast<test::Tensors&>(ta), name);
    const float* f = reinterpret_cast<const float*>(t.bytes.data());
    return std::vector<float>(f, f + t.bytes.size() / 4);
  };
  auto stats = [](const std::vector<float>& v, double center) {
    double sum = 0, sq = 0;
    for (float x : v) {
      EXPECT_TRUE(std::isfinite(x));
      sum += x;
      sq += (x - center) * (x - center);
    }
    return std::pair{sum / v.size(), std::sqrt(sq / v.size())};
  };
  // Linear weights: std 1/sqrt(fan_in) = 1/sqrt(32); lm head 3/sqrt(32); router 2/sqrt(32).
  const double s32 = 1 / std::sqrt(32.0);
  EXPECT_NEAR(stats(floats("blk.0.ffn_gate_exps.weight"), 0).second, s32, 0.02 * s32 * 5);
  EXPECT_NEAR(stats(floats("output.weight"), 0).second, 3 * s32, 0.05);
  EXPECT_NEAR(stats(floats("blk.0.ffn_gate_inp.weight"), 0).second, 2 * s32, 0.05);
  EXPECT_NEAR(stats(floats("token_embd.weight"), 0).second, 1.0, 0.03);
  EXPECT_NEAR(stats(floats("blk.0.ssm_conv1d.weight"), 0).second, 0.5, 0.03);
  // Norms 1 + N(0, 0.1).
  const auto norm = stats(floats("blk.0.attn_norm.weight"), 1.0);
  EXPECT_NEAR(norm.first, 1.0, 0.08);
  EXPECT_NEAR(norm.second, 0.1, 0.05);
  // ssm_a = -A, A in [0.02, 8]; dt_bias in [-4, 1].
  for (int il : {0, 1, 2, 4, 5, 6}) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (float v : floats(p + "ssm_a")) {
      EXPECT_LE(v, -0.02f);
      EXPECT_GE(v, -8.0f);
    }
    for (float v : floats(p + "ssm_dt.bias")) {
      EXPECT_GE(v, -4.0f);
      EXPECT_LE(v, 1.0f);
    }
  }
}

TEST(Synthetic, QuantisedRowsDecodeFinite) {
  const auto plan = synthetic::make_plan(synthetic::preset("tiny-quant"));
  for (const auto& t : plan.tensors) {
    const uint64_t row_bytes = t.bytes / t.n_rows();
    std::vector<uint8_t> row(row_bytes);
    std::vector<float> values(static_cast<size_t>(t.ne[0]));
    for (int64_t r : {int64_t{0}, t.n_rows() - 1}) {
      synthetic::generate_row(plan, t, r, row.data());
      quant::dequantize_row(t.type, row.data(), values.data(), t.ne[0]);
      double sq = 0;
      for (float v : values) {
        ASSERT_TRUE(std::isfinite(v)) << t.name;
        sq += double{v} * v;
      }
      if (t.init == synthetic::Init::Normal) {
        const double rms = std::sqrt(sq / values.size());
        EXPECT_GT(rms, 0.3 * t.stddev) << t.name;
        EXPECT_LT(rms, 3.0 * t.stddev) << t.name;
      }
    }
  }
}

TEST(Synthetic, BuiltInVocabulary) {
  const auto kv = synthetic::builtin_vocab(0);
  auto find = [&](const std::string& key) -> const gguf::Value& {
    for (const auto& [k, v] : kv) {
      if (k == key) return v;
    }
    throw std::runtime_error("missing " + key);
  };
  const auto& tokens = find("tokenizer.ggml.tokens").as_array()->items;
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), synthetic::builtin_vocab_size());
  // GPT-2 byte order: '!' first, the space byte (U+0120 "Ġ") after the 188 printable bytes.
  EXPECT_EQ(*tokens[0].as_string(), "!");
  EXPECT_EQ(*tokens[188 + 32].as_string(), "\xC4\xA0");
  const auto& merges = find("tokenizer.ggml.merges").as_array()->items;
  // Every merge's halves and result are tokens.
  std::set<std::string> vocab;
  for (const auto& t : tokens) vocab.insert(*t.as_string());
  for (const auto& m : merges) {
    const std::string& s = *m.as_string();
    const size_t sp = s.find(' ');
    ASSERT_NE(sp, std::string::npos);
    EXPECT_TRUE(vocab.count(s.substr(0, sp))) << s;
    EXPECT_TRUE(vocab.count(s.substr(sp + 1))) << s;
    EXPECT_TRUE(vocab.count(s.substr(0, sp) + s.substr(sp + 1))) << s;
  }
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                              "<tool_call>", "</tool_call>"}) {
    EXPECT_TRUE(vocab.count(special)) << special;
  }
  const uint64_t eos = *find("tokenizer.ggml.eos_token_id").as_uint();
  EXPECT_EQ(*tokens[eos].as_string(), "<|im_end|>");
  EXPECT_THAT(*find("tokenizer.chat_template").as_string(), HasSubstr("<|im_start|>"));

  const auto padded = synthetic::builtin_vocab(400);
  EXPECT_EQ(padded[2].second.as_array()->items.size(), 400u);
  EXPECT_EQ(*padded[2].second.as_array()->items[399].as_string(), "[PAD399]");
}

TEST(Synthetic, VocabularyCopiedFromAnotherFile) {
  auto s = synthetic::preset("tiny");
  s.shape.n_vocab = 0;
  s.vocab_from = shared_path("testdata/tokenizer/ggml-vocab-qwen2.gguf");
  const auto plan = synthetic::make_plan(s);
  Config c;
  bind_plan(plan, &c);
  EXPECT_EQ(c.n_vocab, 151936);
  int copied = 0;
  for (const auto& [k, v] : plan.metadata) {
    if (k.rfind("tokenizer.", 0) == 0) ++copied;
  }
  EXPECT_EQ(copied, 9);  // model, pre, tokens, token_type, merges, 3 ids, chat_template
  s.shape.n_vocab = 512;
  EXPECT_THROW(synthetic::make_plan(s), Error);
}

}  // namespace
}  // namespace rl::model
