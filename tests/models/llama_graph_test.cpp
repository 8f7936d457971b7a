// The captured decode step against the same kernels run eagerly (GPU only): identical logits at every step,
// since both launch the same deterministic kernels on the same buffers.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace anvil
