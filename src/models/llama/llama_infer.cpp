// Llama inference: KV cache, prefill and decode steps, full logits for parity tests.
#include <cmath>

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/attention/attention.h"
#include "kernels/embedding/embedding.h"
#include "kernels/matmul/matmul.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/rope/rope.h"
#include "kernels/swiglu/swiglu.h"
#include "models/llama/llama.h"

namespace anvil {

namespace {
struct LlamaState final : InferState {
  std::vector<Tensor> k_cache, v_cache;  // per layer (B, Tmax, NKV, HD)
};
}  // namespace

std::unique_ptr<InferState> LlamaModel::new_state(int batch, int max_len) {
  ANVIL_CHECK(batch >= 1, "llama::new_state", "batch >= 1", batch);
  ANVIL_CHECK(max_len >= 1 && max_len <= cfg_.max_position_embeddings, "llama::new_state",
              str("a context of 1..", cfg_.max_position_embeddings, " tokens (max_position_embeddings)"), max_len);
  auto st = std::make_unique<LlamaState>();
  st->batch = batch;
  st->max_len = max_len;
  st->lens.assign(size_t(batch), 0);
  const int64_t NKV = cfg_.num_key_value_heads, HD = cfg_.head_dim;
  for (size_t l = 0; l < layers_.size(); l++) {
    st->k_cache.push_back(Tensor::empty({batch, max_len, NKV, HD}, dtype_, device_));
    st->v_cache.push_back(Tensor::empty({batch, max_len, NKV, HD}, dtype_, device_));
  }
  return st;
}

// Feeds T tokens per sequence. Prefill (all caches empty) runs causal attention over the new tokens; later
// calls feed one token at a time through the decode attention over the cache.
void LlamaModel::step(InferState& st_base, const Tensor& ids_in, Tensor& logits) {
  auto& st = static_cast<LlamaState&>(st_base);
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

  const int64_t C = cfg_.hidden_size, H = cfg_.intermediate_size, HD = cfg_.head_dim;
  const int64_t NH = cfg_.num_attention_heads, NKV = cfg_.num_key_value_heads;
  const float eps = float(cfg_.rms_norm_eps), scale = 1.f / std::sqrt(float(HD));
  auto E = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, device_); };
  Tensor ids = ids_in.contiguous().view({N}).to(device_);
  std::vector<float> pv(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; i++) pv[size_t(i)] = float(start + i % T);
  Tensor pos = Tensor::from_floats(pv, {N}, DType::i32, device_);
  std::vector<float> lv(static_cast<size_t>(B), float(start + T));
  Tensor lens = Tensor::from_floats(lv, {B}, DType::i32, device_);

  Tensor h = E({N, C}, dtype_), n = E({N, C}, dtype_), rstd = E({N}, DType::f32), branch = E({N, C}, dtype_);
  embedding_fwd(ids, embed_->weight, h);
  Tensor q = E({B, T, NH, HD}, dtype_), k = E({B, T, NKV, HD}, dtype_), v = E({B, T, NKV, HD}, dtype_);
  Tensor att = E({B, T, NH, HD}, dtype_), lse = E({B, NH, T}, DType::f32);
  Tensor gu = E({N, 2 * H}, dtype_), act = E({N, H}, dtype_);
  Tensor q2 = q.view({N, NH * HD}), k2 = k.view({N, NKV * HD}), v2 = v.view({N, NKV * HD});
  Tensor q3 = q.view({N, NH, HD}), k3 = k.view({N, NKV, HD}), att2 = att.view({N, NH * HD});
  for (size_t l = 0; l < layers_.size(); l++) {
    LlamaLayer& ly = layers_[l];
    if (l == 0) rms_norm_fwd(h, ly.in_norm->weight, eps, n, rstd);
    else add_rms_norm_fwd(branch, h, ly.in_norm->weight, eps, h, n, rstd);  // h += branch, in place
    matmul_fwd(n, ly.wq->weight, Tensor(), q2);
    matmul_fwd(n, ly.wk->weight, Tensor(), k2);
    matmul_fwd(n, ly.wv->weight, Tensor(), v2);
    rope_fwd(q3, pos, inv_freq_, q3);
    rope_fwd(k3, pos, inv_freq_, k3);
    for (int64_t b = 0; b < B; b++) {  // append to the cache: rows [start, start+T) of sequence b
      st.k_cache[l].select(0, b).slice(0, start, start + T).copy_(k.select(0, b));
      st.v_cache[l].select(0, b).slice(0, start, start + T).copy_(v.select(0, b));
    }
    if (T > 1) attention_fwd(q, k, v, scale, att, lse);
    else {
      Tensor att_rows = att.view({B, NH, HD});
      attention_decode(q.view({B, NH, HD}), st.k_cache[l], st.v_cache[l], lens, scale, att_rows);
    }
    Tensor ao = branch;  // reuse: the attention output projection
    matmul_fwd(att2, ly.wo->weight, Tensor(), ao);
    add_rms_norm_fwd(ao, h, ly.post_norm->weight, eps, h, n, rstd);  // h += attention branch, n = norm(h)
    matmul_fwd(n, ly.gate_up, Tensor(), gu);
    swiglu_fwd(gu, act);
    matmul_fwd(act, ly.w_down->weight, Tensor(), branch);
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

Tensor LlamaModel::logits(const Tensor& ids_in) {
  check_dim("llama::logits", "ids", ids_in, 2);
  const int64_t B = ids_in.size(0), T = ids_in.size(1);
  Tensor ids = ids_in.contiguous().view({B * T}).to(device_);
  Tensor nf = forward_hidden(ids, B, T, nullptr);
  Tensor out = Tensor::empty({B * T, cfg_.vocab_size}, DType::f32, device_);
  matmul(nf, lm_head_->weight, out, false, true);
  return out.view({B, T, cfg_.vocab_size});
}

}  // namespace anvil
