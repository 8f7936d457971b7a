// AdamW over a model's parameters: fp32 first and second moments per Param on the Param's device, global-norm
// gradient clipping folded into adamw's grad_scale, decoupled weight decay only on Param::decay tensors.
// The update runs on the fp32 masters, every parameter in one adamw_step_multi (one GPU launch); when the
// compute copy is a separate tensor (bf16 training) it is written in the same pass. After the step the model
// refreshes what it derives from the masters (refresh_derived), and re-casts its compute copies
// (sync_weights) only when one of them is a separate tensor adamw could not write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "models/model.h"
#include "train/train_config.h"

namespace anvil {

class AdamW {
 public:
  explicit AdamW(CausalLM& model);  // zero moments; every Param needs a master and a grad

  // sqrt(sum over all gradients of g^2): one grad_sum_squares_multi into a device scalar, one host read.
  double grad_norm();
  // Name of the first Param whose gradient holds a NaN or an inf; "" if none.
  std::string first_nonfinite_grad();

  // One optimizer step at learning rate `lr`, gradients multiplied by grad_scale first.
  void step(const OptimConfig& o, double lr, double grad_scale);
  int64_t steps_done() const { return step_; }

  // optimizer.safetensors: "<param>.exp_avg", "<param>.exp_avg_sq" (f32), plus "<param>.master" when the
  // compute copy is not the master (so bf16 runs resume from exact fp32 weights); metadata step = N.
  void save(const std::string& path) const;
  // Restores moments, step and (when present) masters; shapes and names must match the model's parameters.
  // Returns true when masters were restored.
  bool load(const std::string& path);

 private:
  CausalLM& model_;
  std::vector<Tensor> m_, v_;
  // Flat views of every Param's master, grad, moments and (when adamw writes it) compute copy, built once:
  // the model's tensors live as long as the optimizer, so the GPU tables of the multi-tensor ops stay cached.
  std::vector<AdamWTensor> ts_;
  std::vector<Tensor> grads_;
  bool copies_unwritten_ = false;  // some separate compute copy adamw cannot write: sync_weights() after a step
  int64_t step_ = 0;
};

}  // namespace anvil
