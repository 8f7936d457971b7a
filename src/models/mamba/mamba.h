// Mamba-1 (Hugging Face MambaForCausalLM): pre-norm residual stack of selective-SSM mixers, RMSNorm, tied head.
// Forward and backward are written out layer by layer from the kernels (no autograd graph).
//
// Vocabulary: B batch, T tokens per sequence (the kernels' L), C hidden, D = expand*C inner width,
// N state size, R dt rank, W conv width, V vocabulary.
//
// Layout: the conv and scan kernels are channel-major (B, D, T); the residual stream, norms and the LM head are
// token-major (B*T, C). No transpose kernel is needed: the projections around the mixer are written as one GEMM
// per sequence with the transposes folded into the GEMM (x_b (D, T) = W_x (D, C) @ n_b^T, and out_b (T, C) =
// y_b^T @ W_out^T), so in_proj reads token-major and writes channel-major, and out_proj the reverse.
// Precision: the residual stream is kept in the compute dtype (HF's residual_in_fp32 is exact on CPU f32; on GPU
// bf16 it is rounded once per layer, as in the Llama model). conv1d weight/bias, A_log, D and dt_proj.bias are
// f32 always (their weight is their master), as the kernels and mamba_ssm want.
#pragma once
#include <memory>
#include <string>

#include "io/hf_config.h"
#include "models/model.h"

namespace anvil {

struct MambaLayer {
  Param* norm;      // (C)
  Param* in_proj;   // (2D, C): rows [0, D) give x, rows [D, 2D) give z
  Param* conv_w;    // (D, 1, W) f32
  Param* conv_b;    // (D) f32, nullptr without use_conv_bias
  Param* x_proj;    // (R + 2N, D): rows dt [0, R), B [R, R+N), C [R+N, R+2N)
  Param* dt_proj;   // (D, R)
  Param* dt_bias;   // (D) f32 (the scan's delta_bias, softplus inside the scan)
  Param* A_log;     // (D, N) f32
  Param* D_skip;    // (D) f32
  Param* out_proj;  // (C, D)
  Tensor A;         // (D, N) f32 = -exp(A_log), refreshed by refresh_derived()
};

// What the backward (and the prefill) needs of one mixer. Channel-major unless said.
struct MambaMixerActs {
  Tensor x, z;        // (B, D, T) in_proj halves
  Tensor xc;          // (B, D, T) conv1d + SiLU output (the scan's u)
  Tensor dtr;         // (B, R, T) x_proj's dt part (low rank)
  Tensor Bm, Cm;      // (B, N, T) x_proj's B and C parts (the scan sees them as (B, 1, N, T))
  Tensor delta;       // (B, D, T) dt_proj(dtr), before bias and softplus (the scan applies both)
  Tensor states;      // (B, D, chunks, N) f32 scan states at chunk ends
  Tensor y;           // (B, D, T) gated scan output (training drops it after out_proj: the backward recomputes it)
};

struct MambaLayerActs;  // mamba_train.cpp

class MambaModel final : public CausalLM {
 public:
  // Random initialisation as transformers' MambaPreTrainedModel._init_weights does it (see mamba_model.cpp),
  // from a counter-based RNG so every backend starts from the same weights.
  static std::unique_ptr<MambaModel> create(const MambaConfig& cfg, Device device, DType dtype, bool trainable,
                                            uint64_t seed);
  // Loads config.json + safetensors (single or sharded) from a Hugging Face directory.
  static std::unique_ptr<MambaModel> load(const std::string& dir, Device device, DType dtype, bool trainable);

  const ModelInfo& info() const override { return info_; }
  Device device() const override { return device_; }
  DType compute_dtype() const override { return dtype_; }
  const MambaConfig& config() const { return cfg_; }

  float forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight,
                         const TrainOptions& opt) override;
  float forward_loss(const Tensor& ids, const Tensor& targets) override;
  std::vector<Param>& params() override { return params_; }
  void refresh_derived() override { refresh_A(); }

  std::unique_ptr<InferState> new_state(int batch, int max_len) override;
  void step(InferState& st, const Tensor& ids, Tensor& logits) override;
  Tensor logits(const Tensor& ids) override;

  void save(const std::string& dir) const override;

  // Internals shared by the files of this folder.
  struct Acts;
  Param& param(const std::string& name);

 private:
  MambaModel(const MambaConfig& cfg, Device device, DType dtype, bool trainable);
  void build_params();
  void refresh_A();
  // One mixer on the normed input n (B*T, C): returns its output (B*T, C); fills `a` (always: the prefill needs
  // x and the scan states too). with_out = false stops before out_proj and returns an undefined tensor: a
  // recomputed layer's backward never needs the output (Mamba-1.4B at 4 x 2048: 137 GFLOP a layer saved).
  Tensor mixer_forward(MambaLayer& ly, const Tensor& n, int64_t B, int64_t T, MambaMixerActs& a,
                       bool with_out = true);
  Tensor forward_hidden(const Tensor& ids_dev, int64_t B, int64_t T, Acts* acts);  // final normed (N, C)
  void recompute_layer(MambaLayer& ly, MambaLayerActs& a, int64_t B, int64_t T);
  void rebuild_slim_layer(MambaLayer& ly, MambaLayerActs& a, int64_t B, int64_t T);
  float loss_and_backward(const Tensor& ids, const Tensor& targets, float grad_weight, bool backward,
                          const TrainOptions& opt);

  MambaConfig cfg_;
  ModelInfo info_;
  Device device_;
  DType dtype_;
  bool trainable_;
  std::vector<Param> params_;
  std::vector<MambaLayer> layers_;
  Param* embed_ = nullptr;
  Param* final_norm_ = nullptr;
  Param* lm_head_ = nullptr;  // == embed_ when tied
};

}  // namespace anvil
