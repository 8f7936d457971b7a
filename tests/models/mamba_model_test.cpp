// MambaModel beyond the fixture: prefill edge cases (shorter than the conv window, longer than one scan chunk,
// a batch), create_model from presets and inline configs, and a few SGD steps lowering the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "models/factory.h"
#include "models/mamba/mamba.h"
#include "parity_util.h"

namespace anvil {
namespace {

std::vector<float> seq(int64_t n, int64_t V, uint32_t salt) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = 12345u + salt * 7919u;
  for (auto& t : v) {
    x = x * 1664525u + 1013904223u;
    t = float((x >> 8) % uint32_t(V));
  }
  return v;
}

// Feeds `prompt_len` tokens as one prefill, then the rest one at a time; every step's logits must match the
// full-sequence logits() at that position.
void check_stepwise(CausalLM& m, int64_t B, int64_t T, int64_t prompt_len) {
  const int64_t V = m.info().vocab;
  std::vector<float> all;
  for (int64_t b = 0; b < B; b++) {
    auto s = seq(T, V, uint32_t(b + 1));
    all.insert(all.end(), s.begin(), s.end());
  }
  Tensor ids = Tensor::from_floats(all, {B, T}, DType::i32, Device::cpu());
  auto full = m.logits(ids).to_floats();  // (B, T, V)
  auto st = m.new_state(int(B), int(T));
  Tensor logits = Tensor::empty({B, V}, DType::f32, Device::cpu());
  double worst = 0, scale = 0;
  for (float x : full) scale = std::max(scale, double(std::fabs(x)));
  for (int64_t t = prompt_len - 1; t < T; t++) {
    const int64_t t0 = t == prompt_len - 1 ? 0 : t, n = t - t0 + 1;
    std::vector<float> chunk;
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = t0; k <= t; k++) chunk.push_back(all[size_t(b * T + k)]);
    m.step(*st, Tensor::from_floats(chunk, {B, n}, DType::i32, Device::cpu()), logits);
    auto got = logits.to_floats();
    for (int64_t b = 0; b < B; b++)
      for (int64_t v = 0; v < V; v++)
        worst = std::max(worst, double(std::fabs(got[size_t(b * V + v)] - full[size_t((b * T + t) * V + v)])));
  }
  EXPECT_LE(worst, 1e-4 * scale) << "B " << B << " T " << T << " prompt " << prompt_len << ": max|err| " << worst
                                 << " of max|logit| " << scale;
}

TEST(MambaModel, PrefillThenDecodeMatchesFullForward) {
  auto m = MambaModel::load(parity::fixture("mamba_tiny"), Device::cpu(), DType::f32, false);
  check_stepwise(*m, 1, 12, 2);    // prefill shorter than the conv window (W - 1 = 3): zero-padded conv state
  check_stepwise(*m, 1, 12, 3);    // exactly W - 1
  check_stepwise(*m, 2, 20, 9);    // a batch
  check_stepwise(*m, 1, 530, 520); // prefill past one scan chunk (512): the last chunk's state
}

TEST(MambaModel, StepRejectsBadCalls) {
  auto m = MambaModel::load(parity::fixture("mamba_tiny"), Device::cpu(), DType::f32, false);
  auto st = m->new_state(1, 8);
  Tensor logits = Tensor::empty({1, 256}, DType::f32, Device::cpu());
  Tensor two = Tensor::from_floats({1, 2}, {1, 2}, DType::i32, Device::cpu());
  m->step(*st, two, logits);
  EXPECT_THROW(m->step(*st, two, logits), Error);  // a second multi-token call
  Tensor bad = Tensor::empty({1, 7}, DType::f32, Device::cpu());
  EXPECT_THROW(m->step(*st, Tensor::from_floats({1}, {1, 1}, DType::i32, Device::cpu()), bad), Error);
  Tensor ids = Tensor::from_floats({1, 2, 3}, {1, 3}, DType::i32, Device::cpu());
  EXPECT_THROW(m->forward_backward(ids, ids, 1.f, TrainOptions{}), Error);  // inference-only model
}

TEST(MambaModel, CreateFromPresetWithOverrides) {
  ModelSpec spec;
  spec.arch = "mamba";
  spec.preset = "mamba-130m";
  spec.overrides = {{"vocab_size", 96}, {"hidden_size", 32}, {"num_hidden_layers", 2}, {"time_step_rank", 4}};
  auto m = create_model(spec, Device::cpu(), DType::f32, true, 7);
  EXPECT_EQ(m->info().arch, "mamba");
  EXPECT_EQ(m->info().width, 32);
  auto* mm = dynamic_cast<MambaModel*>(m.get());
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->config().intermediate_size, 64);
  // HF init: A_log[d, n] = log(n + 1), D = 1, softplus(dt bias) in [time_step_min, time_step_max].
  auto alog = mm->param("backbone.layers.1.mixer.A_log").weight.to_floats();
  for (size_t k = 0; k < alog.size(); k++) ASSERT_FLOAT_EQ(alog[k], std::log(float(k % 16 + 1)));
  for (float d : mm->param("backbone.layers.0.mixer.D").weight.to_floats()) ASSERT_EQ(d, 1.f);
  for (float b : mm->param("backbone.layers.0.mixer.dt_proj.bias").weight.to_floats()) {
    const double dt = std::log1p(std::exp(double(b)));
    ASSERT_GE(dt, 0.001 * 0.999);
    ASSERT_LE(dt, 0.1 * 1.001);
  }
  // Same seed, same weights; another seed, others.
  auto m2 = create_model(spec, Device::cpu(), DType::f32, true, 7);
  auto m3 = create_model(spec, Device::cpu(), DType::f32, true, 8);
  // params()[2]: layer 0's in_proj (random; [1] is a norm of ones).
  auto w1 = m->params()[2].weight.to_floats(), w2 = m2->params()[2].weight.to_floats();
  auto w3 = m3->params()[2].weight.to_floats();
  EXPECT_EQ(w1, w2);
  EXPECT_NE(w1, w3);

  // A few plain SGD steps on one batch lower the loss (the backward, sync_weights and A = -exp(A_log) agree).
  const int64_t B = 2, T = 16;
  auto s = seq(B * (T + 1), 96, 3);
  std::vector<float> x, y;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      x.push_back(s[size_t(b * (T + 1) + t)]);
      y.push_back(s[size_t(b * (T + 1) + t + 1)]);
    }
  Tensor ids = Tensor::from_floats(x, {B, T}, DType::i32, Device::cpu());
  Tensor tg = Tensor::from_floats(y, {B, T}, DType::i32, Device::cpu());
  float first = 0, last = 0;
  for (int it = 0; it < 10; it++) {
    m->zero_grad();
    last = m->forward_backward(ids, tg, 1.f, TrainOptions{});
    if (it == 0) first = last;
    for (auto& p : m->params()) {
      auto w = p.master.to_floats(), g = p.grad.to_floats();
      for (size_t k = 0; k < w.size(); k++) w[k] -= 0.05f * g[k];
      p.master.copy_(Tensor::from_floats(w, p.master.shape(), DType::f32, Device::cpu()));
    }
    m->sync_weights();
  }
  EXPECT_NEAR(first, std::log(96.f), 1.0);
  EXPECT_LT(last, first - 0.1f) << "loss " << first << " -> " << last;
}

// bf16 compute (the GPU training dtype) on the CPU: f32 conv/A/D/dt-bias params next to bf16 weights, f32
// masters and gradients. Loose bounds: bf16 rounds activations to 8 bits of mantissa at every layer.
TEST(MambaModel, Bf16ComputeTracksF32) {
  const std::string dir = parity::fixture("mamba_tiny");
  SafetensorsIndex ref(dir + "/reference.safetensors");
  auto m = MambaModel::load(dir, Device::cpu(), DType::bf16, true);
  EXPECT_EQ(m->param("backbone.layers.0.mixer.A_log").weight.dtype(), DType::f32);
  EXPECT_EQ(m->param("backbone.layers.0.mixer.in_proj.weight").weight.dtype(), DType::bf16);
  Tensor ids = parity::ids_i32(ref.get("batch.input_ids"));
  parity::Err e = parity::compare(m->logits(ids), ref.get("batch.logits"));
  EXPECT_LE(e.max_abs / e.ref_max, 0.05) << e.max_abs << " of " << e.ref_max;
  std::vector<float> tv = ids.to_floats();
  const int64_t B = ids.size(0), T = ids.size(1);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) tv[size_t(b * T + t)] = t + 1 < T ? ids.to_floats()[size_t(b * T + t + 1)] : -1.f;
  Tensor tg = Tensor::from_floats(tv, {B, T}, DType::i32, Device::cpu());
  m->zero_grad();
  const float loss = m->forward_backward(ids, tg, 1.f, TrainOptions{});
  auto f = MambaModel::load(dir, Device::cpu(), DType::f32, true);
  f->zero_grad();
  const float loss32 = f->forward_backward(ids, tg, 1.f, TrainOptions{});
  EXPECT_NEAR(loss, loss32, 0.02 * loss32);
  for (size_t i = 0; i < m->params().size(); i++) {
    parity::Err g = parity::compare(m->params()[i].grad, f->params()[i].grad);
    EXPECT_LE(g.rel_norm, 0.1) << m->params()[i].name;
  }
}

TEST(ModelFactory, LlamaPresetAndErrors) {
  ModelSpec spec;
  spec.arch = "llama";
  spec.preset = "llama-tiny";
  spec.overrides = {{"num_hidden_layers", 1}};
  auto m = create_model(spec, Device::cpu(), DType::f32, false, 1);
  EXPECT_EQ(m->info().arch, "llama");
  EXPECT_EQ(m->info().layers, 1);
  Tensor ids = Tensor::from_floats({1, 2, 3, 4}, {1, 4}, DType::i32, Device::cpu());
  // Targets unlike the inputs: with tied embeddings a token's own id is favoured at init.
  Tensor tg = Tensor::from_floats({900, 901, 902, 903}, {1, 4}, DType::i32, Device::cpu());
  EXPECT_NEAR(m->forward_loss(ids, tg), std::log(2048.f), 0.5);

  spec.arch = "mamba";  // a Llama preset asked for as Mamba
  EXPECT_THROW(create_model(spec, Device::cpu(), DType::f32, false, 1), Error);
  ModelSpec none;
  none.preset = "no-such-model";
  EXPECT_THROW(create_model(none, Device::cpu(), DType::f32, false, 1), Error);
  ModelSpec inline_only;  // the whole config inline
  inline_only.arch = "mamba";
  inline_only.overrides = {{"vocab_size", 32}, {"hidden_size", 16}, {"num_hidden_layers", 1}};
  auto mi = create_model(inline_only, Device::cpu(), DType::f32, false, 1);
  EXPECT_EQ(mi->info().arch, "mamba");
  EXPECT_EQ(mi->info().vocab, 32);
}

}  // namespace
}  // namespace anvil
