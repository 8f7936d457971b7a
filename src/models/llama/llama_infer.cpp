// Llama inference: KV cache, prefill and decode steps, full logits for parity tests.
//
// A decode step (T = 1) on the GPU is one captured graph: ~9 launches per layer (288 for the 8B shape) cost
// 3-5 µs each to issue eagerly, ~1 ms of a ~4 ms step, while the replayed graph issues them back to back. To
// make the step capturable, everything it reads lives at fixed addresses in the state (ids, positions,
// activations) and positions are device tensors (rope_append, attention_decode read them there) that the step
// advances itself, so a step fed ids already on the device uploads nothing and replays; ids from the host are
// uploaded with the positions (3*B int32). ANVIL_GRAPHS=0 runs the same kernels eagerly (for comparison).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/attention/attention.h"
#include "kernels/decode_stack/decode_stack.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/matmul/matmul.h"
#include "models/common/linear.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/rope_append/rope_append.h"
#include "kernels/swiglu/swiglu.h"
#include "models/llama/llama.h"
#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#endif

namespace anvil {

namespace {

}  // namespace

// The activations of one step of N = B*T rows.
struct LlamaModel::StepBuffers {
  Tensor h, h2, branch;       // (N, C) residual stream and its second buffer, (N, C) the branch added next
  Tensor qkv, q, att, lse;    // (B, T, QD + 2 KVD), (B, T, NH, HD), (B, T, NH, HD), (B, NH, T) f32
  Tensor gu;                  // (N, 2H) gate and up
  Tensor nf, rf, logits;      // (B, C), (B) f32, (B, V) f32
};

namespace {

using StepBuffers = LlamaModel::StepBuffers;

StepBuffers make_buffers(const LlamaConfig& c, int64_t B, int64_t T, DType dt, Device dev) {
  const int64_t N = B * T, C = c.hidden_size, HD = c.head_dim, NH = c.num_attention_heads;
  const int64_t NKV = c.num_key_value_heads, H = c.intermediate_size;
  auto E = [&](const Shape& s, DType d) { return Tensor::empty(s, d, dev); };
  StepBuffers b;
  b.h = E({N, C}, dt), b.h2 = E({N, C}, dt), b.branch = E({N, C}, dt);
  b.qkv = E({B, T, (NH + 2 * NKV) * HD}, dt), b.q = E({B, T, NH, HD}, dt), b.att = E({B, T, NH, HD}, dt);
  b.lse = E({B, NH, T}, DType::f32);
  b.gu = E({N, 2 * H}, dt);  // the norms' and SwiGLU's outputs are linear_fwd_fused's (see linear.h)
  b.nf = E({B, C}, dt), b.rf = E({B}, DType::f32), b.logits = E({B, c.vocab_size}, DType::f32);
  return b;
}

// ANVIL_STEP_EVENTS=1: eager GPU decode steps record an event after each part of the step (embedding, layers,
// final norm, LM head, position advance) and print the GPU time of each part, for a step's split by part
// without a profiler. Unset, marks are no-ops.
struct StepMarks {
#ifdef ANVIL_HAS_GPU
  std::vector<std::pair<const char*, gpu::EventHandle>> ev;
  bool on = false;
  StepMarks() {
    const char* e = std::getenv("ANVIL_STEP_EVENTS");
    on = e && std::strcmp(e, "1") == 0;
  }
  void mark(const char* what) {
    if (!on) return;
    ev.push_back({what, gpu::event_create()});
    gpu::event_record(ev.back().second, gpu::current_stream());
  }
  ~StepMarks() {
    if (ev.empty()) return;
    gpu::event_synchronize(ev.back().second);
    std::fprintf(stderr, "step events (µs):");
    for (size_t i = 1; i < ev.size(); i++) {
      const double ms = double(gpu::event_elapsed_ms(ev[i - 1].second, ev[i].second));
      std::fprintf(stderr, " %s %.1f", ev[i].first, 1e3 * ms);
    }
    std::fprintf(stderr, "\n");
    for (auto& e : ev) gpu::event_destroy(e.second);
  }
#else
  void mark(const char*) {}
#endif
};
thread_local StepMarks* g_marks = nullptr;  // set for the duration of one eager step on this thread
void mark(const char* what) {
  if (g_marks) g_marks->mark(what);
}

#ifdef ANVIL_HAS_GPU
bool graphs_enabled() {
  const char* e = std::getenv("ANVIL_GRAPHS");
  return !(e && std::strcmp(e, "0") == 0);
}
#endif

}  // namespace

struct LlamaModel::State final : InferState {
  std::vector<Tensor> k_cache, v_cache;  // per layer (B, Tmax, NKV, HD)
  // Decode-step state at fixed device addresses: [ids | start | lens] (3B) i32, and the step's activations.
  Tensor meta, ids_dev, start_dev, lens_dev;
  Tensor pos_dev;        // [start | lens] (2B): a GPU decode step adds 1 to them itself
  int meta_start = -1;   // the start position meta holds on the device, or -1 when it must be uploaded
  Tensor step_ids;       // what the step embeds: `ids_dev` for a decode step, the uploaded (B*T) for a prefill
  StepBuffers dec;
  int decode_steps = 0;  // the first decode step runs eagerly (warms the allocator and GEMM heuristics)
  // Batch-1 decode steps run every layer in one persistent launch (kernels/decode_stack) where the model and
  // device allow; built at the first decode step. stack_why says why not otherwise.
  std::unique_ptr<DecodeStack> stack;
  std::string stack_why;
#ifdef ANVIL_HAS_GPU
  gpu::GraphHandle graph = nullptr;
  ~State() override {
    if (graph) gpu::graph_destroy(graph);
  }
#endif
};

std::unique_ptr<InferState> LlamaModel::new_state(int batch, int max_len) {
  ANVIL_CHECK(batch >= 1, "llama::new_state", "batch >= 1", batch);
  ANVIL_CHECK(max_len >= 1 && max_len <= cfg_.max_position_embeddings, "llama::new_state",
              str("a context of 1..", cfg_.max_position_embeddings, " tokens (max_position_embeddings)"), max_len);
  auto st = std::make_unique<State>();
  st->batch = batch;
  st->max_len = max_len;
  st->lens.assign(size_t(batch), 0);
  const int64_t NKV = cfg_.num_key_value_heads, HD = cfg_.head_dim;
  for (size_t l = 0; l < layers_.size(); l++) {
    st->k_cache.push_back(Tensor::empty({batch, max_len, NKV, HD}, dtype_, device_));
    st->v_cache.push_back(Tensor::empty({batch, max_len, NKV, HD}, dtype_, device_));
  }
  st->meta = Tensor::empty({3 * int64_t(batch)}, DType::i32, device_);
  st->ids_dev = st->meta.slice(0, 0, batch);
  st->start_dev = st->meta.slice(0, batch, 2 * batch);
  st->lens_dev = st->meta.slice(0, 2 * batch, 3 * batch);
  st->pos_dev = st->meta.slice(0, batch, 3 * batch);
  return st;
}

// The layers, final norm and LM head of one step, reading ids / start / lens from the state (device tensors).
// Launches kernels only: no allocation that outlives it, no host synchronisation (so it can be captured).
void LlamaModel::step_kernels(State& st, StepBuffers& b, int64_t T) {
  const int64_t B = st.batch, N = B * T;
  const int64_t C = cfg_.hidden_size, HD = cfg_.head_dim, NH = cfg_.num_attention_heads;
  const int64_t NKV = cfg_.num_key_value_heads;
  const float eps = float(cfg_.rms_norm_eps), scale = 1.f / std::sqrt(float(HD));
  mark("start");
  embedding_fwd(st.step_ids, embed_->weight, b.h);
  mark("embedding");
  Tensor att2 = b.att.view({N, NH * HD}), qkv2 = b.qkv.view({N, b.qkv.size(2)});
  // Each norm is folded into the projection after it (linear_fwd_fused: one kernel in decode), which writes the
  // new residual h + branch into the other buffer: blocks of the fused kernel still read h while one writes.
  Tensor* h = &b.h;
  Tensor* h_next = &b.h2;
  auto add_norm = [&](const Tensor& w) {
    SkinnyPrologue p = SkinnyPrologue::add_rms_norm(*h, b.branch, w, eps, *h_next);
    std::swap(h, h_next);
    return p;
  };
  if (T == 1 && st.stack) {  // every layer in one launch; it leaves the residual in its second buffer
    st.stack->run(st.start_dev, b.h, b.h2, b.branch);
    std::swap(h, h_next);
    mark("layers");
  }
  for (size_t l = 0; l < layers_.size() && !(T == 1 && st.stack); l++) {
    LlamaLayer& ly = layers_[l];
    if (l == 0) linear_fwd_fused(SkinnyPrologue::rms_norm(*h, ly.in_norm->weight, eps), ly.lin_qkv, qkv2);
    else linear_fwd_fused(add_norm(ly.in_norm->weight), ly.lin_qkv, qkv2);  // h += branch
    rope_append(b.qkv, st.start_dev, inv_freq_, b.q, st.k_cache[l], st.v_cache[l]);
    if (T > 1) {  // prefill into an empty cache: causal attention over the new tokens (rows [0, T) of the cache)
      Tensor k = Tensor::empty({B, T, NKV, HD}, dtype_, device_), v = Tensor::empty({B, T, NKV, HD}, dtype_, device_);
      for (int64_t s = 0; s < B; s++) {
        k.select(0, s).copy_(st.k_cache[l].select(0, s).slice(0, 0, T));
        v.select(0, s).copy_(st.v_cache[l].select(0, s).slice(0, 0, T));
      }
      attention_fwd(b.q, k, v, scale, b.att, b.lse);
    } else {
      Tensor att_rows = b.att.view({B, NH, HD});
      attention_decode(b.q.view({B, NH, HD}), st.k_cache[l], st.v_cache[l], st.lens_dev, scale, att_rows);
    }
    linear_fwd(att2, ly.lin_wo, b.branch);
    linear_fwd_fused(add_norm(ly.post_norm->weight), ly.lin_gate_up, b.gu);  // h += attention
    linear_fwd_fused(SkinnyPrologue::swiglu(b.gu), ly.lin_down, b.branch);
  }
  // Final norm and LM head on the last position of each sequence only.
  Tensor last_h = *h, last_b = b.branch;
  if (T > 1) {
    last_h = Tensor::empty({B, C}, dtype_, device_), last_b = Tensor::empty({B, C}, dtype_, device_);
    for (int64_t s = 0; s < B; s++) {
      last_h.select(0, s).copy_(h->select(0, s * T + T - 1));
      last_b.select(0, s).copy_(b.branch.select(0, s * T + T - 1));
    }
  }
  if (linear_fuses(B, lin_head_, device_, dtype_)) {
    Tensor h_out = T > 1 ? Tensor::empty({B, C}, dtype_, device_) : *h_next;
    linear_fwd_fused(SkinnyPrologue::add_rms_norm(last_h, last_b, final_norm_->weight, eps, h_out), lin_head_,
                     b.logits);
  } else {
    add_rms_norm_fwd(last_b, last_h, final_norm_->weight, eps, last_h, b.nf, b.rf);
    mark("final norm");
    if (lin_head_.is_fp8()) linear_fwd(b.nf, lin_head_, b.logits);
    else matmul(b.nf, lm_head_->weight, b.logits, false, true);
  }
  mark("lm head");
}

int64_t LlamaModel::tile_linear_weights(bool head_only) {
  std::vector<LinearWeight*> ws;
  if (!head_only)
    for (LlamaLayer& ly : layers_)
      for (LinearWeight* lw : {&ly.lin_qkv, &ly.lin_wo, &ly.lin_gate_up, &ly.lin_down}) ws.push_back(lw);
  ws.push_back(&lin_head_);  // 16-bit heads are skipped
  int64_t room = 0;
#ifdef ANVIL_HAS_GPU
  // With ANVIL_SKINNY_TILES=1 (H200, 8B shape, FP8: +7.2 GB, batch 4-16 0.4-0.9% faster; docs/decode_kernels.md,
  // twenty-first round; the FP8 head +0.54 GB, 132.0 -> 123.7 us per call in a graph, twenty-fifth round). The
  // prefill's activations and the KV cache keep the last quarter.
  room = gpu::room_for_copies();
#endif
  return linear_tile_weights(ws, room);
}

// Feeds T tokens per sequence. Prefill (all caches empty) runs causal attention over the new tokens; later
// calls feed one token at a time through the decode attention over the cache.
void LlamaModel::step(InferState& st_base, const Tensor& ids_in, Tensor& logits) {
  auto& st = static_cast<State&>(st_base);
  check_dim("llama::step", "ids", ids_in, 2);
  check_dtype("llama::step", "ids", ids_in, DType::i32);
  const int64_t B = ids_in.size(0), T = ids_in.size(1), N = B * T;
  ANVIL_CHECK(B == st.batch, "llama::step", str("ids with batch ", st.batch), ids_in.describe());
  check_shape("llama::step", "logits", logits, {B, cfg_.vocab_size});
  check_dtype("llama::step", "logits", logits, DType::f32);
  const int start = st.lens[0];
  for (int b = 0; b < st.batch; b++)
    ANVIL_CHECK(st.lens[size_t(b)] == start, "llama::step", "sequences of one batch at the same position",
                str("lens ", st.lens[0], " and ", st.lens[size_t(b)]));
  ANVIL_CHECK(start + T <= st.max_len, "llama::step",
              str("at most ", st.max_len, " tokens in the context (prompt + generated)"), start + T);
  ANVIL_CHECK(T == 1 || start == 0, "llama::step", "a prefill into an empty cache or one token per step",
              str(T, " tokens at position ", start));

  // The step's ids and positions. A GPU decode step advances the positions on the device (captured with the
  // step), and ids already on the device are copied there, so consecutive decode steps fed device ids upload
  // nothing and never wait for the host: each synchronised upload left the GPU idle for its round trip. Otherwise
  // ids and positions are uploaded together; prefill ids do not fit meta's B slots and get their own.
  Tensor ids_c = ids_in.contiguous().view({N});
  const bool ids_here = ids_c.device() == device_;
  const bool gpu_decode = T == 1 && !device_.is_cpu();
  if (!(gpu_decode && ids_here && st.meta_start == start)) {
    std::vector<float> mv(static_cast<size_t>(3 * B));
    for (int64_t b = 0; b < B; b++) {
      mv[size_t(B + b)] = float(start);
      mv[size_t(2 * B + b)] = float(start + T);
    }
    if (T == 1 && !ids_here) {
      Tensor host_ids = ids_c.to(Device::cpu());
      for (int64_t b = 0; b < B; b++) mv[size_t(b)] = float(host_ids.data<int32_t>()[b]);
    }
    st.meta.copy_(Tensor::from_floats(mv, {3 * B}, DType::i32));
  }
  st.meta_start = -1;  // until this step has run
  if (T == 1 && ids_here) st.ids_dev.copy_(ids_c);
  st.step_ids = T > 1 ? ids_c.to(device_) : st.ids_dev;

  if (T > 1 || device_.is_cpu()) {
    StepBuffers b = make_buffers(cfg_, B, T, dtype_, device_);
    step_kernels(st, b, T);
    logits.copy_(b.logits);
  } else {
    if (!st.dec.h.defined()) {
      st.dec = make_buffers(cfg_, B, 1, dtype_, device_);
      if (B == 1) {
        DecodeStackShape sh;
        sh.C = cfg_.hidden_size, sh.NH = cfg_.num_attention_heads, sh.NKV = cfg_.num_key_value_heads;
        sh.HD = cfg_.head_dim, sh.H = cfg_.intermediate_size;
        sh.eps = float(cfg_.rms_norm_eps), sh.attn_scale = 1.f / std::sqrt(float(cfg_.head_dim));
        std::vector<DecodeStackLayer> ls;
        for (size_t l = 0; l < layers_.size(); l++) {
          const LlamaLayer& ly = layers_[l];
          auto w = [](const LinearWeight& lw) { return DecodeStackWeight{lw.w, lw.w_scale}; };
          ls.push_back({w(ly.lin_qkv), w(ly.lin_wo), w(ly.lin_gate_up), w(ly.lin_down), ly.in_norm->weight,
                        ly.post_norm->weight, st.k_cache[l], st.v_cache[l]});
        }
        st.stack_why = dtype_ == DType::bf16 ? decode_stack_unsupported(sh, ls) : "bf16 activations";
        if (st.stack_why.empty()) st.stack = std::make_unique<DecodeStack>(sh, ls, inv_freq_, &stack_tiles_);
      } else {
        st.stack_why = "batch 1";
      }
      // With decode_stack only the FP8 head (--fp8-lm-head) goes through the skinny GEMM.
      const int64_t tiled = st.stack ? tile_linear_weights(/*head_only=*/true)
                            : B <= kSkinnyWideRows ? tile_linear_weights() : 0;
      if (!st.stack)
        st.decode_path = "one kernel per op (decode_stack needs " + st.stack_why + ")" +
                         (tiled ? str("; FP8 weights also pre-tiled for the skinny GEMM, ", tiled / 1000000, " MB")
                                : std::string());
      else if (st.stack->pretiled_bytes() > 0)
        st.decode_path = str("every layer in one persistent launch of ", st.stack->grid(),
                             " blocks (decode_stack; FP8 weights also pre-tiled, ", st.stack->pretiled_bytes() / 1000000,
                             " MB",
                             tiled ? str("; the FP8 LM head for the skinny GEMM, ", tiled / 1000000, " MB") : "",
                             ")");
      else
        st.decode_path = str("every layer in one persistent launch of ", st.stack->grid(), " blocks (decode_stack)");
    }
    StepBuffers& bufs = st.dec;
    auto kernels = [&] {
      step_kernels(st, bufs, 1);
      add_int_(st.pos_dev, 1);  // the next step's start and lens
      mark("positions");
    };
#ifdef ANVIL_HAS_GPU
    if (graphs_enabled() && !decode_stack_tracing() && st.decode_steps > 0) {
      if (!st.graph) {
        gpu::capture_begin();
        try {
          kernels();
        } catch (...) {
          try {  // end the capture so the stream is usable again; the kernel error is the one to report
            gpu::graph_destroy(gpu::capture_end());
          } catch (...) {
          }
          throw;
        }
        st.graph = gpu::capture_end();
      }
      gpu::graph_launch(st.graph);
    } else {
      StepMarks marks;
      g_marks = &marks;
      try {
        kernels();
      } catch (...) {
        g_marks = nullptr;
        throw;
      }
      g_marks = nullptr;
    }
#else
    kernels();
#endif
    st.meta_start = start + 1;
    st.decode_steps++;
    logits.copy_(st.dec.logits);
  }
  for (auto& len : st.lens) len += int(T);
}

// FP8 models: the training forward (forward_hidden) reads 16-bit weights, so their full logits come from the
// inference path, one decode step per position (the same GEMMs a served model runs; for tests and perplexity).
Tensor LlamaModel::logits_by_steps(const Tensor& ids_in) {
  const int64_t B = ids_in.size(0), T = ids_in.size(1), V = cfg_.vocab_size;
  Tensor ids = ids_in.contiguous().to(Device::cpu());
  Tensor out = Tensor::empty({B, T, V}, DType::f32, device_);
  auto st = new_state(int(B), int(T));
  Tensor lg = Tensor::empty({B, V}, DType::f32, device_);
  for (int64_t t = 0; t < T; t++) {
    step(*st, ids.slice(1, t, t + 1).contiguous(), lg);
    for (int64_t b = 0; b < B; b++) out.select(0, b).select(0, t).copy_(lg.select(0, b));
  }
  return out;
}

Tensor LlamaModel::logits(const Tensor& ids_in) {
  check_dim("llama::logits", "ids", ids_in, 2);
  if (dtype_is_fp8(weight_dtype_)) return logits_by_steps(ids_in);
  const int64_t B = ids_in.size(0), T = ids_in.size(1);
  Tensor ids = ids_in.contiguous().view({B * T}).to(device_);
  Tensor nf = forward_hidden(ids, B, T, nullptr);
  Tensor out = Tensor::empty({B * T, cfg_.vocab_size}, DType::f32, device_);
  matmul(nf, lm_head_->weight, out, false, true);
  return out.view({B, T, cfg_.vocab_size});
}

}  // namespace anvil
