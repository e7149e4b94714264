// Self-test of the MoE kernels: router top-k with forced expert sets and ties, the experts'
// gate/up with SwiGLU and the weighted down projection, against float64.
#include <algorithm>
#include <numeric>

#include "cuda/device.h"
#include "cuda/selftest_util.h"
#include "util/error.h"

namespace rl::cuda::st {

namespace {

using gguf::TensorType;

// Folded logits (RouterFold) for the given values: round(l · kFoldUnits), exact for values of at
// least 2^-7 in magnitude.
std::vector<long long> fold(const std::vector<float>& logits) {
  std::vector<long long> f(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) f[i] = std::llround(double(logits[i]) * kFoldUnits);
  return f;
}

// The logits the router sees: folded values times the factor 1 / rms.
std::vector<double> unfold(const std::vector<long long>& folded, double factor) {
  std::vector<double> l(folded.size());
  for (size_t i = 0; i < folded.size(); ++i) l[i] = double(folded[i]) / kFoldUnits * factor;
  return l;
}

// The reference top-k: descending logits, ties to the lower index; weights renormalised.
void reference_route(const std::vector<double>& logits, int k, std::vector<int>& ids,
                     std::vector<double>& weights) {
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  ids.assign(order.begin(), order.begin() + k);
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += std::exp(logits[ids[i]] - logits[ids[0]]);
  weights.resize(k);
  for (int i = 0; i < k; ++i) weights[i] = std::exp(logits[ids[i]] - logits[ids[0]]) / sum;
}

// The selection alone (moe_route) on folded logits, with a factor that is not 1.
void route_case(Reporter& r, const std::string& name, std::vector<float> logits, int k,
                float shared_logit) {
  if (!r.wanted(name)) return;
  const int n = static_cast<int>(logits.size());
  const float factor = 0.75f;
  logits.push_back(shared_logit);
  const auto folded = fold(logits);
  Dev<long long> df(folded);
  Dev<int32_t> ids(k + 1);
  Dev<float> w(k + 1);
  RL_CUDA(cudaMemset(ids.get(), 0xff, (k + 1) * 4));
  fill_nan(w.get(), w.n, nullptr);
  moe_route(df.get(), n, k, factor, true, ids.get(), w.get(), nullptr);
  const auto got_ids = ids.download();
  const auto got_w = w.download();
  auto l = unfold(folded, factor);
  const double shared = l.back();
  l.pop_back();
  std::vector<int> ref_ids;
  std::vector<double> ref_w;
  reference_route(l, k, ref_ids, ref_w);
  bool same = got_ids[k] == 0;
  for (int i = 0; i < k; ++i) same = same && got_ids[i] == ref_ids[i];
  std::vector<float> gw(got_w.begin(), got_w.end());
  ref_w.push_back(sigmoid(shared));
  std::string detail = same ? "expert ids identical" : "";
  if (!same) {
    detail = "ids got";
    for (int i = 0; i < k; ++i) detail += str(" ", got_ids[i]);
    detail += " want";
    for (int i = 0; i < k; ++i) detail += str(" ", ref_ids[i]);
  }
  r.verdict(name + " ids", same, detail);
  r.check(name + " weights", worst_relative(gw, ref_w), 1e-6);
}

// An expert stack: E matrices of rows x cols in one allocation.
struct Experts {
  TestMatrix tm;
  Experts(TensorType t, int E, int64_t rows, int64_t cols, uint64_t seed)
      : tm(t, E * rows, cols, seed, 0.05f) {
    tm.m.rows = rows;
    tm.m.expert_rows = rows;
  }
  const float* row(int e, int64_t r) const {
    return tm.values.data() + (e * tm.m.expert_rows + tm.m.row_offset + r) * tm.m.cols;
  }
};

double dot(const float* w, const std::vector<double>& h) {
  double s = 0;
  for (size_t i = 0; i < h.size(); ++i) s += double(w[i]) * h[i];
  return s;
}

// The MoE input x with its norm weights, and h = x / rms(x) ⊙ norm in float64.
struct NormedInput {
  std::vector<float> x, norm;
  double factor;  // 1 / rms(x)
  std::vector<double> h;
};
NormedInput normed_input(Rng& rng, int64_t d) {
  NormedInput in{rng.normal(d), rng.normal(d, 0.2f, 1.0f), 0.0, std::vector<double>(d)};
  double ss = 0;
  for (float v : in.x) ss += double(v) * v;
  in.factor = 1.0 / std::sqrt(ss / d + 1e-6);
  for (int64_t i = 0; i < d; ++i) in.h[i] = in.x[i] * in.factor * in.norm[i];
  return in;
}

// Folded router logits that select exactly `ids`, in order, plus the shared gate's (E + 1 in
// all), and the logits they stand for once the kernel applies the factor of x.
struct ForcedRoute {
  std::vector<long long> folded;
  std::vector<double> logits;
};
ForcedRoute forced_route(Rng& rng, int E, const std::vector<int32_t>& ids, double factor) {
  auto raw = rng.normal(E + 1, 0.3f);
  for (size_t i = 0; i < ids.size(); ++i) raw[ids[i]] = 6.0f - 0.37f * static_cast<float>(i);
  ForcedRoute r{fold(raw), {}};
  r.logits = unfold(r.folded, factor);
  return r;
}

// A route on the device: the folded logits, and the ids and weights the kernel writes (k + 1
// each, poisoned first).
struct DeviceRoute {
  Dev<long long> folded;
  Dev<int32_t> ids;
  Dev<float> weights;
  RouteArgs args;
  DeviceRoute(const std::vector<long long>& f, int E, int k)
      : folded(f), ids(k + 1), weights(k + 1) {
    fill_nan(weights.get(), weights.n, nullptr);
    args.folded = folded.get(), args.n_expert = E, args.ids = ids.get();
    args.weights = weights.get();
  }
};

// Expert set `ids` either given to the kernel or, with `routed`, chosen by it from logits
// forced to pick exactly those experts (and their softmax weights become the scales). `shared`:
// the shared expert's launches, one plain matrix (ids {0}, no id array) scaled by the sigmoid of
// the last logit, and its down projection stored (y = extra + W·act) rather than added.
void experts_case(Reporter& r, TensorType t, const std::vector<int32_t>& ids, bool fused, int E,
                  int64_t d, int64_t ff, uint64_t seed, bool routed = false, bool shared = false) {
  const std::string tag = str(gguf::type_name(t), " E=", E, " k=", ids.size(), " ff=", ff, " d=", d,
                              fused ? " fused gate_up" : "", routed ? " routed in-kernel" : "",
                              shared ? " shared (gate logit, stored + extra)" : "");
  const std::string n1 = "moe gate/up+swiglu " + tag,
                    n2 = str("moe down (weighted, ", shared ? "=" : "+=", ") ") + tag;
  if (!r.wanted(n1) && !r.wanted(n2)) return;
  Rng rng(seed);
  const int k = static_cast<int>(ids.size());
  // gate and up: separate stacks, or one stack of 2*ff rows per expert.
  Experts gate(t, E, fused ? 2 * ff : ff, d, seed + 1);
  Experts up_sep(t, fused ? 1 : E, ff, d, seed + 2);
  Matrix g = gate.tm.m, u = fused ? gate.tm.m : up_sep.tm.m;
  if (fused) {
    g.rows = u.rows = ff;
    u.row_offset = ff;
  }
  Experts down(t, E, d, ff, seed + 3);
  const NormedInput in = normed_input(rng, d);
  const auto &x = in.x, &norm = in.norm;
  const auto& h = in.h;
  std::vector<double> scales;
  for (float v : rng.uniform(k, 0.05f, 0.6f)) scales.push_back(v);
  const auto y0 = rng.normal(d);
  const ForcedRoute route = forced_route(rng, E, ids, in.factor);
  const auto& folded = route.folded;
  const auto& logits = route.logits;
  if (routed) {
    std::vector<int> ref_ids;
    std::vector<double> ref_w;
    reference_route(std::vector<double>(logits.begin(), logits.begin() + E), k, ref_ids, ref_w);
    for (int i = 0; i < k; ++i) scales[i] = ref_w[i];
  }
  if (shared) scales[0] = sigmoid(logits[E]);
  const auto extra = rng.normal(d);
  Dev<float> dx(x), dnorm(norm), dscales(std::vector<float>(scales.begin(), scales.end())),
      act(k * ff), dy(y0), dextra(extra);
  DeviceRoute route_dev(folded, E, k);
  if (shared) fill_nan(dy.get(), dy.n, nullptr);
  Dev<int32_t> dids(ids);
  fill_nan(act.get(), act.n, nullptr);
  GateUpArgs a;
  a.gate = g, a.up = u, a.n_slots = k;
  if (routed)
    a.route = &route_dev.args;
  else if (shared)
    a.gate_folded = route_dev.folded.get() + E;
  else
    a.ids = dids.get(), a.scales = dscales.get();
  a.x = dx.get(), a.norm = dnorm.get(), a.eps = 1e-6f, a.act = act.get();
  moe_gate_up(a, nullptr);
  const auto got_act = act.download();
  if (routed) {
    const auto gi = route_dev.ids.download();
    const auto gw = route_dev.weights.download();
    bool same = gi[k] == 0;
    for (int i = 0; i < k; ++i) same = same && gi[i] == ids[i];
    r.verdict("moe in-kernel route ids " + tag, same, same ? "expert ids identical" : "ids differ");
    std::vector<double> want(scales.begin(), scales.end());
    want.push_back(sigmoid(logits[E]));
    // The kernel's factor 1 / rms comes from float sums of squares.
    r.check("moe in-kernel route weights " + tag, worst_relative(gw, want), 1e-5);
  }

  std::vector<double> ref_act(k * ff);
  for (int s = 0; s < k; ++s)
    for (int64_t i = 0; i < ff; ++i) {
      const float* gr = gate.tm.values.data() + (ids[s] * g.expert_rows + i) * d;
      const float* ur = fused ? gate.tm.values.data() + (ids[s] * u.expert_rows + ff + i) * d
                              : up_sep.tm.values.data() + (ids[s] * ff + i) * d;
      ref_act[s * ff + i] = scales[s] * silu(dot(gr, h)) * dot(ur, h);
    }
  // The scale from the gate logit is computed as in the routed kernel: to float precision.
  r.check(n1, worst_relative(got_act, ref_act), 1e-4);

  // Down from the GPU's activations, so this case measures the down kernel alone. It also
  // zeroes the folded logits, as after a layer's gate/up.
  DownArgs dn;
  dn.down = down.tm.m, dn.ids = dids.get(), dn.n_slots = k, dn.act = act.get(), dn.y = dy.get();
  if (shared) dn.ids = nullptr, dn.store = true, dn.extra = dextra.get();
  dn.clear = route_dev.folded.get(), dn.clear_n = E + 1;
  moe_down(dn, nullptr);
  const auto got_y = dy.download();
  const auto cleared = route_dev.folded.download();
  const bool zero = std::all_of(cleared.begin(), cleared.end(), [](long long v) { return v == 0; });
  r.verdict(n2 + " clears the folded logits", zero, zero ? "all zero" : "some left");
  std::vector<double> ref_y(d);
  for (int64_t i = 0; i < d; ++i) {
    double acc = shared ? extra[i] : y0[i];
    for (int s = 0; s < k; ++s) {
      const float* w = down.row(ids[s], i);
      for (int64_t c = 0; c < ff; ++c) acc += double(w[c]) * got_act[s * ff + c];
    }
    ref_y[i] = acc;
  }
  r.check(n2, worst_relative(got_y, ref_y), 1e-4);
}

// The experts' down with the shared expert's down (format ts) in the same launch
// (moe_down_takes_shared): y += Σ_s down_ids[s] · act_s + shared · shared_act, against float64.
void shared_down_case(Reporter& r, TensorType t, TensorType ts, const std::vector<int32_t>& ids,
                      int E, int64_t d, int64_t ff, int64_t shared_ff, uint64_t seed) {
  const int k = static_cast<int>(ids.size());
  const std::string name =
      str("moe down + shared down (", gguf::type_name(ts), ") ", gguf::type_name(t), " E=", E,
          " k=", k, " ff=", ff, " d=", d, " shared ff=", shared_ff);
  if (!r.wanted(name)) return;
  Experts down(t, E, d, ff, seed);
  TestMatrix shared(ts, d, shared_ff, seed + 1, 0.05f);
  if (!moe_down_takes_shared(down.tm.m, k, shared.m)) {
    r.verdict(name, false, "moe_down_takes_shared refused a shape it should take");
    return;
  }
  Rng rng(seed + 2);
  const auto act = rng.normal(k * ff), shared_act = rng.normal(shared_ff), y0 = rng.normal(d);
  Dev<float> dact(act), dshared_act(shared_act), dy(y0);
  Dev<int32_t> dids(ids);
  DownArgs dn;
  dn.down = down.tm.m, dn.ids = dids.get(), dn.n_slots = k, dn.act = dact.get(), dn.y = dy.get();
  dn.shared = shared.m, dn.shared_act = dshared_act.get();
  moe_down(dn, nullptr);
  const auto got = dy.download();
  std::vector<double> want(d);
  for (int64_t i = 0; i < d; ++i) {
    double acc = y0[i];
    for (int s = 0; s < k; ++s) {
      const float* w = down.row(ids[s], i);
      for (int64_t c = 0; c < ff; ++c) acc += double(w[c]) * act[s * ff + c];
    }
    const float* w = shared.values.data() + i * shared_ff;
    for (int64_t c = 0; c < shared_ff; ++c) acc += double(w[c]) * shared_act[c];
    want[i] = acc;
  }
  r.check(name, worst_relative(got, want), 1e-4);
}

// The experts' gate/up with the shared expert's (format ts) as a slot of the same launch
// (moe_gate_up_takes_shared), the experts picked in the kernel: the routed slots' activations and
// the shared one's, sigmoid(last logit) · silu(gate · h) · (up · h), against float64.
void shared_gate_up_case(Reporter& r, TensorType t, TensorType ts, const std::vector<int32_t>& ids,
                         int E, int64_t d, int64_t ff, uint64_t seed) {
  const int k = static_cast<int>(ids.size());
  const std::string name = str("moe gate/up + shared gate/up (", gguf::type_name(ts), ") ",
                               gguf::type_name(t), " E=", E, " k=", k, " ff=", ff, " d=", d);
  if (!r.wanted(name)) return;
  Experts gate(t, E, ff, d, seed), up(t, E, ff, d, seed + 1);
  TestMatrix shared_gate(ts, ff, d, seed + 2, 0.05f), shared_up(ts, ff, d, seed + 3, 0.05f);
  if (!moe_gate_up_takes_shared(gate.tm.m, k, shared_gate.m, shared_up.m)) {
    r.verdict(name, false, "moe_gate_up_takes_shared refused a shape it should take");
    return;
  }
  Rng rng(seed + 4);
  const NormedInput in = normed_input(rng, d);
  const auto& h = in.h;
  const ForcedRoute route = forced_route(rng, E, ids, in.factor);
  const auto& logits = route.logits;
  std::vector<int> ref_ids;
  std::vector<double> ref_w;
  reference_route(std::vector<double>(logits.begin(), logits.begin() + E), k, ref_ids, ref_w);

  Dev<float> dx(in.x), dnorm(in.norm), act(k * ff), shared_act(ff);
  DeviceRoute route_dev(route.folded, E, k);
  fill_nan(act.get(), act.n, nullptr);
  fill_nan(shared_act.get(), shared_act.n, nullptr);
  GateUpArgs a;
  a.gate = gate.tm.m, a.up = up.tm.m, a.route = &route_dev.args, a.n_slots = k;
  a.x = dx.get(), a.norm = dnorm.get(), a.eps = 1e-6f, a.act = act.get();
  a.shared_gate = shared_gate.m, a.shared_up = shared_up.m, a.shared_act = shared_act.get();
  moe_gate_up(a, nullptr);
  const auto got_ids = route_dev.ids.download();
  bool same = true;
  for (int i = 0; i < k; ++i) same = same && got_ids[i] == ids[i];
  r.verdict(name + " ids", same, same ? "expert ids identical" : "ids differ");
  std::vector<double> want(k * ff), want_shared(ff);
  for (int s = 0; s < k; ++s)
    for (int64_t i = 0; i < ff; ++i)
      want[s * ff + i] = ref_w[s] * silu(dot(gate.row(ids[s], i), h)) * dot(up.row(ids[s], i), h);
  for (int64_t i = 0; i < ff; ++i)
    want_shared[i] = sigmoid(logits[E]) * silu(dot(shared_gate.values.data() + i * d, h)) *
                     dot(shared_up.values.data() + i * d, h);
  r.check(name + " experts", worst_relative(act.download(), want), 1e-4);
  r.check(name + " shared", worst_relative(shared_act.download(), want_shared), 1e-4);
}

}  // namespace

void test_moe(Reporter& r, uint64_t seed) {
  Rng rng(seed);
  // Router: random logits; a forced set (ten clear winners); ties decided by the lower index.
  route_case(r, "moe route 512 experts top-10 random", rng.normal(512), 10, 0.3f);
  {
    auto l = rng.normal(512, 0.5f);
    const int forced[10] = {511, 0, 77, 255, 256, 3, 400, 128, 300, 9};
    for (int i = 0; i < 10; ++i) l[forced[i]] = 10.0f - 0.25f * i;
    route_case(r, "moe route 512 top-10 forced set", l, 10, -2.0f);
  }
  {
    auto l = rng.normal(512, 0.5f);
    for (int e : {500, 7, 260, 7 + 64, 33, 1, 480, 129, 64, 300, 301}) l[e] = 4.0f;  // 11-way tie
    route_case(r, "moe route 512 top-10 ties -> lower index", l, 10, 1.5f);
  }
  for (int ties : {25, 27, 28}) {
    // Ties straddling the cut (5 clear winners above): more candidates than k; 30 and 32 are
    // within the 32 the threshold path ranks, 33 are not (the rounds decide).
    auto l = rng.normal(512, 0.5f);
    for (int e : {3, 290, 18, 444, 64}) l[e] = 10.0f;
    for (int i = 0; i < ties; ++i) l[(37 * i + 11) % 512] = 3.0f;
    route_case(r, "moe route 512 top-10 " + std::to_string(ties) + " ties at the cut", l, 10, 0.2f);
  }
  {
    // Wider ties than the threshold path takes (> 32 keys reach it): the rounds decide.
    auto l = rng.normal(512, 0.5f);
    for (int i = 0; i < 40; ++i) l[(13 * i + 5) % 512] = 3.0f;
    route_case(r, "moe route 512 top-10 40-way tie", l, 10, -0.4f);
    route_case(r, "moe route 512 top-10 all equal", std::vector<float>(512, 0.25f), 10, 0.f);
  }
  route_case(r, "moe route 512 experts top-1", rng.normal(512), 1, 0.1f);
  route_case(r, "moe route 512 experts top-32", rng.normal(512), 32, -0.1f);
  route_case(r, "moe route 8 experts top-2", rng.normal(8), 2, 0.0f);
  route_case(r, "moe route 16 experts top-4", rng.normal(16), 4, 0.7f);

  // Experts with forced sets, including repeated and the highest ids.
  const std::vector<int32_t> ids10 = {31, 0, 7, 16, 3, 30, 12, 25, 1, 19};
  experts_case(r, TensorType::IQ2_XXS, ids10, false, 32, 2048, 512, seed + 10);
  experts_case(r, TensorType::IQ2_XXS, ids10, true, 32, 2048, 512, seed + 20);
  experts_case(r, TensorType::IQ2_XXS, ids10, false, 32, 2048, 512, seed + 25, true);
  experts_case(r, TensorType::F32, {5, 11, 0, 2}, false, 16, 32, 32, seed + 27, true);
  experts_case(r, TensorType::Q4_K, {0}, false, 1, 2048, 512, seed + 28, false, true);
  experts_case(r, TensorType::Q5_K, {3, 0, 2, 1}, false, 4, 2048, 512, seed + 29, true);
  experts_case(r, TensorType::Q6_K, {1, 3, 0}, false, 4, 2048, 512, seed + 31);
  experts_case(r, TensorType::IQ3_XXS, {6, 0, 2, 7, 5}, false, 8, 2048, 512, seed + 32, true);
  experts_case(r, TensorType::Q2_K, {2, 7, 0, 5}, false, 8, 2048, 512, seed + 33, true);
  experts_case(r, TensorType::Q3_K, {4, 1, 6, 3, 0}, false, 8, 2048, 512, seed + 34, true);
  experts_case(r, TensorType::Q8_0, {3, 0, 5, 1}, false, 8, 2048, 512, seed + 35, true);
  experts_case(r, TensorType::IQ4_XS, {6, 1, 0, 4, 2}, false, 8, 2048, 512, seed + 36, true);
  experts_case(r, TensorType::Q4_0, {2, 5, 0, 7}, false, 8, 2048, 512, seed + 37, true);
  experts_case(r, TensorType::IQ4_NL, {1, 6, 3, 0, 4}, false, 8, 2048, 512, seed + 38, true);
  experts_case(r, TensorType::IQ2_XS, ids10, false, 32, 2048, 512, seed + 39, true);
  // The 32-value formats on the float decoders (rows of one block, as in mkmodel's tiny models).
  experts_case(r, TensorType::IQ4_NL, {5, 11, 0, 2}, false, 16, 32, 32, seed + 41, true);
  experts_case(r, TensorType::Q4_0, {15, 4, 9, 0}, false, 16, 32, 64, seed + 42);
  // The shared expert in the experts' launches: the 80B's formats and shapes, a shared row of
  // one block, shared rows of as many blocks as the down has warps (k = 4: 8 warps), and every
  // pair of formats that merges, per kernel: IQ2_XXS, IQ3_XXS and IQ4_XS with their own format
  // and the K-quants (IQ3_XXS also with Q6_K and Q8_0); Q2_K-Q5_K with Q2_K-Q5_K; in the down,
  // Q6_K with Q4_K-Q6_K; IQ2_XS with IQ2_XS and the K-quants.
  if (tensor_core_gemv_enabled()) {
    using T = TensorType;
    shared_gate_up_case(r, T::IQ2_XXS, T::Q4_K, ids10, 32, 2048, 512, seed + 74);
    shared_down_case(r, T::IQ2_XXS, T::Q4_K, ids10, 32, 2048, 512, 512, seed + 70);
    shared_down_case(r, T::IQ2_XXS, T::Q5_K, {4, 0, 9, 2, 7, 1, 3, 8}, 10, 2048, 512, 256,
                     seed + 71);
    shared_down_case(r, T::Q4_K, T::Q4_K, {2, 0, 5, 1}, 6, 2048, 512, 2048, seed + 72);
    struct Pairs {
      T routed;
      std::vector<T> shared;
      bool down_only;
    };
    const std::vector<T> k_quants = {T::Q2_K, T::Q3_K, T::Q4_K, T::Q5_K};
    const Pairs pairs[] = {
        {T::IQ2_XXS, {T::IQ2_XXS, T::Q2_K, T::Q3_K, T::Q5_K}, false},  // Q4_K: the 80B's, above
        {T::IQ3_XXS, {T::IQ3_XXS, T::Q2_K, T::Q3_K, T::Q4_K, T::Q5_K, T::Q6_K, T::Q8_0}, false},
        {T::Q2_K, k_quants, false},
        {T::Q3_K, k_quants, false},
        {T::Q4_K, k_quants, false},
        {T::Q5_K, k_quants, false},
        {T::Q6_K, {T::Q4_K, T::Q5_K, T::Q6_K}, true},
        {T::IQ4_XS, {T::IQ4_XS, T::Q2_K, T::Q3_K, T::Q4_K, T::Q5_K}, false},
        {T::IQ2_XS, {T::IQ2_XS, T::Q2_K, T::Q3_K, T::Q4_K, T::Q5_K}, false}};
    const std::vector<int32_t> ids12 = {11, 3, 0, 7, 9, 1, 5, 10, 2, 8};
    uint64_t pair_seed = seed + 200;
    for (const Pairs& p : pairs)
      for (T ts : p.shared) {
        if (!p.down_only) shared_gate_up_case(r, p.routed, ts, ids12, 12, 2048, 512, pair_seed);
        shared_down_case(r, p.routed, ts, ids12, 12, 2048, 512, 512, pair_seed + 1);
        pair_seed += 2;
      }
  }
  if (!r.options().quick) {
    experts_case(r, TensorType::IQ3_XXS, {5, 2}, false, 8, 256, 256, seed + 30);
    experts_case(r, TensorType::Q4_K, {3, 0, 2, 1}, false, 4, 2048, 512, seed + 40);
    experts_case(r, TensorType::F32, {15, 4, 9, 0}, false, 16, 32, 32, seed + 50);
    experts_case(r, TensorType::Q8_0, {1}, false, 2, 2048, 512, seed + 60);
  }
}

}  // namespace rl::cuda::st
