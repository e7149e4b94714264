// Self-test of the block decoders (bit-exact against rl::quant) and of the GEMV kernel in all
// its input and output modes (float64 reference on the decoded weights).
#include <cmath>
#include <cstring>

#include "cuda/layout.h"
#include "cuda/selftest_util.h"
#include "util/error.h"

namespace rl::cuda::st {

namespace {

using gguf::TensorType;

const TensorType kTypes[] = {TensorType::F32,     TensorType::F16,     TensorType::BF16,
                             TensorType::Q8_0,    TensorType::Q4_0,    TensorType::Q2_K,
                             TensorType::Q3_K,    TensorType::Q4_K,    TensorType::Q5_K,
                             TensorType::Q6_K,    TensorType::IQ2_XXS, TensorType::IQ2_XS,
                             TensorType::IQ3_XXS, TensorType::IQ4_XS,  TensorType::IQ4_NL};

std::string type_str(TensorType t) {
  return std::string(gguf::type_name(t));
}

// Number of values whose bits differ.
size_t bit_mismatches(const std::vector<float>& a, const float* b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}

const char* in_name(GemvIn in) {
  switch (in) {
    case GemvIn::Plain:
      return "plain";
    case GemvIn::RmsNorm:
      return "rmsnorm";
    case GemvIn::GroupRms:
      return "group-rms";
  }
  return "?";
}

// The float64 input transform of the GEMV.
std::vector<double> reference_input(GemvIn in, const std::vector<float>& x,
                                    const std::vector<float>& norm, const std::vector<float>& sumsq,
                                    int group, float eps) {
  const size_t n = x.size();
  std::vector<double> h(n);
  if (in == GemvIn::Plain) {
    for (size_t i = 0; i < n; ++i) h[i] = x[i];
  } else if (in == GemvIn::RmsNorm) {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double s = 1.0 / std::sqrt(ss / n + eps);
    for (size_t i = 0; i < n; ++i) h[i] = x[i] * s * norm[i];
  } else {
    for (size_t g0 = 0; g0 < n; g0 += group) {
      double ss = 0;
      for (int p = 0; p < kGroupSumsqParts; ++p) ss += sumsq[g0 / group * kGroupSumsqParts + p];
      const double s = 1.0 / std::sqrt(ss / group + eps);
      for (int j = 0; j < group; ++j) h[g0 + j] = x[g0 + j] * s;
    }
  }
  return h;
}

}  // namespace

void test_decoders(Reporter& r, uint64_t seed) {
  for (TensorType t : kTypes) {
    const std::string name = "decode " + type_str(t) + " 5 rows x 2048";
    if (!r.wanted(name)) continue;
    TestMatrix m(t, 5, 2048, seed++, 0.5f);
    Dev<float> y(5 * 2048);
    fill_nan(y.get(), y.n, nullptr);
    dequantize_rows(m.m, 0, 5, y.get(), nullptr);
    const auto got = y.download();
    const size_t bad = bit_mismatches(got, m.values.data(), got.size());
    // The embedding path: the row index read from device memory.
    Dev<int32_t> row(std::vector<int32_t>{3});
    Dev<float> e(2048);
    fill_nan(e.get(), e.n, nullptr);
    embed(m.m, row.get(), e.get(), nullptr);
    const size_t bad_embed = bit_mismatches(e.download(), m.values.data() + 3 * 2048, 2048);
    r.verdict(name, bad == 0 && bad_embed == 0,
              bad == 0 && bad_embed == 0 ? "bit-identical (10240 + 2048 values)"
                                         : str(bad, " + ", bad_embed, " values differ in bits"));
  }
}

void test_gemv(Reporter& r, uint64_t seed) {
  Rng rng(seed);
  struct Shape {
    int64_t rows, cols;
  };
  // Partial row groups, rows shorter than a warp's granules (down to one block), long rows
  // whose granule count is not a power of two, many blocks of rows.
  // The 2048-column shapes of >= 1100 rows and the last one take the tensor-core path for Q4_K /
  // IQ2_XXS (enough tiles of 16 rows for half the SMs of an H200): a tile with one row, 17
  // blocks per row. The three consecutive 2048-column ones give every type all three inputs
  // there, the one-pass RMSNorm among them.
  std::vector<Shape> shapes = {{1, 256},     {37, 512},    {300, 2048}, {129, 4352}, {2500, 2048},
                               {1100, 2048}, {1500, 2048}, {5, 32},     {1057, 4352}};
  if (r.options().quick) shapes = {{37, 512}, {129, 4352}, {5, 32}};
  const GemvIn ins[] = {GemvIn::Plain, GemvIn::RmsNorm, GemvIn::GroupRms};
  int variant = 0;
  for (TensorType t : kTypes) {
    const BlockLayout layout = *block_layout(t);
    for (const Shape& s : shapes) {
      const int64_t cols = s.cols;
      if (cols % layout.values != 0) continue;
      GemvIn in = ins[variant % 3];
      if (in == GemvIn::GroupRms && cols % 128 != 0) in = GemvIn::RmsNorm;
      const bool add = (variant / 3) % 2 == 1;
      ++variant;
      const std::string name =
          str("gemv ", type_str(t), " ", s.rows, "x", cols, " ", in_name(in), add ? " +=" : "");
      if (!r.wanted(name)) continue;
      TestMatrix m(t, s.rows, cols, seed++, 0.05f);
      const auto x = rng.normal(cols);
      const auto norm = rng.normal(cols, 0.2f, 1.0f);
      const int group = 128;
      const float eps = 1e-6f;
      // Partial sums of squares of groups of values of unit scale.
      const auto sumsq = rng.uniform(cols / group * kGroupSumsqParts, 8.0f, 56.0f);
      const auto y0 = rng.normal(s.rows);
      Dev<float> dx(x), dnorm(norm), dsumsq(sumsq), dy(s.rows);
      if (add)
        dy.upload(y0);
      else
        fill_nan(dy.get(), dy.n, nullptr);
      GemvArgs a;
      a.w = m.m, a.in = in, a.x = dx.get(), a.norm = dnorm.get(), a.sumsq = dsumsq.get();
      a.group = group, a.eps = eps, a.out = add ? GemvOut::Add : GemvOut::Store, a.y = dy.get();
      // Every += case also folds a router into its output (RouterFold): the model's 513 logits
      // on the larger shapes, a few elsewhere.
      const int n_logits = s.rows >= 1000 ? 513 : 7, ld = fold_row_floats(n_logits);
      auto fold_w = rng.normal(s.rows * ld, 0.05f);
      for (int64_t j = 0; j < s.rows; ++j)  // the rows' padding never enters a sum
        for (int e = n_logits; e < ld; ++e) fold_w[j * ld + e] = std::nanf("");
      const auto fold_norm = rng.normal(s.rows, 0.2f, 1.0f);
      Dev<float> dfold_w(fold_w), dfold_norm(fold_norm);
      Dev<long long> dfolded(std::vector<long long>(n_logits, 0));
      if (add) a.fold = {dfold_w.get(), dfold_norm.get(), n_logits, dfolded.get()};
      gemv(a, nullptr);
      const auto got = dy.download();
      const auto h = reference_input(in, x, norm, sumsq, group, eps);
      std::vector<double> ref(s.rows);
      for (int64_t i = 0; i < s.rows; ++i) {
        double acc = add ? y0[i] : 0.0;
        const float* w = m.values.data() + i * cols;
        for (int64_t c = 0; c < cols; ++c) acc += double(w[c]) * h[c];
        ref[i] = acc;
      }
      r.check(name, worst_relative(got, ref), 1e-4);
      if (!add) continue;
      const auto folded = dfolded.download();
      std::vector<float> got_fold(n_logits);
      std::vector<double> ref_fold(n_logits, 0.0);
      for (int e = 0; e < n_logits; ++e) {
        got_fold[e] = static_cast<float>(double(folded[e]) / kFoldUnits);
        for (int64_t j = 0; j < s.rows; ++j)
          ref_fold[e] += double(fold_w[j * ld + e]) * fold_norm[j] * ref[j];
      }
      r.check(name + " router fold", worst_relative(got_fold, ref_fold), 1e-4);
    }
  }
  // An infinity and a NaN in the input: the float64 sums are not finite, so no output may be
  // (the tensor-core path gives such a block a NaN scale instead of digits).
  for (TensorType t : kTypes) {
    const int64_t rows = 2500, cols = 2048;
    const std::string name = str("gemv ", type_str(t), " ", rows, "x", cols, " inf and NaN in x");
    if (!r.wanted(name)) continue;
    TestMatrix m(t, rows, cols, seed++, 0.05f);
    auto x = rng.normal(cols);
    x[300] = INFINITY, x[1400] = std::nanf("");
    // Poisoned with a finite value, so that an output left unwritten counts as a failure.
    Dev<float> dx(x), dy(std::vector<float>(rows, 7.0f));
    GemvArgs a;
    a.w = m.m, a.x = dx.get(), a.y = dy.get();
    gemv(a, nullptr);
    const auto got = dy.download();
    int64_t finite = 0;
    for (int64_t i = 0; i < rows; ++i) {
      double ref = 0.0;
      for (int64_t c = 0; c < cols; ++c) ref += double(m.values[i * cols + c]) * x[c];
      if (std::isfinite(ref)) fail("selftest: the reference of ", name, " is finite");
      finite += std::isfinite(got[i]);
    }
    r.verdict(name, finite == 0, str(finite, " of ", rows, " outputs finite"));
  }
}

}  // namespace rl::cuda::st
