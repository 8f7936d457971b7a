#include "models/model.h"

#include <algorithm>

#include "kernels/adamw/adamw.h"
#include "kernels/elementwise/elementwise.h"

namespace anvil {

double ModelInfo::train_flops_per_token(int64_t T) const {
  return 6.0 * double(n_params) + flops_attn_per_token_per_t * double(T);
}

int64_t TrainOptions::recomputed_layers(int64_t layers) const {
  ANVIL_CHECK(keep_layers >= 0, "TrainOptions", "keep_layers >= 0 (the layers that keep their activations)",
              str("keep_layers ", keep_layers));
  if (!recompute) return 0;
  return std::max<int64_t>(0, layers - std::max<int64_t>(1, keep_layers));
}

void CausalLM::zero_grad() {
  std::vector<Tensor> grads;
  for (auto& p : params())
    if (p.grad.defined()) grads.push_back(p.grad);
  if (!grads.empty()) zero_multi(grads);  // one launch on the GPU, not one memset per tensor
}

void CausalLM::sync_weights() {
  for (auto& p : params())
    if (p.master.defined() && p.master.data_ptr() != p.weight.data_ptr()) cast(p.master, p.weight);
  refresh_derived();
}

}  // namespace anvil
