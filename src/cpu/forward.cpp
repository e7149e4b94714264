// The qwen3next forward pass on the CPU, readable top to bottom (MODEL.md is the spec):
//
//   x = token_embd[t]
//   for each layer:  x += attention(norm(x)) or deltanet(norm(x));  x += moe(norm(x))
//   logits = output · norm(x)
//
// A call processes a chunk of T tokens. Projections run as matrix products over the chunk; the
// DeltaNet recurrence runs token by token (exact form); attention reads the KV cache.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "cpu/state.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/half.h"

namespace rl::cpu {

namespace {

using engine::KvType;

void grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

void reserve_workspace(const model::Config& c, Workspace& ws, int64_t T, int threads) {
  if (T <= ws.capacity) return;
  const int64_t d = c.n_embd;
  grow(ws.x, T * d);
  grow(ws.h, T * d);
  grow(ws.mix, T * d);
  grow(ws.qg, T * 2 * c.q_dim());
  grow(ws.k, T * c.kv_dim());
  grow(ws.v, T * c.kv_dim());
  grow(ws.o, T * c.q_dim());
  grow(ws.qkv, T * c.ssm_conv_channels());
  grow(ws.conv, T * c.ssm_conv_channels());
  grow(ws.z, T * c.ssm_v_dim());
  grow(ws.fused, T * (c.ssm_conv_channels() + c.ssm_v_dim()));
  grow(ws.ba, T * 2 * c.ssm_n_v_heads);
  grow(ws.core, T * c.ssm_v_dim());
  grow(ws.router, T * c.n_expert);
  ws.expert_ids.resize(T * c.n_expert_used);
  grow(ws.expert_weights, T * c.n_expert_used);
  grow(ws.ex_in, T * d);
  grow(ws.ex_gu, T * 2 * c.expert_ff);
  grow(ws.ex_act, T * c.expert_ff);
  grow(ws.ex_out, T * d);
  grow(ws.sh_gu, T * 2 * c.shexp_ff);
  grow(ws.sh_act, T * c.shexp_ff);
  grow(ws.sh_out, T * d);
  grow(ws.sh_gate, T);
  ws.scores.resize(threads);
  ws.capacity = T;
}

// ---- KV cache rows in the session's storage type ----------------------------------------

}  // namespace

void store_kv_row(KvType type, uint8_t* dst, const float* src, int64_t n) {
  switch (type) {
    case KvType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvType::F16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_half(src[i]);
      return;
    }
    case KvType::BF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
      return;
    }
  }
}

namespace {

// Returns the row as floats: in place for f32, else converted into tmp.
const float* load_row(KvType type, const uint8_t* src, float* tmp, int64_t n) {
  if (type == KvType::F32) return reinterpret_cast<const float*>(src);
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  if (type == KvType::F16)
    for (int64_t i = 0; i < n; ++i) tmp[i] = half_to_float(s[i]);
  else
    for (int64_t i = 0; i < n; ++i) tmp[i] = bf16_to_float(s[i]);
  return tmp;
}

// ---- Full attention ----------------------------------------------------------------------

void attention(const Model& m, SessionState& st, const model::AttentionWeights& w, KvLayer& kv,
               int64_t T) {
  const auto& c = m.config;
  auto& ws = st.ws;
  ThreadPool& pool = *m.pool;
  const int64_t d = c.n_embd, hd = c.head_dim, kv_dim = c.kv_dim();
  const int64_t qg_dim = 2 * c.q_dim();
  const int group = c.n_head / c.n_head_kv;
  const int row_bytes = static_cast<int>(kv_dim * engine::kv_type_bytes(st.kv_type));

  matmul(pool, ws.scratch, w.q, 0, qg_dim, ws.h.data(), d, T, ws.qg.data(), qg_dim);
  matmul(pool, ws.scratch, w.k, 0, kv_dim, ws.h.data(), d, T, ws.k.data(), kv_dim);
  matmul(pool, ws.scratch, w.v, 0, kv_dim, ws.h.data(), d, T, ws.v.data(), kv_dim);

  // Per-head norms and RoPE, then append K and V to the cache.
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = st.position + t;
    for (int h = 0; h < c.n_head; ++h) {
      float* q = ws.qg.data() + t * qg_dim + h * 2 * hd;
      rmsnorm(q, w.q_norm.f32(), q, hd, c.rms_eps);
      rope_neox(q, c.n_rot, pos, c.rope_theta);
    }
    for (int g = 0; g < c.n_head_kv; ++g) {
      float* k = ws.k.data() + t * kv_dim + g * hd;
      rmsnorm(k, w.k_norm.f32(), k, hd, c.rms_eps);
      rope_neox(k, c.n_rot, pos, c.rope_theta);
    }
    store_kv_row(st.kv_type, kv.k.data() + pos * row_bytes, ws.k.data() + t * kv_dim, kv_dim);
    store_kv_row(st.kv_type, kv.v.data() + pos * row_bytes, ws.v.data() + t * kv_dim, kv_dim);
  }

  // softmax(q·Kᵀ/sqrt(hd))·V causally, each query head reading KV head h / group.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t n_positions = st.position + T;
  // Sized for the whole context once, so decode never reallocates as the position grows.
  for (auto& s : ws.scores) grow(s, st.max_context + kv_dim);  // scores, then one K/V row
  pool.parallel_for(T * c.n_head, 1, [&](int64_t i0, int64_t i1, int thread) {
    float* scores = ws.scores[thread].data();
    float* tmp = scores + n_positions;  // one converted K or V row
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / c.n_head;
      const int h = static_cast<int>(i % c.n_head);
      const int64_t g_off = (h / group) * hd;
      const float* q = ws.qg.data() + t * qg_dim + h * 2 * hd;
      const float* gate = q + hd;
      const int64_t n = st.position + t + 1;
      float max_s = -INFINITY;
      for (int64_t p = 0; p < n; ++p) {
        const float* k = load_row(st.kv_type, kv.k.data() + p * row_bytes, tmp, kv_dim);
        scores[p] = quant::dot_f32(q, k + g_off, hd) * scale;
        max_s = std::max(max_s, scores[p]);
      }
      double sum = 0;
      for (int64_t p = 0; p < n; ++p) {
        scores[p] = std::exp(scores[p] - max_s);
        sum += scores[p];
      }
      float* o = ws.o.data() + t * c.q_dim() + h * hd;
      std::fill(o, o + hd, 0.0f);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t p = 0; p < n; ++p) {
        const float* v = load_row(st.kv_type, kv.v.data() + p * row_bytes, tmp, kv_dim);
        quant::axpy_f32(scores[p] * inv, v + g_off, o, hd);
      }
      for (int64_t j = 0; j < hd; ++j) o[j] *= sigmoid(gate[j]);
    }
  });

  matmul(pool, ws.scratch, w.output, 0, d, ws.o.data(), c.q_dim(), T, ws.mix.data(), d);
}

// ---- Gated DeltaNet ----------------------------------------------------------------------

void deltanet(const Model& m, SessionState& st, const model::DeltaNetWeights& w,
              DeltaNetState& state, int64_t T) {
  const auto& c = m.config;
  auto& ws = st.ws;
  ThreadPool& pool = *m.pool;
  const int64_t d = c.n_embd, hd = c.ssm_head_dim;
  const int64_t C = c.ssm_conv_channels(), k_dim = c.ssm_k_dim(), v_dim = c.ssm_v_dim();
  const int nv = c.ssm_n_v_heads, nk = c.ssm_n_k_heads, r = nv / nk;
  const int K = c.ssm_conv_kernel;

  // Input projections: q,k,v (the conv channels) and the output gate z.
  if (w.layout == model::DeltaNetLayout::Split) {
    matmul(pool, ws.scratch, w.qkv, 0, C, ws.h.data(), d, T, ws.qkv.data(), C);
    matmul(pool, ws.scratch, w.gate, 0, v_dim, ws.h.data(), d, T, ws.z.data(), v_dim);
  } else {
    const int64_t fused_dim = C + v_dim;
    matmul(pool, ws.scratch, w.ssm_in, 0, fused_dim, ws.h.data(), d, T, ws.fused.data(), fused_dim);
    for (int64_t t = 0; t < T; ++t)
      model::unfuse_ssm_in(c, ws.fused.data() + t * fused_dim, ws.qkv.data() + t * C,
                           ws.z.data() + t * v_dim);
  }
  matmul(pool, ws.scratch, w.ba, 0, 2 * nv, ws.h.data(), d, T, ws.ba.data(), 2 * nv);

  // Causal depthwise conv over time, continuing from the last K-1 inputs, then SiLU.
  const float* taps = w.conv.f32();  // [C][K]
  pool.parallel_for(C, 256, [&](int64_t c0, int64_t c1, int) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      auto input = [&](int64_t u) {  // u < 0 reads the saved state
        return u < 0 ? state.conv[(u + K - 1) * C + ch] : ws.qkv[u * C + ch];
      };
      for (int64_t t = 0; t < T; ++t) {
        float acc = 0;
        for (int j = 0; j < K; ++j) acc += taps[ch * K + j] * input(t - (K - 1) + j);
        ws.conv[t * C + ch] = silu(acc);
      }
      float last[8];  // K - 1 <= 8, checked by read_config
      for (int i = 0; i < K - 1; ++i) last[i] = input(T - (K - 1) + i);
      for (int i = 0; i < K - 1; ++i) state.conv[i * C + ch] = last[i];
    }
  });

  // L2-normalise q and k per key head; q also takes the 1/sqrt(d_k) scale.
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t t = 0; t < T; ++t) {
    float* row = ws.conv.data() + t * C;
    for (int g = 0; g < nk; ++g) {
      l2norm(row + g * hd, hd, c.rms_eps);
      for (int64_t i = 0; i < hd; ++i) row[g * hd + i] *= q_scale;
      l2norm(row + k_dim + g * hd, hd, c.rms_eps);
    }
  }

  // The gated delta rule, token by token, each value head on its own state S (k × v):
  //   S = exp(g)·S;  δ = β·(v − Sᵀk);  S += k ⊗ δ;  o = Sᵀq
  const float* a_log = w.a.f32();
  const float* dt_bias = w.dt_bias.f32();
  pool.parallel_for(nv, 1, [&](int64_t h0, int64_t h1, int) {
    thread_local std::vector<float> kv, delta;  // sized once per thread
    kv.resize(hd);
    delta.resize(hd);
    for (int64_t h = h0; h < h1; ++h) {
      float* S = state.delta.data() + h * hd * hd;
      const int64_t g = h / r, j = h % r;  // key head g serves value heads g*r .. g*r+r-1
      for (int64_t t = 0; t < T; ++t) {
        const float* row = ws.conv.data() + t * C;
        const float* q = row + g * hd;
        const float* k = row + k_dim + g * hd;
        const float* v = row + 2 * k_dim + h * hd;
        const float* ba = ws.ba.data() + t * 2 * nv + g * 2 * r;  // [b(r) | a(r)] per key head
        const float beta = sigmoid(ba[j]);
        const float decay = std::exp(a_log[h] * softplus(ba[r + j] + dt_bias[h]));
        std::fill(kv.begin(), kv.end(), 0.0f);
        for (int64_t i = 0; i < hd; ++i) {
          float* s = S + i * hd;
          for (int64_t e = 0; e < hd; ++e) s[e] *= decay;
          quant::axpy_f32(k[i], s, kv.data(), hd);
        }
        for (int64_t e = 0; e < hd; ++e) delta[e] = beta * (v[e] - kv[e]);
        float* o = ws.core.data() + t * v_dim + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t i = 0; i < hd; ++i) {
          float* s = S + i * hd;
          quant::axpy_f32(k[i], delta.data(), s, hd);
          quant::axpy_f32(q[i], s, o, hd);
        }
      }
    }
  });

  // Gated RMSNorm per value head: rmsnorm(o) * ssm_norm * silu(z).
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < nv; ++h) {
      float* o = ws.core.data() + t * v_dim + h * hd;
      const float* z = ws.z.data() + t * v_dim + h * hd;
      rmsnorm(o, w.norm.f32(), o, hd, c.rms_eps);
      for (int64_t i = 0; i < hd; ++i) o[i] *= silu(z[i]);
    }
  }

  matmul(pool, ws.scratch, w.out, 0, d, ws.core.data(), v_dim, T, ws.mix.data(), d);
}

// ---- Mixture of experts ------------------------------------------------------------------

void moe(const Model& m, SessionState& st, const model::LayerWeights& w, int64_t T) {
  const auto& c = m.config;
  auto& ws = st.ws;
  ThreadPool& pool = *m.pool;
  const int64_t d = c.n_embd, ff = c.expert_ff, ffs = c.shexp_ff;
  const int E = c.n_expert, top = c.n_expert_used;

  // Router: softmax over experts, top-k (ties go to the lower index), renormalised weights.
  matmul(pool, ws.scratch, w.router, 0, E, ws.h.data(), d, T, ws.router.data(), E);
  auto& order = ws.expert_order;
  order.resize(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* logits = ws.router.data() + t * E;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    // Softmax restricted to the chosen experts equals the renormalised full softmax.
    const float max_l = logits[order[0]];
    double sum = 0;
    for (int i = 0; i < top; ++i) sum += std::exp(double(logits[order[i]]) - max_l);
    for (int i = 0; i < top; ++i) {
      ws.expert_ids[t * top + i] = order[i];
      ws.expert_weights[t * top + i] =
          static_cast<float>(std::exp(double(logits[order[i]]) - max_l) / sum);
    }
  }

  std::fill(ws.mix.begin(), ws.mix.begin() + T * d, 0.0f);

  // Routed experts, one expert at a time over the tokens that chose it (ascending expert id,
  // so a token's sum has the same order in a chunk as token by token).
  auto& users = ws.expert_users;
  users.resize(E);
  for (auto& u : users) u.clear();  // keeps capacity: no allocation in steady state
  for (int64_t t = 0; t < T; ++t)
    for (int i = 0; i < top; ++i)
      users[ws.expert_ids[t * top + i]].emplace_back(t, ws.expert_weights[t * top + i]);
  thread_local std::vector<const uint8_t*> rows;
  const auto& ex = w.experts;
  for (int e = 0; e < E; ++e) {
    const auto& list = users[e];
    if (list.empty()) continue;
    const int64_t n = static_cast<int64_t>(list.size());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(ws.ex_in.data() + i * d, ws.h.data() + list[i].first * d, d * sizeof(float));
    rows.resize(2 * ff);
    for (int64_t r = 0; r < ff; ++r) {
      rows[r] = ex.gate_row(e, r, ff);
      rows[ff + r] = ex.up_row(e, r, ff);
    }
    matmul_rows(pool, ws.scratch, ex.gate_up_type(), d, rows.data(), 2 * ff, ws.ex_in.data(), d, n,
                ws.ex_gu.data(), 2 * ff);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < ff; ++r)
        ws.ex_act[i * ff + r] = silu(ws.ex_gu[i * 2 * ff + r]) * ws.ex_gu[i * 2 * ff + ff + r];
    rows.resize(d);
    for (int64_t r = 0; r < d; ++r) rows[r] = ex.down_row(e, r, d);
    matmul_rows(pool, ws.scratch, ex.down.type, ff, rows.data(), d, ws.ex_act.data(), ff, n,
                ws.ex_out.data(), d);
    for (int64_t i = 0; i < n; ++i)
      quant::axpy_f32(list[i].second, ws.ex_out.data() + i * d, ws.mix.data() + list[i].first * d,
                      d);
  }

  // Shared expert with its sigmoid gate.
  matmul(pool, ws.scratch, w.shexp_gate, 0, ffs, ws.h.data(), d, T, ws.sh_gu.data(), 2 * ffs);
  matmul(pool, ws.scratch, w.shexp_up, 0, ffs, ws.h.data(), d, T, ws.sh_gu.data() + ffs, 2 * ffs);
  matmul(pool, ws.scratch, w.shexp_gate_inp, 0, 1, ws.h.data(), d, T, ws.sh_gate.data(), 1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < ffs; ++r)
      ws.sh_act[t * ffs + r] = silu(ws.sh_gu[t * 2 * ffs + r]) * ws.sh_gu[t * 2 * ffs + ffs + r];
  matmul(pool, ws.scratch, w.shexp_down, 0, d, ws.sh_act.data(), ffs, T, ws.sh_out.data(), d);
  for (int64_t t = 0; t < T; ++t)
    quant::axpy_f32(sigmoid(ws.sh_gate[t]), ws.sh_out.data() + t * d, ws.mix.data() + t * d, d);
}

}  // namespace

void forward(const Model& m, SessionState& st, std::span<const int32_t> tokens,
             std::span<float> last_logits, std::span<float> all_logits) {
  const auto& c = m.config;
  const auto& W = m.weights;
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t d = c.n_embd;
  if (T == 0) return;
  reserve_workspace(c, st.ws, T, m.pool->size());
  auto& ws = st.ws;
  ThreadPool& pool = *m.pool;

  for (int64_t t = 0; t < T; ++t) embedding_row(W.token_embd, tokens[t], ws.x.data() + t * d);

  int attn_index = 0, deltanet_index = 0;
  for (int il = 0; il < c.n_layer; ++il) {
    const auto& L = W.layers[il];
    for (int64_t t = 0; t < T; ++t)
      rmsnorm(ws.x.data() + t * d, L.attn_norm.f32(), ws.h.data() + t * d, d, c.rms_eps);
    if (L.is_attention)
      attention(m, st, L.attn, st.kv[attn_index++], T);
    else
      deltanet(m, st, L.deltanet, st.deltanet[deltanet_index++], T);
    for (int64_t i = 0; i < T * d; ++i) ws.x[i] += ws.mix[i];

    for (int64_t t = 0; t < T; ++t)
      rmsnorm(ws.x.data() + t * d, L.post_attention_norm.f32(), ws.h.data() + t * d, d, c.rms_eps);
    moe(m, st, L, T);
    for (int64_t i = 0; i < T * d; ++i) ws.x[i] += ws.mix[i];
  }

  // Output head: every row when asked for, else just the last.
  const int64_t first = all_logits.empty() ? T - 1 : 0;
  const int64_t n_out = T - first;
  for (int64_t t = first; t < T; ++t)
    rmsnorm(ws.x.data() + t * d, W.output_norm.f32(), ws.h.data() + (t - first) * d, d, c.rms_eps);
  if (all_logits.empty()) {
    matmul(pool, ws.scratch, W.output, 0, c.n_vocab, ws.h.data(), d, 1, last_logits.data(),
           c.n_vocab);
  } else {
    matmul(pool, ws.scratch, W.output, 0, c.n_vocab, ws.h.data(), d, n_out, all_logits.data(),
           c.n_vocab);
    std::copy_n(all_logits.data() + (T - 1) * c.n_vocab, c.n_vocab, last_logits.data());
  }
  st.position += T;
}

}  // namespace rl::cpu
