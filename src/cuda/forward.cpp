// The GPU forward pass for one token, top to bottom. Every launch is asynchronous and reads the
// token and position from device memory, so the whole step is captured once into a CUDA graph.
//
// Launches per layer: DeltaNet 3-4 (input projections by weight type, the step with the gated
// norm's gate and weights, the output projection with the norm's 1 / rms), attention 5-6
// (projections, norm/RoPE/append, split-K attention, merge with the gate, output projection), MoE 4
// (top-k with the experts' gate/up, shared gate/up, shared down, experts' down). Residual adds are
// fused into the output and down projections, the router's logits into the output projections
// (RouterFold), RMSNorms into the GEMVs that read them. Launches that do not depend on each other
// run concurrently on a second stream (a parallel branch of the graph): the shared expert beside
// the routed top-k and gate/up, and a projection's second weight type beside its first.
#include "cuda/forward.h"

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "util/error.h"

namespace rl::cuda {

namespace {

using engine::KvType;

// Calls back the observer, if any, after a launch.
struct Note {
  StepObserver* observer;
  cudaStream_t stream;
  void operator()(const char* what, uint64_t bytes) const {
    if (observer) observer->launched(what, bytes, stream);
  }
};

// Independent launches beside the main stream (StepStreams): fork() lets the side stream start
// after what main has enqueued so far, join() makes main wait for what the side has enqueued.
// Without a side stream both do nothing and stream() is main.
struct Side {
  const StepStreams& s;
  cudaStream_t stream() const { return s.side ? s.side : s.main; }
  void fork() const {
    if (!s.side) return;
    RL_CUDA(cudaEventRecord(s.fork, s.main));
    RL_CUDA(cudaStreamWaitEvent(s.side, s.fork, 0));
  }
  void join() const {
    if (!s.side) return;
    RL_CUDA(cudaEventRecord(s.join, s.side));
    RL_CUDA(cudaStreamWaitEvent(s.main, s.join, 0));
  }
};

// y[run offsets] = W · in(x) for every run of a projection; runs after the first (other weight
// types, e.g. DeltaNet's Q8_0 b|a beside its Q4_K qkv|z) on the side stream.
void project(const Projection& p, GemvIn in, const float* x, const float* norm, float eps, float* y,
             cudaStream_t stream, const Side& side, const Note& note, const char* what) {
  const bool split = p.runs.size() > 1;
  if (split) side.fork();
  for (size_t i = 0; i < p.runs.size(); ++i) {
    const auto& run = p.runs[i];
    GemvArgs a;
    a.w = run.m;
    a.in = in;
    a.x = x;
    a.norm = norm;
    a.eps = eps;
    a.y = y + run.out_offset;
    gemv(a, i == 0 ? stream : side.stream());
    note(what, matrix_bytes(run.m));
  }
  if (split) side.join();
}

// The output projections complete the residual the MoE reads: they also fold in its router.
RouterFold router_fold(const DeviceModel& m, const LayerGpu& L, const SessionBuffers& s) {
  RouterFold f;
  f.w_t = L.moe.router_t, f.norm = L.post_norm, f.n_logits = m.config.n_expert + 1;
  f.acc = s.folded;
  return f;
}

void attention_block(const DeviceModel& m, const LayerGpu& L, SessionBuffers& s,
                     const SessionBuffers::AttentionState& kv, const StepOptions& opt,
                     cudaStream_t stream, const Side& side, const Note& note) {
  const auto& c = m.config;
  const int32_t* pos = s.step + 1;
  project(L.attn.qkv, GemvIn::RmsNorm, s.x, L.attn_norm, c.rms_eps, s.proj, stream, side, note,
          "attention q|k|v projection");
  const float* qg = s.proj;
  const float* k = qg + 2 * c.q_dim();
  const float* v = k + c.kv_dim();

  AttnPrepArgs prep;
  prep.qg = qg, prep.k = k, prep.v = v;
  prep.q_norm = L.attn.q_norm, prep.k_norm = L.attn.k_norm, prep.eps = c.rms_eps;
  prep.rope_inv_freq = m.rope_inv_freq, prep.n_rot = c.n_rot;
  prep.q_out = s.q, prep.k_cache = kv.k, prep.v_cache = kv.v;
  prep.kv_type = s.kv_type, prep.max_ctx = s.max_ctx, prep.pos = pos;
  prep.n_head = c.n_head, prep.n_head_kv = c.n_head_kv, prep.head_dim = c.head_dim;
  attn_prep(prep, stream);
  note("attention q/k norm, RoPE, KV append", 0);

  AttnArgs at;
  at.q = s.q, at.k_cache = kv.k, at.v_cache = kv.v, at.kv_type = s.kv_type;
  at.max_ctx = s.max_ctx, at.pos = pos, at.n_head_kv = c.n_head_kv;
  at.split = opt.split;
  at.ctas = s.attn_grid.at(opt.split);
  at.part_o = s.part_o, at.part_ml = s.part_ml;
  attn_decode(at, stream);
  note("attention split-K",
       2ull * c.kv_dim() * (opt.position_hint + 1) * engine::kv_type_bytes(s.kv_type));

  AttnMergeArgs mg;
  mg.part_o = s.part_o, mg.part_ml = s.part_ml, mg.ctas = at.ctas;
  mg.pos = pos, mg.qg = qg, mg.out = s.mixed, mg.n_head = c.n_head, mg.n_head_kv = c.n_head_kv;
  attn_merge(mg, stream);
  note("attention merge + gate", 0);

  GemvArgs out;
  out.w = L.attn.output, out.x = s.mixed, out.out = GemvOut::Add, out.y = s.x;
  out.fold = router_fold(m, L, s);
  gemv(out, stream);
  note("attention output projection (+residual, router fold)",
       matrix_bytes(L.attn.output) + router_fold_bytes(c));
}

void deltanet_block(const DeviceModel& m, const LayerGpu& L, SessionBuffers& s,
                    const SessionBuffers::DeltaNetState& st, cudaStream_t stream, const Side& side,
                    const Note& note) {
  const auto& c = m.config;
  const auto& w = L.deltanet;
  project(w.in, GemvIn::RmsNorm, s.x, L.attn_norm, c.rms_eps, s.proj, stream, side, note,
          "deltanet qkv|z|b|a projection");
  const float* qkv = s.proj;
  const float* z = qkv + c.ssm_conv_channels();
  const float* b = z + c.ssm_v_dim();
  const float* a = b + c.ssm_n_v_heads;

  DeltaNetArgs d;
  d.qkv = qkv, d.b = b, d.a = a;
  d.conv_w = w.conv, d.dt_bias = w.dt_bias, d.ssm_a = w.a;
  d.z = z, d.norm = w.norm;
  d.conv_ring = st.conv_ring, d.state = st.delta, d.out = s.mixed, d.out_sumsq = s.mixed_sumsq;
  d.pos = s.step + 1;
  d.n_k_heads = c.ssm_n_k_heads, d.n_v_heads = c.ssm_n_v_heads, d.head_dim = c.ssm_head_dim;
  d.conv_kernel = c.ssm_conv_kernel, d.eps = c.rms_eps;
  deltanet_step(d, stream);
  note("deltanet conv + delta rule + gate",
       2ull * c.ssm_n_v_heads * c.ssm_head_dim * c.ssm_head_dim * 4);

  GemvArgs out;
  out.w = w.out, out.in = GemvIn::GroupRms, out.x = s.mixed, out.sumsq = s.mixed_sumsq;
  out.group = c.ssm_head_dim, out.eps = c.rms_eps;
  out.out = GemvOut::Add, out.y = s.x;
  out.fold = router_fold(m, L, s);
  gemv(out, stream);
  note("deltanet norm + output projection (+residual, router fold)",
       matrix_bytes(w.out) + router_fold_bytes(c));
}

// The router's logits were folded into the output projection just before (RouterFold). Where
// the formats allow (moe_gate_up_takes_shared, moe_down_takes_shared), the shared expert is a slot
// of the experts' gate/up launch and blocks of their down's last warps, which adds both into the
// residual.
// Otherwise it runs on the side stream beside the routed top-k and gate/up (it needs only its
// gate's folded logit, the last one) and stores its output for the experts' down to add. The
// experts' down also zeroes the folded logits for the next layer.
void moe_block(const DeviceModel& m, const LayerGpu& L, SessionBuffers& s, cudaStream_t stream,
               const Side& side, const Note& note) {
  const auto& c = m.config;
  const auto& w = L.moe;
  const int k = c.n_expert_used;
  const bool shared_joins = moe_gate_up_takes_shared(w.gate, k, w.sh_gate, w.sh_up) &&
                            moe_down_takes_shared(w.down, k, w.sh_down);
  const uint64_t shared_gate_up_bytes = matrix_bytes(w.sh_gate) + matrix_bytes(w.sh_up);

  if (!shared_joins) {
    side.fork();
    GateUpArgs sh;
    sh.gate = w.sh_gate, sh.up = w.sh_up, sh.n_slots = 1;
    sh.gate_folded = s.folded + c.n_expert;
    sh.x = s.x, sh.norm = L.post_norm, sh.eps = c.rms_eps, sh.act = s.sh_act;
    moe_gate_up(sh, side.stream());
    note("shared expert gate/up + SwiGLU", shared_gate_up_bytes);
    DownArgs sd;
    sd.down = w.sh_down, sd.n_slots = 1, sd.act = s.sh_act, sd.store = true, sd.y = s.sh_out;
    moe_down(sd, side.stream());
    note("shared expert down", matrix_bytes(w.sh_down));
  }

  RouteArgs route;
  route.folded = s.folded, route.n_expert = c.n_expert;
  route.ids = s.expert_ids, route.weights = s.expert_weights;
  GateUpArgs gu;
  gu.gate = w.gate, gu.up = w.up, gu.route = &route;
  gu.n_slots = k, gu.x = s.x, gu.norm = L.post_norm, gu.eps = c.rms_eps, gu.act = s.act;
  if (shared_joins) gu.shared_gate = w.sh_gate, gu.shared_up = w.sh_up, gu.shared_act = s.sh_act;
  moe_gate_up(gu, stream);
  const uint64_t gate_up_bytes = k * (matrix_bytes(w.gate) + matrix_bytes(w.up));
  if (shared_joins)
    note("router top-k + experts and shared gate/up + SwiGLU",
         gate_up_bytes + shared_gate_up_bytes);
  else
    note("router top-k + experts gate/up + SwiGLU", gate_up_bytes);
  if (!shared_joins) side.join();

  DownArgs dn;
  dn.down = w.down, dn.ids = s.expert_ids, dn.n_slots = k, dn.act = s.act, dn.y = s.x;
  if (shared_joins)
    dn.shared = w.sh_down, dn.shared_act = s.sh_act;
  else
    dn.extra = s.sh_out;
  dn.clear = s.folded, dn.clear_n = c.n_expert + 1;
  moe_down(dn, stream);
  if (shared_joins)
    note("experts and shared down (+residual)", k * matrix_bytes(w.down) + matrix_bytes(w.sh_down));
  else
    note("experts down + shared output (+residual)", k * matrix_bytes(w.down));
}

// Sizes (in bytes) of the pieces of a session's storage, in allocation order.
struct Plan {
  uint64_t offset = 0;
  uint64_t take(uint64_t bytes) {
    const uint64_t at = offset;
    offset += (bytes + 255) / 256 * 256;
    return at;
  }
};

int64_t proj_rows(const model::Config& c) {
  const int64_t attn = 2 * c.q_dim() + 2 * c.kv_dim();
  const int64_t dn = c.ssm_conv_channels() + c.ssm_v_dim() + 2 * c.ssm_n_v_heads;
  return std::max(attn, dn);
}

// Partials per KV head that a session keeps room for (1 without attention layers).
int partials_per_head(const model::Config& c, const AttnGrid& grid) {
  return c.n_attention_layers() == 0 ? 1 : most_ctas(grid);
}

}  // namespace

uint64_t SessionBuffers::bytes_needed(const model::Config& c, int64_t max_ctx, KvType kv_type) {
  Plan p;
  const uint64_t kv_one =
      static_cast<uint64_t>(c.kv_dim()) * max_ctx * engine::kv_type_bytes(kv_type);
  for (int i = 0; i < c.n_attention_layers(); ++i) p.take(kv_one), p.take(kv_one);
  for (int i = 0; i < c.n_deltanet_layers(); ++i) {
    p.take(static_cast<uint64_t>(c.ssm_conv_kernel) * c.ssm_conv_channels() * 4);
    p.take(static_cast<uint64_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim * 4);
  }
  const uint64_t ctas = partials_per_head(c, attention_grid(kv_type, c.n_head_kv));
  p.take(c.n_embd * 4);
  p.take(proj_rows(c) * 4);
  p.take(c.q_dim() * 4);
  p.take(std::max(c.q_dim(), c.ssm_v_dim()) * 4);
  p.take(c.ssm_n_v_heads * kGroupSumsqParts * 4);
  p.take((c.n_expert + 1) * 8);
  p.take((c.n_expert_used + 1) * 4);
  p.take((c.n_expert_used + 1) * 4);
  p.take(c.n_expert_used * c.expert_ff * 4);
  p.take(c.shexp_ff * 4);
  p.take(c.n_embd * 4);
  p.take(static_cast<uint64_t>(c.n_head_kv) * ctas * kAttnGroup * kAttnHeadDim * 4);
  p.take(static_cast<uint64_t>(c.n_head_kv) * ctas * kAttnGroup * 2 * 4);
  p.take(2 * 4);
  return p.offset;
}

SessionBuffers::SessionBuffers(const DeviceModel& model, int64_t max_ctx_, KvType kv_type_,
                               float* logits_)
    : max_ctx(max_ctx_), kv_type(kv_type_), logits(logits_) {
  const auto& c = model.config;
  storage = DeviceBuffer(bytes_needed(c, max_ctx, kv_type));
  uint8_t* base = storage.as<uint8_t>();
  Plan p;  // the same order as bytes_needed
  auto at = [&](uint64_t bytes) { return base + p.take(bytes); };
  const uint64_t kv_one =
      static_cast<uint64_t>(c.kv_dim()) * max_ctx * engine::kv_type_bytes(kv_type);
  for (int i = 0; i < c.n_attention_layers(); ++i) {
    AttentionState a;
    a.k = at(kv_one);
    a.v = at(kv_one);
    attention.push_back(a);
  }
  for (int i = 0; i < c.n_deltanet_layers(); ++i) {
    DeltaNetState d;
    d.conv_ring = reinterpret_cast<float*>(
        at(static_cast<uint64_t>(c.ssm_conv_kernel) * c.ssm_conv_channels() * 4));
    d.delta = reinterpret_cast<float*>(
        at(static_cast<uint64_t>(c.ssm_n_v_heads) * c.ssm_head_dim * c.ssm_head_dim * 4));
    deltanet.push_back(d);
  }
  state_bytes = p.offset;
  attn_grid = attention_grid(kv_type, c.n_head_kv);
  const uint64_t ctas = partials_per_head(c, attn_grid);
  x = reinterpret_cast<float*>(at(c.n_embd * 4));
  proj = reinterpret_cast<float*>(at(proj_rows(c) * 4));
  q = reinterpret_cast<float*>(at(c.q_dim() * 4));
  mixed = reinterpret_cast<float*>(at(std::max(c.q_dim(), c.ssm_v_dim()) * 4));
  mixed_sumsq = reinterpret_cast<float*>(at(c.ssm_n_v_heads * kGroupSumsqParts * 4));
  folded = reinterpret_cast<long long*>(at((c.n_expert + 1) * 8));
  expert_ids = reinterpret_cast<int32_t*>(at((c.n_expert_used + 1) * 4));
  expert_weights = reinterpret_cast<float*>(at((c.n_expert_used + 1) * 4));
  act = reinterpret_cast<float*>(at(c.n_expert_used * c.expert_ff * 4));
  sh_act = reinterpret_cast<float*>(at(c.shexp_ff * 4));
  sh_out = reinterpret_cast<float*>(at(c.n_embd * 4));
  part_o = reinterpret_cast<float*>(
      at(static_cast<uint64_t>(c.n_head_kv) * ctas * kAttnGroup * kAttnHeadDim * 4));
  part_ml =
      reinterpret_cast<float*>(at(static_cast<uint64_t>(c.n_head_kv) * ctas * kAttnGroup * 2 * 4));
  step = reinterpret_cast<int32_t*>(at(2 * 4));
  RL_CUDA(cudaMemset(base, 0, storage.bytes()));
}

AttnGrid attention_grid(KvType kv_type, int n_head_kv) {
  AttnGrid grid;
  for (int split : attn_splits(kv_type))
    grid[split] = attn_ctas_per_head(kv_type, split, n_head_kv);
  return grid;
}

int most_ctas(const AttnGrid& grid) {
  int most = 1;
  for (const auto& [split, ctas] : grid) most = std::max(most, ctas);
  return most;
}

namespace {
// "32, 64, ...": split sizes as RL_ENGINE_ATTN_BLK's errors name them.
std::string size_list(const std::vector<int>& sizes) {
  std::string list;
  for (int s : sizes) list += (list.empty() ? "" : ", ") + std::to_string(s);
  return list;
}
}  // namespace

int parse_attention_split(const char* value) {
  if (!value || !*value) return 0;
  const std::string v = value;
  for (int s : kAttnSplitSizes)
    if (v == std::to_string(s)) return s;
  fail("RL_ENGINE_ATTN_BLK must be one of ",
       size_list({std::begin(kAttnSplitSizes), std::end(kAttnSplitSizes)}), ", not '", v, "'");
}

int forced_attention_split() {
  static const int forced = parse_attention_split(std::getenv("RL_ENGINE_ATTN_BLK"));
  return forced;
}

int attention_split_for(int64_t position, const AttnGrid& grid, int forced) {
  if (grid.empty()) fail("attention: no split sizes for this cache type");
  if (forced) {
    if (!grid.count(forced)) {
      std::vector<int> sizes;
      for (const auto& [split, ctas] : grid) sizes.push_back(split);
      fail("RL_ENGINE_ATTN_BLK=", forced, " is not available with this KV cache type (it takes ",
           size_list(sizes), ")");
    }
    return forced;
  }
  const int64_t n = position + 1;
  for (const auto& [split, ctas] : grid)
    if ((n + split - 1) / split <= ctas) return split;
  return grid.rbegin()->first;
}

void enqueue_decode_step(const DeviceModel& m, SessionBuffers& s, const StepOptions& options,
                         const StepStreams& streams, StepObserver* observer) {
  const auto& c = m.config;
  cudaStream_t stream = streams.main;
  const Note note{observer, stream};
  StepStreams in_order = streams;
  if (observer) in_order.side = nullptr;  // timed launch by launch
  const Side side{in_order};
  embed(m.token_embd, s.step, s.x, stream);
  note("embedding row", matrix_bytes(m.token_embd) / std::max<int64_t>(1, c.n_vocab));

  int attention_index = 0, deltanet_index = 0;
  for (const LayerGpu& L : m.layers) {
    if (L.attention)
      attention_block(m, L, s, s.attention[attention_index++], options, stream, side, note);
    else
      deltanet_block(m, L, s, s.deltanet[deltanet_index++], stream, side, note);
    moe_block(m, L, s, stream, side, note);
  }

  GemvArgs head;
  head.w = m.output, head.in = GemvIn::RmsNorm, head.x = s.x, head.norm = m.output_norm;
  head.eps = c.rms_eps, head.y = s.logits;
  gemv(head, stream);
  note("output norm + head", matrix_bytes(m.output));
}

}  // namespace rl::cuda
