// Self-test of full attention for one token: Q/K norm + RoPE + append, split-K decode attention
// and the merge, at edge lengths around the split sizes and the 8-position tiles of the CTAs'
// shares, and long ones, for every split size and all KV types, against float64. Cache rows past
// the position hold NaN, so reading one fails.
#include <algorithm>
#include <cstring>

#include "cuda/selftest_util.h"
#include "util/error.h"
#include "util/half.h"

namespace rl::cuda::st {

namespace {

using engine::KvType;

constexpr int kHeads = 16, kKvHeads = 2, kHd = 256, kRot = 64;
constexpr double kTheta = 1e7;

double kv_value(KvType t, const uint8_t* base, int64_t i) {
  switch (t) {
    case KvType::F32: {
      float f;
      std::memcpy(&f, base + i * 4, 4);
      return f;
    }
    case KvType::F16: {
      uint16_t h;
      std::memcpy(&h, base + i * 2, 2);
      return half_to_float(h);
    }
    case KvType::BF16: {
      uint16_t h;
      std::memcpy(&h, base + i * 2, 2);
      return bf16_to_float(h);
    }
  }
  return 0;
}

// rmsnorm * w, then NEOX RoPE on the first kRot dims at position p.
std::vector<double> norm_rope(const float* x, const std::vector<float>& w, int64_t p) {
  double ss = 0;
  for (int i = 0; i < kHd; ++i) ss += double(x[i]) * x[i];
  std::vector<double> y(kHd);
  for (int i = 0; i < kHd; ++i) y[i] = x[i] / std::sqrt(ss / kHd + 1e-6) * w[i];
  for (int j = 0; j < kRot / 2; ++j) {
    const double angle = double(p) * std::pow(kTheta, -2.0 * j / kRot);
    const double a = y[j], b = y[j + kRot / 2];
    y[j] = a * std::cos(angle) - b * std::sin(angle);
    y[j + kRot / 2] = a * std::sin(angle) + b * std::cos(angle);
  }
  return y;
}

const char* kv_name(KvType t) {
  return engine::kv_type_name(t);
}

void attention_case(Reporter& r, int L, int split, KvType kv, int ctas, bool check_prep,
                    uint64_t seed) {
  const std::string name = str("attention len ", L, " split ", split, " kv ", kv_name(kv),
                               ctas > 0 ? str(" ctas ", ctas) : std::string());
  if (!r.wanted(name)) return;
  Rng rng(seed);
  const int64_t max_ctx = L + 3;
  const int eb = engine::kv_type_bytes(kv);
  const int64_t cache_values = int64_t{kKvHeads} * max_ctx * kHd;
  DeviceBuffer kc(cache_values * eb), vc(cache_values * eb);
  // Rows [0, L-1) random; rows from L-1 on NaN (row L-1 is appended by the prep kernel).
  fill_random(kc.data(), kv, cache_values, seed * 2 + 1, 1.0f, nullptr);
  fill_random(vc.data(), kv, cache_values, seed * 2 + 2, 1.0f, nullptr);
  for (int g = 0; g < kKvHeads; ++g)
    for (DeviceBuffer* b : {&kc, &vc})
      RL_CUDA(cudaMemset(b->as<uint8_t>() + (g * max_ctx + L - 1) * kHd * eb, 0xff,
                         (max_ctx - L + 1) * kHd * eb));

  const auto qg = rng.normal(kHeads * 2 * kHd);
  const auto k = rng.normal(kKvHeads * kHd);
  const auto v = rng.normal(kKvHeads * kHd);
  const auto q_norm = rng.normal(kHd, 0.3f, 1.0f);
  const auto k_norm = rng.normal(kHd, 0.3f, 1.0f);
  std::vector<double> inv_freq(kRot / 2);
  for (int j = 0; j < kRot / 2; ++j) inv_freq[j] = std::pow(kTheta, -2.0 * j / kRot);
  Dev<float> d_qg(qg), d_k(k), d_v(v), d_qn(q_norm), d_kn(k_norm), d_q(kHeads * kHd);
  Dev<float> d_out(kHeads * kHd);
  Dev<double> d_freq(inv_freq);
  Dev<int32_t> d_pos(std::vector<int32_t>{L - 1});
  const int n_ctas = ctas > 0 ? ctas : attn_ctas_per_head(kv, split, kKvHeads);
  Dev<float> part_o(int64_t{kKvHeads} * n_ctas * kAttnGroup * kHd);
  Dev<float> part_ml(int64_t{kKvHeads} * n_ctas * kAttnGroup * 2);
  fill_nan(d_q.get(), d_q.n, nullptr);
  fill_nan(d_out.get(), d_out.n, nullptr);
  fill_nan(part_o.get(), part_o.n, nullptr);
  fill_nan(part_ml.get(), part_ml.n, nullptr);

  AttnPrepArgs p;
  p.qg = d_qg.get(), p.k = d_k.get(), p.v = d_v.get(), p.q_norm = d_qn.get(), p.k_norm = d_kn.get();
  p.eps = 1e-6f, p.rope_inv_freq = d_freq.get(), p.n_rot = kRot, p.q_out = d_q.get();
  p.k_cache = kc.data(), p.v_cache = vc.data(), p.kv_type = kv, p.max_ctx = max_ctx;
  p.pos = d_pos.get(), p.n_head = kHeads, p.n_head_kv = kKvHeads, p.head_dim = kHd;
  attn_prep(p, nullptr);
  AttnArgs a;
  a.q = d_q.get(), a.k_cache = kc.data(), a.v_cache = vc.data(), a.kv_type = kv;
  a.max_ctx = max_ctx, a.pos = d_pos.get(), a.n_head_kv = kKvHeads, a.split = split;
  a.ctas = n_ctas, a.part_o = part_o.get(), a.part_ml = part_ml.get();
  attn_decode(a, nullptr);
  AttnMergeArgs m;
  m.part_o = part_o.get(), m.part_ml = part_ml.get(), m.ctas = n_ctas;
  m.pos = d_pos.get(), m.qg = d_qg.get(), m.out = d_out.get(), m.n_head = kHeads;
  m.n_head_kv = kKvHeads;
  attn_merge(m, nullptr);
  const auto got = d_out.download();

  // float64 reference over the cache as stored (the appended rows as the GPU stored them).
  std::vector<uint8_t> hk(cache_values * eb), hv(cache_values * eb);
  RL_CUDA(cudaMemcpy(hk.data(), kc.data(), hk.size(), cudaMemcpyDeviceToHost));
  RL_CUDA(cudaMemcpy(hv.data(), vc.data(), hv.size(), cudaMemcpyDeviceToHost));
  std::vector<double> ref(kHeads * kHd), ref_q(kHeads * kHd), ref_knew(kKvHeads * kHd);
  std::vector<double> ref_vnew(kKvHeads * kHd), got_knew(kKvHeads * kHd), got_vnew(kKvHeads * kHd);
  for (int g = 0; g < kKvHeads; ++g) {
    const auto kr = norm_rope(k.data() + g * kHd, k_norm, L - 1);
    for (int i = 0; i < kHd; ++i) {
      ref_knew[g * kHd + i] = kr[i];
      ref_vnew[g * kHd + i] = v[g * kHd + i];
      got_knew[g * kHd + i] = kv_value(kv, hk.data(), (g * max_ctx + L - 1) * kHd + i);
      got_vnew[g * kHd + i] = kv_value(kv, hv.data(), (g * max_ctx + L - 1) * kHd + i);
    }
  }
  std::vector<double> scores(L), keyrow(kHd);
  for (int h = 0; h < kHeads; ++h) {
    const int g = h / kAttnGroup;
    auto q = norm_rope(qg.data() + h * 2 * kHd, q_norm, L - 1);
    for (int i = 0; i < kHd; ++i) ref_q[h * kHd + i] = q[i] / 16.0;
    double mx = -INFINITY;
    for (int j = 0; j < L; ++j) {
      double s = 0;
      const int64_t base = (g * max_ctx + j) * kHd;
      for (int i = 0; i < kHd; ++i) s += q[i] * kv_value(kv, hk.data(), base + i);
      scores[j] = s / 16.0;
      mx = std::max(mx, scores[j]);
    }
    double sum = 0;
    for (int j = 0; j < L; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
    for (int i = 0; i < kHd; ++i) {
      double o = 0;
      for (int j = 0; j < L; ++j)
        o += scores[j] * kv_value(kv, hv.data(), (g * max_ctx + j) * kHd + i);
      ref[h * kHd + i] = o / sum * sigmoid(qg[h * 2 * kHd + kHd + i]);
    }
  }
  // float32 caches: float32 products and sums over up to 40000 positions (observed ~4e-7).
  // bf16 / f16 caches run on the tensor cores with q and p split into hi + lo in the cache type:
  // each product keeps 2^-16 (bf16) or 2^-22 (f16) of relative error, independent from position
  // to position, so the output moves by ~1e-5 (bf16) of its scale; the MMA's float32 sums
  // (truncating, not rounding to nearest) add ~1e-6. 1e-4 leaves a margin of ~5 for bf16.
  r.check(name, worst_relative(got, ref), kv == KvType::F32 ? 1e-5 : 1e-4);
  if (check_prep) {
    // The stored row is rounded to the cache type: allow that rounding for bf16 / f16.
    const double store_tol = kv == KvType::F32 ? 1e-6 : (kv == KvType::BF16 ? 8e-3 : 1e-3);
    r.check(str("attention prep q norm+rope kv ", kv_name(kv)),
            worst_relative(d_q.download(), ref_q), 1e-6);
    std::vector<float> gk(got_knew.begin(), got_knew.end()), gv(got_vnew.begin(), got_vnew.end());
    r.check(str("attention prep k norm+rope+append kv ", kv_name(kv)), worst_relative(gk, ref_knew),
            store_tol);
    r.check(str("attention prep v append kv ", kv_name(kv)), worst_relative(gv, ref_vnew),
            store_tol);
  }
}

}  // namespace

void test_attention(Reporter& r, uint64_t seed) {
  std::vector<int> lengths = {1,   2,   31,  32,  33,  63,   64,   65,   127,  128,   129,  255,
                              256, 257, 511, 512, 513, 1023, 1024, 1025, 1500, 12288, 40000};
  std::vector<KvType> types = {KvType::F32, KvType::BF16, KvType::F16};
  if (r.options().quick) {
    lengths = {1, 129, 257, 1500};
    types = {KvType::F32, KvType::BF16};
  }
  for (KvType kv : types) {
    bool prep = true;
    for (int L : lengths)
      for (int split : attn_splits(kv)) {
        attention_case(r, L, split, kv, 0, prep, seed++);
        prep = false;
      }
  }
  // Small grids: each CTA folds many passes into its running softmax (on the tensor cores, each
  // warp's online softmax runs over many tiles); with 7 CTAs the shares differ by a tile.
  const int small_grid_len = r.options().quick ? 1500 : 12288;
  attention_case(r, small_grid_len, 128, KvType::F32, 3, false, seed++);
  attention_case(r, small_grid_len - 7, 32, KvType::F32, 3, false, seed++);
  attention_case(r, small_grid_len, 128, KvType::BF16, 3, false, seed++);
  attention_case(r, small_grid_len - 7, 64, KvType::BF16, 3, false, seed++);
  if (!r.options().quick) attention_case(r, small_grid_len + 5, 256, KvType::F16, 3, false, seed++);
  attention_case(r, small_grid_len + 5, 64, KvType::F32, 7, false, seed++);
  attention_case(r, small_grid_len + 3, 512, KvType::F32, 3, false, seed++);
  attention_case(r, small_grid_len - 3, 1024, KvType::F32, 3, false, seed++);
  attention_case(r, small_grid_len + 5, 256, KvType::BF16, 7, false, seed++);
  // Large grids (more CTAs than are resident): more partials per head than the merge's warps
  // load in one batch (8 x 24), the last batch partial. Long enough that every CTA has a share
  // (a tile of 8 positions at least), in the quick run too.
  attention_case(r, 12288, 32, KvType::F32, 200, false, seed++);
  attention_case(r, 12291, 64, KvType::BF16, 321, false, seed++);
  if (!r.options().quick) attention_case(r, 40000, 128, KvType::F32, 480, false, seed++);
}

}  // namespace rl::cuda::st
