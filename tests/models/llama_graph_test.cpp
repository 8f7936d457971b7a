// The captured decode step against the same kernels run eagerly (GPU only): identical logits at every step,
// since both launch the same deterministic kernels on the same buffers. And the decode step (one row: on sm_90
// every layer in one decode_stack launch, elsewhere the skinny GEMMs and the one-launch decode attention) against
// a prefill of the same tokens (many rows: the tiled GEMMs and the prefill attention).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backends/backend.h"
#include "models/llama/llama.h"
#include "io/hf_config.h"
#include "parity_util.h"

namespace anvil {
namespace {

std::vector<std::vector<float>> decode_logits(LlamaModel& m, int steps) {
  const int64_t V = m.info().vocab;
  auto st = m.new_state(1, 64);
  Tensor logits = Tensor::empty({1, V}, DType::f32, m.device());
  Tensor prompt = Tensor::from_floats({1, 17, 42, 7, 99}, {1, 5}, DType::i32, Device::cpu());
  m.step(*st, prompt, logits);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; s++) {
    auto row = logits.to_floats();
    out.push_back(row);
    const float id = float(parity::argmax(row, 0, size_t(V)));
    m.step(*st, Tensor::from_floats({id}, {1, 1}, DType::i32, Device::cpu()), logits);
  }
  return out;
}

TEST(LlamaGraph, CapturedDecodeEqualsEager) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  // Head dim 64, the shape class of real models (the GPU attention kernels also take 16 and 32).
  LlamaConfig c;
  c.vocab_size = 512, c.hidden_size = 256, c.intermediate_size = 512, c.num_hidden_layers = 2;
  c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 64, c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5, c.initializer_range = 0.1;
  auto m = LlamaModel::create(c, Device::gpu(0), DType::bf16, false, 7);
  setenv("ANVIL_GRAPHS", "0", 1);
  auto eager = decode_logits(*m, 12);
  unsetenv("ANVIL_GRAPHS");
  auto graph = decode_logits(*m, 12);
  ASSERT_EQ(eager.size(), graph.size());
  for (size_t s = 0; s < eager.size(); s++) EXPECT_EQ(eager[s], graph[s]) << "decode step " << s;
}

TEST(LlamaGraph, DecodeStepsMatchPrefill) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  LlamaConfig c;
  c.vocab_size = 512, c.hidden_size = 256, c.intermediate_size = 512, c.num_hidden_layers = 2;
  c.num_attention_heads = 8, c.num_key_value_heads = 2, c.head_dim = 32, c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5, c.initializer_range = 0.1;
  auto m = LlamaModel::create(c, Device::gpu(0), DType::bf16, false, 11);
  const int64_t V = m->info().vocab;
  const auto dec = decode_logits(*m, 8);  // dec[s]: after the 5-token prompt and s generated tokens
  std::vector<float> ids = {1, 17, 42, 7, 99};
  for (size_t s = 0; s < dec.size(); s++) {
    if (s > 0) ids.push_back(float(parity::argmax(dec[s - 1], 0, size_t(V))));
    auto st = m->new_state(1, 64);
    Tensor logits = Tensor::empty({1, V}, DType::f32, m->device());
    m->step(*st, Tensor::from_floats(ids, {1, int64_t(ids.size())}, DType::i32, Device::cpu()), logits);
    const auto ref = logits.to_floats();
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); i++) {
      num += double(dec[s][i] - ref[i]) * double(dec[s][i] - ref[i]);
      den += double(ref[i]) * double(ref[i]);
    }
    // Both paths round activations to bf16 in different places (the fused step keeps the normed x in f32), so
    // they differ by bf16 noise (~2^-8 relative per rounding); a missing 1/rms or a wrong residual is O(1).
    const double rel = std::sqrt(num / den);
    std::printf("decode step %zu vs prefill: relative L2 %.2e\n", s, rel);
    EXPECT_LT(rel, 2e-2) << "decode step " << s << " against a prefill of " << ids.size() << " tokens";
  }
}

}  // namespace
}  // namespace anvil
