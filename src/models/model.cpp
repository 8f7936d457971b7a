#include "models/model.h"

#include "kernels/elementwise/elementwise.h"

namespace anvil {

double ModelInfo::train_flops_per_token(int64_t T) const {
  return 6.0 * double(n_params) + flops_attn_per_token_per_t * double(T);
}

void CausalLM::zero_grad() {
  for (auto& p : params())
    if (p.grad.defined()) p.grad.zero_();
}

void CausalLM::sync_weights() {
  for (auto& p : params())
    if (p.master.defined() && p.master.data_ptr() != p.weight.data_ptr()) cast(p.master, p.weight);
  refresh_derived();
}

}  // namespace anvil
