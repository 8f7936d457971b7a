// The captured decode step against the same kernels run eagerly (GPU only): identical logits at every step,
// since both launch the same deterministic kernels on the same buffers. And the decode step (one row: on sm_90
// every layer in one decode_stack launch, elsewhere the skinny GEMMs and the one-launch decode attention) against
// a prefill of the same tokens (many rows: the tiled GEMMs and the prefill attention). And ids fed from the
// device against ids fed from the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "backends/backend.h"
#include "models/llama/llama.h"
#include "io/hf_config.h"
#include "parity_util.h"
#include "serve/generate.h"
#include "serve/sampler.h"

namespace anvil {
namespace {

// How the decode steps get their ids: from the host (the step uploads them with the positions), already on the
// device (the step uploads nothing: positions are advanced on the device), or alternating between the two.
enum class Ids { host, device, alternate };

std::vector<std::vector<float>> decode_logits(LlamaModel& m, int steps, Ids where = Ids::host) {
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
    const bool dev = where == Ids::device || (where == Ids::alternate && s % 3 == 1);
    m.step(*st, Tensor::from_floats({id}, {1, 1}, DType::i32, dev ? m.device() : Device::cpu()), logits);
  }
  return out;
}

// A 2-layer bf16 test model: width 256, MLP 512, vocab 512, `nh` heads over `nkv` kv-heads of `hd`.
std::unique_ptr<LlamaModel> small_model(int nh, int nkv, int hd, uint64_t seed) {
  LlamaConfig c;
  c.vocab_size = 512, c.hidden_size = 256, c.intermediate_size = 512, c.num_hidden_layers = 2;
  c.num_attention_heads = nh, c.num_key_value_heads = nkv, c.head_dim = hd, c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5, c.initializer_range = 0.1;
  return LlamaModel::create(c, Device::gpu(0), DType::bf16, false, seed);
}

TEST(LlamaGraph, CapturedDecodeEqualsEager) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  // Head dim 64, the shape class of real models (the GPU attention kernels also take 16 and 32).
  auto m = small_model(4, 2, 64, 7);
  setenv("ANVIL_GRAPHS", "0", 1);
  auto eager = decode_logits(*m, 12);
  unsetenv("ANVIL_GRAPHS");
  auto graph = decode_logits(*m, 12);
  ASSERT_EQ(eager.size(), graph.size());
  for (size_t s = 0; s < eager.size(); s++) EXPECT_EQ(eager[s], graph[s]) << "decode step " << s;
}

// Device ids skip every upload and the step advances its own positions; mixing the two kinds of step must keep
// the positions right. Same kernels on the same buffers: identical logits.
TEST(LlamaGraph, DeviceIdsEqualHostIds) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  auto m = small_model(4, 2, 64, 5);
  const auto host = decode_logits(*m, 10, Ids::host);
  const auto dev = decode_logits(*m, 10, Ids::device);
  const auto mixed = decode_logits(*m, 10, Ids::alternate);
  for (size_t s = 0; s < host.size(); s++) {
    EXPECT_EQ(host[s], dev[s]) << "decode step " << s << ", device ids";
    EXPECT_EQ(host[s], mixed[s]) << "decode step " << s << ", host and device ids alternating";
  }
}

// generate() with greedy sampling picks on the device and runs a step ahead of the host (greedy_pipe.h); the host
// loop above downloads each logits row and takes its argmax. Same steps, same picks.
TEST(LlamaGraph, PipelinedGreedyEqualsHostArgmax) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  auto m = small_model(4, 2, 64, 13);
  const int64_t V = m->info().vocab;
  const int steps = 12;
  const auto rows = decode_logits(*m, steps);
  std::vector<int32_t> expect;
  for (const auto& r : rows) expect.push_back(int32_t(parity::argmax(r, 0, size_t(V))));
  GenerationConfig c;
  c.max_new_tokens = steps;
  c.sampling.greedy = true;
  c.stop_at_eos = false;
  Detokenizer detok{[](int32_t) { return std::string(); }, [] { return std::string(); }};
  const GenerationResult r = generate(*m, detok, {1, 17, 42, 7, 99}, c);
  EXPECT_EQ(r.ids, expect);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  // A stop met while the next step is already in flight: generation still ends at it, with its ids.
  c.stop_ids = {expect[4]};
  const GenerationResult r2 = generate(*m, detok, {1, 17, 42, 7, 99}, c);
  const auto at = std::find(expect.begin(), expect.end(), expect[4]);
  EXPECT_EQ(r2.ids, std::vector<int32_t>(expect.begin(), at + 1));
  EXPECT_EQ(r2.stop, StopReason::stop_id);
}

// Top-k sampling in generate() takes the k best from topk_rows on the device; a host loop samples each whole
// logits row. Same seed, same steps: the same tokens.
TEST(LlamaGraph, TopKSamplingOnTheDeviceEqualsTheHostSampler) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  auto m = small_model(4, 2, 64, 17);
  const int64_t V = m->info().vocab;
  const std::vector<int32_t> prompt = {1, 17, 42, 7, 99};
  GenerationConfig c;
  c.max_new_tokens = 16;
  c.stop_at_eos = false;
  c.seed = 5;
  c.sampling.temperature = 1.5f, c.sampling.top_k = 40, c.sampling.top_p = 0.95f;
  Detokenizer detok{[](int32_t) { return std::string(); }, [] { return std::string(); }};
  const GenerationResult r = generate(*m, detok, prompt, c);

  Sampler s(c.sampling, c.seed);
  auto st = m->new_state(1, 64);
  Tensor logits = Tensor::empty({1, V}, DType::f32, m->device());
  m->step(*st, Tensor::from_floats({1, 17, 42, 7, 99}, {1, 5}, DType::i32, Device::cpu()), logits);
  std::vector<int32_t> host;
  for (int t = 0; t < c.max_new_tokens; t++) {
    host.push_back(s.sample(logits.to_floats()));
    m->step(*st, Tensor::from_floats({float(host.back())}, {1, 1}, DType::i32, Device::cpu()), logits);
  }
  EXPECT_EQ(r.ids, host);
}

TEST(LlamaGraph, DecodeStepsMatchPrefill) {
  if (!gpu_available()) GTEST_SKIP() << "no GPU";
  auto m = small_model(8, 2, 32, 11);
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
