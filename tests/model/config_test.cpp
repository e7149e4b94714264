// read_config on the shared tiny models (checked against manifest.json) and on edited metadata:
// llama.cpp's defaults, explicit recurrent arrays, MTP blocks, and errors that list every
// problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model_test_util.h"

namespace rl::model {
namespace {

using test::Metadata;
using test::shared_path;
using ::testing::AllOf;
using ::testing::HasSubstr;

nlohmann::json manifest_config(const std::string& model) {
  std::ifstream in(shared_path("testdata/tiny/manifest.json"));
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in)[model]["config"];
}

void expect_matches_manifest(const Config& c, const nlohmann::json& m) {
  EXPECT_EQ(c.name, m["name"].get<std::string>());
  EXPECT_EQ(c.n_vocab, m["vocab_size"].get<int64_t>());
  EXPECT_EQ(c.n_embd, m["hidden_size"].get<int64_t>());
  EXPECT_EQ(c.n_layer, m["num_hidden_layers"].get<int>());
  EXPECT_EQ(c.n_nextn, 0);
  EXPECT_EQ(c.context_length, m["max_position_embeddings"].get<int64_t>());
  EXPECT_EQ(c.n_head, m["num_attention_heads"].get<int>());
  EXPECT_EQ(c.n_head_kv, m["num_key_value_heads"].get<int>());
  EXPECT_EQ(c.head_dim, m["head_dim"].get<int>());
  EXPECT_EQ(c.n_rot,
            static_cast<int>(m["head_dim"].get<int>() * m["partial_rotary_factor"].get<double>()));
  EXPECT_FLOAT_EQ(c.rope_theta, m["rope_theta"].get<float>());
  EXPECT_FLOAT_EQ(c.rms_eps, m["rms_norm_eps"].get<float>());
  EXPECT_EQ(c.ssm_n_k_heads, m["linear_num_key_heads"].get<int>());
  EXPECT_EQ(c.ssm_n_v_heads, m["linear_num_value_heads"].get<int>());
  EXPECT_EQ(c.ssm_head_dim, m["linear_key_head_dim"].get<int>());
  EXPECT_EQ(c.ssm_head_dim, m["linear_value_head_dim"].get<int>());
  EXPECT_EQ(c.ssm_conv_kernel, m["linear_conv_kernel_dim"].get<int>());
  EXPECT_EQ(c.n_expert, m["num_experts"].get<int>());
  EXPECT_EQ(c.n_expert_used, m["num_experts_per_tok"].get<int>());
  EXPECT_EQ(c.expert_ff, m["moe_intermediate_size"].get<int64_t>());
  EXPECT_EQ(c.shexp_ff, m["shared_expert_intermediate_size"].get<int64_t>());
  EXPECT_EQ(c.dense_ff, m["intermediate_size"].get<int64_t>());
  const int interval = m["full_attention_interval"].get<int>();
  ASSERT_EQ(c.recurrent.size(), static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    EXPECT_EQ(c.is_attention(i), (i + 1) % interval == 0) << "layer " << i;
  }
}

TEST(Config, TinyF32MatchesManifest) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/tiny-f32.gguf"));
  EXPECT_TRUE(is_qwen3next(file));
  const Config c = read_config(file);
  expect_matches_manifest(c, manifest_config("tiny-f32"));
  EXPECT_EQ(c.n_attention_layers(), 2);  // layers 3 and 7
  EXPECT_EQ(c.n_deltanet_layers(), 6);
  EXPECT_EQ(c.ssm_conv_channels(), 2 * 2 * 128 + 4 * 128);
  // KV: 2 attention layers x (K, V) x 2 heads x 256.
  EXPECT_EQ(c.kv_values_per_position(), 2 * 2 * 2 * 256);
  // Per DeltaNet layer: 4 value heads x 128 x 128 f32 + 3 conv taps x 1024 channels f32.
  EXPECT_EQ(c.recurrent_state_bytes(), 6 * (4 * 128 * 128 * 4 + 3 * 1024 * 4));
}

TEST(Config, TinyQuantMatchesManifest) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/tiny-quant.gguf"));
  const Config c = read_config(file);
  expect_matches_manifest(c, manifest_config("tiny-quant"));
  EXPECT_EQ(c.n_attention_layers(), 1);
}

TEST(Config, OtherArchitectureIsNamed) {
  const auto file = gguf::File::open(shared_path("testdata/tokenizer/ggml-vocab-qwen2.gguf"));
  EXPECT_FALSE(is_qwen3next(file));
  try {
    read_config(file);
    FAIL() << "no error";
  } catch (const ModelError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("qwen2"), HasSubstr("qwen3next"),
                                HasSubstr("ggml-vocab-qwen2.gguf")));
  }
}

// The tiny preset's metadata, edited, read without tensors (n_vocab from the token list).
Config config_of(const std::function<void(Metadata&)>& edit) {
  Metadata md = synthetic::make_plan(synthetic::preset("tiny")).metadata;
  edit(md);
  return read_config(md, {}, "edited");
}

std::vector<std::string> problems_of(const std::function<void(Metadata&)>& edit) {
  try {
    config_of(edit);
  } catch (const ModelError& e) {
    return e.problems();
  }
  return {};
}

TEST(Config, LlamaCppDefaultsWhenKeysAreAbsent) {
  const Config c = config_of([](Metadata& md) {
    test::erase_metadata(md, "qwen3next.full_attention_interval");
    test::erase_metadata(md, "qwen3next.rope.dimension_count");
    test::erase_metadata(md, "qwen3next.rope.freq_base");
    test::erase_metadata(md, "qwen3next.attention.head_count_kv");
    test::erase_metadata(md, "qwen3next.attention.layer_norm_rms_epsilon");
    test::erase_metadata(md, "qwen3next.expert_feed_forward_length");
    test::erase_metadata(md, "qwen3next.expert_shared_feed_forward_length");
  });
  EXPECT_EQ(c.n_vocab, 512);                // from tokenizer.ggml.tokens
  EXPECT_EQ(c.n_rot, 256);                  // = key_length
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);  // llama.cpp's default
  EXPECT_EQ(c.n_head_kv, 16);               // = head_count
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.expert_ff, 64 / 4);  // feed_forward_length / expert_used_count
  EXPECT_EQ(c.shexp_ff, 64);       // feed_forward_length
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.is_attention(i), i == 3 || i == 7);
}

TEST(Config, ExplicitRecurrentArrayWinsOverInterval) {
  const Config c = config_of([](Metadata& md) {
    std::vector<gguf::Value> flags;
    for (int i = 0; i < 8; ++i) flags.push_back(gguf::Value::boolean(i % 2 == 0));
    test::set_metadata(md, "qwen3next.attention.recurrent_layers",
                       gguf::Value::array(gguf::ValueType::BOOL, flags));
  });
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.recurrent[i], i % 2 == 0) << i;

  const Config ints = config_of([](Metadata& md) {
    std::vector<gguf::Value> flags(8, gguf::Value::i32(1));
    flags[5] = gguf::Value::i32(0);
    test::set_metadata(md, "qwen3next.attention.recurrent_layers",
                       gguf::Value::array(gguf::ValueType::INT32, flags));
  });
  EXPECT_EQ(ints.n_attention_layers(), 1);
  EXPECT_TRUE(ints.is_attention(5));

  auto wrong_length = problems_of([](Metadata& md) {
    test::set_metadata(md, "qwen3next.attention.recurrent_layers",
                       gguf::Value::array(gguf::ValueType::BOOL, {gguf::Value::boolean(true)}));
  });
  ASSERT_EQ(wrong_length.size(), 1u);
  EXPECT_THAT(wrong_length[0], HasSubstr("recurrent_layers"));
}

TEST(Config, NextnBlocksAreKeptOutOfTheTrunk) {
  const Config c = config_of([](Metadata& md) {
    test::set_metadata(md, "qwen3next.block_count", gguf::Value::u32(9));
    test::set_metadata(md, "qwen3next.nextn_predict_layers", gguf::Value::u32(1));
  });
  EXPECT_EQ(c.n_layer, 8);
  EXPECT_EQ(c.n_nextn, 1);
  EXPECT_EQ(c.recurrent.size(), 8u);
  EXPECT_EQ(c.n_attention_layers(), 2);
}

TEST(Config, EveryProblemIsListedAtOnce) {
  const auto problems = problems_of([](Metadata& md) {
    test::set_metadata(md, "qwen3next.attention.head_count_kv", gguf::Value::u32(3));
    test::set_metadata(md, "qwen3next.rope.dimension_count", gguf::Value::u32(63));
    test::set_metadata(md, "qwen3next.ssm.group_count", gguf::Value::u32(3));
    test::set_metadata(md, "qwen3next.ssm.inner_size", gguf::Value::u32(500));
    test::set_metadata(md, "qwen3next.expert_used_count", gguf::Value::u32(17));
    test::set_metadata(md, "qwen3next.context_length", gguf::Value::u32(0));
    test::erase_metadata(md, "qwen3next.ssm.conv_kernel");
    test::set_metadata(md, "qwen3next.embedding_length", gguf::Value::string("32"));
  });
  const std::string all = ::testing::PrintToString(problems);
  EXPECT_EQ(problems.size(), 8u) << all;
  EXPECT_THAT(all, HasSubstr("head_count_kv 3"));
  EXPECT_THAT(all, HasSubstr("rope.dimension_count 63"));
  EXPECT_THAT(all, HasSubstr("ssm.group_count (key heads) 3"));
  EXPECT_THAT(all, HasSubstr("ssm.inner_size 500"));
  EXPECT_THAT(all, HasSubstr("expert_used_count 17"));
  EXPECT_THAT(all, HasSubstr("qwen3next.context_length: 0 is out of range"));
  EXPECT_THAT(all, HasSubstr("qwen3next.ssm.conv_kernel: missing"));
  EXPECT_THAT(all, HasSubstr("qwen3next.embedding_length: has type string"));
}

TEST(Config, AbsurdSizesAreRefusedBeforeUse) {
  const auto problems = problems_of([](Metadata& md) {
    test::set_metadata(md, "qwen3next.block_count", gguf::Value::u32(4000000000u));
  });
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("block_count"));
  const auto too_many_nextn = problems_of([](Metadata& md) {
    test::set_metadata(md, "qwen3next.nextn_predict_layers", gguf::Value::u32(8));
  });
  ASSERT_EQ(too_many_nextn.size(), 1u);
  EXPECT_THAT(too_many_nextn[0], HasSubstr("nextn_predict_layers"));
}

TEST(Config, MissingArchitectureIsNotAModel) {
  try {
    read_config(Metadata{{"general.name", gguf::Value::string("x")}}, {}, "meta.gguf");
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("general.architecture: missing"));
  }
}

}  // namespace
}  // namespace rl::model
