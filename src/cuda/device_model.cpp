#include "cuda/device_model.h"

#include <cmath>
#include <cstring>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/layout.h"
#include "quant/quant.h"
#include "util/log.h"

namespace rl::cuda {

namespace {

using gguf::TensorType;

constexpr uint64_t kAlign = 256;
constexpr size_t kStagingBytes = 64ull << 20;  // per pinned staging buffer (two of them)

double gib(uint64_t b) {
  return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0);
}

BlockLayout layout_of(const model::Tensor& t) {
  const auto layout = block_layout(t.type);
  if (!layout)
    fail(t.name, ": the CUDA backend has no kernels for type ", gguf::type_name(t.type),
         " (use --backend cpu)");
  if (t.cols() % layout->values != 0)
    fail(t.name, ": rows of ", t.cols(), " values are not whole blocks of ", layout->values,
         " for the CUDA kernels");
  return *layout;
}

// Rows of one source tensor that go into a matrix: rows [row0, row0 + n) in order, or the
// listed source rows.
struct Part {
  const model::Tensor* tensor = nullptr;
  std::vector<int64_t> rows;  // empty: all rows in order
  int64_t count() const {
    return rows.empty() ? tensor->n_rows() : static_cast<int64_t>(rows.size());
  }
  int64_t source_row(int64_t i) const { return rows.empty() ? i : rows[i]; }
};

// Double-buffered pinned staging for host-to-device copies.
class Stager {
 public:
  Stager() {
    RL_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int i = 0; i < 2; ++i) {
      buffers_[i] = PinnedBuffer(kStagingBytes);
      RL_CUDA(cudaEventCreateWithFlags(&free_[i], cudaEventDisableTiming));
      RL_CUDA(cudaEventRecord(free_[i], stream_));
    }
  }
  ~Stager() {
    cudaStreamSynchronize(stream_);
    for (auto e : free_) cudaEventDestroy(e);
    cudaStreamDestroy(stream_);
  }
  uint8_t* acquire() {
    cur_ ^= 1;
    RL_CUDA(cudaEventSynchronize(free_[cur_]));
    return buffers_[cur_].as<uint8_t>();
  }
  void copy(void* dst, size_t offset, size_t n) {
    RL_CUDA(cudaMemcpyAsync(dst, buffers_[cur_].as<uint8_t>() + offset, n, cudaMemcpyHostToDevice,
                            stream_));
  }
  void release() { RL_CUDA(cudaEventRecord(free_[cur_], stream_)); }
  void finish() { RL_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
  PinnedBuffer buffers_[2];
  cudaEvent_t free_[2] = {};
  int cur_ = 1;
};

// Lays the weights out in one allocation. Run once with base == nullptr to size it (nothing is
// copied), then with the real base to upload.
class Builder {
 public:
  Builder(uint8_t* base, Stager* stager, uint64_t total, const engine::Progress& progress)
      : base_(base), stager_(stager), total_(total), progress_(progress) {}

  uint64_t size() const { return offset_; }

  Matrix matrix(const std::vector<Part>& parts) {
    const model::Tensor& first = *parts.front().tensor;
    const BlockLayout layout = layout_of(first);
    int64_t rows = 0;
    for (const Part& p : parts) {
      if (p.tensor->type != first.type || p.tensor->cols() != first.cols())
        fail(p.tensor->name, ": cannot be concatenated with ", first.name);
      rows += p.count();
    }
    const int64_t blocks = first.cols() / layout.values;
    const uint64_t body_row = blocks * layout.body_bytes(), tail_row = blocks * layout.tail_bytes;
    Matrix m;
    m.type = first.type;
    m.cols = first.cols();
    m.rows = rows;
    m.expert_rows = rows;
    const uint64_t body_off = alloc(body_row * rows), tail_off = alloc(tail_row * rows);
    m.body = base_ ? base_ + body_off : nullptr;
    m.tail = base_ ? base_ + tail_off : nullptr;
    if (base_) upload(parts, layout, body_row, tail_row, body_off, tail_off);
    return m;
  }

  Matrix matrix(const model::Tensor& t) { return matrix({Part{&t, {}}}); }

  const float* floats(const model::Tensor& t) {
    if (t.type != TensorType::F32)
      fail(t.name, ": the CUDA backend expects F32 for this tensor, found ",
           gguf::type_name(t.type));
    return reinterpret_cast<const float*>(raw(t.data, t.bytes));
  }

  const void* raw(const void* src, uint64_t bytes) {
    const uint64_t off = alloc(bytes);
    if (!base_) return nullptr;
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t n = std::min<uint64_t>(bytes - done, kStagingBytes);
      std::memcpy(stager_->acquire(), static_cast<const uint8_t*>(src) + done, n);
      stager_->copy(base_ + off + done, 0, n);
      stager_->release();
      done += n;
    }
    report(bytes);
    return base_ + off;
  }

  // The rows of parts, in order, decoded to float32 and transposed: [cols][fold_row_floats(rows)]
  // (zeros after the rows). Decoding is exact for the float types, and the quantised ones decode
  // to the same values as in a GEMV.
  const float* transposed(const std::vector<Part>& parts) {
    const int64_t cols = parts.front().tensor->cols();
    int64_t rows = 0;
    for (const Part& p : parts) {
      if (p.tensor->cols() != cols)
        fail(p.tensor->name, ": cannot be concatenated with ", parts.front().tensor->name);
      rows += p.count();
    }
    const int64_t ld = fold_row_floats(static_cast<int>(rows));
    const uint64_t bytes = static_cast<uint64_t>(ld * cols) * sizeof(float);
    if (!base_) return static_cast<const float*>(raw(nullptr, bytes));  // sizing only
    std::vector<float> t(ld * cols, 0.0f), row(cols);
    int64_t r = 0;
    for (const Part& p : parts) {
      for (int64_t i = 0; i < p.count(); ++i, ++r) {
        quant::dequantize_row(p.tensor->type, p.tensor->row(p.source_row(i)), row.data(), cols);
        for (int64_t c = 0; c < cols; ++c) t[c * ld + r] = row[c];
      }
    }
    return static_cast<const float*>(raw(t.data(), bytes));
  }

  // A projection: parts in output order, one run per stretch of equal type.
  Projection projection(const std::vector<Part>& parts) {
    Projection p;
    for (size_t i = 0; i < parts.size();) {
      size_t j = i + 1;
      while (j < parts.size() && parts[j].tensor->type == parts[i].tensor->type) ++j;
      const std::vector<Part> run(parts.begin() + i, parts.begin() + j);
      Projection::Run r{matrix(run), p.rows};
      p.rows += r.m.rows;
      p.runs.push_back(r);
      i = j;
    }
    return p;
  }

 private:
  uint64_t alloc(uint64_t bytes) {
    const uint64_t off = offset_;
    offset_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return off;
  }

  void upload(const std::vector<Part>& parts, const BlockLayout& layout, uint64_t body_row,
              uint64_t tail_row, uint64_t body_off, uint64_t tail_off) {
    const int64_t blocks = parts.front().tensor->cols() / layout.values;
    const int64_t chunk = std::max<int64_t>(1, kStagingBytes / (body_row + tail_row));
    int64_t out_row = 0;
    for (const Part& p : parts) {
      const int64_t n = p.count();
      for (int64_t r0 = 0; r0 < n; r0 += chunk) {
        const int64_t rn = std::min(chunk, n - r0);
        uint8_t* host = stager_->acquire();
        uint8_t* bodies = host;
        uint8_t* tails = host + body_row * rn;
        for (int64_t i = 0; i < rn; ++i) {
          const uint8_t* src = p.tensor->row(p.source_row(r0 + i));
          split_blocks(layout, src, blocks, bodies + i * body_row, tails + i * tail_row);
        }
        stager_->copy(base_ + body_off + (out_row + r0) * body_row, 0, body_row * rn);
        if (tail_row)
          stager_->copy(base_ + tail_off + (out_row + r0) * tail_row, body_row * rn, tail_row * rn);
        stager_->release();
        report((body_row + tail_row) * rn);
      }
      out_row += n;
    }
  }

  void report(uint64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(static_cast<int64_t>(done_), static_cast<int64_t>(total_));
  }

  uint8_t* base_;
  Stager* stager_;
  uint64_t offset_ = 0, total_ = 0, done_ = 0;
  engine::Progress progress_;
};

// Rows of a fused ssm_in in the split order [q | k | v | z], derived from unfuse_ssm_in itself.
std::vector<int64_t> ssm_in_order(const model::Config& c) {
  const int64_t channels = c.ssm_conv_channels(), v_dim = c.ssm_v_dim();
  std::vector<float> fused(channels + v_dim), qkv(channels), z(v_dim);
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = static_cast<float>(i);  // exact < 2^24
  model::unfuse_ssm_in(c, fused.data(), qkv.data(), z.data());
  std::vector<int64_t> order;
  for (float f : qkv) order.push_back(static_cast<int64_t>(f));
  for (float f : z) order.push_back(static_cast<int64_t>(f));
  return order;
}

// ssm_ba rows are grouped per key head [b(r) | a(r)]: the b rows, then the a rows, by value head.
std::vector<int64_t> ba_order(const model::Config& c, bool a_rows) {
  const int r = c.ssm_n_v_heads / c.ssm_n_k_heads;
  std::vector<int64_t> order;
  for (int h = 0; h < c.ssm_n_v_heads; ++h)
    order.push_back((h / r) * 2 * r + (a_rows ? r : 0) + h % r);
  return order;
}

void build(Builder& b, const model::Config& c, const model::Weights& w, DeviceModel& m) {
  m.token_embd = b.matrix(w.token_embd);
  m.output = w.tied_output ? m.token_embd : b.matrix(w.output);
  m.output_norm = b.floats(w.output_norm);
  std::vector<double> inv_freq(c.n_rot / 2);
  for (int j = 0; j < c.n_rot / 2; ++j)
    inv_freq[j] = std::pow(static_cast<double>(c.rope_theta), -2.0 * j / c.n_rot);
  m.rope_inv_freq = static_cast<const double*>(b.raw(inv_freq.data(), inv_freq.size() * 8));
  m.layers.clear();
  for (int il = 0; il < c.n_layer; ++il) {
    const model::LayerWeights& L = w.layers[il];
    LayerGpu g;
    g.attention = L.is_attention;
    g.attn_norm = b.floats(L.attn_norm);
    g.post_norm = b.floats(L.post_attention_norm);
    if (L.is_attention) {
      g.attn.qkv = b.projection({{&L.attn.q, {}}, {&L.attn.k, {}}, {&L.attn.v, {}}});
      g.attn.q_norm = b.floats(L.attn.q_norm);
      g.attn.k_norm = b.floats(L.attn.k_norm);
      g.attn.output = b.matrix(L.attn.output);
    } else {
      const auto& d = L.deltanet;
      const Part b_rows{&d.ba, ba_order(c, false)}, a_rows{&d.ba, ba_order(c, true)};
      if (d.layout == model::DeltaNetLayout::Split)
        g.deltanet.in = b.projection({{&d.qkv, {}}, {&d.gate, {}}, b_rows, a_rows});
      else
        g.deltanet.in = b.projection({{&d.ssm_in, ssm_in_order(c)}, b_rows, a_rows});
      g.deltanet.conv = b.floats(d.conv);
      g.deltanet.dt_bias = b.floats(d.dt_bias);
      g.deltanet.a = b.floats(d.a);
      g.deltanet.norm = b.floats(d.norm);
      g.deltanet.out = b.matrix(d.out);
    }
    auto& moe = g.moe;
    moe.router_t = b.transposed({{&L.router, {}}, {&L.shexp_gate_inp, {}}});
    const auto& ex = L.experts;
    const int64_t ff = c.expert_ff;
    if (ex.fused_gate_up) {
      moe.gate = b.matrix(ex.gate_up);
      moe.gate.rows = ff;
      moe.gate.expert_rows = 2 * ff;
      moe.up = moe.gate;
      moe.up.row_offset = ff;
    } else {
      moe.gate = b.matrix(ex.gate);
      moe.up = b.matrix(ex.up);
      moe.gate.rows = moe.up.rows = ff;
      moe.gate.expert_rows = moe.up.expert_rows = ff;
    }
    moe.down = b.matrix(ex.down);
    moe.down.rows = moe.down.expert_rows = c.n_embd;
    moe.sh_gate = b.matrix(L.shexp_gate);
    moe.sh_up = b.matrix(L.shexp_up);
    moe.sh_down = b.matrix(L.shexp_down);
    m.layers.push_back(std::move(g));
  }
}

uint64_t row_bytes(const Matrix& m) {
  const BlockLayout l = *block_layout(m.type);
  return static_cast<uint64_t>(m.cols / l.values) * l.block_bytes;
}

}  // namespace

uint64_t router_fold_bytes(const model::Config& c) {
  return static_cast<uint64_t>(fold_row_floats(c.n_expert + 1)) * c.n_embd * 4;
}

uint64_t matrix_bytes(const Matrix& m) {
  return row_bytes(m) * m.rows;
}

uint64_t planned_weight_bytes(const model::Config& config, const model::Weights& weights) {
  DeviceModel scratch;
  Builder plan(nullptr, nullptr, 0, {});
  build(plan, config, weights, scratch);
  return plan.size();
}

DeviceModel upload_model(const model::Config& config, const model::Weights& weights,
                         const engine::Progress& progress) {
  const uint64_t need = planned_weight_bytes(config, weights);
  size_t free_bytes = 0, total_bytes = 0;
  RL_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const uint64_t reserve = 512ull << 20;  // CUDA context growth, workspaces, graphs
  if (need + reserve > free_bytes)
    fail("the model's weights need ", gib(need),
         " GiB of GPU memory (plus ~0.5 GiB of working "
         "space), but ",
         current_device().name, " has ", gib(free_bytes), " GiB free of ", gib(total_bytes),
         " GiB: use a smaller quantisation, free the GPU, or --backend cpu");
  DeviceModel m;
  m.config = config;
  m.storage = DeviceBuffer(need);
  m.bytes = need;
  Stager stager;
  Builder upload(m.storage.as<uint8_t>(), &stager, need, progress);
  build(upload, config, weights, m);
  stager.finish();
  if (upload.size() != need) fail("internal: weight layout changed between plan and upload");
  return m;
}

uint64_t decode_step_weight_bytes(const DeviceModel& m) {
  const auto& c = m.config;
  auto proj = [](const Projection& p) {
    uint64_t s = 0;
    for (const auto& r : p.runs) s += matrix_bytes(r.m);
    return s;
  };
  const uint64_t d4 = static_cast<uint64_t>(c.n_embd) * 4;
  uint64_t total = row_bytes(m.token_embd) + matrix_bytes(m.output) + d4;
  for (const LayerGpu& L : m.layers) {
    total += 2 * d4;
    if (L.attention) {
      total += proj(L.attn.qkv) + matrix_bytes(L.attn.output) + 2ull * c.head_dim * 4;
    } else {
      total += proj(L.deltanet.in) + matrix_bytes(L.deltanet.out);
      total += static_cast<uint64_t>(c.ssm_conv_channels()) * c.ssm_conv_kernel * 4 +
               (2ull * c.ssm_n_v_heads + c.ssm_head_dim) * 4;
    }
    const auto& e = L.moe;
    total += router_fold_bytes(c);
    total += static_cast<uint64_t>(c.n_expert_used) *
             (row_bytes(e.gate) * e.gate.rows + row_bytes(e.up) * e.up.rows +
              row_bytes(e.down) * e.down.rows);
    total += matrix_bytes(e.sh_gate) + matrix_bytes(e.sh_up) + matrix_bytes(e.sh_down);
  }
  return total;
}

}  // namespace rl::cuda
