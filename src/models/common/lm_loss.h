// The language-model loss every architecture shares: fused cross-entropy of the final normed hidden states
// against the LM head, its mean over valid targets and, for training, its gradients.
#pragma once
#include "core/tensor.h"

namespace anvil {

struct LmLoss {
  float mean = 0.f;  // mean loss over targets >= 0
  Tensor dnf;        // (N, C) in nf's dtype: d(mean * grad_weight)/d(nf)
};

// nf (N, C) and lm_head (V, C) on the model's device; targets (N) i32 on that device, targets_host the same
// values anywhere (read on the host to count the valid ones). Returns the mean loss over targets >= 0.
float lm_loss_fwd(const Tensor& nf, const Tensor& lm_head, const Tensor& targets, const Tensor& targets_host);

// Training: the loss and its gradients in one pass (cross_entropy_fwd_bwd, which computes the logits once):
// the mean and dnf, and d(mean * grad_weight)/d(lm_head) added into lm_head_grad (V, C) f32.
LmLoss lm_loss_fwd_bwd(const Tensor& nf, const Tensor& lm_head, Tensor& lm_head_grad, const Tensor& targets,
                       const Tensor& targets_host, float grad_weight);

}  // namespace anvil
