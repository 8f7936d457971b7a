// Llama training step: forward with saved activations, fused cross-entropy, and the backward pass written
// out in reverse layer order. Shapes in comments use N = B*T rows.
#include <cmath>

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/rope/rope.h"
#include "kernels/swiglu/swiglu.h"
#include "models/common/lm_loss.h"
#include "models/llama/llama.h"

namespace anvil {

// What the backward needs of one layer. With recomputation only `h` is kept between the forward and the
// backward (except in the last TrainOptions::keep_layers layers, whose backward comes first); the backward
// rebuilds the rest.
struct LlamaLayerActs {
  Tensor h;       // (N, C) residual stream entering the layer
  Tensor n1;      // (N, C) input_layernorm output
  Tensor rstd1;   // (N)
  Tensor q, k, v; // (B, T, NH|NKV, HD) after RoPE
  Tensor att;     // (B, T, NH, HD) attention output
  Tensor lse;     // (B, NH, T)
  Tensor mid;     // (N, C) h + attention branch
  Tensor n2;      // (N, C) post_attention_layernorm output
  Tensor rstd2;   // (N)
  Tensor gu;      // (N, 2H) gate/up projections
  Tensor act;     // (N, H) swiglu output

  // Drops everything the layer's forward can rebuild from h.
  void keep_input_only() {
    Tensor in = h;
    *this = LlamaLayerActs{};
    h = in;
  }
};

// Saved activations, per token and layer, in elements of the compute dtype: h, n1, mid, n2 (4C), q and att
// (2·NH·HD), k and v (2·NKV·HD), gu and act (3H); plus f32 rstd1, rstd2 and lse (2 + NH). With recompute a
// layer keeps h (C) only, and the last layer keeps everything. Llama-3.2-1B in bf16 (C 2048, NH·HD 2048,
// NKV·HD 512, H 8192, 16 layers): 75,912 B against 4,096 B per token and layer, so the stack keeps
// 16 · 75,912 = 1.21 MB per token without and 16 · 4,096 + 71,816 = 137 KB with recompute (8.8× less; at
// batch 8 × 2048 tokens: 19.9 GB → 2.25 GB) for one more forward of 15 of the 16 layers (≈ +30% FLOPs).
// TrainOptions::keep_layers = K keeps everything in the last K layers instead of the last one: each extra one
// costs 75,912 − 4,096 B per token (1.18 GB at 8 × 2048) and saves one recomputed forward.
struct LlamaModel::Acts {
  int64_t recomputed = 0;  // layers [0, recomputed) keep only their input (TrainOptions::recomputed_layers)
  int64_t B = 0, T = 0;
  Tensor ids;          // (N) i32 on device
  Tensor pos;          // (N) i32 positions 0..T-1 per sequence
  std::vector<LlamaLayerActs> layers;
  Tensor h_final;      // (N, C) residual stream after the last layer
  Tensor n_final;      // (N, C) model.norm output
  Tensor rstd_final;   // (N)

  int64_t bytes() const {
    int64_t s = 0;
    auto add = [&](const Tensor& t) { s += t.defined() ? int64_t(t.nbytes()) : 0; };
    for (const LlamaLayerActs& a : layers)
      for (const Tensor* t : {&a.h, &a.n1, &a.rstd1, &a.q, &a.k, &a.v, &a.att, &a.lse, &a.mid, &a.n2, &a.rstd2,
                              &a.gu, &a.act})
        add(*t);
    for (const Tensor* t : {&ids, &pos, &h_final, &n_final, &rstd_final}) add(*t);
    return s;
  }
};

static Tensor positions(int64_t B, int64_t T, int64_t start, Device d) {
  std::vector<float> p(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) p[size_t(b * T + t)] = float(start + t);
  return Tensor::from_floats(p, {B * T}, DType::i32, d);
}

// One decoder layer after its input norm (a.h, a.n1 are set): fills the rest of `a` and returns the MLP
// branch (N, C) that the next norm adds to a.mid. The forward and the recomputation both run this, so they
// compute the same values.
Tensor LlamaModel::layer_forward(LlamaLayer& ly, LlamaLayerActs& a, const Tensor& pos, int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg_.hidden_size, H = cfg_.intermediate_size, HD = cfg_.head_dim;
  const int64_t NH = cfg_.num_attention_heads, NKV = cfg_.num_key_value_heads;
  const float eps = float(cfg_.rms_norm_eps), scale = 1.f / std::sqrt(float(HD));
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  a.q = E({B, T, NH, HD}, dtype_);
  a.k = E({B, T, NKV, HD}, dtype_);
  a.v = E({B, T, NKV, HD}, dtype_);
  Tensor q2 = a.q.view({N, NH * HD}), k2 = a.k.view({N, NKV * HD}), v2 = a.v.view({N, NKV * HD});
  matmul_fwd(a.n1, ly.wq->weight, Tensor(), q2);
  matmul_fwd(a.n1, ly.wk->weight, Tensor(), k2);
  matmul_fwd(a.n1, ly.wv->weight, Tensor(), v2);
  Tensor q3 = a.q.view({N, NH, HD}), k3 = a.k.view({N, NKV, HD});
  rope_fwd(q3, pos, inv_freq_, q3);
  rope_fwd(k3, pos, inv_freq_, k3);
  a.att = E({B, T, NH, HD}, dtype_);
  a.lse = E({B, NH, T}, DType::f32);
  attention_fwd(a.q, a.k, a.v, scale, a.att, a.lse);
  Tensor ao = E({N, C}, dtype_);
  matmul_fwd(a.att.view({N, NH * HD}), ly.wo->weight, Tensor(), ao);
  a.mid = E({N, C}, dtype_);
  a.n2 = E({N, C}, dtype_);
  a.rstd2 = E({N}, DType::f32);
  add_rms_norm_fwd(ao, a.h, ly.post_norm->weight, eps, a.mid, a.n2, a.rstd2);
  a.gu = E({N, 2 * H}, dtype_);
  matmul_fwd(a.n2, ly.gate_up, Tensor(), a.gu);
  a.act = E({N, H}, dtype_);
  swiglu_fwd(a.gu, a.act);
  Tensor branch = E({N, C}, dtype_);
  matmul_fwd(a.act, ly.w_down->weight, Tensor(), branch);
  return branch;
}

// Runs the decoder stack on ids (N) and returns the final normed hidden states (N, C). With `acts`, saves what
// the backward needs (only the layer input in the first acts->recomputed layers).
Tensor LlamaModel::forward_hidden(const Tensor& ids, int64_t B, int64_t T, Acts* acts) {
  const int64_t N = B * T, C = cfg_.hidden_size;
  const float eps = float(cfg_.rms_norm_eps);
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor pos = positions(B, T, 0, device_);
  Tensor x = E({N, C}, dtype_);
  embedding_fwd(ids, embed_->weight, x);
  Tensor h = x, branch;  // residual stream and the branch output to add to it
  if (acts) {
    acts->B = B;
    acts->T = T;
    acts->ids = ids;
    acts->pos = pos;
    acts->layers.resize(layers_.size());
  }
  for (size_t l = 0; l < layers_.size(); l++) {
    LlamaLayer& ly = layers_[l];
    LlamaLayerActs a;
    a.n1 = E({N, C}, dtype_);
    a.rstd1 = E({N}, DType::f32);
    if (l == 0) {
      a.h = h;
      rms_norm_fwd(h, ly.in_norm->weight, eps, a.n1, a.rstd1);
    } else {
      a.h = E({N, C}, dtype_);
      add_rms_norm_fwd(branch, h, ly.in_norm->weight, eps, a.h, a.n1, a.rstd1);
    }
    branch = layer_forward(ly, a, pos, B, T);
    h = a.mid;
    if (acts) {
      if (int64_t(l) < acts->recomputed) a.keep_input_only();
      acts->layers[l] = std::move(a);
    }
  }
  Tensor hf = E({N, C}, dtype_), nf = E({N, C}, dtype_), rf = E({N}, DType::f32);
  add_rms_norm_fwd(branch, h, final_norm_->weight, eps, hf, nf, rf);
  if (acts) {
    acts->h_final = hf;
    acts->n_final = nf;
    acts->rstd_final = rf;
  }
  return nf;
}

// Rebuilds a layer's activations from its input h. n1 = rms_norm(h) is what the forward's fused
// add_rms_norm gave: its contract computes the norm from the stored (rounded) h. On the CPU the two kernels
// are the same arithmetic, so the gradients equal the saved-activation path's bit for bit
// (tests/models/recompute_test.cpp); a GPU kernel may sum the squares in another order (last-bit rstd).
void LlamaModel::recompute_layer(LlamaLayer& ly, LlamaLayerActs& a, const Tensor& pos, int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg_.hidden_size;
  a.n1 = Tensor::empty({N, C}, dtype_, device_);
  a.rstd1 = Tensor::empty({N}, DType::f32, device_);
  rms_norm_fwd(a.h, ly.in_norm->weight, float(cfg_.rms_norm_eps), a.n1, a.rstd1);
  layer_forward(ly, a, pos, B, T);  // the branch output is not needed: the backward starts from d(branch)
}

float LlamaModel::loss_and_backward(const Tensor& ids_in, const Tensor& targets_in, float grad_weight,
                                    bool backward, const TrainOptions& opt) {
  check_dim("llama", "ids", ids_in, 2);
  check_dtype("llama", "ids", ids_in, DType::i32);
  check_shape("llama", "targets", targets_in, ids_in.shape());
  check_dtype("llama", "targets", targets_in, DType::i32);
  const int64_t B = ids_in.size(0), T = ids_in.size(1), N = B * T;
  const int64_t C = cfg_.hidden_size, H = cfg_.intermediate_size, HD = cfg_.head_dim;
  const int64_t NH = cfg_.num_attention_heads, NKV = cfg_.num_key_value_heads;
  const float scale = 1.f / std::sqrt(float(HD));
  ANVIL_CHECK(T <= cfg_.max_position_embeddings, "llama", str("sequences of at most ", cfg_.max_position_embeddings,
              " tokens (max_position_embeddings)"), T);
  ANVIL_CHECK(!backward || trainable_, "llama", "a model loaded for training", "an inference-only model");
  Tensor ids = ids_in.contiguous().view({N}).to(device_);
  Tensor targets = targets_in.contiguous().view({N}).to(device_);
  Acts acts;
  acts.recomputed = backward ? opt.recomputed_layers(int64_t(layers_.size())) : 0;
  Tensor nf = forward_hidden(ids, B, T, backward ? &acts : nullptr);
  if (!backward) return lm_loss_fwd(nf, lm_head_->weight, targets, targets_in);
  // The head's loss and gradients in one pass (the logits once): dnf = d(n_final), lm_head's grad accumulated.
  const LmLoss head = lm_loss_fwd_bwd(nf, lm_head_->weight, lm_head_->grad, targets, targets_in, grad_weight);
  saved_activation_bytes_ = acts.bytes();

  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor none;
  Tensor dh = E({N, C}, dtype_);
  add_rms_norm_bwd(head.dnf, none, acts.h_final, final_norm_->weight, acts.rstd_final, dh, final_norm_->grad);
  for (int64_t l = int64_t(layers_.size()) - 1; l >= 0; l--) {
    LlamaLayer& ly = layers_[size_t(l)];
    LlamaLayerActs& a = acts.layers[size_t(l)];
    if (!a.n1.defined()) recompute_layer(ly, a, acts.pos, B, T);
    // MLP branch: branch = act @ Wd^T, act = swiglu(gu), gu = n2 @ Wgu^T.  dh is d(branch) and d(mid).
    Tensor dact = E({N, H}, dtype_), dgu = E({N, 2 * H}, dtype_), dn2 = E({N, C}, dtype_);
    matmul_bwd(dh, a.act, ly.w_down->weight, dact, ly.w_down->grad, none);
    swiglu_bwd(dact, a.gu, dgu);
    matmul_bwd(dgu, a.n2, ly.gate_up, dn2, ly.gate_up_grad, none);
    // mid = ao + h, n2 = norm(mid): the total gradient of mid.
    Tensor dmid = E({N, C}, dtype_);
    add_rms_norm_bwd(dn2, dh, a.mid, ly.post_norm->weight, a.rstd2, dmid, ly.post_norm->grad);
    // Attention branch: ao = att @ Wo^T.
    Tensor datt = E({B, T, NH, HD}, dtype_);
    Tensor datt2 = datt.view({N, NH * HD});
    matmul_bwd(dmid, a.att.view({N, NH * HD}), ly.wo->weight, datt2, ly.wo->grad, none);
    Tensor dq = E({B, T, NH, HD}, dtype_), dk = E({B, T, NKV, HD}, dtype_), dv = E({B, T, NKV, HD}, dtype_);
    attention_bwd(datt, a.q, a.k, a.v, a.att, a.lse, scale, dq, dk, dv);
    Tensor dq3 = dq.view({N, NH, HD}), dk3 = dk.view({N, NKV, HD});
    rope_bwd(dq3, acts.pos, inv_freq_, dq3);
    rope_bwd(dk3, acts.pos, inv_freq_, dk3);
    // q/k/v = n1 @ W^T: dn1 = dq Wq + dk Wk + dv Wv.
    Tensor dn1 = E({N, C}, dtype_);
    Tensor dq2 = dq.view({N, NH * HD}), dk2 = dk.view({N, NKV * HD}), dv2 = dv.view({N, NKV * HD});
    matmul_bwd(dq2, a.n1, ly.wq->weight, dn1, ly.wq->grad, none);
    matmul_bwd(dk2, a.n1, ly.wk->weight, none, ly.wk->grad, none);
    matmul_bwd(dv2, a.n1, ly.wv->weight, none, ly.wv->grad, none);
    matmul(dk2, ly.wk->weight, dn1, false, false, 1.f, 1.f);
    matmul(dv2, ly.wv->weight, dn1, false, false, 1.f, 1.f);
    // n1 = norm(h); h also flows straight to mid.
    Tensor dh_prev = E({N, C}, dtype_);
    if (l > 0) {
      add_rms_norm_bwd(dn1, dmid, a.h, ly.in_norm->weight, a.rstd1, dh_prev, ly.in_norm->grad);
    } else {
      rms_norm_bwd(dn1, a.h, ly.in_norm->weight, a.rstd1, dh_prev, ly.in_norm->grad);
      add(dh_prev, dmid, dh_prev);
      embedding_bwd(dh_prev, acts.ids, embed_->grad);
    }
    dh = dh_prev;
    a = LlamaLayerActs{};  // this layer's backward is done: its activations go back to the allocator
  }
  return head.mean;
}

float LlamaModel::forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight,
                                   const TrainOptions& opt) {
  return loss_and_backward(ids, targets, grad_weight, true, opt);
}

float LlamaModel::forward_loss(const Tensor& ids, const Tensor& targets) {
  return loss_and_backward(ids, targets, 1.f, false, TrainOptions{});
}

}  // namespace anvil
