// Host-side launchers of every GPU kernel, callable from .cpp files. Internal to src/cuda.
//
// All launchers are asynchronous on the given stream and capture into CUDA graphs: sizes that
// change from token to token (the position) are read by the kernels from device memory.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "gguf/types.h"

namespace rl::cuda {

// The IQ lookup tables in device memory, uploaded once per device: ggml's (rl::quant::tables)
// and the tensor-core decoders' built from them (layout.h, tc_iq_tables).
struct DeviceTables {
  const uint64_t* iq2xxs_grid = nullptr;
  const uint32_t* iq3xxs_grid = nullptr;
  const int8_t* iq4nl_values = nullptr;
  const uint64_t* iq2xs_grid = nullptr;
  const uint32_t* iq2xxs_codes = nullptr;  // the tensor-core decoders' (layout.h, TcIqTables)
  const uint32_t* iq2xs_codes = nullptr;
  const uint32_t* iq2xxs_sign_nibbles = nullptr;
  const uint2* sign_bytes = nullptr;
};
const DeviceTables& device_tables();  // for the current device

// A weight matrix in device memory in the split block layout (cuda/layout.h), or a stack of
// equally shaped expert matrices. Row r of expert e is global row
// e * expert_rows + row_offset + r.
struct Matrix {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* body = nullptr;
  const uint8_t* tail = nullptr;
  int64_t cols = 0;         // values per row
  int64_t rows = 0;         // rows of one matrix (one expert)
  int64_t expert_rows = 0;  // rows from one expert's start to the next (stacks only)
  int64_t row_offset = 0;   // first row within each expert (the up half of a fused gate_up)
};

// True if the GEMV kernels decode this type (cols must be a multiple of its block size).
bool gemv_supports(gguf::TensorType type);

// ---- GEMV: y = W · in(x) -------------------------------------------------------------------
enum class GemvIn {
  Plain,     // x
  RmsNorm,   // x / sqrt(mean(x²) + eps) * norm                        (norm: cols values)
  GroupRms,  // per group of `group` values (a multiple of 8): x / sqrt(ss / group + eps), where
             // ss, the group's sum of squares, comes as kGroupSumsqParts partial sums (sumsq)
};
// The partial sums of squares per group of a GemvIn::GroupRms input: the DeltaNet step leaves
// one per quarter of a head (its CTAs' column slices).
constexpr int kGroupSumsqParts = 4;
enum class GemvOut { Store, Add };  // y = W·in  |  y += W·in

// ---- The router folded into the projection that completes the residual ---------------------
// The MoE router and the shared expert's gate read rmsnorm(x) · norm, and 1 / rms(x) is a common
// factor of all their logits. So the layer's output projection, each of whose CTAs completes some
// rows of x, also adds those rows' share of W · (norm ⊙ x) to `acc`, and the MoE kernels apply
// 1 / rms, which they compute anyway to normalise x: the router needs no launch of its own, one
// fewer on every layer's critical path. The shares are added as 64-bit fixed-point integers
// (kFoldUnits per 1.0), so the sums are exact and do not depend on the order in which the CTAs
// finish: a step stays deterministic. A share is clamped to ±2^25 (far beyond a real model's
// values), so the sum of up to 255 shares cannot overflow; more shares could only by reaching
// the bound, i.e. with non-finite inputs, whose step is NaN anyway.
struct RouterFold {
  // [rows of the projection][fold_row_floats(n_logits)]: the logits' weights, transposed, each
  // row padded to 16 bytes (16-byte aligned)
  const float* w_t = nullptr;
  const float* norm = nullptr;  // [rows of the projection]
  int n_logits = 0;             // 0: no fold
  long long* acc = nullptr;     // [n_logits]: zero before the projection
};
constexpr double kFoldUnits = 1073741824.0;  // 2^30
constexpr int fold_row_floats(int n_logits) {
  return (n_logits + 3) / 4 * 4;
}

struct GemvArgs {
  Matrix w;
  GemvIn in = GemvIn::Plain;
  const float* x = nullptr;
  const float* norm = nullptr;
  const float* sumsq = nullptr;  // GroupRms: [cols / group][kGroupSumsqParts]
  int group = 0;
  float eps = 1e-6f;
  GemvOut out = GemvOut::Store;
  float* y = nullptr;
  RouterFold fold;  // with GemvOut::Add, after y is complete
};
void gemv(const GemvArgs& args, cudaStream_t stream);

// ---- Mixture of experts --------------------------------------------------------------------
// The routers read folded logits (RouterFold): logit e = folded[e] / kFoldUnits · factor, where
// factor = 1 / rms(x) of the input the experts normalise. The top k (ties: lower index first)
// with the softmax weights renormalised over the k; if shared is given, slot k gets the shared
// expert: ids[k] = 0, weights[k] = sigmoid of its logit, folded[n_expert]. moe_route is that
// selection alone, for the self-test; the gate/up below runs it in every CTA.
void moe_route(const long long* folded, int n_expert, int k, float factor, bool shared,
               int32_t* ids, float* weights, cudaStream_t stream);

// act[s][r] = scale[s] * silu(gate_e·h)[r] * (up_e·h)[r] with e = ids[s] and
// h = rmsnorm(x) * norm, for slots s < n_slots and rows r < gate.rows. With `route` set, the
// kernel first picks the experts itself (moe_route over route->folded, n_slots = k, the factor
// that of x): ids and weights come from there and are also written to route->ids /
// route->weights (with the shared expert's gate in slot k) for the kernels that follow.
struct RouteArgs {
  const long long* folded = nullptr;  // [n_expert], then the shared expert's gate
  int n_expert = 0;
  int32_t* ids = nullptr;    // [k + 1] out
  float* weights = nullptr;  // [k + 1] out
};
struct GateUpArgs {
  Matrix gate, up;
  const int32_t* ids = nullptr;            // null: expert 0 in every slot (a plain matrix)
  const float* scales = nullptr;           // null: 1 (or the gate below)
  const long long* gate_folded = nullptr;  // without scales: every slot's scale is the sigmoid of
                                           // this folded logit (the shared expert's gate)
  const RouteArgs* route = nullptr;        // pick the experts in the kernel (ids, scales unused)
  int n_slots = 1;
  const float* x = nullptr;
  const float* norm = nullptr;
  float eps = 1e-6f;
  float* act = nullptr;  // [n_slots][gate.rows]
  // The shared expert's gate and up, optional with a route (moe_gate_up_takes_shared): one slot
  // more of CTAs, scaled by the sigmoid of the route's last folded logit, into shared_act
  // [gate.rows].
  Matrix shared_gate, shared_up;
  float* shared_act = nullptr;
};
void moe_gate_up(const GateUpArgs& args, cudaStream_t stream);
// Whether moe_gate_up can take the shared expert's gate and up into the launch of a route over
// gate and up (the tensor-core path, shared matrices of the same shape, and a pair of routed and
// shared formats on the gate/up's list, pair_merges in moe.cu); otherwise they are a launch of
// their own.
bool moe_gate_up_takes_shared(const Matrix& gate, int n_slots, const Matrix& shared_gate,
                              const Matrix& shared_up);

// y[r] += sum over slots s of down_e · act[s] with e = ids[s] (+ extra[r]), for r < down.rows;
// with store, y[r] = that sum instead.
struct DownArgs {
  Matrix down;
  const int32_t* ids = nullptr;  // null: expert 0
  int n_slots = 1;
  const float* act = nullptr;    // [n_slots][down.cols]
  const float* extra = nullptr;  // [down.rows], optional
  // The shared expert's down, optional (moe_down_takes_shared): its matrix (down.rows rows) and
  // activation [shared.cols], summed with the slots' into the same rows.
  Matrix shared;
  const float* shared_act = nullptr;
  bool store = false;
  float* y = nullptr;
  // Zeroed after the wait for the previous launch: the folded logits, which the gate/up before
  // it (and the shared expert's, joined before it) have read, ready for the next layer's fold.
  long long* clear = nullptr;
  int clear_n = 0;
};
void moe_down(const DownArgs& args, cudaStream_t stream);
// Whether moe_down can take the shared expert's down `shared` into the launch of the routed
// `down` over n_slots slots (the tensor-core path, a pair of formats on the down's list, which
// also takes Q6_K experts, and a shared row of at most as many blocks as the launch has warps);
// otherwise it is a launch of its own.
bool moe_down_takes_shared(const Matrix& down, int n_slots, const Matrix& shared);

// ---- Gated DeltaNet, one token --------------------------------------------------------------
struct DeltaNetArgs {
  const float* qkv = nullptr;      // conv-channel inputs [q: nk*hd | k: nk*hd | v: nv*hd]
  const float* b = nullptr;        // [nv] beta logits
  const float* a = nullptr;        // [nv] decay inputs
  const float* conv_w = nullptr;   // [channels][conv_kernel]
  const float* dt_bias = nullptr;  // [nv]
  const float* ssm_a = nullptr;    // [nv] = -exp(A_log)
  float* conv_ring = nullptr;      // [conv_kernel][channels]: input of position p in slot p % K
  float* state = nullptr;          // [nv][hd k][hd v]
  const float* z = nullptr;        // [nv][hd] the output gate's inputs
  const float* norm = nullptr;     // [hd] the gated RMSNorm's weights
  // [nv][hd]: o · norm · silu(z), o = Sᵀq, and [nv][kGroupSumsqParts] the sums of squares of o
  // over each quarter of a head: the gated RMSNorm but for its 1 / rms, which the output
  // projection applies (GemvIn::GroupRms) instead of gating o again in each of its CTAs.
  float* out = nullptr;
  float* out_sumsq = nullptr;
  const int32_t* pos = nullptr;
  int n_k_heads = 0, n_v_heads = 0, head_dim = 0, conv_kernel = 0;
  float eps = 1e-6f;
};
void deltanet_step(const DeltaNetArgs& args, cudaStream_t stream);

// ---- Full attention, one token ---------------------------------------------------------------
// Per query head: rmsnorm, NEOX RoPE on the first n_rot dims, times 1/sqrt(head_dim) into q_out;
// per KV head: rmsnorm + RoPE of k, then k and v appended to the caches at *pos.
struct AttnPrepArgs {
  const float* qg = nullptr;  // [n_head][2 * hd]: q then gate per head
  const float* k = nullptr;   // [n_head_kv * hd]
  const float* v = nullptr;
  const float* q_norm = nullptr;  // [hd]
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  const double* rope_inv_freq = nullptr;  // [n_rot / 2]
  int n_rot = 0;
  float* q_out = nullptr;   // [n_head][hd]
  void* k_cache = nullptr;  // [n_head_kv][max_ctx][hd] of kv_type
  void* v_cache = nullptr;
  engine::KvType kv_type = engine::KvType::F32;
  int64_t max_ctx = 0;
  const int32_t* pos = nullptr;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
};
void attn_prep(const AttnPrepArgs& args, cudaStream_t stream);

// The attention kernels are specialised for the model's shape.
constexpr int kAttnHeadDim = 256;
constexpr int kAttnGroup = 8;  // query heads per KV head

// Split-K decode attention over positions [0, *pos]: CTA (g, y) handles KV head g and the y-th
// of `ctas` equal shares of the positions (whole tiles of 8) for all 8 query heads of g, reading
// each K and V row once, and leaves one partial (unnormalised o, max, sum). The float32 kernel
// takes its share in passes of `split` positions (one of attn_splits).
struct AttnArgs {
  const float* q = nullptr;  // [n_head][hd] from attn_prep
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  engine::KvType kv_type = engine::KvType::F32;
  int64_t max_ctx = 0;
  const int32_t* pos = nullptr;
  int n_head_kv = 0;
  int split = 128;
  int ctas = 0;              // CTAs per KV head (a persistent grid sized to the GPU)
  float* part_o = nullptr;   // [n_head_kv][ctas][8][hd]
  float* part_ml = nullptr;  // [n_head_kv][ctas][8][2]
};
void attn_decode(const AttnArgs& args, cudaStream_t stream);
// Every split size attn_decode has kernels for, ascending (32, 512 and 1024 for float32 caches
// only).
constexpr int kAttnSplitSizes[] = {32, 64, 128, 256, 512, 1024};
// The split sizes attn_decode supports for a cache type, ascending: kAttnSplitSizes less those
// the type cannot use.
std::vector<int> attn_splits(engine::KvType kv_type);
// CTAs per KV head that fill the GPU once for this configuration.
int attn_ctas_per_head(engine::KvType kv_type, int split, int n_head_kv);

// out[h] = (sum of partials of h) * sigmoid(gate of h), the gates read from qg.
struct AttnMergeArgs {
  const float* part_o = nullptr;
  const float* part_ml = nullptr;
  int ctas = 0;
  const int32_t* pos = nullptr;
  const float* qg = nullptr;
  float* out = nullptr;  // [n_head][hd]
  int n_head = 0, n_head_kv = 0;
};
void attn_merge(const AttnMergeArgs& args, cudaStream_t stream);

// ---- Odds and ends -----------------------------------------------------------------------------
// x = row *token of the table, decoded exactly.
void embed(const Matrix& table, const int32_t* token, float* x, cudaStream_t stream);
// Decodes rows [row0, row0 + n_rows) of a matrix exactly (self-test of the decoders).
void dequantize_rows(const Matrix& m, int64_t row0, int64_t n_rows, float* y, cudaStream_t stream);
// n values drawn from N(0, stddev²) (a counter-based hash: reproducible for a seed), stored as
// float32, f16 or bf16.
void fill_random(void* dst, engine::KvType type, int64_t n, uint64_t seed, float stddev,
                 cudaStream_t stream);
// Sets n floats to NaN (poisoning outputs before a check).
void fill_nan(float* dst, int64_t n, cudaStream_t stream);

}  // namespace rl::cuda
