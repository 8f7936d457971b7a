#include "models/common/lm_loss.h"

#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil {

LmLoss lm_loss_fwd(const Tensor& nf, const Tensor& lm_head, const Tensor& targets, const Tensor& targets_host,
                   float grad_weight) {
  const int64_t N = nf.size(0);
  const Device d = nf.device();
  LmLoss r;
  Tensor loss = Tensor::empty({N}, DType::f32, d);
  r.lse = Tensor::empty({N}, DType::f32, d);
  cross_entropy_fwd(nf, lm_head, targets, loss, r.lse);
  const std::vector<float> t = targets_host.to_floats();
  int64_t valid = 0;
  for (float x : t) valid += x >= 0;
  std::vector<float> w(t.size(), 0.f);
  for (size_t i = 0; i < t.size(); i++) w[i] = t[i] >= 0 ? grad_weight / float(valid) : 0.f;
  r.dloss = Tensor::from_floats(w, {int64_t(w.size())}, DType::f32, d);
  double total = 0;
  for (float x : loss.to_floats()) total += x;
  r.mean = valid ? float(total / double(valid)) : 0.f;
  return r;
}

}  // namespace anvil
