// Mamba inference: constant-size recurrent state, prefill through the full kernels, decode one token at a time
// through causal_conv1d_update and selective_state_update; full logits for parity tests.
#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/causal_conv1d/causal_conv1d.h"
#include "kernels/embedding/embedding.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/selective_scan/selective_scan.h"
#include "models/mamba/mamba.h"

namespace anvil {

namespace {
struct MambaState final : InferState {
  std::vector<Tensor> conv;  // per layer (B, D, W-1) compute dtype: the last W-1 conv inputs, oldest first
  std::vector<Tensor> ssm;   // per layer (B, D, N) f32
};
}  // namespace

std::unique_ptr<InferState> MambaModel::new_state(int batch, int max_len) {
  ANVIL_CHECK(batch >= 1, "mamba::new_state", "batch >= 1", batch);
  auto st = std::make_unique<MambaState>();
  st->batch = batch;
  st->max_len = max_len;  // not a capacity: the state does not grow
  st->lens.assign(size_t(batch), 0);
  const int64_t D = cfg_.intermediate_size, N = cfg_.state_size, W = cfg_.conv_kernel;
  for (size_t l = 0; l < layers_.size(); l++) {
    st->conv.push_back(Tensor::zeros({batch, D, W - 1}, dtype_, device_));
    st->ssm.push_back(Tensor::zeros({batch, D, N}, DType::f32, device_));
  }
  return st;
}

void MambaModel::step(InferState& st_base, const Tensor& ids_in, Tensor& logits) {
  auto& st = static_cast<MambaState&>(st_base);
  check_dim("mamba::step", "ids", ids_in, 2);
  check_dtype("mamba::step", "ids", ids_in, DType::i32);
  const int64_t B = ids_in.size(0), T = ids_in.size(1), NT = B * T;
  ANVIL_CHECK(B == st.batch, "mamba::step", str("ids with batch ", st.batch), ids_in.describe());
  ANVIL_CHECK(T >= 1, "mamba::step", "at least one token", ids_in.describe());
  check_shape("mamba::step", "logits", logits, {B, cfg_.vocab_size});
  check_dtype("mamba::step", "logits", logits, DType::f32);
  const int start = st.lens[0];
  for (int b = 0; b < st.batch; b++)
    ANVIL_CHECK(st.lens[size_t(b)] == start, "mamba::step", "sequences of one batch at the same position",
                str("lens ", st.lens[0], " and ", st.lens[size_t(b)]));
  ANVIL_CHECK(T == 1 || start == 0, "mamba::step", "a prefill into a fresh state or one token per step",
              str(T, " tokens at position ", start));

  const int64_t C = cfg_.hidden_size, D = cfg_.intermediate_size, N = cfg_.state_size, R = cfg_.time_step_rank;
  const int64_t W = cfg_.conv_kernel;
  const float eps = float(cfg_.layer_norm_epsilon);
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor ids = ids_in.contiguous().view({NT}).to(device_);
  Tensor h = E({NT, C}, dtype_), n = E({NT, C}, dtype_), rstd = E({NT}, DType::f32), branch;
  embedding_fwd(ids, embed_->weight, h);
  // Decode buffers: with T = 1 the channel-major (B, D, 1) and token-major (B, D) layouts coincide, so the
  // projections are plain linears.
  Tensor x, z, xc, dtr, Bm, Cm, delta, y;
  if (T == 1) {
    x = E({B, D}, dtype_), z = E({B, D}, dtype_), xc = E({B, D}, dtype_), dtr = E({B, R}, dtype_);
    Bm = E({B, N}, dtype_), Cm = E({B, N}, dtype_), delta = E({B, D}, dtype_), y = E({B, D}, dtype_);
    branch = E({B, C}, dtype_);
  }
  for (size_t l = 0; l < layers_.size(); l++) {
    MambaLayer& ly = layers_[l];
    if (l == 0) rms_norm_fwd(h, ly.norm->weight, eps, n, rstd);
    else add_rms_norm_fwd(branch, h, ly.norm->weight, eps, h, n, rstd);  // h += branch, in place
    Tensor cw = ly.conv_w->weight.view({D, W}), cb = ly.conv_b ? ly.conv_b->weight : Tensor();
    if (T > 1) {
      MambaMixerActs a;
      branch = mixer_forward(ly, n, B, T, a);
      // Conv state: the last W-1 conv inputs, zeros before the sequence start when T < W-1. These strided
      // copies go through the host on a GPU (Tensor::copy_): once per prefill, never per decoded token.
      if (T >= W - 1) {
        st.conv[l].copy_(a.x.slice(2, T - (W - 1), T));
      } else {
        auto xv = a.x.to_floats();  // (B, D, T), T < W-1 <= 3: tiny
        std::vector<float> cv(static_cast<size_t>(B * D * (W - 1)), 0.f);
        for (int64_t i = 0; i < B * D; i++)
          for (int64_t t = 0; t < T; t++) cv[size_t(i * (W - 1) + (W - 1 - T) + t)] = xv[size_t(i * T + t)];
        st.conv[l].copy_(Tensor::from_floats(cv, {B, D, W - 1}, dtype_, device_));  // exact: values of dtype_
      }
      // SSM state: the last chunk's state.
      const int64_t last = a.states.size(2) - 1;
      st.ssm[l].copy_(a.states.select(2, last));
    } else {
      matmul_fwd(n, ly.in_proj->weight.slice(0, 0, D), Tensor(), x);
      matmul_fwd(n, ly.in_proj->weight.slice(0, D, 2 * D), Tensor(), z);
      causal_conv1d_update(x, st.conv[l], cw, cb, /*silu=*/true, xc);
      const Tensor& wxp = ly.x_proj->weight;
      matmul_fwd(xc, wxp.slice(0, 0, R), Tensor(), dtr);
      matmul_fwd(xc, wxp.slice(0, R, R + N), Tensor(), Bm);
      matmul_fwd(xc, wxp.slice(0, R + N, R + 2 * N), Tensor(), Cm);
      matmul_fwd(dtr, ly.dt_proj->weight, Tensor(), delta);
      selective_state_update(st.ssm[l], xc, delta, ly.A, Bm.view({B, 1, N}), Cm.view({B, 1, N}),
                             ly.D_skip->weight, z, ly.dt_bias->weight, /*dt_softplus=*/true, y);
      matmul_fwd(y, ly.out_proj->weight, Tensor(), branch);
    }
  }
  // Final norm and LM head on the last position of each sequence only.
  Tensor last_h = E({B, C}, dtype_), last_b = E({B, C}, dtype_);
  for (int64_t b = 0; b < B; b++) {
    last_h.select(0, b).copy_(h.select(0, b * T + T - 1));
    last_b.select(0, b).copy_(branch.select(0, b * T + T - 1));
  }
  Tensor nf = E({B, C}, dtype_), rf = E({B}, DType::f32);
  add_rms_norm_fwd(last_b, last_h, final_norm_->weight, eps, last_h, nf, rf);
  matmul(nf, lm_head_->weight, logits, false, true);
  for (auto& len : st.lens) len += int(T);
}

Tensor MambaModel::logits(const Tensor& ids_in) {
  check_dim("mamba::logits", "ids", ids_in, 2);
  check_dtype("mamba::logits", "ids", ids_in, DType::i32);
  const int64_t B = ids_in.size(0), T = ids_in.size(1);
  Tensor ids = ids_in.contiguous().view({B * T}).to(device_);
  Tensor nf = forward_hidden(ids, B, T, nullptr);
  Tensor out = Tensor::empty({B * T, cfg_.vocab_size}, DType::f32, device_);
  matmul(nf, lm_head_->weight, out, false, true);
  return out.view({B, T, cfg_.vocab_size});
}

}  // namespace anvil
