// The model's weights in GPU memory, in the layouts the kernels read. Internal to src/cuda.
//
// Everything lives in one allocation whose size is computed before anything is allocated.
// Changes of layout at upload (values never change):
//  - every block is split into body and tail (cuda/layout.h);
//  - matrices that read the same input and have the same type are concatenated by rows, so one
//    GEMV launch computes them all (q|k|v, qkv|z);
//  - the router and the shared expert's gate are one float32 matrix, transposed, for the fold
//    into the output projections (kernels.h, RouterFold);
//  - the legacy fused ssm_in and ssm_ba rows are permuted into the split order
//    [q all heads | k | v | z] and [b all heads | a all heads].
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/kernels.h"
#include "engine/engine.h"
#include "model/config.h"
#include "model/weights.h"

namespace rl::cuda {

// Matrices sharing one input whose outputs are concatenated: one GEMV per run of equal type.
struct Projection {
  struct Run {
    Matrix m;
    int64_t out_offset = 0;  // where its rows land in the output
  };
  std::vector<Run> runs;
  int64_t rows = 0;  // total outputs
};

struct AttentionWeightsGpu {
  Projection qkv;  // outputs [q|gate per head: 2 * q_dim | k: kv_dim | v: kv_dim]
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  Matrix output;
};

struct DeltaNetWeightsGpu {
  Projection in;                // outputs [q k v: conv channels | z: v_dim | b: nv | a: nv]
  const float* conv = nullptr;  // [channels][kernel]
  const float* dt_bias = nullptr;
  const float* a = nullptr;
  const float* norm = nullptr;  // [head_dim]
  Matrix out;
};

struct MoeWeightsGpu {
  // [n_embd][fold_row_floats(n_expert + 1)]: the router's rows, then the shared gate's,
  // transposed (RouterFold)
  const float* router_t = nullptr;
  Matrix gate, up, down;           // expert stacks
  Matrix sh_gate, sh_up, sh_down;  // the shared expert
};

struct LayerGpu {
  bool attention = false;
  const float* attn_norm = nullptr;
  const float* post_norm = nullptr;
  AttentionWeightsGpu attn;
  DeltaNetWeightsGpu deltanet;
  MoeWeightsGpu moe;
};

struct DeviceModel {
  model::Config config;
  Matrix token_embd;
  Matrix output;
  const float* output_norm = nullptr;
  const double* rope_inv_freq = nullptr;  // [n_rot / 2]
  std::vector<LayerGpu> layers;
  DeviceBuffer storage;
  uint64_t bytes = 0;  // of storage
};

// Bytes the upload of these weights needs on the GPU (the size of DeviceModel::storage).
uint64_t planned_weight_bytes(const model::Config& config, const model::Weights& weights);

// Uploads the weights to the current device. Checks free memory first and throws rl::Error
// with the sizes if they do not fit. Reports progress in bytes uploaded.
DeviceModel upload_model(const model::Config& config, const model::Weights& weights,
                         const engine::Progress& progress);

// Bytes read from weights by one decode step (top-k experts only), for bandwidth figures.
uint64_t decode_step_weight_bytes(const DeviceModel& m);

// Bytes a matrix occupies (bodies + tails).
uint64_t matrix_bytes(const Matrix& m);
// Bytes of the router and shared gate as folded into an output projection
// (MoeWeightsGpu::router_t).
uint64_t router_fold_bytes(const model::Config& c);

}  // namespace rl::cuda
