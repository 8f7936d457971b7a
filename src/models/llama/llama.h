// Llama (Llama 2, 3, 3.1, 3.2 shapes): pre-norm decoder, GQA attention with RoPE, SwiGLU MLP, RMSNorm.
// Forward and backward are written out layer by layer from the kernels (no autograd graph).
//
// Vocabulary: B batch, T tokens per sequence, N = B*T rows, C hidden, H intermediate, V vocabulary,
// NH query heads, NKV key/value heads, HD head dim, L layers.
#pragma once
#include <memory>
#include <string>

#include "io/hf_config.h"
#include "models/common/linear.h"
#include "models/model.h"

namespace anvil {

struct LlamaLayerActs;  // llama_train.cpp

struct LlamaLayer {
  Param* in_norm;    // (C)
  Param* wq;         // (NH*HD, C)   view of rows [0, QD) of the stacked qkv weight
  Param* wk;         // (NKV*HD, C)  view of rows [QD, QD + KVD)
  Param* wv;         // (NKV*HD, C)  view of rows [QD + KVD, QD + 2 KVD)
  Param* wo;         // (C, NH*HD)
  Param* post_norm;  // (C)
  Param* w_gate;     // (H, C)  view of rows [0, H) of the fused gate_up weight
  Param* w_up;       // (H, C)  view of rows [H, 2H)
  Param* w_down;     // (C, H)
  Tensor qkv;        // (QD + 2 KVD, C) the tensor q, k and v view: one GEMM for the three projections
  Tensor qkv_grad;   // (QD + 2 KVD, C) f32
  Tensor gate_up;    // (2H, C) the tensor gate and up view: one GEMM for both
  Tensor gate_up_grad;  // (2H, C) f32
  // FP8 models: per-output-channel f32 scales of the four weights (per-tensor scales of a checkpoint expanded,
  // so the stacked q|k|v and gate|up get one vector each); undefined for 16-bit models.
  Tensor qkv_scale, wo_scale, gate_up_scale, down_scale;  // (QD + 2 KVD), (C), (2H), (C)
  // What the inference GEMMs read (models/common/linear.h): the weights above, 16-bit or FP8 with scales.
  LinearWeight lin_qkv, lin_wo, lin_gate_up, lin_down;
};

class LlamaModel final : public CausalLM {
 public:
  // Random initialisation as transformers does it (normal(0, 0.02) for linears and embeddings, ones for norms),
  // from a counter-based RNG so every backend starts from the same weights.
  static std::unique_ptr<LlamaModel> create(const LlamaConfig& cfg, Device device, DType dtype, bool trainable,
                                            uint64_t seed);
  // Loads config.json + safetensors (single or sharded) from a Hugging Face directory. FP8 weights (an FP8
  // checkpoint, or WeightFormat::fp8) are inference only: trainable = true with them is an error.
  // fp8_lm_head (FP8 models, untied head): the LM head quantised at load as well (load_model, models/model.h);
  // a checkpoint whose lm_head.weight is stored FP8 (with its weight_scale) loads it FP8 either way.
  static std::unique_ptr<LlamaModel> load(const std::string& dir, Device device, DType dtype, bool trainable,
                                          WeightFormat weights = WeightFormat::checkpoint, bool fp8_lm_head = false);

  const ModelInfo& info() const override { return info_; }
  // The dtype of the projection weights: dtype_ for 16/32-bit models, e4m3fn / e4m3fnuz for FP8 ones.
  DType weight_dtype() const { return weight_dtype_; }
  // The LM head as the inference GEMMs read it: 16-bit, or weight_dtype() with per-row scales (fp8_lm_head).
  const LinearWeight& lm_head() const { return lin_head_; }
  Device device() const override { return device_; }
  DType compute_dtype() const override { return dtype_; }
  const LlamaConfig& config() const { return cfg_; }

  float forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight,
                         const TrainOptions& opt) override;
  float forward_loss(const Tensor& ids, const Tensor& targets) override;
  std::vector<Param>& params() override { return params_; }

  std::unique_ptr<InferState> new_state(int batch, int max_len) override;
  void step(InferState& st, const Tensor& ids, Tensor& logits) override;
  Tensor logits(const Tensor& ids) override;

  void save(const std::string& dir) const override;

  // Internals shared by the files of this folder.
  struct Acts;
  struct StepBuffers;
  struct State;
  Param& param(const std::string& name);
  const Tensor& embed_weight() const { return embed_->weight; }
  const Tensor& lm_head_weight() const { return lm_head_->weight; }

 private:
  LlamaModel(const LlamaConfig& cfg, Device device, DType dtype, bool trainable, DType weight_dtype,
             bool fp8_head = false);
  void build_params();
  void build_linears(const std::vector<Tensor>& input_scales);  // LlamaLayer::lin_* from the weights (+ scales)
  Tensor logits_by_steps(const Tensor& ids);                    // logits() of FP8 models, via step()
  Tensor forward_hidden(const Tensor& ids_dev, int64_t B, int64_t T, Acts* acts);  // final normed (N, C)
  void step_kernels(State& st, StepBuffers& b, int64_t T);  // one inference step's launches (capturable)
  // FP8 decode through the per-op kernels, ANVIL_SKINNY_TILES=1: the projections' weights and an FP8 head pre-tiled
  // for the skinny GEMM's ring kernel (linear_tile_weights) while anvil's device memory stays within three quarters
  // of the device's; head_only: the head alone (batch 1, where decode_stack runs the layers). Returns their bytes
  // (0: none).
  int64_t tile_linear_weights(bool head_only = false);
  Tensor layer_forward(LlamaLayer& ly, LlamaLayerActs& a, const Tensor& pos, int64_t B, int64_t T);
  void recompute_layer(LlamaLayer& ly, LlamaLayerActs& a, const Tensor& pos, int64_t B, int64_t T);
  float loss_and_backward(const Tensor& ids, const Tensor& targets, float grad_weight, bool backward,
                          const TrainOptions& opt);

  LlamaConfig cfg_;
  ModelInfo info_;
  Device device_;
  DType dtype_;
  DType weight_dtype_;  // of qkv, wo, gate_up, down
  bool fp8_head_;       // lm_head.weight in weight_dtype_ too, with head_scale_
  bool trainable_;
  std::vector<Param> params_;
  std::vector<LlamaLayer> layers_;
  Param* embed_ = nullptr;
  Param* final_norm_ = nullptr;
  Param* lm_head_ = nullptr;  // == embed_ when tied
  Tensor head_scale_;         // (V) f32, fp8_head_ only
  LinearWeight lin_head_;     // what step() reads for the logits
  Tensor inv_freq_;           // (HD/2) f32 on device
  Tensor stack_tiles_;        // FP8: decode_stack's pre-tiled weights, made at the first plan, shared by the rest
};

}  // namespace anvil
