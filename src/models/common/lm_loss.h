// The language-model loss every architecture shares: fused cross-entropy of the final normed hidden states
// against the LM head, its mean over valid targets, and the per-row weights its backward starts from.
#pragma once
#include "core/tensor.h"

namespace anvil {

struct LmLoss {
  float mean = 0.f;  // mean loss over targets >= 0
  Tensor lse;        // (N) f32, saved by the forward for cross_entropy_bwd
  Tensor dloss;      // (N) f32: grad_weight / valid for valid targets, 0 elsewhere
};

// nf (N, C) and lm_head (V, C) on the model's device; targets (N) i32 on that device, targets_host the same
// values anywhere (read on the host to count the valid ones).
LmLoss lm_loss_fwd(const Tensor& nf, const Tensor& lm_head, const Tensor& targets, const Tensor& targets_host,
                   float grad_weight);

}  // namespace anvil
