#include "models/common/lm_loss.h"

#include "kernels/cross_entropy/cross_entropy.h"

namespace anvil {
namespace {

// dloss (N) on `d`: grad_weight / valid on the rows with a target, 0 elsewhere; valid counted on the host.
Tensor dloss_of(const Tensor& targets_host, float grad_weight, Device d, int64_t& valid) {
  const std::vector<float> t = targets_host.to_floats();
  valid = 0;
  for (float x : t) valid += x >= 0;
  std::vector<float> w(t.size(), 0.f);
  for (size_t i = 0; i < t.size(); i++) w[i] = t[i] >= 0 ? grad_weight / float(valid) : 0.f;
  return Tensor::from_floats(w, {int64_t(w.size())}, DType::f32, d);
}

float mean_of(const Tensor& loss, int64_t valid) {
  double total = 0;
  for (float x : loss.to_floats()) total += x;
  return valid ? float(total / double(valid)) : 0.f;
}

}  // namespace

float lm_loss_fwd(const Tensor& nf, const Tensor& lm_head, const Tensor& targets, const Tensor& targets_host) {
  const int64_t N = nf.size(0);
  const Device d = nf.device();
  Tensor loss = Tensor::empty({N}, DType::f32, d), lse = Tensor::empty({N}, DType::f32, d);
  cross_entropy_fwd(nf, lm_head, targets, loss, lse);
  int64_t valid = 0;
  for (float x : targets_host.to_floats()) valid += x >= 0;
  return mean_of(loss, valid);
}

LmLoss lm_loss_fwd_bwd(const Tensor& nf, const Tensor& lm_head, Tensor& lm_head_grad, const Tensor& targets,
                       const Tensor& targets_host, float grad_weight) {
  const int64_t N = nf.size(0);
  const Device d = nf.device();
  LmLoss r;
  int64_t valid = 0;
  const Tensor dloss = dloss_of(targets_host, grad_weight, d, valid);
  Tensor loss = Tensor::empty({N}, DType::f32, d);
  r.dnf = Tensor::empty(nf.shape(), nf.dtype(), d);
  cross_entropy_fwd_bwd(nf, lm_head, targets, dloss, loss, r.dnf, lm_head_grad);
  r.mean = mean_of(loss, valid);
  return r;
}

}  // namespace anvil
