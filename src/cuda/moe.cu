// Mixture of experts on the GPU: router top-k, the chosen experts' gate/up with SwiGLU, and
// their down projections summed into the residual stream. Expert ids never leave the device.
//
// Bytes: per layer the 10 experts' gate, up and down matrices (8.1 MB in IQ2_XXS for the 80B)
// plus the shared expert's; each is read exactly once. gate and up of a row are read by the same
// warp so SwiGLU happens in registers; the down projection of all slots of a row is one warp's
// dot product over a virtual row of n_slots segments, so the weighted sum needs no extra pass.
// The top-k runs inside the gate/up kernel (every block picks the same experts from the 512
// logits in about a microsecond), which saves a launch per layer.
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemv_core.cuh"
#include "cuda/launch.cuh"
#include "cuda/router_fold.cuh"
#include "cuda/tc_gemv.cuh"

namespace rl::cuda {

namespace {

using gguf::TensorType;

constexpr int kMaxExperts = 512;  // 16 logits per lane, in registers
constexpr int kMaxSlots = 32;

// Top-k of n folded logits (RouterFold) by one warp (value descending, index ascending on ties).
// The factor 1 / rms is positive and common to all, so the ranking needs only the folded values;
// the softmax over the chosen k, which equals the renormalised softmax, is route_weight's. The
// comparisons are on order-preserving integer keys of the values, the warp reductions in hardware
// (redux.sync, sm_80+).
__device__ __forceinline__ uint32_t order_key(float x) {  // x1 < x2  <=>  key(x1) < key(x2)
  const uint32_t b = __float_as_uint(x);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}
// The keys of this lane's logits (indices lane + 32 j), and the value after the n logits (the
// shared expert's gate), loaded in the same batch. All loads are issued before any value is
// used: converting each value before loading the next (the NaN test branches on it) had made
// the 16 loads 16 serial round trips to L2, 2.2 µs more per MoE layer (CUDA_DECODE.md, sixth
// pass); loading the gate's value after the selection cost one more (sixteenth pass).
__device__ __forceinline__ float load_keys(const long long* folded, int n,
                                           uint32_t (&key)[kMaxExperts / 32]) {
  constexpr int J = kMaxExperts / 32;
  const int lane = threadIdx.x & 31;
  long long f[J];
#pragma unroll
  for (int j = 0; j < J; ++j) f[j] = folded[min(lane + 32 * j, n - 1)];
  const long long after = folded[n];
  float x[J];
#pragma unroll
  for (int j = 0; j < J; ++j) x[j] = folded_value(f[j]);
#pragma unroll
  for (int j = 0; j < J; ++j) {
    // Padding has key 0, below every real expert, and is never chosen as k <= n. A folded
    // value is an integer's conversion, never NaN, infinite or -0 (a NaN share lands on the
    // fold's lower bound), so equal logits are equal keys and tie by index.
    key[j] = lane + 32 * j < n ? order_key(x[j]) : 0u;
  }
  return folded_value(after);
}
// The rounds of a warp arg-max over all of a lane's keys (value descending, index ascending on
// ties): lane r gets the key of round r, lane 0 writes ids[0..k). The general path of warp_topk.
__device__ uint32_t topk_rounds(uint32_t (&key)[kMaxExperts / 32], int k, int32_t* ids) {
  const int lane = threadIdx.x & 31;
  uint32_t my_key = 0;
  for (int round = 0; round < k; ++round) {
    uint32_t local = 0;
#pragma unroll
    for (int j = 0; j < kMaxExperts / 32; ++j) local = max(local, key[j]);
    const uint32_t best = __reduce_max_sync(kFullMask, local);
    uint32_t mine = kMaxExperts;  // this lane's lowest index holding the best key
#pragma unroll
    for (int j = kMaxExperts / 32 - 1; j >= 0; --j)
      if (key[j] == best) mine = lane + 32 * j;
    const uint32_t best_i = __reduce_min_sync(kFullMask, mine);
#pragma unroll
    for (int j = 0; j < kMaxExperts / 32; ++j)
      if (lane + 32 * j == static_cast<int>(best_i)) key[j] = 0;
    if (lane == round) my_key = best;
    if (lane == 0) ids[round] = static_cast<int32_t>(best_i);
  }
  return my_key;
}

// The top k by a threshold, with no rounds over all keys: the k-th largest of the 32 lane maxima
// (or, with ties among them, a value below it) bounds the k-th largest key from below (the k
// lanes at or above it hold k keys at least as large), so only the keys at or above it are
// candidates, usually a few more than k. Their ranks, counted against each other in the same
// order as the rounds, place them. Returns false (nothing written) when more than 32 keys reach
// the threshold (wide ties), for topk_rounds to decide.
// Against the rounds alone: +0.6-1.1 % per decode step at 4K (CUDA_DECODE.md, tenth pass).
__device__ bool topk_threshold(const uint32_t (&key)[kMaxExperts / 32], int k, int32_t* ids,
                               uint32_t& my_key) {
  constexpr int J = kMaxExperts / 32;
  const int lane = threadIdx.x & 31;
  __shared__ uint2 cand[2][32];  // (key, index); one list per calling warp (warps 0 and 1)
  uint2* list = cand[(threadIdx.x >> 5) & 1];
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < J; ++j) m = max(m, key[j]);
  // k rounds over one value per lane; k <= n and k <= 32, so k lanes hold a real key (> 0).
  // A round retires every lane holding the maximum (no ballot for the lowest one): after k
  // rounds at least k lanes are retired, all at or above t, so t still bounds the k-th key from
  // below (+0.46 % per decode step at 4K, CUDA_DECODE.md, twenty-eighth pass). Ties that retire
  // every real lane early leave t = 0, which all 512 keys reach: topk_rounds decides.
  uint32_t t = 0;
  for (int r = 0; r < k; ++r) {
    t = __reduce_max_sync(kFullMask, m);
    if (m == t) m = 0;
  }
  int count = 0;
#pragma unroll
  for (int j = 0; j < J; ++j) count += key[j] >= t;
  int end = count;  // inclusive prefix sum over the lanes
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(kFullMask, end, o);
    if (lane >= o) end += v;
  }
  const int total = __shfl_sync(kFullMask, end, 31);
  if (total > 32) return false;
  int at = end - count;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (key[j] >= t) list[at++] = make_uint2(key[j], static_cast<uint32_t>(lane + 32 * j));
  __syncwarp();
  const uint2 me = lane < total ? list[lane] : make_uint2(0u, 0u);
  int rank = 0;
  for (int q = 0; q < total; ++q) {
    const uint2 o = list[q];
    rank += o.x > me.x || (o.x == me.x && o.y < me.y);
  }
  __syncwarp();  // every lane has read the list
  if (lane < total && rank < k) {
    ids[rank] = static_cast<int32_t>(me.y);
    list[rank].x = me.x;
  }
  __syncwarp();
  my_key = lane < k ? list[lane].x : 0u;
  return true;
}

// Writes ids[0..k) and, if top is given, the chosen values top[0..k) (descending) and top[k],
// the value of folded[n] (the shared expert's gate).
__device__ void warp_topk(const long long* folded, int n, int k, int32_t* ids, float* top) {
  const int lane = threadIdx.x & 31;
  uint32_t key[kMaxExperts / 32];
  const float after = load_keys(folded, n, key);
  uint32_t my_key;  // lane r < k: the key of rank r
  if (!topk_threshold(key, k, ids, my_key)) my_key = topk_rounds(key, k, ids);
  if (top && lane < k) top[lane] = key_value(my_key);
  if (top && lane == 0) top[k] = after;
}

// The weight of slot s of a route from its chosen values top[0..k) (descending) and the factor
// 1 / rms: the softmax over the k; slot k, the shared expert's, is the sigmoid of top[k], its
// gate's value. Every thread that needs a weight computes it in the same order.
__device__ float route_weight(const float* top, int k, int s, float factor) {
  if (s == k) return sigmoidf_exact(top[k] * factor);
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += expf((top[i] - top[0]) * factor);
  return expf((top[s] - top[0]) * factor) / sum;
}

__global__ void route_kernel(const long long* folded, int n_expert, int k, float factor,
                             bool shared, int32_t* ids, float* weights) {
  __shared__ float top[kMaxSlots + 1];
  pdl_launch_dependents();
  pdl_wait();
  warp_topk(folded, n_expert, k, ids, top);
  const int lane = threadIdx.x & 31;
  __syncwarp();
  if (lane < k) weights[lane] = route_weight(top, k, lane, factor);
  if (lane == 0 && shared) {
    ids[k] = 0;
    weights[k] = route_weight(top, k, k, factor);
  }
}

// ---- The shared expert in the routed experts' launches (moe_gate_up_takes_shared,
// moe_down_takes_shared). On a stream of its own beside the routed top-k and gate/up, its gate/up
// and down ended after them, and the routed down waited: 3 % of a 4K step (CUDA_DECODE.md,
// twenty-ninth pass). Its gate/up takes a slot of CTAs of its own, its down a block per warp of
// the CTA's last warps after their routed items.
constexpr auto kNoShared = TensorType::F32;

// The pairs of routed and shared formats that merge, per kernel: those whose merged kernels keep
// the plain routed kernels' occupancy (ptxas: the gate/up as many CTAs per SM, the down its
// 96-register cap) and were measured faster on 12-layer models at 4K (CUDA_DECODE.md, thirtieth
// to thirty-third passes). A shared format other than the routed one must need no lookup tables
// (the launch stages the routed format's). A layer merges only if both of its kernels do
// (moe_block).
enum class MoeKernel { GateUp, Down };
template <MoeKernel K, TensorType T, TensorType Ts>
constexpr bool pair_merges() {
  constexpr bool k_quant = Ts == TensorType::Q2_K || Ts == TensorType::Q3_K ||
                           Ts == TensorType::Q4_K || Ts == TensorType::Q5_K;
  if constexpr (!tc::supported<T>()) return false;
  // Q6_K experts' downs with a Q4_K-Q6_K shared down (the downs of llama.cpp's Q4_K_M and Q5_K_M
  // recipes): +5.7 to +9.6 %. Q6_K and Q8_0 gate/ups were slower (-2.6 and -3.2 %): their plain
  // kernels alone take 242 and 232 registers.
  if constexpr (T == TensorType::Q6_K)
    return K == MoeKernel::Down && (Ts == TensorType::Q4_K || Ts == TensorType::Q5_K || Ts == T);
  // Q8_0 experts were slower merged with a Q8_0 shared expert (thirtieth and thirty-first passes),
  // Q4_0 and IQ4_NL ones with their own format too (-3.5 and -1.7 %, thirty-third pass): items of
  // eight 32-value blocks alike.
  if constexpr (T == TensorType::Q8_0 || T == TensorType::Q4_0 || T == TensorType::IQ4_NL)
    return false;
  // Experts merging their own format: IQ2_XS +9.0 % (thirty-third pass).
  if constexpr (Ts == T) return true;
  // IQ2_XXS, IQ2_XS and IQ4_XS experts merge a Q2_K-Q5_K shared expert, not a Q6_K or Q8_0 one:
  // - IQ2_XXS: a Q6_K or Q8_0 shared expert takes the gate/up past 128 registers (one CTA per SM
  //   instead of two); with K-quant experts, slower by 3.3 and 4.6 % (the kernels within caps);
  // - IQ2_XS with Q4_K: +2.6 % (thirty-fourth pass); Q2_K, Q3_K and Q5_K merge by the same
  //   register counts (gate/up within 128, down 83-84), not timed;
  // - IQ4_XS with Q4_K or Q5_K: +6.9 and +5.7 %; with Q6_K or Q8_0, slower by 4.7 and 2.4 %
  //   (thirty-second pass).
  if constexpr (T == TensorType::IQ2_XXS || T == TensorType::IQ2_XS || T == TensorType::IQ4_XS)
    return k_quant;
  if constexpr (T == TensorType::IQ3_XXS)
    return k_quant || Ts == TensorType::Q6_K || Ts == TensorType::Q8_0;
  // K-quant experts with another K-quant (Q3_K with Q5_K: +6.4 %).
  return k_quant && (T == TensorType::Q2_K || T == TensorType::Q3_K || T == TensorType::Q4_K ||
                     T == TensorType::Q5_K);
}
// Host side of the above (moe_*_takes_shared check the shapes).
template <MoeKernel K>
bool formats_take_shared(TensorType routed, TensorType shared) {
  bool ok = false;
  fmt::dispatch(routed, [&]<TensorType T>() {
    fmt::dispatch(shared, [&]<TensorType Ts>() { ok = pair_merges<K, T, Ts>(); });
  });
  return ok;
}
// Calls run<Ts>() with the shared expert's format when `shared` (the moe_*_takes_shared checks
// passed), else run<kNoShared>().
template <MoeKernel K, TensorType T, class Run>
void run_with_shared(bool shared, TensorType shared_type, Run&& run) {
  if (shared) {
    fmt::dispatch(shared_type, [&]<TensorType Ts>() {
      if constexpr (pair_merges<K, T, Ts>()) run.template operator()<Ts>();
    });
    return;
  }
  run.template operator()<kNoShared>();
}

// ---- Gate/up with SwiGLU: blockIdx.y = slot. --------------------------------------------------
struct GateUpParams {
  GateUpArgs a;
  RouteArgs route;
  bool routed;
  DeviceTables tables;
  int lanes;
  int rows_per_block;
  int64_t prefetch_rows;  // of a fixed gate and up (prefetch_rows_for); a routed expert: none
};

// The experts of the slots into shared memory, with what their scales are made of (slot_top,
// for slot_scale once the factor 1 / rms is known): picked here from the folded logits (routed:
// the chosen values, then the shared gate's), or from ids and scales / gate_folded. Visible
// after the caller's next barrier. Returns whether the calling warp ran a top-k.
__device__ bool pick_slots(const GateUpParams& p, int32_t* slot_ids, float* slot_top) {
  const GateUpArgs& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (p.routed) {
    const RouteArgs& r = p.route;
    const bool copy = warp == 1 && blockIdx.x == 0 && blockIdx.y == 0;
    if (warp == 0) warp_topk(r.folded, r.n_expert, a.n_slots, slot_ids, slot_top);
    if (copy) {  // the copy the later kernels read
      warp_topk(r.folded, r.n_expert, a.n_slots, r.ids, nullptr);
      if (lane == 0) r.ids[a.n_slots] = 0;
    }
    return warp == 0 || copy;
  }
  if (threadIdx.x < a.n_slots) {
    slot_ids[threadIdx.x] = a.ids ? a.ids[threadIdx.x] : 0;
    slot_top[threadIdx.x] = a.scales        ? a.scales[threadIdx.x]
                            : a.gate_folded ? folded_value(*a.gate_folded)
                                            : 1.0f;
  }
  return false;
}

// The scale of a slot, from pick_slots' values and the factor 1 / rms of x. CTA (0, 0) of a routed
// launch also writes the route's weights (after the barrier that made slot_top visible).
__device__ float slot_scale(const GateUpParams& p, const float* slot_top, int slot, float factor) {
  const GateUpArgs& a = p.a;
  if (p.routed) {
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x <= a.n_slots)
      p.route.weights[threadIdx.x] = route_weight(slot_top, a.n_slots, threadIdx.x, factor);
    return route_weight(slot_top, a.n_slots, slot, factor);
  }
  if (!a.scales && a.gate_folded) return sigmoidf_exact(slot_top[slot] * factor);
  return slot_top[slot];
}

// One row of gate and one of up per lane group, the granule loop unrolled 4 times: two rows of
// each per lane group (more loads in flight per lane, half the blocks) was slower once the grids
// were one resident wave (see gemv.cu).
template <TensorType T>
__global__ void __launch_bounds__(kGemvThreads) gate_up_kernel(GateUpParams p) {
  using F = fmt::Format<T>;
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  __shared__ int32_t slot_ids[kMaxSlots + 1];
  __shared__ float slot_top[kMaxSlots + 1];
  const GateUpArgs& a = p.a;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * p.rows_per_block;
  const int64_t end = min(first + p.rows_per_block, a.gate.rows);
  if (!p.routed && !a.ids) {  // fixed matrices (the shared expert)
    prefetch_weight_rows<T>(a.gate, first, end, p.prefetch_rows);
    prefetch_weight_rows<T>(a.up, first, end, p.prefetch_rows);
  }
  const fmt::IqTables tables = stage_tables<T>(p.tables);
  pdl_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  pick_slots(p, slot_ids, slot_top);
  const float factor =
      stage_input<F::kGranuleValues>(GemvIn::RmsNorm, a.x, static_cast<int>(a.gate.cols), a.norm,
                                     nullptr, 0, a.eps, xs);  // ends synchronised
  const int slot = blockIdx.y;
  const int64_t e = slot_ids[slot];
  const float scale = slot_scale(p, slot_top, slot, factor);

  const int L = p.lanes, sub = lane & (L - 1), rows_per_pass = 32 / L;
  const int n_gran = static_cast<int>(a.gate.cols / F::kGranuleValues);
  for (int64_t r0 = first + warp * rows_per_pass; r0 < end; r0 += 8 * rows_per_pass) {
    if (r0 + 8 * rows_per_pass >= end) pdl_launch_dependents();
    const int64_t row = r0 + lane / L;
    const int64_t rc = min(row, end - 1);  // clamped: no branch around loads
    const RowLocator<T> loc[2] = {locate_row<T>(a.gate, e, rc), locate_row<T>(a.up, e, rc)};
    float v[2];
    rows_dot<T, 2, 4>(n_gran, sub, L, xs, tables, loc, v);
    const float g = group_sum(v[0], L), u = group_sum(v[1], L);
    if (sub == 0 && row < end) a.act[slot * a.gate.rows + row] = scale * (siluf(g) * u);
  }
}

// On the tensor cores (tc_gemv.cuh): a CTA takes rows_per_block rows (whole tiles) of gate and up
// of its slot; a warp item is a tile of both at one kb, sharing the input fragments.
// Warps per CTA at most (one per kb). The gate/up's 2048-value input has 8 kbs, and its Q4_K
// kernel takes 164 registers per thread, more than 16 warps allow; 20 warps allow 102.
constexpr int kGateUpMostWarps = 8;
constexpr int kDownMostWarps = 20;

// The rows' SwiGLU from a CTA's item sums (partial, as gate_up_tc_kernel lays them out), times
// the scale, into act.
__device__ __forceinline__ void swiglu_rows(const float* partial, const tc::CtaRows& rows, int n_kb,
                                            float factor, float scale, float* act) {
  for (int64_t j = threadIdx.x; j < rows.end - rows.first; j += blockDim.x) {
    const float gs = tc::row_total(partial, j, n_kb, 2 * tc::kTileRows) * factor;
    const float us = tc::row_total(partial + tc::kTileRows, j, n_kb, 2 * tc::kTileRows) * factor;
    act[rows.first + j] = scale * (siluf(gs) * us);
  }
}

// A CTA of the shared expert's slot in the routed gate/up's launch: its rows of the shared gate
// and up (format Ts, fixed, so the first items' bytes are requested before the wait), one
// matrix per item (both at once took 161 registers in Q4_K, more than two routed CTAs per SM
// allow), scaled by the sigmoid of the shared gate's folded logit.
template <TensorType Ts>
__device__ __forceinline__ void shared_gate_up_cta(const GateUpParams& p, const tc::Staged& st,
                                                   float* partial, const tc::CtaRows& rows) {
  using Raw = typename tc::Tc<Ts>::Raw;
  const GateUpArgs& a = p.a;
  const int n = static_cast<int>(a.gate.cols), n_kb = n / tc::kBlock;
  const int lane = threadIdx.x & 31;
  const tc::CtaBase base[2] = {tc::cta_base<Ts>(a.shared_gate, 0, rows),
                               tc::cta_base<Ts>(a.shared_up, 0, rows)};
  Raw first[2] = {};
  if (rows.items.n > 0)
    for (int m = 0; m < 2; ++m)
      first[m] = tc::load_item<Ts>(base[m], rows, rows.items.first(), lane);
  tc::stage_tables<Ts>(p.tables);  // an IQ format's own, routed and shared
  const tc::Input in{GemvIn::RmsNorm, a.x, a.norm, nullptr, 0, a.eps, n};
  pdl_wait();
  const long long gate_logit = p.route.folded[p.route.n_expert];
  tc::stage_own_blocks<Ts>(in, st);
  if constexpr (tc::reads_tables<Ts>()) __syncthreads();
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    auto load = [&](tc::Item it) { return tc::load_item<Ts>(base[m], rows, it, lane); };
    tc::pipelined(rows.items, first[m], load, [&](tc::Item it, const Raw& item) {
      const Raw one[1] = {item};
      float2 v[1];
      tc::item_sums<Ts, 1>(one, st, it.kb, lane, v);
      tc::store_item(partial + (rows.items.number(it) * 2 + m) * tc::kTileRows, v[0], lane);
    });
  }
  pdl_launch_dependents();
  __syncthreads();
  const float factor = tc::input_factor(in, st);
  swiglu_rows(partial, rows, n_kb, factor, sigmoidf_exact(folded_value(gate_logit) * factor),
              a.shared_act);
}

// With Ts, the CTAs of slot n_slots take the shared expert (shared_gate_up_cta).
template <TensorType T, TensorType Ts = kNoShared>
__global__ void __launch_bounds__(32 * kGateUpMostWarps) gate_up_tc_kernel(GateUpParams p) {
  extern __shared__ float4 smem[];
  __shared__ int32_t slot_ids[kMaxSlots + 1];
  __shared__ float slot_top[kMaxSlots + 1];
  const GateUpArgs& a = p.a;
  const int n = static_cast<int>(a.gate.cols), n_kb = n / tc::kBlock;
  const tc::Staged st = tc::carve(smem, n);
  float* partial = tc::after(st, n);  // [tile][kb][gate 16 | up 16]; 2 floats per row
  const tc::CtaRows rows = tc::cta_rows(p.rows_per_block, a.gate.rows, n_kb);
  const int slot = blockIdx.y;
  if constexpr (Ts != kNoShared) {
    if (slot == a.n_slots) return shared_gate_up_cta<Ts>(p, st, partial, rows);
  }
  const int lane = threadIdx.x & 31;
  tc::CtaBase base[2];  // gate, up of this slot's expert, once known
  struct Raw {
    typename tc::Tc<T>::Raw m[2];  // gate, up
  };
  auto load = [&](tc::Item it) {
    return Raw{
        {tc::load_item<T>(base[0], rows, it, lane), tc::load_item<T>(base[1], rows, it, lane)}};
  };
  auto find_expert = [&](int64_t e) {
    base[0] = tc::cta_base<T>(a.gate, e, rows);
    base[1] = tc::cta_base<T>(a.up, e, rows);
  };
  Raw raw{};
  const bool fixed = !p.routed && !a.ids;  // the shared expert: constant, before the wait
  if (fixed) find_expert(0);
  if (fixed && rows.items.n > 0) raw = load(rows.items.first());
  if (fixed) {
    prefetch_weight_rows<T>(a.gate, rows.first, rows.end, p.prefetch_rows);
    prefetch_weight_rows<T>(a.up, rows.first, rows.end, p.prefetch_rows);
  }
  tc::stage_tables<T>(p.tables);
  const tc::Input in{GemvIn::RmsNorm, a.x, a.norm, nullptr, 0, a.eps, n};
  pdl_wait();
  // The warps that pick no experts stage their blocks of x meanwhile; the others after the
  // barrier, while their first item's bytes arrive (+2.3 % at 4K, CUDA_DECODE.md, fifteenth pass).
  const bool picks = pick_slots(p, slot_ids, slot_top);
  if (!picks) tc::stage_own_blocks<T>(in, st);
  __syncthreads();  // the slots and the tables
  if (!fixed) find_expert(slot_ids[slot]);
  if (!fixed && rows.items.n > 0) raw = load(rows.items.first());
  if (picks) tc::stage_own_blocks<T>(in, st);
  tc::pipelined(rows.items, raw, load, [&](tc::Item it, const Raw& item) {
    float* out = partial + rows.items.number(it) * 2 * tc::kTileRows;
    float2 v[2];
    tc::item_sums<T, 2>(item.m, st, it.kb, lane, v);
    tc::store_item(out, v[0], lane);
    tc::store_item(out + tc::kTileRows, v[1], lane);
  });
  // After the items, unlike the GEMV's and the down's trigger: at the top it gained nothing
  // (CUDA_DECODE.md, forty-fifth pass).
  pdl_launch_dependents();
  __syncthreads();
  const float factor = tc::input_factor(in, st);
  swiglu_rows(partial, rows, n_kb, factor, slot_scale(p, slot_top, slot, factor),
              a.act + slot * a.gate.rows);
}

// ---- Down: y[r] += sum over slots. -------------------------------------------------------------
struct DownParams {
  DownArgs a;
  DeviceTables tables;
  int lanes;
  int rows_per_block;
  int64_t prefetch_rows;  // of a fixed matrix (prefetch_rows_for); routed experts: none
};

// The shared expert's block j (of its activation, format Ts) against the CTA's rows of its down
// matrix, by a slot warp after its routed items: each tile's two row sums at
// partial[tile][j][16], after the shared input staged at `area`. The matrix is fixed, so its bytes
// are asked of L2 before the wait and loaded after the routed items: held in registers across
// them, they made the K-quant and Q8_0 kernels spill under the 96-register cap.
template <TensorType Ts>
struct SharedDownBlock {
  using Raw = typename tc::Tc<Ts>::Raw;
  // Where the block sums of a shared row of `cols` values lie in the CTA's shared area.
  __device__ static float* partial_at(void* area, int cols) {
    return tc::after(tc::carve(area, cols), cols);
  }
  tc::CtaRows rows;
  tc::CtaBase base;
  tc::Input in;
  tc::Staged st;
  float* partial;
  int j;
  __device__ SharedDownBlock(const DownArgs& a, const tc::CtaRows& cta, void* area, int block)
      : rows(cta),
        base(tc::cta_base<Ts>(a.shared, 0, cta)),
        in{GemvIn::Plain, a.shared_act, nullptr, nullptr, 0, 0.f, static_cast<int>(a.shared.cols)},
        st(tc::carve(area, in.n)),
        partial(partial_at(area, in.n)),
        j(block) {}
  __device__ Raw load(int tile, int lane) const {
    return tc::load_item<Ts>(base, rows, {tile, j}, lane);
  }
  // After the wait: the block's input, by this warp alone.
  __device__ void stage() const { tc::stage_blocks<Ts>(in, st, j, in.n / tc::kBlock); }
  __device__ void sum(int lane) const {
    const int tiles = static_cast<int>((rows.end - rows.first + tc::kTileRows - 1) / tc::kTileRows);
    for (int tile = 0; tile < tiles; ++tile) {
      const Raw item[1] = {load(tile, lane)};
      float2 v[1];
      tc::item_sums<Ts, 1>(item, st, j, lane, v);
      tc::store_item(partial + (tile * (in.n / tc::kBlock) + j) * tc::kTileRows, v[0], lane);
    }
  }
};
template <TensorType Ts>
struct SharedDownOf {
  using type = SharedDownBlock<Ts>;
};
template <>
struct SharedDownOf<kNoShared> {  // no shared expert: nothing to hold or do
  struct type {
    __device__ type(const DownArgs&, const tc::CtaRows&, void*, int) {}
    __device__ void stage() const {}
    __device__ void sum(int) const {}
  };
};

__device__ __forceinline__ void clear_folded(const DownArgs& a) {
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < a.clear_n; i += stride)
    a.clear[i] = 0;
}

template <TensorType T>
__global__ void __launch_bounds__(kGemvThreads) down_kernel(DownParams p) {
  using F = fmt::Format<T>;
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  __shared__ int64_t expert[kMaxSlots + 1];
  const DownArgs& a = p.a;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * p.rows_per_block;
  const int64_t end = min(first + p.rows_per_block, a.down.rows);
  if (!a.ids) prefetch_weight_rows<T>(a.down, first, end, p.prefetch_rows);  // a fixed matrix
  const fmt::IqTables tables = stage_tables<T>(p.tables);
  pdl_wait();
  clear_folded(a);
  const int seg = static_cast<int>(a.down.cols);  // values per slot
  // The slots' activations back to back: granules never straddle slots since seg is a
  // multiple of the block size.
  for (int s = threadIdx.x; s < a.n_slots; s += blockDim.x) expert[s] = a.ids ? a.ids[s] : 0;
  stage_input<F::kGranuleValues>(GemvIn::Plain, a.act, seg * a.n_slots, nullptr, nullptr, 0, 0.f,
                                 xs);  // ends synchronised

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int L = p.lanes, sub = lane & (L - 1), rows_per_pass = 32 / L;
  const int gran_per_slot = seg / F::kGranuleValues;
  const int n_gran = gran_per_slot * a.n_slots;
  const int64_t body_bytes = body_row_bytes<T>(seg), tail_bytes = tail_row_bytes<T>(seg);
  for (int64_t r0 = first + warp * rows_per_pass; r0 < end; r0 += 8 * rows_per_pass) {
    if (r0 + 8 * rows_per_pass >= end) pdl_launch_dependents();
    const int64_t r = r0 + lane / L;
    float acc = 0.f;
    if (r < end) {
      acc = row_dot<T>(
          n_gran, sub, L, xs, tables, [&](int i, const uint8_t*& b, const uint8_t*& t, int& g) {
            const int s = i / gran_per_slot, gi = i - s * gran_per_slot;
            const int blk = gi / F::kGranules;
            g = gi - blk * F::kGranules;
            const int64_t row = expert[s] * a.down.expert_rows + a.down.row_offset + r;
            b = a.down.body + row * body_bytes + static_cast<int64_t>(blk) * F::kBodyBytes;
            t = a.down.tail + row * tail_bytes + static_cast<int64_t>(blk) * F::kTailBytes;
          });
    }
    acc = group_sum(acc, L);
    if (sub == 0 && r < end) {
      if (a.extra) acc += a.extra[r];
      if (a.store)
        a.y[r] = acc;
      else
        a.y[r] += acc;
    }
  }
}

// On the tensor cores: the slots' activations are one input of n_slots · cols values, so a kb
// lies in one slot and reads that slot's expert. With the shared expert's down (Ts), the CTA's
// last warps take one of its blocks each (SharedDownBlock) after their routed items, and the
// rows' sums add both. (As warps of their own, 22 in a CTA capped a thread at 80 registers: the
// K-quant kernels spilled 200-670 bytes.)
template <TensorType T, TensorType Ts = kNoShared>
__global__ void __launch_bounds__(32 * kDownMostWarps) down_tc_kernel(DownParams p) {
  pdl_launch_dependents();  // at the top, as gemv_tc_kernel (one planned wave)
  constexpr bool kShared = Ts != kNoShared;
  extern __shared__ float4 smem[];
  __shared__ tc::CtaBase expert[kMaxSlots + 1];  // each slot's expert
  const DownArgs& a = p.a;
  const int seg = static_cast<int>(a.down.cols), n = seg * a.n_slots;
  const int n_kb = n / tc::kBlock, kb_per_slot = seg / tc::kBlock;
  const tc::Staged st = tc::carve(smem, n);
  float* partial = tc::after(st, n);  // [tile][kb][16]
  const tc::CtaRows rows = tc::cta_rows(p.rows_per_block, a.down.rows, n_kb);
  const int lane = threadIdx.x & 31, warp = static_cast<int>(threadIdx.x >> 5);
  const int shared_kbs = kShared ? static_cast<int>(a.shared.cols / tc::kBlock) : 0;
  const int shared_j = warp - (static_cast<int>(blockDim.x >> 5) - shared_kbs);  // < 0: none
  const tc::CtaBase fixed = tc::cta_base<T>(a.down, 0, rows);
  auto load = [&](tc::Item it) {
    const int slot = it.kb / kb_per_slot;
    return tc::load_item<T>(a.ids ? expert[slot] : fixed, rows,
                            {it.tile, it.kb - slot * kb_per_slot}, lane);
  };
  typename tc::Tc<T>::Raw raw{};
  const bool has_items = rows.items.n > 0;
  if (!a.ids && has_items) raw = load(rows.items.first());  // a fixed matrix: before the wait
  if (!a.ids) prefetch_weight_rows<T>(a.down, rows.first, rows.end, p.prefetch_rows);
  if constexpr (kShared)  // a fixed matrix, all of the CTA's rows
    prefetch_weight_rows<Ts>(a.shared, rows.first, rows.end, rows.end - rows.first);
  tc::stage_tables<T>(p.tables);
  // The shared block's state is rebuilt where it is used (cheap), not held across the routed work.
  using Shared = typename SharedDownOf<Ts>::type;
  void* const shared_area = partial + p.rows_per_block * n_kb;
  pdl_wait();
  clear_folded(a);
  if (a.ids)
    for (int s = threadIdx.x; s < a.n_slots; s += blockDim.x)
      expert[s] = tc::cta_base<T>(a.down, a.ids[s], rows);
  __syncthreads();  // the experts and the tables
  if (a.ids && has_items) raw = load(rows.items.first());
  const tc::Input in{GemvIn::Plain, a.act, nullptr, nullptr, 0, 0.f, n};
  tc::stage_own_blocks<T>(in, st);  // while the first item's bytes arrive
  if (shared_j >= 0) Shared(a, rows, shared_area, shared_j).stage();
  tc::sum_items<T>(rows, raw, load, st, partial, [&] {
    if (shared_j >= 0) Shared(a, rows, shared_area, shared_j).sum(lane);
  });
  for (int64_t j = threadIdx.x; j < rows.end - rows.first; j += blockDim.x) {
    const int64_t r = rows.first + j;
    float sum = tc::row_total(partial, j, n_kb, tc::kTileRows);
    if constexpr (kShared)
      sum += tc::row_total(Shared::partial_at(shared_area, static_cast<int>(a.shared.cols)), j,
                           shared_kbs, tc::kTileRows);
    if (a.extra) sum += a.extra[r];
    a.y[r] = a.store ? sum : a.y[r] + sum;
  }
}

// Rows per block so that the grid (times other_blocks) is at most target_blocks, the blocks
// resident at once (resident_blocks): one wave.
int rows_per_block_for(int64_t rows, int L, int64_t other_blocks, int64_t target_blocks) {
  const int rows_per_pass = 8 * (32 / L);
  const int64_t per_pass = rows_per_pass * target_blocks;
  int64_t passes = (rows * other_blocks + per_pass - 1) / per_pass;  // one wave
  passes = passes < 1 ? 1 : (passes > 16 ? 16 : passes);
  return static_cast<int>(rows_per_pass * passes);
}

void check_topk(int k, int n_expert) {
  if (k < 1 || k > kMaxSlots || k > n_expert || n_expert > kMaxExperts)
    fail("MoE router: top-", k, " of ", n_expert, " experts is not supported (k <= ", kMaxSlots,
         ", experts <= ", kMaxExperts, ")");
}

}  // namespace

void moe_route(const long long* folded, int n_expert, int k, float factor, bool shared,
               int32_t* ids, float* weights, cudaStream_t stream) {
  check_topk(k, n_expert);
  launch(route_kernel, dim3(1), dim3(32), 0, stream, folded, n_expert, k, factor, shared, ids,
         weights);
}

bool moe_gate_up_takes_shared(const Matrix& gate, int n_slots, const Matrix& shared_gate,
                              const Matrix& shared_up) {
  return formats_take_shared<MoeKernel::GateUp>(gate.type, shared_gate.type) &&
         shared_up.type == shared_gate.type && shared_gate.body && shared_up.body && n_slots >= 1 &&
         n_slots < kMaxSlots && tc::usable(gate.rows, gate.cols, n_slots, 2) &&
         shared_gate.rows == gate.rows && shared_up.rows == gate.rows &&
         shared_gate.cols == gate.cols && shared_up.cols == gate.cols;
}

void moe_gate_up(const GateUpArgs& a, cudaStream_t stream) {
  if (a.gate.type != a.up.type || a.gate.cols != a.up.cols || a.gate.rows != a.up.rows)
    fail("MoE gate/up: gate and up must have the same type and shape");
  if (a.shared_act &&
      (!a.route || !moe_gate_up_takes_shared(a.gate, a.n_slots, a.shared_gate, a.shared_up)))
    fail("MoE gate/up: the shared expert cannot join this launch (moe_gate_up_takes_shared)");
  if (a.n_slots < 1 || a.n_slots > kMaxSlots) fail("MoE gate/up: ", a.n_slots, " slots");
  if (a.route) {
    check_topk(a.n_slots, a.route->n_expert);
    if (!a.route->folded || !a.route->ids || !a.route->weights)
      fail("MoE gate/up: a route needs its folded logits, ids and weights");
  }
  const bool ok = fmt::dispatch(a.gate.type, [&]<TensorType T>() {
    using F = fmt::Format<T>;
    const int64_t n_gran = a.gate.cols / F::kGranuleValues;
    const int L = lanes_for(n_gran);
    if constexpr (tc::supported<T>()) {
      if (tc::usable(a.gate.rows, a.gate.cols, a.n_slots, 2)) {
        // With the shared expert: a slot more (moe_gate_up_takes_shared).
        auto run = [&]<TensorType Ts>() {
          const int slots = a.n_slots + (Ts != kNoShared ? 1 : 0);
          const tc::Plan plan = tc::plan(gate_up_tc_kernel<T, Ts>, kGateUpMostWarps, a.gate.rows,
                                         a.gate.cols, slots, 2);
          const int rows_per_block = plan.rows_per_block;
          GateUpParams p{a,
                         a.route ? *a.route : RouteArgs{},
                         a.route != nullptr,
                         device_tables(),
                         0,
                         rows_per_block,
                         0};
          p.a.route = nullptr;
          p.prefetch_rows = prefetch_rows_for<T>(a.gate, rows_per_block, 2 * a.n_slots);
          const dim3 grid(
              static_cast<unsigned>((a.gate.rows + rows_per_block - 1) / rows_per_block),
              static_cast<unsigned>(slots));
          launch(gate_up_tc_kernel<T, Ts>, grid, dim3(plan.threads), plan.smem, stream, p);
        };
        run_with_shared<MoeKernel::GateUp, T>(a.shared_act != nullptr, a.shared_gate.type, run);
        return;
      }
    }
    const size_t smem = padded_size<F::kGranuleValues>(a.gate.cols) * sizeof(float);
    allow_smem(gate_up_kernel<T>, smem);
    const int64_t resident = resident_blocks(gate_up_kernel<T>, smem);
    GateUpParams p{a,
                   a.route ? *a.route : RouteArgs{},
                   a.route != nullptr,
                   device_tables(),
                   L,
                   rows_per_block_for(a.gate.rows, L, a.n_slots, resident),
                   0};
    p.a.route = nullptr;
    p.prefetch_rows = prefetch_rows_for<T>(a.gate, p.rows_per_block, 2 * a.n_slots);
    const dim3 grid(static_cast<unsigned>((a.gate.rows + p.rows_per_block - 1) / p.rows_per_block),
                    static_cast<unsigned>(a.n_slots));
    launch(gate_up_kernel<T>, grid, dim3(kGemvThreads), smem, stream, p);
  });
  if (!ok) fail("MoE gate/up: the CUDA kernels do not decode ", gguf::type_name(a.gate.type));
}

bool moe_down_takes_shared(const Matrix& down, int n_slots, const Matrix& shared) {
  const int64_t n = down.cols * n_slots;
  return formats_take_shared<MoeKernel::Down>(down.type, shared.type) && n_slots >= 1 &&
         n_slots <= kMaxSlots && shared.body && tc::usable(down.rows, n, 1) &&
         n % tc::kBlock == 0 && shared.rows == down.rows && shared.cols % tc::kBlock == 0 &&
         shared.cols / tc::kBlock >= 1 &&
         shared.cols / tc::kBlock <= tc::warps_for(n / tc::kBlock, kDownMostWarps) &&
         tc::smem_bytes(n, tc::kTileRows) + tc::smem_bytes(shared.cols, tc::kTileRows) <=
             tc::kMaxSmem;
}

void moe_down(const DownArgs& a, cudaStream_t stream) {
  if (a.n_slots < 1 || a.n_slots > kMaxSlots) fail("MoE down: ", a.n_slots, " slots");
  if (a.shared_act && !moe_down_takes_shared(a.down, a.n_slots, a.shared))
    fail("MoE down: the shared expert's down cannot join this launch (moe_down_takes_shared)");
  const bool ok = fmt::dispatch(a.down.type, [&]<TensorType T>() {
    using F = fmt::Format<T>;
    if constexpr (tc::supported<T>()) {
      if (tc::usable(a.down.rows, a.down.cols * a.n_slots, 1)) {
        // With the shared expert's shared memory (moe_down_takes_shared).
        auto run = [&]<TensorType Ts>() {
          const tc::Plan plan =
              tc::plan(down_tc_kernel<T, Ts>, kDownMostWarps, a.down.rows, a.down.cols * a.n_slots,
                       1, 1, [&](int64_t r) {
                         return Ts != kNoShared ? tc::smem_bytes(a.shared.cols, r) : size_t{0};
                       });
          DownParams p{a, device_tables(), 0, plan.rows_per_block, 0};
          p.prefetch_rows = prefetch_rows_for<T>(a.down, p.rows_per_block);
          const unsigned blocks =
              static_cast<unsigned>((a.down.rows + plan.rows_per_block - 1) / plan.rows_per_block);
          launch(down_tc_kernel<T, Ts>, dim3(blocks), dim3(plan.threads), plan.smem, stream, p);
        };
        run_with_shared<MoeKernel::Down, T>(a.shared_act != nullptr, a.shared.type, run);
        return;
      }
    }
    const int L = lanes_for(a.down.cols / F::kGranuleValues * a.n_slots);
    const size_t smem = padded_size<F::kGranuleValues>(a.down.cols * a.n_slots) * sizeof(float);
    allow_smem(down_kernel<T>, smem);
    DownParams p{a, device_tables(), L,
                 rows_per_block_for(a.down.rows, L, 1, resident_blocks(down_kernel<T>, smem)), 0};
    p.prefetch_rows = prefetch_rows_for<T>(a.down, p.rows_per_block);
    const unsigned blocks =
        static_cast<unsigned>((a.down.rows + p.rows_per_block - 1) / p.rows_per_block);
    launch(down_kernel<T>, dim3(blocks), dim3(kGemvThreads), smem, stream, p);
  });
  if (!ok) fail("MoE down: the CUDA kernels do not decode ", gguf::type_name(a.down.type));
}

}  // namespace rl::cuda
