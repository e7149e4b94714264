// redlite mkmodel: writes a synthetic qwen3next GGUF (random weights) of a preset or any shape
// and type mix, streaming tensor by tensor.
#include <unistd.h>

#include <cstdio>
#include <optional>

#include "cli/common.h"
#include "model/config.h"
#include "model/synthetic.h"
#include "model/weights.h"
#include "util/error.h"
#include "util/timer.h"

namespace rl::cli {
namespace {

namespace syn = model::synthetic;

gguf::TensorType parse_type(const std::string& flag, const std::string& name) {
  auto t = gguf::type_from_name(name);
  if (!t) fail(flag, ": unknown tensor type '", name, "' (e.g. f32, bf16, q8_0, q4_K, iq2_xxs)");
  return *t;
}

// Shape flags: each overrides the preset's value when given.
struct ShapeFlags {
  std::optional<int64_t> vocab, hidden, context, expert_ff, shared_ff, ff;
  std::optional<int> layers, interval, heads, kv_heads, head_dim, rope_dims, k_heads, v_heads,
      linear_head_dim, conv_kernel, experts, experts_used;
  std::optional<float> rope_theta;

  void add_to(CLI::App& app) {
    app.add_option("--layers", layers, "trunk layers (blocks without the MTP block)");
    app.add_option("--hidden", hidden, "hidden size d (embedding_length)");
    app.add_option("--vocab", vocab, "vocabulary size (rows of token_embd)");
    app.add_option("--context", context, "trained context length");
    app.add_option("--full-attention-interval", interval,
                   "layer i is full attention when (i+1) % N == 0");
    app.add_option("--heads", heads, "attention query heads");
    app.add_option("--kv-heads", kv_heads, "attention key/value heads");
    app.add_option("--head-dim", head_dim, "attention head dim (key_length = value_length)");
    app.add_option("--rope-dims", rope_dims, "rotary dims per head");
    app.add_option("--rope-theta", rope_theta, "rope.freq_base");
    app.add_option("--linear-k-heads", k_heads, "DeltaNet key heads (ssm.group_count)");
    app.add_option("--linear-v-heads", v_heads, "DeltaNet value heads (ssm.time_step_rank)");
    app.add_option("--linear-head-dim", linear_head_dim, "DeltaNet head dim (ssm.state_size)");
    app.add_option("--conv-kernel", conv_kernel, "DeltaNet causal conv kernel");
    app.add_option("--experts-count", experts, "routed experts per layer");
    app.add_option("--experts-used", experts_used, "experts used per token (top-k)");
    app.add_option("--expert-ff", expert_ff, "routed expert feed-forward size");
    app.add_option("--shared-ff", shared_ff, "shared expert feed-forward size");
    app.add_option("--ff", ff, "feed_forward_length (informational)");
  }

  void apply(syn::Shape& h) const {
    if (vocab) h.n_vocab = *vocab;
    if (hidden) h.n_embd = *hidden;
    if (layers) h.n_layer = *layers;
    if (context) h.context_length = *context;
    if (interval) h.full_attention_interval = *interval;
    if (heads) h.n_head = *heads;
    if (kv_heads) h.n_head_kv = *kv_heads;
    if (head_dim) h.head_dim = *head_dim;
    if (rope_dims) h.n_rot = *rope_dims;
    if (rope_theta) h.rope_theta = *rope_theta;
    if (k_heads) h.ssm_n_k_heads = *k_heads;
    if (v_heads) h.ssm_n_v_heads = *v_heads;
    if (linear_head_dim) h.ssm_head_dim = *linear_head_dim;
    if (conv_kernel) h.ssm_conv_kernel = *conv_kernel;
    if (experts) h.n_expert = *experts;
    if (experts_used) h.n_expert_used = *experts_used;
    if (expert_ff) h.expert_ff = *expert_ff;
    if (shared_ff) h.shexp_ff = *shared_ff;
    if (ff) h.dense_ff = *ff;
  }
};

struct TypeFlags {
  std::string experts, down, dense, shexp_down, ssm_ba, embed, output, router;

  void add_to(CLI::App& app) {
    app.add_option("--experts", experts, "type of the routed experts' gate, up and down");
    app.add_option("--down", down, "type of the routed experts' down only (after --experts)");
    app.add_option("--dense", dense,
                   "type of every attention, DeltaNet (but ssm_ba) and shared-expert projection");
    app.add_option("--shexp-down", shexp_down,
                   "type of the shared expert's down only (after --dense)");
    app.add_option("--ssm-ba", ssm_ba, "type of ssm_ba");
    app.add_option("--embed", embed, "type of token_embd");
    app.add_option("--output", output, "type of output.weight");
    app.add_option("--router", router, "type of the routers (ffn_gate_inp, ffn_gate_inp_shexp)");
  }

  void apply(syn::TypeMix& t) const {
    if (!experts.empty()) t.expert_gate_up = t.expert_down = parse_type("--experts", experts);
    if (!down.empty()) t.expert_down = parse_type("--down", down);
    if (!dense.empty()) t.set_dense(parse_type("--dense", dense));
    if (!shexp_down.empty()) t.shexp_down = parse_type("--shexp-down", shexp_down);
    if (!ssm_ba.empty()) t.ssm_ba = parse_type("--ssm-ba", ssm_ba);
    if (!embed.empty()) t.embed = parse_type("--embed", embed);
    if (!output.empty()) t.output = parse_type("--output", output);
    if (!router.empty()) t.router = parse_type("--router", router);
  }
};

// Progress on stderr for writes that take more than a second: a rewritten line on a terminal,
// a line every 10 s otherwise.
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(fileno(stderr)) != 0) {}
  void operator()(uint64_t done, uint64_t total) {
    const double now = timer_.seconds();
    const bool last = done >= total;
    if (last ? !shown_ : (now < 1.0 || now - shown_at_ < (tty_ ? 0.5 : 10.0))) return;
    shown_ = true;
    shown_at_ = now;
    std::fprintf(stderr, "%smkmodel: %.2f / %.2f GB (%.0f%%), %.0f MB/s%s", tty_ ? "\r" : "",
                 done / 1e9, total / 1e9, total ? 100.0 * done / total : 100.0,
                 now > 0 ? done / 1e6 / now : 0.0, tty_ && !last ? "" : "\n");
  }

 private:
  bool tty_;
  bool shown_ = false;
  double shown_at_ = 0;
  Timer timer_;
};

void print_plan(const syn::Plan& plan, const std::string& path) {
  const auto infos = plan.tensor_infos();
  const model::Config c = model::read_config(plan.metadata, infos, path);
  const model::Weights w = model::bind_weights(infos, c, path);
  const model::DecodeBytes b = model::decode_weight_breakdown(c, w);
  std::printf(
      "%s: qwen3next '%s', %d layers (%d attention)%s, d %lld, vocab %lld, %d experts "
      "top-%d\n",
      path.c_str(), c.name.c_str(), c.n_layer, c.n_attention_layers(),
      c.n_nextn ? " + MTP block" : "", static_cast<long long>(c.n_embd),
      static_cast<long long>(c.n_vocab), c.n_expert, c.n_expert_used);
  std::printf(
      "  %zu tensors, %.3f GB of tensor data; %.2f MB of weights read per decoded token; "
      "KV cache %lld B per position (f32)\n",
      plan.tensors.size(), plan.tensor_bytes() / 1e9, b.total() / 1e6,
      static_cast<long long>(c.kv_bytes_per_position(4)));
}

}  // namespace

int cmd_mkmodel(const Args& args) {
  CLI::App app{
      "Writes a synthetic qwen3next GGUF with random but valid weights: a preset, any "
      "shape (flags override the preset) and any type mix. Types whose blocks do not "
      "divide a tensor's rows fall back to a 32-block type (iq4_nl, q4_0 or q8_0; f16 "
      "if even 32 does not divide), with a note.",
      "mkmodel"};
  std::string preset = "tiny", out, vocab_from, name;
  uint64_t seed = 0;
  bool dry_run = false;
  syn::Layout layout;
  ShapeFlags shape;
  TypeFlags types;
  app.add_option("--preset", preset, "tiny, tiny-quant or 80b-a3b (default tiny)");
  app.add_option("-o,--out", out, "the GGUF file to write")->required();
  app.add_option("--seed", seed, "random seed (default: the preset's)");
  app.add_option("--name", name, "general.name (default: the preset's name)");
  app.add_option("--vocab-from", vocab_from,
                 "copy tokenizer.* metadata from this GGUF (n_vocab = its token count); default: "
                 "a small built-in byte-level vocabulary padded to --vocab");
  shape.add_to(app);
  types.add_to(app);
  app.add_flag("--fused-ssm-in", layout.fused_ssm_in,
               "legacy fused DeltaNet input ssm_in instead of attn_qkv + attn_gate");
  app.add_flag("--fused-gate-up", layout.fused_gate_up,
               "fused routed ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps");
  app.add_flag("--tied-output", layout.tied_output, "no output.weight (tied to token_embd)");
  app.add_flag("--mtp", layout.mtp, "add one MTP block (nextn_predict_layers = 1)");
  app.add_flag("--dry-run", dry_run, "print what would be written and stop");
  if (auto rc = parse_args(app, args)) return *rc;

  syn::Spec spec = syn::preset(preset);
  shape.apply(spec.shape);
  types.apply(spec.types);
  if (layout.fused_ssm_in) spec.layout.fused_ssm_in = true;
  if (layout.fused_gate_up) spec.layout.fused_gate_up = true;
  if (layout.tied_output) spec.layout.tied_output = true;
  if (layout.mtp) spec.layout.mtp = true;
  if (app.count("--seed")) spec.seed = seed;
  if (!name.empty()) spec.name = name;
  spec.vocab_from = vocab_from;
  if (!vocab_from.empty() && !app.count("--vocab")) spec.shape.n_vocab = 0;  // the file's size

  const syn::Plan plan = syn::make_plan(spec);
  for (const auto& note : plan.notes) std::fprintf(stderr, "mkmodel: note: %s\n", note.c_str());
  print_plan(plan, out);
  if (dry_run) return 0;

  Timer timer;
  ProgressLine progress;
  syn::write_model(plan, out, [&](uint64_t done, uint64_t total) { progress(done, total); });
  const double s = timer.seconds();
  std::printf("  wrote %s in %.1f s (%.0f MB/s)\n", out.c_str(), s,
              s > 0 ? plan.tensor_bytes() / 1e6 / s : 0.0);
  return 0;
}

}  // namespace rl::cli
