// Mamba training step: forward with saved activations, fused cross-entropy, and the backward pass written out
// in reverse layer order. Token-major tensors are (N, C) with N = B*T rows; channel-major ones (B, D|R|N, T).
#include <cmath>

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/causal_conv1d/causal_conv1d.h"
#include "kernels/cross_entropy/cross_entropy.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/embedding/embedding.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/selective_scan/selective_scan.h"
#include "models/common/lm_loss.h"
#include "models/mamba/mamba.h"

namespace anvil {

// What the backward needs of one layer. With recomputation only `h` is kept between the forward and the
// backward (except in the last TrainOptions::keep_layers layers, whose backward comes first); the backward
// rebuilds the rest.
struct MambaLayerActs {
  Tensor h;      // (N, C) residual stream entering the layer
  Tensor n;      // (N, C) norm output
  Tensor rstd;   // (N)
  MambaMixerActs m;

  // Drops everything the layer's forward can rebuild from h.
  void keep_input_only() {
    Tensor in = h;
    *this = MambaLayerActs{};
    h = in;
  }
  // A kept layer under recompute: drops what a norm, the conv and dt_proj rebuild cheaply from h, x and dtr
  // (n, rstd, xc, delta: C + 2D elements and 4 B a token, 20 of Mamba-1.4B's 49.5 KB) and keeps what only the scan
  // or the big in_proj would give back. Rebuilding takes ~65 us a layer there, recomputing the layer ~1 ms (H200).
  void slim() {
    n = rstd = m.xc = m.delta = Tensor();
  }
  bool is_slim() const { return !n.defined() && m.x.defined(); }
};

// Saved activations, per token and layer, in elements of the compute dtype: h, n (2C), x, z, xc, delta (4D),
// dtr (R), B and C (2N); plus f32 rstd and the scan's saved states (D·N f32 per 32 tokens at N <= 16,
// selective_scan.h). The scan's output y is not kept: the scan's backward recomputes it with everything else
// (selective_scan_bwd's `out`), and out_proj's weight gradient waits for it. With recompute a layer keeps h (C)
// only, except the last TrainOptions::keep_layers = K (at least 1), which keep the slim set: h (C), x, z (2D),
// dtr, B, C and the states; their backward rebuilds n, rstd, xc and delta (a norm, the conv, dt_proj).
// Mamba-130m in bf16 (C 768, D 1536, R 48, N 16, 24 layers): 18,596 B per token and layer without recompute,
// 1,536 with, 10,912 slim; so the stack keeps 24 · 18,596 = 446 KB per token without and 23 · 1,536 + 10,912 =
// 46 KB with recompute (9.7× less; at batch 16 × 2048 tokens: 14.6 GB → 1.52 GB) for one more forward of 23 of
// the 24 layers (≈ +30% FLOPs). Each kept layer past the last costs slim − h bytes and saves one recomputed
// forward: Mamba-1.4B (C 2048, D 4096, R 128) 28,992 − 4,096 B per token, 0.20 GB at 4 × 2048 (0.27 GB while y
// was kept, 0.44 GB when kept layers kept everything).
struct MambaModel::Acts {
  int64_t recomputed = 0;  // layers [0, recomputed) keep only their input (TrainOptions::recomputed_layers)
  bool slim = false;        // the other layers keep the slim set (with recompute: MambaLayerActs::slim)
  int64_t B = 0, T = 0;
  Tensor ids;  // (N) i32 on device
  std::vector<MambaLayerActs> layers;
  Tensor h_final, n_final, rstd_final;  // (N, C), (N, C), (N)

  int64_t bytes() const {
    int64_t s = 0;
    auto add = [&](const Tensor& t) { s += t.defined() ? int64_t(t.nbytes()) : 0; };
    for (const MambaLayerActs& a : layers)
      for (const Tensor* t : {&a.h, &a.n, &a.rstd, &a.m.x, &a.m.z, &a.m.xc, &a.m.dtr, &a.m.Bm, &a.m.Cm, &a.m.delta,
                              &a.m.states, &a.m.y})
        add(*t);
    for (const Tensor* t : {&ids, &h_final, &n_final, &rstd_final}) add(*t);
    return s;
  }
};

// The rows [r0, r1) of a contiguous (rows, K) weight: still contiguous, so a GEMM operand.
static Tensor rows(const Tensor& w, int64_t r0, int64_t r1) { return w.slice(0, r0, r1); }
// A weight as a batch of one, shared by every sequence of a batched product.
static Tensor shared(const Tensor& w) { return w.view({1, w.size(0), w.size(1)}); }

// The projections around the conv and the scan meet channel-major (B, D, T) activations: each is one batched
// product per call (the weight shared over the batch), and each weight gradient one batch sum
// (kernels/matmul/matmul.h). One GEMM per sequence had cost 32 launches of 6-12 µs for x_proj + dt_proj alone at
// batch 16, about a sixth of a Mamba-130m step on the H200.

// The two cheap steps a slim layer's backward repeats: xc = SiLU(conv(x)), delta = W_dt dtr (per sequence).
static void conv_forward(MambaLayer& ly, int64_t D, int64_t W, MambaMixerActs& a) {
  Tensor cw = ly.conv_w->weight.view({D, W}), cb = ly.conv_b ? ly.conv_b->weight : Tensor();
  causal_conv1d_fwd(a.x, cw, cb, /*silu=*/true, a.xc);
}
static void dt_forward(MambaLayer& ly, MambaMixerActs& a) {
  matmul_batched(shared(ly.dt_proj->weight), a.dtr, a.delta, false, false);
}

Tensor MambaModel::mixer_forward(MambaLayer& ly, const Tensor& n, int64_t B, int64_t T, MambaMixerActs& a,
                                 bool with_out) {
  const int64_t C = cfg_.hidden_size, D = cfg_.intermediate_size, N = cfg_.state_size, R = cfg_.time_step_rank;
  const int64_t W = cfg_.conv_kernel;
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  const Tensor& win = ly.in_proj->weight;
  const Tensor& wxp = ly.x_proj->weight;
  a.x = E({B, D, T}, dtype_);
  a.z = E({B, D, T}, dtype_);
  a.xc = E({B, D, T}, dtype_);
  a.dtr = E({B, R, T}, dtype_);
  a.Bm = E({B, N, T}, dtype_);
  a.Cm = E({B, N, T}, dtype_);
  a.delta = E({B, D, T}, dtype_);
  Tensor n3 = n.view({B, T, C});
  // in_proj, one product per half: x_b (D, T) = W_x (D, C) @ n_b^T.
  matmul_batched(shared(rows(win, 0, D)), n3, a.x, false, true);
  matmul_batched(shared(rows(win, D, 2 * D)), n3, a.z, false, true);
  conv_forward(ly, D, W, a);
  // x_proj and dt_proj stay channel-major: [dtr; B; C]_b (R + 2N, T) = W_xp (R + 2N, D) @ xc_b (D, T) in one
  // product (xc read once, not three times: 2 x 100 MB per layer at Mamba-130m's batch 16 x 2048), then its
  // three row blocks copied out, since the scan and dt_proj take contiguous operands (5 MB).
  Tensor xp = E({B, R + 2 * N, T}, dtype_);
  matmul_batched(shared(wxp), a.xc, xp, false, false);
  a.dtr.copy_(xp.slice(1, 0, R));
  a.Bm.copy_(xp.slice(1, R, R + N));
  a.Cm.copy_(xp.slice(1, R + N, R + 2 * N));
  dt_forward(ly, a);
  a.states = E({B, D, selective_scan_states(T, N), N}, DType::f32);
  a.y = E({B, D, T}, dtype_);
  selective_scan_fwd(a.xc, a.delta, ly.A, a.Bm.view({B, 1, N, T}), a.Cm.view({B, 1, N, T}), ly.D_skip->weight, a.z,
                     ly.dt_bias->weight, /*delta_softplus=*/true, a.y, a.states);
  if (!with_out) return Tensor();
  // out_proj back to token-major: out_b (T, C) = y_b^T (T, D) @ W_out^T (D, C).
  Tensor out = E({B * T, C}, dtype_);
  Tensor out3 = out.view({B, T, C});
  matmul_batched(a.y, shared(ly.out_proj->weight), out3, true, true);
  return out;
}

// Runs the stack on ids (N) and returns the final normed hidden states (N, C). With `acts`, keeps what the
// backward needs (only the layer input in the first acts->recomputed layers).
Tensor MambaModel::forward_hidden(const Tensor& ids, int64_t B, int64_t T, Acts* acts) {
  const int64_t N = B * T, C = cfg_.hidden_size;
  const float eps = float(cfg_.layer_norm_epsilon);
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor h = E({N, C}, dtype_);
  embedding_fwd(ids, embed_->weight, h);
  Tensor branch;
  if (acts) {
    acts->B = B;
    acts->T = T;
    acts->ids = ids;
    acts->layers.resize(layers_.size());
  }
  for (size_t l = 0; l < layers_.size(); l++) {
    MambaLayer& ly = layers_[l];
    MambaLayerActs a;
    a.n = E({N, C}, dtype_);
    a.rstd = E({N}, DType::f32);
    if (l == 0) {
      a.h = h;
      rms_norm_fwd(h, ly.norm->weight, eps, a.n, a.rstd);
    } else {
      a.h = E({N, C}, dtype_);
      add_rms_norm_fwd(branch, h, ly.norm->weight, eps, a.h, a.n, a.rstd);  // h_l = h_{l-1} + mixer_{l-1}
    }
    branch = mixer_forward(ly, a.n, B, T, a.m);
    h = a.h;
    a.m.y = Tensor();  // the scan's backward gives y back (out_proj's weight gradient comes after it)
    if (acts) {
      if (int64_t(l) < acts->recomputed) a.keep_input_only();
      else if (acts->slim) a.slim();
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

// Rebuilds a layer's activations from its input h. n = rms_norm(h) is what the forward's fused add_rms_norm
// gave: its contract computes the norm from the stored (rounded) h. On the CPU the two kernels are the same
// arithmetic, so the gradients equal the saved-activation path's bit for bit (tests/models/recompute_test.cpp);
// a GPU kernel may sum the squares in another order (last-bit rstd).
static void renorm(MambaLayer& ly, MambaLayerActs& a, float eps, DType dtype, Device device) {
  a.n = Tensor::empty(a.h.shape(), dtype, device);
  a.rstd = Tensor::empty({a.h.size(0)}, DType::f32, device);
  rms_norm_fwd(a.h, ly.norm->weight, eps, a.n, a.rstd);
}

void MambaModel::recompute_layer(MambaLayer& ly, MambaLayerActs& a, int64_t B, int64_t T) {
  renorm(ly, a, float(cfg_.layer_norm_epsilon), dtype_, device_);
  mixer_forward(ly, a.n, B, T, a.m, /*with_out=*/false);  // the backward starts from the output's gradient
}

// A slim layer's n, rstd, xc and delta, as its forward made them (n as recompute_layer says).
void MambaModel::rebuild_slim_layer(MambaLayer& ly, MambaLayerActs& a, int64_t B, int64_t T) {
  const int64_t D = cfg_.intermediate_size;
  renorm(ly, a, float(cfg_.layer_norm_epsilon), dtype_, device_);
  a.m.xc = Tensor::empty({B, D, T}, dtype_, device_);
  a.m.delta = Tensor::empty({B, D, T}, dtype_, device_);
  conv_forward(ly, D, cfg_.conv_kernel, a.m);
  dt_forward(ly, a.m);
}

float MambaModel::loss_and_backward(const Tensor& ids_in, const Tensor& targets_in, float grad_weight,
                                    bool backward, const TrainOptions& opt) {
  check_dim("mamba", "ids", ids_in, 2);
  check_dtype("mamba", "ids", ids_in, DType::i32);
  check_shape("mamba", "targets", targets_in, ids_in.shape());
  check_dtype("mamba", "targets", targets_in, DType::i32);
  const int64_t B = ids_in.size(0), T = ids_in.size(1), NT = B * T;
  const int64_t C = cfg_.hidden_size, D = cfg_.intermediate_size, N = cfg_.state_size, R = cfg_.time_step_rank;
  const int64_t W = cfg_.conv_kernel;
  ANVIL_CHECK(B >= 1 && T >= 1, "mamba", "ids with at least one token", ids_in.describe());
  ANVIL_CHECK(!backward || trainable_, "mamba", "a model loaded for training", "an inference-only model");
  Tensor ids = ids_in.contiguous().view({NT}).to(device_);
  Tensor targets = targets_in.contiguous().view({NT}).to(device_);
  Acts acts;
  acts.recomputed = backward ? opt.recomputed_layers(int64_t(layers_.size())) : 0;
  acts.slim = backward && opt.recompute;
  Tensor nf = forward_hidden(ids, B, T, backward ? &acts : nullptr);
  if (!backward) return lm_loss_fwd(nf, lm_head_->weight, targets, targets_in);
  // The head's loss and gradients in one pass (the logits once): dnf = d(n_final), lm_head's grad accumulated.
  // Default row chunks (~1.5 GB of buffers at Mamba-1.4B's 4 x 2048). Passes of ~512 MB measured 1.15 ms a step
  // slower there for 0.97 GB, which the kept layers no longer need since y left the slim set.
  const LmLoss head = lm_loss_fwd_bwd(nf, lm_head_->weight, lm_head_->grad, targets, targets_in, grad_weight);
  saved_activation_bytes_ = acts.bytes();

  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor none;
  Tensor dh = E({NT, C}, dtype_);  // d(residual stream after the last layer) = d(mixer output) too
  add_rms_norm_bwd(head.dnf, none, acts.h_final, final_norm_->weight, acts.rstd_final, dh, final_norm_->grad);
  for (int64_t l = int64_t(layers_.size()) - 1; l >= 0; l--) {
    MambaLayer& ly = layers_[size_t(l)];
    MambaLayerActs& la = acts.layers[size_t(l)];
    if (la.is_slim()) rebuild_slim_layer(ly, la, B, T);
    else if (!la.n.defined()) recompute_layer(ly, la, B, T);
    MambaMixerActs& a = la.m;
    Tensor dh3 = dh.view({B, T, C});
    // out_proj: out_b = y_b^T W_out^T.  dy_b (D, T) = W_out^T (D, C) @ dh_b^T;  dW_out += dh^T @ y^T, once the
    // scan's backward has given y back.
    Tensor dy = E({B, D, T}, dtype_);
    matmul_batched(shared(ly.out_proj->weight), dh3, dy, true, true);
    // Selective scan: du (the conv output's gradient), ddelta, dB, dC, dz, and y; dA, dD, d(dt bias) accumulate.
    // y, dz and (below) dx go to (D, B, T) buffers, which the scan and the conv write as (B, D, T) views: as
    // (D, B * T) matrices, each weight gradient is then one product with K = B * T. As B products with K = T
    // (Mamba-1.4B, batch 4) they ran at 545-582 TFLOP/s against ~740 for one product of the same size.
    Tensor dxc = E({B, D, T}, dtype_), ddelta = E({B, D, T}, dtype_);
    Tensor dxz = E({2 * D, B, T}, dtype_);  // rows [0, D): dx, [D, 2D): dz: in_proj's output gradient
    Tensor dz = dxz.slice(0, D, 2 * D).transpose(0, 1);
    Tensor dB = E({B, N, T}, dtype_), dC = E({B, N, T}, dtype_);
    Tensor dB4 = dB.view({B, 1, N, T}), dC4 = dC.view({B, 1, N, T});
    Tensor dA = Tensor::zeros({D, N}, DType::f32, device_);  // f32, zeroed: the scan accumulates into it
    // Every layer takes y from the scan's backward, a recomputed one too (its forward's y is in (B, D, T) order):
    // the gradients then come out of the same products with and without recompute.
    a.y = Tensor();
    Tensor ydbt = E({D, B, T}, dtype_), y = ydbt.transpose(0, 1);
    selective_scan_bwd(dy, a.xc, a.delta, ly.A, a.Bm.view({B, 1, N, T}), a.Cm.view({B, 1, N, T}),
                       ly.D_skip->weight, a.z, ly.dt_bias->weight, true, a.states, dxc, ddelta, dA, dB4, dC4,
                       ly.D_skip->grad, dz, ly.dt_bias->grad, &y);
    matmul(dh, ydbt.view({D, NT}), ly.out_proj->grad, true, true, 1.f, 1.f);  // (C, NT) @ (NT, D)
    y = ydbt = Tensor();
    addcmul_(ly.A_log->grad, dA, ly.A);  // A = -exp(A_log): dA_log += dA * A
    // dt_proj: delta_b = W_dt dtr_b.  ddtr_b (R, T) = W_dt^T ddelta_b;  dW_dt += ddelta_b dtr_b^T.
    // x_proj: [dtr; B; C]_b = W_xp xc_b.  dxc_b += W_xp^T [ddtr; dB; dC]_b;  dW_xp += [..]_b xc_b^T, each one
    // product over the stacked rows (K = R + 2N): three products with K = R, N, N read and wrote dxc three times
    // and read xc three times, ~0.5 GB per layer at Mamba-130m's batch 16 x 2048 to move 5 MB of gradients.
    Tensor ddtr = E({B, R, T}, dtype_);
    matmul_batched(shared(ly.dt_proj->weight), ddelta, ddtr, true, false);
    matmul_batch_sum(ddelta, a.dtr, ly.dt_proj->grad, false, true, 1.f, 1.f);
    Tensor dxp = E({B, R + 2 * N, T}, dtype_);
    dxp.slice(1, 0, R).copy_(ddtr);
    dxp.slice(1, R, R + N).copy_(dB);
    dxp.slice(1, R + N, R + 2 * N).copy_(dC);
    matmul_batched(shared(ly.x_proj->weight), dxp, dxc, true, false, 1.f, 1.f);
    matmul_batch_sum(dxp, a.xc, ly.x_proj->grad, false, true, 1.f, 1.f);
    // conv1d + SiLU.
    Tensor dx = dxz.slice(0, 0, D).transpose(0, 1);
    Tensor cw = ly.conv_w->weight.view({D, W}), cb = ly.conv_b ? ly.conv_b->weight : Tensor();
    Tensor dcw = ly.conv_w->grad.view({D, W}), dcb = ly.conv_b ? ly.conv_b->grad : Tensor();
    causal_conv1d_bwd(dxc, a.x, cw, cb, true, dx, dcw, dcb);
    // in_proj: [x; z]_b = W_in n_b^T.  With dxz (2D, NT): dn (NT, C) = dxz^T W_in;  dW_in += dxz n.
    Tensor dn = E({NT, C}, dtype_);
    Tensor dxz2 = dxz.view({2 * D, NT});
    matmul(dxz2, ly.in_proj->weight, dn, true, false);
    matmul(dxz2, la.n, ly.in_proj->grad, false, false, 1.f, 1.f);
    // n = norm(h); h also flows straight on to the next layer (dh).
    Tensor dh_prev = E({NT, C}, dtype_);
    if (l > 0) {
      add_rms_norm_bwd(dn, dh, la.h, ly.norm->weight, la.rstd, dh_prev, ly.norm->grad);
    } else {
      rms_norm_bwd(dn, la.h, ly.norm->weight, la.rstd, dh_prev, ly.norm->grad);
      add(dh_prev, dh, dh_prev);
      embedding_bwd(dh_prev, acts.ids, embed_->grad);
    }
    dh = dh_prev;
    la = MambaLayerActs{};  // this layer's backward is done: its activations go back to the allocator
  }
  return head.mean;
}

float MambaModel::forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight,
                                   const TrainOptions& opt) {
  return loss_and_backward(ids, targets, grad_weight, true, opt);
}

float MambaModel::forward_loss(const Tensor& ids, const Tensor& targets) {
  return loss_and_backward(ids, targets, 1.f, false, TrainOptions{});
}

}  // namespace anvil
