// Per-layer activation recomputation (TrainOptions::recompute, keep_layers): the loss and every Param::grad must
// equal the saved-activation path's bit for bit on the CPU (the backward reruns each layer's forward with the
// same kernels on the same inputs), and the activations kept for the backward must shrink by the amount each
// model's *_train.cpp states.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/factory.h"

namespace anvil {
namespace {

// Seeded ids (B, T) in [0, V); every 7th target is -1 (ignored), as padding would be.
void batch(int64_t B, int64_t T, int64_t V, Tensor& ids, Tensor& targets) {
  std::vector<float> x(size_t(B * T)), y(size_t(B * T));
  uint32_t s = 2024u;
  for (size_t i = 0; i < x.size(); i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = float((s >> 8) % uint32_t(V));
    s = s * 1664525u + 1013904223u;
    y[i] = i % 7 == 3 ? -1.f : float((s >> 8) % uint32_t(V));
  }
  ids = Tensor::from_floats(x, {B, T}, DType::i32, Device::cpu());
  targets = Tensor::from_floats(y, {B, T}, DType::i32, Device::cpu());
}

struct GradRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;  // per Param, after two accumulated micro-batches
  int64_t saved_bytes = 0;
};

// Two micro-batches accumulated (grad_weight 1/2), as the trainer does.
GradRun train_twice(CausalLM& m, int64_t B, int64_t T, bool recompute, int64_t keep_layers = 1) {
  GradRun r;
  TrainOptions opt;
  opt.recompute = recompute;
  opt.keep_layers = keep_layers;
  m.zero_grad();
  Tensor ids, tg;
  batch(B, T, m.info().vocab, ids, tg);
  r.losses.push_back(m.forward_backward(ids, tg, 0.5f, opt));
  r.saved_bytes = m.saved_activation_bytes();
  batch(B, T + 3, m.info().vocab, ids, tg);  // another length: nothing cached from the first call is reused
  r.losses.push_back(m.forward_backward(ids, tg, 0.5f, opt));
  for (auto& p : m.params()) r.grads.push_back(p.grad.to_floats());
  return r;
}

// Exact equality, bit for bit (memcmp: -0 vs +0 and NaN payloads count too).
void expect_identical(CausalLM& m, const GradRun& a, const GradRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); i++)
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(float)), 0)
        << "loss " << i << ": " << a.losses[i] << " vs " << b.losses[i];
  ASSERT_EQ(a.grads.size(), m.params().size());
  for (size_t i = 0; i < a.grads.size(); i++) {
    ASSERT_EQ(a.grads[i].size(), b.grads[i].size());
    size_t diff = 0;
    for (size_t k = 0; k < a.grads[i].size(); k++)
      diff += std::memcmp(&a.grads[i][k], &b.grads[i][k], sizeof(float)) != 0;
    EXPECT_EQ(diff, 0u) << m.params()[i].name << ": " << diff << " of " << a.grads[i].size() << " values differ";
  }
  double sum = 0;  // the gradients are not trivially zero
  for (auto& g : a.grads)
    for (float v : g) sum += double(v) * double(v);
  EXPECT_GT(sum, 0.0);
}

std::unique_ptr<CausalLM> llama(DType dt) {
  ModelSpec spec;
  spec.arch = "llama";
  spec.preset = "llama-tiny";  // C 128, H 384, NH 4, NKV 2, HD 32, V 2048
  spec.overrides = {{"num_hidden_layers", 3}};
  return create_model(spec, Device::cpu(), dt, /*trainable=*/true, 5);
}

std::unique_ptr<CausalLM> mamba(DType dt) {
  ModelSpec spec;
  spec.arch = "mamba";
  spec.preset = "mamba-130m";
  spec.overrides = {{"vocab_size", 200}, {"hidden_size", 48}, {"num_hidden_layers", 3}, {"time_step_rank", 6}};
  return create_model(spec, Device::cpu(), dt, /*trainable=*/true, 5);
}

TEST(Recompute, LlamaGradientsBitIdentical) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto m = llama(dt);
    GradRun saved = train_twice(*m, 2, 24, false), rec = train_twice(*m, 2, 24, true);
    expect_identical(*m, saved, rec);
  }
}

TEST(Recompute, MambaGradientsBitIdentical) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto m = mamba(dt);
    GradRun saved = train_twice(*m, 2, 24, false), rec = train_twice(*m, 2, 24, true);
    expect_identical(*m, saved, rec);
  }
  // Past one scan chunk (512 steps): the saved chunk-end states come from the recomputed scan.
  auto m = mamba(DType::f32);
  GradRun saved = train_twice(*m, 1, 530, false), rec = train_twice(*m, 1, 530, true);
  expect_identical(*m, saved, rec);
}

// keep_layers = 2 of 3: layer 0 is recomputed, layers 1 and 2 are kept (Mamba's slim: their n, xc and delta
// rebuilt); the gradients are the same.
TEST(Recompute, PartialKeepLayersGradientsBitIdentical) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto l = llama(dt);
    GradRun saved = train_twice(*l, 2, 24, false), part = train_twice(*l, 2, 24, true, 2);
    expect_identical(*l, saved, part);
    auto m = mamba(dt);
    saved = train_twice(*m, 2, 24, false);
    part = train_twice(*m, 2, 24, true, 2);
    expect_identical(*m, saved, part);
  }
}

TEST(Recompute, NegativeKeepLayersIsAnError) {
  auto m = mamba(DType::f32);
  TrainOptions opt;
  opt.recompute = true;
  opt.keep_layers = -1;
  Tensor ids, tg;
  batch(1, 8, m->info().vocab, ids, tg);
  try {
    m->forward_backward(ids, tg, 1.f, opt);
    FAIL() << "keep_layers = -1 was accepted";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("keep_layers >= 0"), std::string::npos) << w;
    EXPECT_NE(w.find("-1"), std::string::npos) << w;
  }
}

// keep_layers = 2 of 3 keeps `partial` bytes (2 kept layers, 1 input), strictly between full recomputation
// (`full`) and none (`all`); 0 keeps as 1 does; keep_layers >= the layer count keeps `kept` (every layer as a
// kept one: what no recomputation keeps for Llama, the slim set for Mamba).
void expect_keep_layers(CausalLM& m, int64_t B, int64_t T, int64_t all, int64_t full, int64_t partial,
                        int64_t kept) {
  EXPECT_EQ(train_twice(m, B, T, true, 2).saved_bytes, partial);
  EXPECT_GT(partial, full);
  EXPECT_LT(partial, all);
  EXPECT_EQ(train_twice(m, B, T, true, 0).saved_bytes, full);
  EXPECT_EQ(train_twice(m, B, T, true, 3).saved_bytes, kept);
  EXPECT_EQ(train_twice(m, B, T, true, 100).saved_bytes, kept);
  EXPECT_EQ(train_twice(m, B, T, false, 2).saved_bytes, all) << "keep_layers without recompute changes nothing";
}

// The kept bytes follow the formulas of llama_train.cpp / mamba_train.cpp: recompute drops, in every layer
// but the last keep_layers, all but the layer input h (N·C elements); Mamba's kept layers drop n, rstd, xc and
// delta too.
TEST(Recompute, SavedActivationBytesShrinkAsStated) {
  const int64_t B = 2, T = 24, N = B * T, L = 3;
  {
    auto m = llama(DType::f32);
    const int64_t C = 128, H = 384, NH = 4, NKV = 2, HD = 32;
    const int64_t layer = N * 4 * (4 * C + 2 * NH * HD + 2 * NKV * HD + 3 * H) + N * 4 * (2 + NH);
    const int64_t head = N * 4 * (2 * C + 1) + 2 * N * 4;  // h_final, n_final, rstd_final; ids, pos
    GradRun saved = train_twice(*m, B, T, false), rec = train_twice(*m, B, T, true);
    EXPECT_EQ(saved.saved_bytes, L * layer + head);
    EXPECT_EQ(rec.saved_bytes, (L - 1) * N * C * 4 + layer + head);
    expect_keep_layers(*m, B, T, saved.saved_bytes, rec.saved_bytes, (L - 2) * N * C * 4 + 2 * layer + head,
                       saved.saved_bytes);
    std::printf("llama-tiny, 3 layers, %lld tokens: %lld -> %lld bytes kept (%.2fx)\n", (long long)N,
                (long long)saved.saved_bytes, (long long)rec.saved_bytes,
                double(saved.saved_bytes) / double(rec.saved_bytes));
  }
  {
    auto m = mamba(DType::f32);
    const int64_t C = 48, D = 96, R = 6, NS = 16;
    const int64_t states = B * D * 1 * NS * 4;  // one saved state per 32-step tile: T = 24 is one tile
    // y (D) is not kept: the scan's backward gives it back.
    const int64_t layer = N * 4 * (2 * C + 4 * D + R + 2 * NS + 1) + states;
    const int64_t slim = N * 4 * (C + 2 * D + R + 2 * NS) + states;  // a kept layer under recompute
    const int64_t head = N * 4 * (2 * C + 1) + N * 4;  // h_final, n_final, rstd_final; ids
    GradRun saved = train_twice(*m, B, T, false), rec = train_twice(*m, B, T, true);
    EXPECT_EQ(saved.saved_bytes, L * layer + head);
    EXPECT_EQ(rec.saved_bytes, (L - 1) * N * C * 4 + slim + head);
    expect_keep_layers(*m, B, T, saved.saved_bytes, rec.saved_bytes, (L - 2) * N * C * 4 + 2 * slim + head,
                       L * slim + head);
    std::printf("mamba, 3 layers, %lld tokens: %lld -> %lld bytes kept (%.2fx)\n", (long long)N,
                (long long)saved.saved_bytes, (long long)rec.saved_bytes,
                double(saved.saved_bytes) / double(rec.saved_bytes));
  }
}

}  // namespace
}  // namespace anvil
