// Decode benchmark helpers: the weight-bytes floor, the timed loop on a CPU fake model, quantiles.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_lm.h"
#include "serve/bench.h"

using namespace anvil;
using anvil::testing::FakeLM;

namespace {

Param param(const std::string& name, const Shape& shape, DType dt) {
  return Param{name, Tensor::empty(shape, dt), Tensor(), Tensor(), true};
}
FakeLM tiny(int64_t max_len = 64) {
  return FakeLM(100, max_len, 0, [](const std::vector<int32_t>& s) { return s.back(); });
}

}  // namespace

TEST(DecodeBench, WeightBytesCountOneEmbeddingRowPerSequenceUnlessTied) {
  FakeLM m = tiny();
  // An untied Llama-like model in bf16: V = 100, C = 8, one (16, 8) projection and a norm.
  m.params_.push_back(param("model.embed_tokens.weight", {100, 8}, DType::bf16));
  m.params_.push_back(param("model.layers.0.self_attn.q_proj.weight", {16, 8}, DType::bf16));
  m.params_.push_back(param("model.norm.weight", {8}, DType::bf16));
  m.params_.push_back(param("lm_head.weight", {100, 8}, DType::bf16));
  const int64_t rest = (16 * 8 + 8 + 100 * 8) * 2;
  EXPECT_EQ(decode_weight_bytes(m, 1), rest + 8 * 2);
  EXPECT_EQ(decode_weight_bytes(m, 4), rest + 4 * 8 * 2);
  // Tied: the LM head reads the whole table.
  m.params_.pop_back();
  EXPECT_EQ(decode_weight_bytes(m, 1), (100 * 8 + 16 * 8 + 8) * 2);
}

TEST(DecodeBench, TimesEveryStepWithinTheContext) {
  FakeLM m = tiny();
  DecodeBenchConfig c;
  c.batch = 2;
  c.prompt_len = 5;
  c.tokens = 9;
  auto r = bench_decode(m, c);
  EXPECT_EQ(r.step_ms.size(), 9u);
  EXPECT_EQ(r.context, 14);
  EXPECT_EQ(m.step_T.front(), 5);
  // The timed steps, then the generation loop's: a prefill and the same number of steps on a fresh state.
  ASSERT_EQ(m.step_T.size(), 20u);
  EXPECT_EQ(m.step_T[10], 5);
  EXPECT_EQ(r.loop_tokens, 9 - DecodeBenchResult::kLoopWarmup);
  EXPECT_GT(r.loop_ms, 0.0);
  EXPECT_LE(r.p10_ms, r.median_ms);
  EXPECT_LE(r.median_ms, r.p90_ms);
  EXPECT_GT(r.tokens_per_s, 0.0);
  c.context = 13;  // too small for 5 + 9
  EXPECT_THROW(bench_decode(m, c), Error);
  FakeLM small = tiny(10);
  c.context = 0;
  EXPECT_THROW(bench_decode(small, c), Error);  // 14 > the model's 10
}

// Ids put on the device before timing (the default) and ids made and uploaded inside each step (--host-ids) are
// the same seeded stream: step s gets ids [offset + s * B, offset + (s + 1) * B).
TEST(DecodeBench, HostIdsFeedTheSameIds) {
  DecodeBenchConfig c;
  c.batch = 3;
  c.prompt_len = 2;
  c.tokens = 7;
  FakeLM dev = tiny(), host = tiny();
  bench_decode(dev, c);
  c.host_ids = true;
  bench_decode(host, c);
  ASSERT_EQ(dev.fed.size(), size_t(2 * 3 * (2 + 7)));  // the timed steps, then the generation loop's
  EXPECT_EQ(dev.fed, host.fed);
  EXPECT_NE(std::vector<int32_t>(dev.fed.begin() + 6, dev.fed.begin() + 9),
            std::vector<int32_t>(dev.fed.begin() + 9, dev.fed.begin() + 12));  // consecutive steps differ
}

// The generation loop feeds each step the argmax of the step before. The fake model's next token is the last one
// fed, so every row keeps feeding its prompt's token; the timed steps before it are fed the seeded random ids.
TEST(DecodeBench, TheLoopFeedsEachStepTheGreedyPick) {
  DecodeBenchConfig c;
  c.batch = 2;
  c.prompt_len = 1;
  c.tokens = 6;
  FakeLM m = tiny();
  bench_decode(m, c);
  const size_t loop0 = size_t(2 * (1 + 6)) + 2;  // after the timed steps and the loop's prefill (1 token a row)
  ASSERT_EQ(m.fed.size(), loop0 + 2 * 6);
  for (size_t i = loop0; i < m.fed.size(); i++) EXPECT_EQ(m.fed[i], m.fed[i - 2]) << "fed id " << i;
  EXPECT_NE(std::vector<int32_t>(m.fed.begin() + 2, m.fed.begin() + 4),
            std::vector<int32_t>(m.fed.begin() + 4, m.fed.begin() + 6));  // the timed steps are not greedy
}

// Batch 1 also runs generate() twice (the device's picks, then the host sampler): a prefill and tokens - 1 steps
// each, the last token never fed back.
TEST(DecodeBench, BatchOneTimesGenerateBothWays) {
  DecodeBenchConfig c;
  c.prompt_len = 2;
  c.tokens = 5;
  c.sampling.temperature = 0.8f, c.sampling.top_k = 3;
  FakeLM m = tiny();
  auto r = bench_decode(m, c);
  EXPECT_GT(r.gen_ms, 0.0);
  EXPECT_GT(r.gen_host_ms, 0.0);
  ASSERT_EQ(m.step_T.size(), size_t(6 + 6 + 5 + 5));
  EXPECT_EQ(m.step_T[12], 2);  // generate()'s prefill
  EXPECT_EQ(m.step_T[17], 2);
  c.batch = 2;
  FakeLM m2 = tiny();
  auto r2 = bench_decode(m2, c);
  EXPECT_EQ(r2.gen_ms, 0.0);  // generate() is batch 1
  EXPECT_EQ(m2.step_T.size(), size_t(6 + 6));
}

TEST(DecodeBench, QuantilesInterpolate) {
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2}, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({5}, 0.9), 5.0);
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.1), 1.0);
  EXPECT_THROW(quantile({}, 0.5), Error);
}

TEST(DecodeBench, CopyBandwidthIsPositiveOnTheCpu) {
  EXPECT_GT(measure_copy_bandwidth(Device::cpu(), size_t(1) << 20, 3), 0.0);
}
