// AdamW (train/optimizer.h) against the per-tensor loop it replaced: one sum_squares per gradient for the norm,
// one adamw_step per parameter, then sync_weights(). On the CPU the multi-tensor ops must give the same bits,
// step after step, for f32 training (weights are the masters) and bf16 training (separate compute copies next
// to f32 parameters), and the model's derived state (Mamba's A = -exp(A_log)) must follow the masters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../models/parity_util.h"
#include "fake_bigram.h"
#include "kernels/adamw/adamw.h"
#include "kernels/elementwise/elementwise.h"
#include "models/mamba/mamba.h"
#include "train/optimizer.h"

namespace anvil {
namespace {

OptimConfig optim() {
  OptimConfig o;
  o.weight_decay = 0.1;  // decay on the matrices, none on norms and biases: both kinds of tensor
  return o;
}

// The optimizer phase as it was before the multi-tensor ops.
double per_tensor_grad_norm(CausalLM& m) {
  Tensor acc = Tensor::zeros({1}, DType::f32);
  for (Param& p : m.params()) sum_squares(p.grad, acc);
  return std::sqrt(double(acc.item()));
}
void per_tensor_step(CausalLM& m, std::vector<Tensor>& ms, std::vector<Tensor>& vs, int64_t step,
                     const OptimConfig& o, double lr, double grad_scale) {
  auto& ps = m.params();
  if (ms.empty())
    for (Param& p : ps) {
      ms.push_back(Tensor::zeros(p.master.shape(), DType::f32));
      vs.push_back(Tensor::zeros(p.master.shape(), DType::f32));
    }
  for (size_t i = 0; i < ps.size(); i++) {
    Param& p = ps[i];
    AdamWParams a;
    a.lr = float(lr);
    a.beta1 = float(o.beta1);
    a.beta2 = float(o.beta2);
    a.eps = float(o.eps);
    a.weight_decay = p.decay ? float(o.weight_decay) : 0.f;
    a.step = step;
    a.grad_scale = float(grad_scale);
    Tensor w = p.master.view({-1}), g = p.grad.view({-1}), mm = ms[i].view({-1}), vv = vs[i].view({-1}), out;
    if (p.weight.data_ptr() != p.master.data_ptr() && p.weight.dtype() != DType::f32 && p.weight.is_contiguous())
      out = p.weight.view({-1});
    adamw_step(w, g, mm, vv, a, out);
  }
  m.sync_weights();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Three steps of forward_backward + clipping + AdamW on two copies of one model: `a` through AdamW, `b` through
// the per-tensor loop. Losses, norms, masters and compute copies must agree to the bit at every step.
void expect_same_training(CausalLM& a, CausalLM& b, const Tensor& ids, const Tensor& targets) {
  AdamW opt(a);
  std::vector<Tensor> ms, vs;
  const OptimConfig o = optim();
  for (int64_t step = 1; step <= 3; step++) {
    a.zero_grad();
    b.zero_grad();
    const float la = a.forward_backward(ids, targets, 1.f, TrainOptions{});
    const float lb = b.forward_backward(ids, targets, 1.f, TrainOptions{});
    ASSERT_EQ(std::memcmp(&la, &lb, sizeof la), 0) << "step " << step << ": loss " << la << " vs " << lb;
    const double na = opt.grad_norm(), nb = per_tensor_grad_norm(b);
    ASSERT_EQ(std::memcmp(&na, &nb, sizeof na), 0) << "step " << step << ": grad norm " << na << " vs " << nb;
    const double scale = na > 0.5 ? 0.5 / na : 1.0;  // clipping at 0.5: active on most steps here
    opt.step(o, 1e-2, scale);
    per_tensor_step(b, ms, vs, step, o, 1e-2, scale);
    for (size_t i = 0; i < a.params().size(); i++) {
      const Param &pa = a.params()[i], &pb = b.params()[i];
      EXPECT_TRUE(same_bits(pa.master, pb.master)) << "step " << step << ": master of " << pa.name;
      EXPECT_TRUE(same_bits(pa.weight, pb.weight)) << "step " << step << ": weight of " << pa.name;
    }
  }
}

void mamba_case(DType dtype) {
  const std::string dir = parity::fixture("mamba_tiny");
  SafetensorsIndex ref(dir + "/reference.safetensors");
  auto a = MambaModel::load(dir, Device::cpu(), dtype, true), b = MambaModel::load(dir, Device::cpu(), dtype, true);
  Tensor ids = parity::ids_i32(ref.get("batch.input_ids"));
  std::vector<float> tv = ids.to_floats();
  const int64_t B = ids.size(0), T = ids.size(1);
  for (int64_t r = 0; r < B; r++)
    for (int64_t t = 0; t < T; t++) tv[size_t(r * T + t)] = t + 1 < T ? ids.to_floats()[size_t(r * T + t + 1)] : -1.f;
  Tensor targets = Tensor::from_floats(tv, {B, T}, DType::i32, Device::cpu());
  expect_same_training(*a, *b, ids, targets);
  // After the steps, a fresh forward (it reads A = -exp(A_log)) agrees too: the derived state followed.
  EXPECT_TRUE(same_bits(a->logits(ids), b->logits(ids)));
}

TEST(Optimizer, MambaF32MatchesPerTensorAdamWBitForBit) { mamba_case(DType::f32); }
TEST(Optimizer, MambaBf16MatchesPerTensorAdamWBitForBit) { mamba_case(DType::bf16); }

// sync_weights() re-casts every compute copy; after a step that wrote them all (or whose copies are the
// masters) only refresh_derived() is needed.
TEST(Optimizer, StepRefreshesDerivedStateWithoutResyncingWrittenCopies) {
  for (DType dt : {DType::f32, DType::bf16}) {
    train_test::FakeBigram m(8, dt, 5);
    AdamW opt(m);
    Tensor ids = Tensor::from_floats({1, 2, 3, 4}, {1, 4}, DType::i32);
    Tensor tg = Tensor::from_floats({2, 3, 4, 5}, {1, 4}, DType::i32);
    m.zero_grad();
    m.forward_backward(ids, tg, 1.f, TrainOptions{});
    opt.step(optim(), 1e-2, 1.0);
    EXPECT_EQ(m.syncs, 0) << dtype_name(dt);
    EXPECT_EQ(m.refreshes, 1) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace anvil
