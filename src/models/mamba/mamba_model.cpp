// Mamba parameters: creation, naming (Hugging Face layout), random initialisation, weight refresh.
#include <cmath>

#include "core/rng.h"
#include "kernels/elementwise/elementwise.h"
#include "models/mamba/mamba.h"

namespace anvil {

MambaModel::MambaModel(const MambaConfig& cfg, Device device, DType dtype, bool trainable)
    : cfg_(cfg), device_(device), dtype_(dtype), trainable_(trainable) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, "MambaModel",
              "compute dtype f32, bf16 or f16", dtype_name(dtype));
  ANVIL_CHECK(!cfg.use_bias, "MambaModel", "use_bias = false (in_proj/out_proj without bias, as every released "
              "Mamba checkpoint)", "use_bias = true");
  ANVIL_CHECK(cfg.conv_kernel >= 2 && cfg.conv_kernel <= 4, "MambaModel", "conv_kernel 2, 3 or 4",
              cfg.conv_kernel);
  ANVIL_CHECK(cfg.state_size >= 1 && cfg.state_size <= 256, "MambaModel", "state_size in 1..256", cfg.state_size);
  info_.arch = "mamba";
  info_.vocab = cfg.vocab_size;
  info_.width = cfg.hidden_size;
  info_.layers = cfg.num_hidden_layers;
  info_.max_len = 0;  // no position limit: a recurrent state
  info_.bos_id = int32_t(cfg.bos_token_id.value_or(-1));
  for (int64_t e : cfg.eos_token_ids) info_.eos_ids.push_back(int32_t(e));
  info_.eos_id = info_.eos_ids.empty() ? -1 : info_.eos_ids[0];
  // The scan is linear in T: no T-dependent FLOP term (its 9*D*N per token is small next to 6*N_params).
  info_.flops_attn_per_token_per_t = 0;
  build_params();
}

void MambaModel::build_params() {
  const int64_t C = cfg_.hidden_size, D = cfg_.intermediate_size, N = cfg_.state_size, V = cfg_.vocab_size;
  const int64_t R = cfg_.time_step_rank, W = cfg_.conv_kernel, L = cfg_.num_hidden_layers;
  auto grad_of = [&](const Shape& s) { return trainable_ ? Tensor::zeros(s, DType::f32, device_) : Tensor(); };
  // Compute-dtype parameters: a separate f32 master when training in bf16/f16.
  auto add = [&](const std::string& name, const Shape& s, bool decay) {
    Tensor w = Tensor::empty(s, dtype_, device_);
    Tensor m = dtype_ == DType::f32 ? w : (trainable_ ? Tensor::empty(s, DType::f32, device_) : Tensor());
    params_.push_back(Param{name, w, m, grad_of(s), decay});
  };
  // f32 parameters whatever the compute dtype: the weight is the master.
  auto add_f32 = [&](const std::string& name, const Shape& s, bool decay) {
    Tensor w = Tensor::empty(s, DType::f32, device_);
    params_.push_back(Param{name, w, trainable_ ? w : Tensor(), grad_of(s), decay});
  };
  params_.reserve(size_t(3 + 11 * L));
  add("backbone.embeddings.weight", {V, C}, true);
  for (int64_t l = 0; l < L; l++) {
    const std::string p = str("backbone.layers.", l, ".");
    add(p + "norm.weight", {C}, false);
    add(p + "mixer.in_proj.weight", {2 * D, C}, true);
    add_f32(p + "mixer.conv1d.weight", {D, 1, W}, true);
    if (cfg_.use_conv_bias) add_f32(p + "mixer.conv1d.bias", {D}, false);
    add(p + "mixer.x_proj.weight", {R + 2 * N, D}, true);
    add(p + "mixer.dt_proj.weight", {D, R}, true);
    add_f32(p + "mixer.dt_proj.bias", {D}, false);
    add_f32(p + "mixer.A_log", {D, N}, false);  // mamba_ssm: _no_weight_decay on A_log and D
    add_f32(p + "mixer.D", {D}, false);
    add(p + "mixer.out_proj.weight", {C, D}, true);
  }
  add("backbone.norm_f.weight", {C}, false);
  if (!cfg_.tie_word_embeddings) add("lm_head.weight", {V, C}, true);

  size_t i = 0;
  embed_ = &params_[i++];
  layers_.resize(size_t(L));
  for (int64_t l = 0; l < L; l++) {
    MambaLayer& ly = layers_[size_t(l)];
    ly.norm = &params_[i++];
    ly.in_proj = &params_[i++];
    ly.conv_w = &params_[i++];
    ly.conv_b = cfg_.use_conv_bias ? &params_[i++] : nullptr;
    ly.x_proj = &params_[i++];
    ly.dt_proj = &params_[i++];
    ly.dt_bias = &params_[i++];
    ly.A_log = &params_[i++];
    ly.D_skip = &params_[i++];
    ly.out_proj = &params_[i++];
    ly.A = Tensor::empty({D, N}, DType::f32, device_);
  }
  final_norm_ = &params_[i++];
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : &params_[i++];
  info_.n_params = 0;
  for (auto& p : params_) info_.n_params += p.weight.numel();
}

Param& MambaModel::param(const std::string& name) {
  for (auto& p : params_)
    if (p.name == name) return p;
  ANVIL_THROW("MambaModel::param", "a Mamba parameter name", "'" + name + "'");
}

// A = -exp(A_log), (D, N) f32 per layer, whenever the weights change (never per token).
void MambaModel::refresh_A() {
  for (auto& ly : layers_) neg_exp(ly.A_log->weight, ly.A);
}

// transformers' MambaPreTrainedModel._init_weights, in the order it applies them:
//   embeddings, in_proj, x_proj: normal(0, initializer_range);  norms: ones;
//   A_log[d, n] = log(n + 1);  D = 1;  conv1d.bias = 0;
//   dt_proj.weight: U(-s, s) ("random") or s ("constant") with s = time_step_rank^-0.5 * time_step_scale;
//   dt_proj.bias = softplus^-1(dt), dt = exp(U(log dt_min, log dt_max)) clamped below at time_step_floor;
//   conv1d.weight, out_proj.weight: kaiming_uniform(a = sqrt 5) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
//     (fan_in = W for the depthwise conv, D for out_proj), out_proj then / sqrt(L) with rescale_prenorm_residual;
//   an untied lm_head: normal(0, initializer_range).
// The random streams are anvil's (Philox per parameter), not torch's: same distributions, other numbers.
std::unique_ptr<MambaModel> MambaModel::create(const MambaConfig& cfg, Device device, DType dtype, bool trainable,
                                               uint64_t seed) {
  std::unique_ptr<MambaModel> m(new MambaModel(cfg, device, dtype, trainable));
  const double std_ = cfg.initializer_range;
  const int64_t N = cfg.state_size;
  uint64_t salt = 0;
  auto ends = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  for (auto& p : m->params_) {
    std::vector<float> v(static_cast<size_t>(p.weight.numel()));
    const uint64_t s = seed * 0x9E3779B97F4A7C15ull + (++salt);
    auto uniform = [&](double lo, double hi) {
      rng_fill_uniform(v.data(), v.size(), s, lo, hi);
    };
    const std::string& n = p.name;
    if (ends(n, "norm.weight") || ends(n, "norm_f.weight") || ends(n, "mixer.D")) {
      for (auto& x : v) x = 1.f;
    } else if (ends(n, "A_log")) {
      for (size_t k = 0; k < v.size(); k++) v[k] = float(std::log(double(k % size_t(N) + 1)));
    } else if (ends(n, "conv1d.bias")) {
      for (auto& x : v) x = 0.f;
    } else if (ends(n, "dt_proj.weight")) {
      const double sc = std::pow(double(cfg.time_step_rank), -0.5) * cfg.time_step_scale;
      if (cfg.time_step_init_scheme == "constant") for (auto& x : v) x = float(sc);
      else uniform(-sc, sc);
    } else if (ends(n, "dt_proj.bias")) {
      const double lmin = std::log(cfg.time_step_min), lmax = std::log(cfg.time_step_max);
      for (size_t k = 0; k < v.size(); k++) {
        double dt = std::max(std::exp(lmin + (lmax - lmin) * rng_uniform(s, k)), cfg.time_step_floor);
        v[k] = float(dt + std::log(-std::expm1(-dt)));  // softplus(v) = dt
      }
    } else if (ends(n, "conv1d.weight") || ends(n, "out_proj.weight")) {
      double b = 1.0 / std::sqrt(double(p.weight.size(-1)));  // fan_in: W (conv) or D (out_proj)
      if (ends(n, "out_proj.weight") && cfg.rescale_prenorm_residual) b /= std::sqrt(double(cfg.num_hidden_layers));
      uniform(-b, b);
    } else {
      rng_fill_normal(v.data(), v.size(), s);
#pragma omp parallel for simd
      for (size_t k = 0; k < v.size(); k++) v[k] = float(std_ * v[k]);
    }
    Tensor src = Tensor::from_floats(v, p.weight.shape(), DType::f32, device);
    if (p.master.defined()) p.master.copy_(src);
    else cast(src, p.weight);
  }
  m->sync_weights();
  return m;
}

}  // namespace anvil
