// Self-test of the Gated DeltaNet step: several consecutive positions from a random state and
// conv history, outputs (o gated with its norm weights, and o's sums of squares per quarter head)
// and the final state against a float64 recurrence.
#include <algorithm>

#include "cuda/selftest_util.h"
#include "util/error.h"

namespace rl::cuda::st {

namespace {

void deltanet_case(Reporter& r, int nk, int nv, int first_pos, int steps, uint64_t seed) {
  const std::string name = str("deltanet step nk=", nk, " nv=", nv, " positions ", first_pos, "..",
                               first_pos + steps - 1);
  if (!r.wanted(name)) return;
  Rng rng(seed);
  const int hd = 128, K = 4, rr = nv / nk;
  const int64_t C = 2LL * nk * hd + int64_t{nv} * hd;
  const auto conv_w = rng.normal(C * K, 0.5f);
  const auto dt_bias = rng.uniform(nv, -4.0f, 1.0f);
  auto ssm_a = rng.uniform(nv, -7.0f, -0.03f);
  auto ring = rng.normal(C * K);
  const auto state0 = rng.normal(int64_t{nv} * hd * hd, 0.05f);
  const auto norm = rng.normal(hd, 0.2f, 1.0f);
  Dev<float> d_conv(conv_w), d_dt(dt_bias), d_a(ssm_a), d_ring(ring), d_state(state0), d_norm(norm);
  Dev<float> d_in(C + 2 * nv), d_z(int64_t{nv} * hd), d_out(int64_t{nv} * hd);
  Dev<float> d_sumsq(int64_t{nv} * kGroupSumsqParts);
  Dev<int32_t> d_pos(1);

  std::vector<double> S(state0.begin(), state0.end());
  std::vector<double> ring_ref(ring.begin(), ring.end());
  double worst_out = 0, worst_sumsq = 0;
  for (int step = 0; step < steps; ++step) {
    const int p = first_pos + step;
    const auto in = rng.normal(C + 2 * nv);  // qkv, then b, then a
    const auto z = rng.normal(int64_t{nv} * hd);
    d_in.upload(in);
    d_z.upload(z);
    RL_CUDA(cudaMemcpy(d_pos.get(), &p, 4, cudaMemcpyHostToDevice));
    fill_nan(d_out.get(), d_out.n, nullptr);
    fill_nan(d_sumsq.get(), d_sumsq.n, nullptr);
    DeltaNetArgs a;
    a.qkv = d_in.get(), a.b = d_in.get() + C, a.a = d_in.get() + C + nv;
    a.conv_w = d_conv.get(), a.dt_bias = d_dt.get(), a.ssm_a = d_a.get();
    a.z = d_z.get(), a.norm = d_norm.get();
    a.conv_ring = d_ring.get(), a.state = d_state.get(), a.out = d_out.get(), a.pos = d_pos.get();
    a.out_sumsq = d_sumsq.get();
    a.n_k_heads = nk, a.n_v_heads = nv, a.head_dim = hd, a.conv_kernel = K, a.eps = 1e-6f;
    deltanet_step(a, nullptr);
    const auto got = d_out.download();
    const auto got_sumsq = d_sumsq.download();

    // float64 reference.
    std::vector<double> u(C);
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < K - 1; ++j)
        acc += conv_w[c * K + j] * ring_ref[((p - (K - 1) + j + K) % K) * C + c];
      acc += conv_w[c * K + K - 1] * in[c];
      u[c] = silu(acc);
    }
    for (int64_t c = 0; c < C; ++c) ring_ref[(p % K) * C + c] = in[c];
    for (int g = 0; g < nk; ++g) {
      for (double* v : {u.data() + g * hd, u.data() + int64_t{nk} * hd + g * hd}) {
        double ss = 0;
        for (int i = 0; i < hd; ++i) ss += v[i] * v[i];
        for (int i = 0; i < hd; ++i) v[i] /= std::sqrt(ss + 1e-6);
      }
      for (int i = 0; i < hd; ++i) u[g * hd + i] /= std::sqrt(double(hd));
    }
    std::vector<double> ref(int64_t{nv} * hd), ref_sumsq(int64_t{nv} * kGroupSumsqParts, 0.0);
    for (int h = 0; h < nv; ++h) {
      const double* q = u.data() + (h / rr) * hd;
      const double* k = u.data() + int64_t{nk} * hd + (h / rr) * hd;
      const double* v = u.data() + 2LL * nk * hd + int64_t{h} * hd;
      const double beta = sigmoid(in[C + h]);
      const double x = in[C + nv + h] + dt_bias[h];
      const double decay = std::exp(ssm_a[h] * (x > 20 ? x : std::log1p(std::exp(x))));
      double* Sh = S.data() + int64_t{h} * hd * hd;
      for (int i = 0; i < hd * hd; ++i) Sh[i] *= decay;
      for (int c = 0; c < hd; ++c) {
        double kv = 0;
        for (int i = 0; i < hd; ++i) kv += Sh[i * hd + c] * k[i];
        const double delta = beta * (v[c] - kv);
        double o = 0;
        for (int i = 0; i < hd; ++i) {
          Sh[i * hd + c] += k[i] * delta;
          o += Sh[i * hd + c] * q[i];
        }
        ref[int64_t{h} * hd + c] = o * norm[c] * silu(z[int64_t{h} * hd + c]);
        ref_sumsq[int64_t{h} * kGroupSumsqParts + c / (hd / kGroupSumsqParts)] += o * o;
      }
    }
    worst_out = std::max(worst_out, worst_relative(got, ref));
    worst_sumsq = std::max(worst_sumsq, worst_relative(got_sumsq, ref_sumsq));
  }
  r.check(name + " outputs", worst_out, 1e-4);
  r.check(name + " sums of squares", worst_sumsq, 1e-4);
  r.check(name + " state", worst_relative(d_state.download(), S), 1e-5);
  r.check(name + " conv ring", worst_relative(d_ring.download(), ring_ref), 0.0);
}

}  // namespace

void test_deltanet(Reporter& r, uint64_t seed) {
  deltanet_case(r, 16, 32, 0, 6, seed);         // the first positions of the ring
  deltanet_case(r, 16, 32, 1021, 5, seed + 1);  // ring wrap-around
  deltanet_case(r, 2, 4, 7, 3, seed + 2);       // the tiny models' heads
}

}  // namespace rl::cuda::st
