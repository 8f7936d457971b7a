// Llama parameters: creation, naming (Hugging Face layout), random initialisation, weight refresh.
#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/rope/rope.h"
#include "models/llama/llama.h"

namespace anvil {

LlamaModel::LlamaModel(const LlamaConfig& cfg, Device device, DType dtype, bool trainable, DType weight_dtype,
                       bool fp8_head)
    : cfg_(cfg), device_(device), dtype_(dtype), weight_dtype_(weight_dtype), fp8_head_(fp8_head),
      trainable_(trainable) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, "LlamaModel",
              "compute dtype f32, bf16 or f16", dtype_name(dtype));
  ANVIL_CHECK(weight_dtype == dtype || weight_dtype == DType::e4m3fn || weight_dtype == DType::e4m3fnuz,
              "LlamaModel", str("projection weights in the compute dtype ", dtype_name(dtype), " or FP8 e4m3"),
              dtype_name(weight_dtype));
  ANVIL_CHECK(!(trainable && dtype_is_fp8(weight_dtype)), "LlamaModel",
              "FP8 weights for inference only (train or fine-tune from the 16-bit checkpoint)",
              "trainable = true with FP8 weights");
  ANVIL_CHECK(!fp8_head || dtype_is_fp8(weight_dtype), "LlamaModel",
              "an FP8 LM head in an FP8 model (--dtype fp8 or an FP8 checkpoint)",
              str("an FP8 head with ", dtype_name(weight_dtype), " projections"));
  ANVIL_CHECK(!fp8_head || !cfg.tie_word_embeddings, "LlamaModel",
              "an FP8 LM head on an untied model (a tied head is the embedding table, which stays 16-bit)",
              "tie_word_embeddings = true");
  ANVIL_CHECK(cfg.num_attention_heads % cfg.num_key_value_heads == 0, "LlamaModel",
              "num_attention_heads divisible by num_key_value_heads",
              str(cfg.num_attention_heads, " and ", cfg.num_key_value_heads));
  info_.arch = "llama";
  info_.vocab = cfg.vocab_size;
  info_.width = cfg.hidden_size;
  info_.layers = cfg.num_hidden_layers;
  info_.max_len = cfg.max_position_embeddings;
  info_.bos_id = int32_t(cfg.bos_token_id.value_or(-1));
  for (int64_t e : cfg.eos_token_ids) info_.eos_ids.push_back(int32_t(e));
  info_.eos_id = info_.eos_ids.empty() ? -1 : info_.eos_ids[0];
  if (dtype_is_fp8(weight_dtype))
    info_.weights = str("FP8 (", dtype_name(weight_dtype), ") weights", fp8_head ? " and LM head" : "");
  // Attention adds 6 * L * C * T FLOPs per token for the causal QK^T and PV products (fwd + bwd, halved
  // for causality: 12 * L * C * T / 2), the convention of the MFU formula in TARGETS.md.
  info_.flops_attn_per_token_per_t = 6.0 * double(cfg.num_hidden_layers) * double(cfg.hidden_size);
  build_params();
  auto inv = rope_inv_freq(cfg.rope, cfg.head_dim);
  inv_freq_ = Tensor::from_floats(inv, {int64_t(inv.size())}, DType::f32, device);
}

void LlamaModel::build_params() {
  const int64_t C = cfg_.hidden_size, H = cfg_.intermediate_size, V = cfg_.vocab_size, HD = cfg_.head_dim;
  const int64_t QD = cfg_.num_attention_heads * HD, KVD = cfg_.num_key_value_heads * HD;
  const int64_t L = cfg_.num_hidden_layers;
  auto alloc = [&](const Shape& s) { return Tensor::empty(s, dtype_, device_); };
  // The projections (q|k|v, o, gate|up, down) are in weight_dtype_: FP8 models have no masters or gradients.
  auto alloc_proj = [&](const Shape& s) { return Tensor::empty(s, weight_dtype_, device_); };
  const bool fp8 = dtype_is_fp8(weight_dtype_);
  auto master_of = [&](const Tensor& w) {
    return dtype_ == DType::f32 ? w : (trainable_ ? Tensor::empty(w.shape(), DType::f32, device_) : Tensor());
  };
  auto grad_of = [&](const Shape& s) { return trainable_ ? Tensor::zeros(s, DType::f32, device_) : Tensor(); };
  auto add = [&](const std::string& name, const Shape& s, bool decay, bool proj = false) {
    Tensor w = proj ? alloc_proj(s) : alloc(s);
    params_.push_back(Param{name, w, proj && fp8 ? Tensor() : master_of(w), grad_of(s), decay});
  };
  params_.reserve(size_t(4 + 9 * L));
  add("model.embed_tokens.weight", {V, C}, true);
  // Projections that read the same input are row views of one stacked tensor (and so are their masters and
  // gradients): q|k|v (QD + 2 KVD, C) and gate|up (2H, C) — one GEMM each instead of three and two.
  struct Stack {
    Tensor w, master, grad;
  };
  auto stack = [&](int64_t rows) {
    Stack s{alloc_proj({rows, C}), Tensor(), grad_of({rows, C})};
    if (!fp8) s.master = master_of(s.w);
    return s;
  };
  auto add_view = [&](const std::string& name, const Stack& s, int64_t a, int64_t b) {
    auto view = [&](const Tensor& t) { return t.defined() ? t.slice(0, a, b) : Tensor(); };
    params_.push_back(Param{name, s.w.slice(0, a, b), view(s.master), view(s.grad), true});
  };
  std::vector<Stack> qkv(static_cast<size_t>(L)), gate_up(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; l++) {
    const std::string p = str("model.layers.", l, ".");
    Stack& a = qkv[size_t(l)];
    Stack& m = gate_up[size_t(l)];
    a = stack(QD + 2 * KVD);
    m = stack(2 * H);
    add(p + "input_layernorm.weight", {C}, false);
    add_view(p + "self_attn.q_proj.weight", a, 0, QD);
    add_view(p + "self_attn.k_proj.weight", a, QD, QD + KVD);
    add_view(p + "self_attn.v_proj.weight", a, QD + KVD, QD + 2 * KVD);
    add(p + "self_attn.o_proj.weight", {C, QD}, true, true);
    add(p + "post_attention_layernorm.weight", {C}, false);
    add_view(p + "mlp.gate_proj.weight", m, 0, H);
    add_view(p + "mlp.up_proj.weight", m, H, 2 * H);
    add(p + "mlp.down_proj.weight", {C, H}, true, true);
  }
  add("model.norm.weight", {C}, false);
  if (!cfg_.tie_word_embeddings) add("lm_head.weight", {V, C}, true, /*proj=*/fp8_head_);
  if (fp8_head_) head_scale_ = Tensor::empty({V}, DType::f32, device_);

  size_t i = 0;
  embed_ = &params_[i++];
  layers_.resize(size_t(L));
  for (int64_t l = 0; l < L; l++) {
    LlamaLayer& ly = layers_[size_t(l)];
    ly.in_norm = &params_[i++];
    ly.wq = &params_[i++];
    ly.wk = &params_[i++];
    ly.wv = &params_[i++];
    ly.wo = &params_[i++];
    ly.post_norm = &params_[i++];
    ly.w_gate = &params_[i++];
    ly.w_up = &params_[i++];
    ly.w_down = &params_[i++];
    ly.qkv = qkv[size_t(l)].w;
    ly.qkv_grad = qkv[size_t(l)].grad;
    ly.gate_up = gate_up[size_t(l)].w;
    ly.gate_up_grad = gate_up[size_t(l)].grad;
    if (fp8) {
      auto scale = [&](int64_t rows) { return Tensor::empty({rows}, DType::f32, device_); };
      ly.qkv_scale = scale(QD + 2 * KVD), ly.wo_scale = scale(C), ly.gate_up_scale = scale(2 * H);
      ly.down_scale = scale(C);
    }
  }
  final_norm_ = &params_[i++];
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : &params_[i++];
  info_.n_params = 0;
  for (auto& p : params_) info_.n_params += p.weight.numel();
  if (!fp8) build_linears({});
}

// input_scales: FP8 models with static activation scales, 4 per layer (qkv, wo, gate_up, down) f32 (1) tensors,
// then the FP8 head's when it has one; empty for dynamic activations (and 16-bit models). An undefined tensor
// among them: that GEMM quantises its activations per token.
void LlamaModel::build_linears(const std::vector<Tensor>& input_scales) {
  const size_t head_in = 4 * layers_.size();
  lin_head_ = !fp8_head_ ? linear_weight(lm_head_->weight)
                         : linear_weight_fp8(lm_head_->weight, head_scale_,
                                             input_scales.size() > head_in ? input_scales[head_in] : Tensor());
  for (size_t l = 0; l < layers_.size(); l++) {
    LlamaLayer& ly = layers_[l];
    if (!dtype_is_fp8(weight_dtype_)) {
      ly.lin_qkv = linear_weight(ly.qkv), ly.lin_wo = linear_weight(ly.wo->weight);
      ly.lin_gate_up = linear_weight(ly.gate_up), ly.lin_down = linear_weight(ly.w_down->weight);
      continue;
    }
    auto in = [&](size_t k) { return input_scales.empty() ? Tensor() : input_scales[4 * l + k]; };
    ly.lin_qkv = linear_weight_fp8(ly.qkv, ly.qkv_scale, in(0));
    ly.lin_wo = linear_weight_fp8(ly.wo->weight, ly.wo_scale, in(1));
    ly.lin_gate_up = linear_weight_fp8(ly.gate_up, ly.gate_up_scale, in(2));
    ly.lin_down = linear_weight_fp8(ly.w_down->weight, ly.down_scale, in(3));
  }
}

Param& LlamaModel::param(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return p;
  ANVIL_THROW("LlamaModel::param", "a Llama parameter name", "'" + name + "'");
}

std::unique_ptr<LlamaModel> LlamaModel::create(const LlamaConfig& cfg, Device device, DType dtype, bool trainable,
                                               uint64_t seed) {
  std::unique_ptr<LlamaModel> m(new LlamaModel(cfg, device, dtype, trainable, dtype));
  uint64_t salt = 0;
  for (auto& p : m->params_) {
    const bool is_norm = p.weight.dim() == 1;
    std::vector<float> v(static_cast<size_t>(p.weight.numel()));
    const uint64_t s = seed * 0x9E3779B97F4A7C15ull + (++salt);
    if (is_norm) {
      std::fill(v.begin(), v.end(), 1.f);
    } else {
      rng_fill_normal(v.data(), v.size(), s);
      const float r = float(cfg.initializer_range);
#pragma omp parallel for simd
      for (size_t k = 0; k < v.size(); k++) v[k] *= r;
    }
    Tensor src = Tensor::from_floats(v, p.weight.shape(), DType::f32, device);
    if (p.master.defined()) p.master.copy_(src);
    else cast(src, p.weight);
  }
  m->sync_weights();
  return m;
}

}  // namespace anvil
