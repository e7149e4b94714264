// bind_weights on the shared tiny models and on synthetic models in every layout, the fused
// layouts against the split ones, and errors that name each bad tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/weights.h"
#include "model_test_util.h"
#include "quant/quant.h"

namespace rl::model {
namespace {

using gguf::TensorType;
using test::Metadata;
using test::shared_path;
using test::Tensors;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<int64_t> shape(const Tensor& t) {
  return {t.ne.begin(), t.ne.end()};
}

TEST(Weights, BindsTinyF32) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/tiny-f32.gguf"));
  const Config c = read_config(file);
  const Weights w = bind_weights(file, c);
  EXPECT_FALSE(w.tied_output);
  EXPECT_TRUE(w.mtp.empty());
  ASSERT_EQ(w.layers.size(), 8u);
  EXPECT_EQ(shape(w.token_embd), (std::vector<int64_t>{32, 512, 1, 1}));
  EXPECT_EQ(w.token_embd.row_bytes, 32u * 4);
  for (int il = 0; il < 8; ++il) {
    const LayerWeights& l = w.layers[il];
    EXPECT_EQ(l.is_attention, il == 3 || il == 7);
    if (l.is_attention) {
      EXPECT_EQ(shape(l.attn.q), (std::vector<int64_t>{32, 16 * 256 * 2, 1, 1}));
      EXPECT_EQ(shape(l.attn.output), (std::vector<int64_t>{4096, 32, 1, 1}));
    } else {
      EXPECT_EQ(l.deltanet.layout, DeltaNetLayout::Split);
      EXPECT_EQ(shape(l.deltanet.qkv), (std::vector<int64_t>{32, 1024, 1, 1}));
      EXPECT_EQ(shape(l.deltanet.conv), (std::vector<int64_t>{4, 1024, 1, 1}));
      // ssm_a = -exp(A_log) < 0 (README: observed -0.03 .. -7.0).
      for (int h = 0; h < 4; ++h) EXPECT_LT(l.deltanet.a.f32()[h], 0.0f);
    }
    EXPECT_FALSE(l.experts.fused_gate_up);
    EXPECT_EQ(shape(l.experts.down), (std::vector<int64_t>{32, 32, 16, 1}));
    EXPECT_EQ(shape(l.shexp_gate_inp), (std::vector<int64_t>{32, 1, 1, 1}));  // {d, 1} form
  }
  // The view points at the file's bytes: expert 5, row 7 of gate is row 5*32+7 of the tensor.
  const auto* info = file.find_tensor("blk.2.ffn_gate_exps.weight");
  EXPECT_EQ(w.layers[2].experts.gate_row(5, 7, 32), info->data + (5 * 32 + 7) * 32 * 4);
  EXPECT_EQ(w.layers[2].experts.up_row(5, 7, 32),
            file.find_tensor("blk.2.ffn_up_exps.weight")->data + (5 * 32 + 7) * 32 * 4);
}

TEST(Weights, BindsTinyQuantWithItsTypes) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/tiny-quant.gguf"));
  const Config c = read_config(file);
  const Weights w = bind_weights(file, c);
  EXPECT_EQ(w.token_embd.type, TensorType::Q4_K);
  EXPECT_EQ(w.output.type, TensorType::Q6_K);
  EXPECT_EQ(w.token_embd.row_bytes, 144u);  // 256 values of q4_K
  const LayerWeights& l0 = w.layers[0];
  EXPECT_EQ(l0.experts.gate_up_type(), TensorType::IQ2_XXS);
  EXPECT_EQ(l0.experts.down.type, TensorType::IQ3_XXS);
  EXPECT_EQ(l0.deltanet.qkv.type, TensorType::Q8_0);
  EXPECT_EQ(shape(l0.shexp_gate_inp), (std::vector<int64_t>{256, 1, 1, 1}));  // {d} form
  EXPECT_EQ(l0.experts.down_row(3, 10, 256), l0.experts.down.data + (3 * 256 + 10) * 98);
  EXPECT_TRUE(w.layers[3].is_attention);
  EXPECT_EQ(w.layers[3].attn.k.type, TensorType::Q8_0);
}

synthetic::Spec small_spec() {
  synthetic::Spec s = synthetic::preset("tiny");
  s.shape.n_layer = 4;
  s.types.ssm_qkv = s.types.ssm_gate = TensorType::Q8_0;  // same type: fused rows = split rows
  s.types.expert_gate_up = TensorType::Q8_0;
  return s;
}

TEST(Weights, EveryLayoutBinds) {
  for (int variant = 0; variant < 16; ++variant) {
    synthetic::Spec s = small_spec();
    s.layout.fused_ssm_in = variant & 1;
    s.layout.fused_gate_up = variant & 2;
    s.layout.tied_output = variant & 4;
    s.layout.mtp = variant & 8;
    s.layout.shexp_gate_2d = variant & 1;
    const auto plan = synthetic::make_plan(s);
    const auto file = test::plan_file(plan);
    const Config c = read_config(file);
    const Weights w = bind_weights(file, c);
    SCOPED_TRACE(variant);
    EXPECT_EQ(c.n_layer, 4);
    EXPECT_EQ(c.n_nextn, s.layout.mtp ? 1 : 0);
    EXPECT_EQ(w.tied_output, s.layout.tied_output);
    if (s.layout.tied_output) {
      EXPECT_EQ(w.output.data, w.token_embd.data);
      EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
    }
    for (const auto& l : w.layers) {
      if (!l.is_attention) {
        EXPECT_EQ(l.deltanet.layout,
                  s.layout.fused_ssm_in ? DeltaNetLayout::Fused : DeltaNetLayout::Split);
      }
      EXPECT_EQ(l.experts.fused_gate_up, s.layout.fused_gate_up);
    }
    if (s.layout.mtp) {
      // One full-attention block plus the nextn tensors, named as llama.cpp names them.
      for (const char* name : {"blk.4.nextn.eh_proj.weight", "blk.4.nextn.enorm.weight",
                               "blk.4.nextn.hnorm.weight", "blk.4.nextn.shared_head_norm.weight",
                               "blk.4.attn_q.weight", "blk.4.ffn_down_exps.weight"}) {
        EXPECT_TRUE(w.mtp.count(name)) << name;
      }
      EXPECT_EQ(shape(w.mtp.at("blk.4.nextn.eh_proj.weight")),
                (std::vector<int64_t>{64, 32, 1, 1}));
    } else {
      EXPECT_TRUE(w.mtp.empty());
    }
  }
}

std::vector<float> dequantize(const Tensor& t, int64_t row) {
  std::vector<float> out(static_cast<size_t>(t.cols()));
  quant::dequantize_row(t.type, t.row(row), out.data(), t.cols());
  return out;
}

// y = W x over all rows of a bound 2-D tensor, accumulated in double.
std::vector<float> matvec(const Tensor& t, const std::vector<float>& x) {
  std::vector<float> y;
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    const auto w = dequantize(t, r);
    double acc = 0;
    for (size_t i = 0; i < w.size(); ++i) acc += double{w[i]} * x[i];
    y.push_back(static_cast<float>(acc));
  }
  return y;
}

TEST(Weights, FusedSsmInUnfusesToTheSplitProjections) {
  synthetic::Spec split = small_spec(), fused = small_spec();
  fused.layout.fused_ssm_in = true;
  const auto split_file = test::plan_file(synthetic::make_plan(split));
  const auto fused_file = test::plan_file(synthetic::make_plan(fused));
  const Config c = read_config(split_file);
  const Weights ws = bind_weights(split_file, c), wf = bind_weights(fused_file, c);

  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(c.n_embd));
  for (auto& v : x) v = normal(rng);
  for (int il : {0, 2}) {
    const auto y_fused = matvec(wf.layers[il].deltanet.ssm_in, x);
    ASSERT_EQ(y_fused.size(), static_cast<size_t>(2 * c.ssm_k_dim() + 2 * c.ssm_v_dim()));
    std::vector<float> qkv(static_cast<size_t>(c.ssm_conv_channels())),
        z(static_cast<size_t>(c.ssm_v_dim()));
    unfuse_ssm_in(c, y_fused.data(), qkv.data(), z.data());
    EXPECT_EQ(qkv, matvec(ws.layers[il].deltanet.qkv, x)) << "layer " << il;
    EXPECT_EQ(z, matvec(ws.layers[il].deltanet.gate, x)) << "layer " << il;
  }
  // ssm_ba, conv and the rest are the same in both layouts.
  EXPECT_EQ(0, std::memcmp(ws.layers[1].deltanet.ba.data, wf.layers[1].deltanet.ba.data,
                           ws.layers[1].deltanet.ba.bytes));
}

TEST(Weights, UnfuseSsmInFollowsTheKeyHeadGrouping) {
  // An independent statement of the legacy layout: per key head g, [q 128 | k 128 | v r*128 |
  // z r*128]; value head h = g*r + j.
  Config c;
  c.ssm_head_dim = 128;
  c.ssm_n_k_heads = 2;
  c.ssm_n_v_heads = 6;  // r = 3
  const int64_t hd = 128, r = 3, group = 2 * hd + 2 * r * hd;
  std::vector<float> fused(static_cast<size_t>(2 * group));
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = static_cast<float>(i);
  std::vector<float> qkv(2 * 256 + 768), z(768);
  unfuse_ssm_in(c, fused.data(), qkv.data(), z.data());
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < hd; ++i) {
      EXPECT_EQ(qkv[g * hd + i], g * group + i);             // q
      EXPECT_EQ(qkv[256 + g * hd + i], g * group + hd + i);  // k
    }
    for (int j = 0; j < r; ++j) {
      for (int i = 0; i < hd; ++i) {
        const int h = g * r + j;
        EXPECT_EQ(qkv[512 + h * hd + i], g * group + 2 * hd + j * hd + i);   // v
        EXPECT_EQ(z[h * hd + i], g * group + 2 * hd + r * hd + j * hd + i);  // z
      }
    }
  }
}

TEST(Weights, FusedGateUpHoldsGateRowsThenUpRows) {
  synthetic::Spec split = small_spec(), fused = small_spec();
  fused.layout.fused_gate_up = true;
  const auto split_file = test::plan_file(synthetic::make_plan(split));
  const auto fused_file = test::plan_file(synthetic::make_plan(fused));
  const Config c = read_config(split_file);
  const Weights ws = bind_weights(split_file, c), wf = bind_weights(fused_file, c);
  const ExpertWeights& xs = ws.layers[1].experts;
  const ExpertWeights& xf = wf.layers[1].experts;
  ASSERT_TRUE(xf.fused_gate_up);
  const int64_t ff = c.expert_ff;
  const uint64_t rb = xs.gate.row_bytes;
  for (int64_t e = 0; e < c.n_expert; ++e) {
    for (int64_t r = 0; r < ff; ++r) {
      ASSERT_EQ(0, std::memcmp(xs.gate_row(e, r, ff), xf.gate_row(e, r, ff), rb)) << e << "," << r;
      ASSERT_EQ(0, std::memcmp(xs.up_row(e, r, ff), xf.up_row(e, r, ff), rb)) << e << "," << r;
      // Stated independently: in the fused tensor expert e's rows are [gate (ff) | up (ff)].
      ASSERT_EQ(xf.gate_row(e, r, ff), xf.gate_up.data + (e * 2 * ff + r) * rb);
      ASSERT_EQ(xf.up_row(e, r, ff), xf.gate_up.data + (e * 2 * ff + ff + r) * rb);
    }
  }
  EXPECT_NE(0, std::memcmp(xs.gate_row(0, 0, ff), xs.up_row(0, 0, ff), rb));
  EXPECT_EQ(decode_weight_bytes(c, ws), decode_weight_bytes(c, wf));
}

// Errors: a ModelError whose problems name every bad tensor.
std::vector<std::string> bind_problems(const std::function<void(Metadata&, Tensors&)>& edit) {
  const auto file = test::plan_file(synthetic::make_plan(small_spec()), edit);
  try {
    bind_weights(file, read_config(file));
  } catch (const ModelError& e) {
    return e.problems();
  }
  return {};
}

TEST(Weights, MissingTensorIsNamedWithItsShape) {
  const auto p = bind_problems([](Metadata&, Tensors& t) {
    std::erase_if(t, [](const auto& x) { return x.name == "blk.1.ssm_a"; });
  });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], AllOf(HasSubstr("blk.1.ssm_a"), HasSubstr("missing"), HasSubstr("{4}")));
}

TEST(Weights, MisShapedTensorShowsExpectedAndFound) {
  const auto p = bind_problems([](Metadata&, Tensors& t) {
    auto& k = test::tensor_named(t, "blk.3.attn_k.weight");
    k.ne = {32, 256};
    k.bytes.resize(32 * 256 * 4);
  });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], AllOf(HasSubstr("blk.3.attn_k.weight"), HasSubstr("expected shape {32, 512}"),
                          HasSubstr("found {32, 256}")));
}

TEST(Weights, UnsupportedTypeIsNamed) {
  const auto p = bind_problems([](Metadata&, Tensors& t) {
    auto& down = test::tensor_named(t, "blk.0.ffn_down_exps.weight");
    down.type = TensorType::Q4_1;  // 32 values in 20 bytes: valid GGUF, not decoded here
    down.bytes.assign(32 * 16 * 20, 0);
  });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], AllOf(HasSubstr("blk.0.ffn_down_exps.weight"), HasSubstr("q4_1"),
                          HasSubstr("not supported")));
}

TEST(Weights, NormsMustBeF32) {
  const auto p = bind_problems([](Metadata&, Tensors& t) {
    auto& n = test::tensor_named(t, "blk.2.attn_norm.weight");
    n.type = TensorType::F16;
    n.bytes.resize(32 * 2);
  });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], AllOf(HasSubstr("blk.2.attn_norm.weight"), HasSubstr("f16"),
                          HasSubstr("expected f32")));
}

TEST(Weights, AllProblemsAreListedTogether) {
  try {
    const auto file =
        test::plan_file(synthetic::make_plan(small_spec()), [](Metadata&, Tensors& t) {
          std::erase_if(t, [](const auto& x) {
            return x.name == "output_norm.weight" || x.name == "blk.0.attn_gate.weight";
          });
          auto& r = test::tensor_named(t, "blk.3.ffn_gate_inp.weight");
          r.ne = {32, 8};
          r.bytes.resize(32 * 8 * 4);
        });
    bind_weights(file, read_config(file));
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_EQ(e.problems().size(), 3u);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("output_norm.weight"), HasSubstr("blk.0.attn_gate"),
                                HasSubstr("blk.3.ffn_gate_inp.weight"), HasSubstr("3 problems")));
  }
}

TEST(Weights, DeltaNetWithNeitherLayoutIsReported) {
  const auto p = bind_problems([](Metadata&, Tensors& t) {
    std::erase_if(t, [](const auto& x) { return x.name.rfind("blk.1.attn_", 0) == 0; });
  });
  const std::string all = ::testing::PrintToString(p);
  EXPECT_THAT(all, AllOf(HasSubstr("blk.1.attn_qkv.weight: missing"),
                         HasSubstr("blk.1.attn_gate.weight: missing")));
}

TEST(Weights, FileWithoutTensorsIsOneProblem) {
  const auto file = gguf::File::open(shared_path("testdata/tiny/tiny-f32.gguf"));
  try {
    bind_weights({}, read_config(file), "meta.gguf");
    FAIL();
  } catch (const ModelError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("meta.gguf"), HasSubstr("no tensors")));
  }
}

}  // namespace
}  // namespace rl::model
