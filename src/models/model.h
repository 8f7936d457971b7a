// The causal language model interface shared by every architecture (Llama, Mamba). Model code is pure math:
// the trainer, LoRA, sharding and serving talk to a model only through this interface.
//
// Vocabulary: B batch, T sequence length, V vocabulary, C model width.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil {

// One trainable tensor: the compute copy the forward reads (bf16 on GPU training, f32 on CPU), its fp32
// master copy (the optimizer updates it, then refreshes `weight`), and the fp32 gradient it accumulates into.
// When the compute dtype is f32, master and weight are the same tensor.
struct Param {
  std::string name;  // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Tensor weight;     // compute dtype
  Tensor master;     // f32
  Tensor grad;       // f32, same shape; zeroed by zero_grad()
  bool decay = true; // weight decay applies (not to norms and biases)
};

// Recurrent/KV state of a batch of sequences being generated.
struct InferState {
  virtual ~InferState() = default;
  int batch = 0;
  int max_len = 0;          // cache capacity in tokens (Llama); unused by Mamba's constant-size state
  std::vector<int> lens;    // tokens consumed so far per sequence
  std::string decode_path;  // how one-token steps run, once the first has run ("" = the model's only way)
};

struct ModelInfo {
  std::string arch;         // "llama" | "mamba"
  int64_t vocab = 0, width = 0, layers = 0, max_len = 0;
  int64_t n_params = 0;
  // Approximate training FLOPs per token (forward + backward), for MFU: 6*N + attention terms.
  double train_flops_per_token(int64_t T) const;
  double flops_attn_per_token_per_t = 0;  // the T-dependent part: 6 * layers * width for attention (Llama)
  int32_t bos_id = -1, eos_id = -1;   // -1: none
  std::vector<int32_t> eos_ids;        // every id that ends generation (config.json may list several)
  std::string weights;  // for logs: how the linear weights are stored, e.g. "FP8 (e4m3fn) weights"; "" = 16/32-bit
};

struct TrainOptions {
  bool recompute = false;   // per-layer activation recomputation: keep only layer inputs, recompute inside
  // With recompute, the last keep_layers layers keep their activations and the others only their input: the
  // dial between memory and the second forward. The backward reaches the last layers first, so theirs is the
  // memory freed earliest. 1 (the default; 0 means the same): only the last layer, whose recomputation would
  // come right after its forward; >= the layer count: nothing recomputed. Each more kept layer costs its
  // activations less the input it keeps anyway and saves one layer forward in the backward. A model may keep
  // less than everything in a kept layer when the rest is cheap to rebuild: Mamba keeps the slim set
  // (mamba_train.cpp; Mamba-1.4B, bf16, batch 4 x 2048: 0.24 - 0.03 = 0.20 GB a layer).
  int64_t keep_layers = 1;

  // The number of leading layers of a `layers`-deep stack that keep only their input: layers - max(keep_layers,
  // 1) with recompute (at least 0), 0 without. Throws anvil::Error naming keep_layers when it is negative.
  int64_t recomputed_layers(int64_t layers) const;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelInfo& info() const = 0;
  virtual Device device() const = 0;
  virtual DType compute_dtype() const = 0;

  // ---- training ----
  // Forward and backward on one micro-batch: ids, targets (B, T) i32 on any device (-1 targets are ignored).
  // Returns the mean loss over valid targets; gradients of (loss * grad_weight) accumulate into Param::grad,
  // so micro-batches of a step add up with grad_weight = 1 / micro_batches.
  virtual float forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight,
                                 const TrainOptions& opt) = 0;
  // Bytes of activations the last forward_backward kept for its backward (counted when the backward starts):
  // what TrainOptions::recompute and keep_layers trade for compute. Each model's *_train.cpp states the ratio
  // it expects.
  int64_t saved_activation_bytes() const { return saved_activation_bytes_; }
  // Mean loss without gradients (validation).
  virtual float forward_loss(const Tensor& ids, const Tensor& targets) = 0;
  virtual std::vector<Param>& params() = 0;
  void zero_grad();
  // After the fp32 masters changed (loading, an optimizer step that could not write every compute copy): refresh
  // the compute copies (a no-op when they are the same tensor), then refresh_derived(). Models with derived
  // state override refresh_derived(), not this.
  virtual void sync_weights();
  // Recomputes the state a model derives from its fp32 masters other than the compute copies (Mamba's
  // A = -exp(A_log)). The optimizer calls it after every step that wrote every compute copy itself, instead of
  // sync_weights(). Default: nothing derived.
  virtual void refresh_derived() {}

  // ---- inference ----
  virtual std::unique_ptr<InferState> new_state(int batch, int max_len) = 0;
  // Feeds ids (B, T) (T >= 1; prefill when T > 1) and writes the logits of the last position: (B, V) f32.
  virtual void step(InferState& st, const Tensor& ids, Tensor& logits) = 0;
  // Full logits for every position (B, T, V) f32 (parity tests; no cache).
  virtual Tensor logits(const Tensor& ids) = 0;

  // ---- checkpoints (Hugging Face layout: config.json + model.safetensors) ----
  virtual void save(const std::string& dir) const = 0;

 protected:
  int64_t saved_activation_bytes_ = 0;
};

// How the linear-layer weights of a loaded model are stored.
//   checkpoint: as the checkpoint has them (16-bit weights in the compute dtype; an FP8 checkpoint, one whose
//               config.json carries a quantization_config, stays FP8);
//   fp8:        16-bit weights quantised at load to e4m3 (e4m3fnuz on AMD) with one f32 scale per output channel
//               (amax / fp8_max). Inference only (Llama); see models/common/linear.h for the GEMM paths.
enum class WeightFormat { checkpoint, fp8 };

// Loads a Hugging Face checkpoint directory (config.json + safetensors), picking the architecture from the
// config. dtype: the compute dtype (f32 on CPU; bf16 or f32 on GPU). trainable: keep fp32 masters and grads.
// fp8_lm_head: an FP8 model's (untied) LM head quantised too, per output channel, like its projections. Off, the
// head stays 16-bit, as vLLM's and TensorRT-LLM's FP8 defaults keep it, unless the checkpoint stores it FP8.
std::unique_ptr<CausalLM> load_model(const std::string& dir, Device device, DType dtype, bool trainable,
                                     WeightFormat weights = WeightFormat::checkpoint, bool fp8_lm_head = false);

}  // namespace anvil
