// Sampler: greedy and filters against their definitions, distributions against softmax with fixed seeds.
// Frequencies are checked within 5 binomial standard deviations: a false failure has probability ~6e-7 per
// check, and with fixed seeds the outcome never changes between runs anyway.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/topk/topk.h"
#include "serve/sampler.h"

using namespace anvil;

namespace {

std::vector<float> random_logits(int64_t V, uint64_t seed, float scale = 3.f) {
  std::vector<float> v(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; i++) v[size_t(i)] = scale * rng_normal(seed, uint64_t(i));
  return v;
}

std::vector<double> softmax(const std::vector<float>& l, double temperature = 1.0) {
  double m = -INFINITY, z = 0;
  for (float x : l) m = std::max(m, double(x));
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); i++) z += p[i] = std::exp((double(l[i]) - m) / temperature);
  for (auto& x : p) x /= z;
  return p;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < n; i++) f[size_t(s.sample(logits))] += 1.0 / n;
  return f;
}

void expect_distribution(const std::vector<double>& freq, const std::vector<double>& p, int n) {
  for (size_t i = 0; i < p.size(); i++) {
    const double sd = std::sqrt(p[i] * (1 - p[i]) / n);
    EXPECT_NEAR(freq[i], p[i], 5 * sd + 1e-12) << "token " << i;
  }
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(SamplingParams{.greedy = true}, 0);
  EXPECT_EQ(s.sample(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{-INFINITY, -5, -INFINITY}), 1);
  EXPECT_EQ(s.draws(), 0u);  // greedy consumes no random numbers
  SamplingParams zero_t;
  zero_t.temperature = 0.f;
  EXPECT_TRUE(zero_t.is_greedy());
}

TEST(Sampler, TopK1AndTinyTopPEqualGreedy) {
  for (uint64_t seed = 0; seed < 50; seed++) {
    auto l = random_logits(1000, seed);
    l[17] = l[423] = 1e3f;  // a tie at the top: the lower id wins in every mode
    const int32_t g = argmax_logits(l);
    ASSERT_EQ(g, 17);
    Sampler k1(SamplingParams{.temperature = 1.5f, .top_k = 1}, seed);
    SamplingParams tp{.temperature = 1.f, .top_p = 1e-6f};
    Sampler p0(tp, seed);
    EXPECT_EQ(k1.sample(l), g);
    EXPECT_EQ(p0.sample(l), g);
  }
  for (uint64_t seed = 0; seed < 50; seed++) {  // without the tie too
    auto l = random_logits(1000, seed + 100);
    Sampler p0(SamplingParams{.top_p = 1e-6f}, seed);
    EXPECT_EQ(p0.sample(l), argmax_logits(l));
  }
}

TEST(Sampler, TemperatureOneMatchesSoftmax) {
  const auto l = random_logits(6, 7, 1.f);
  const int n = 100000;
  Sampler s(SamplingParams{}, 42);
  expect_distribution(frequencies(s, l, n), softmax(l), n);
}

TEST(Sampler, TemperatureScalesTheLogits) {
  const auto l = random_logits(5, 8, 1.f);
  const int n = 100000;
  Sampler s(SamplingParams{.temperature = 0.5f}, 3);
  expect_distribution(frequencies(s, l, n), softmax(l, 0.5), n);
}

TEST(Sampler, HugeTemperatureIsUniform) {
  const auto l = random_logits(8, 9, 5.f);  // very peaked at T = 1
  const int n = 80000;
  Sampler s(SamplingParams{.temperature = 1e6f}, 5);
  expect_distribution(frequencies(s, l, n), std::vector<double>(8, 1.0 / 8), n);
}

TEST(Sampler, TopKRenormalisesOverTheKBest) {
  const std::vector<float> l = {0.1f, 2.f, -1.f, 1.5f, 1.f, -3.f};
  const int n = 100000;
  Sampler s(SamplingParams{.top_k = 3}, 11);
  auto f = frequencies(s, l, n);
  auto p = softmax({l[1], l[3], l[4]});
  expect_distribution({f[1], f[3], f[4]}, p, n);
  EXPECT_EQ(f[0] + f[2] + f[5], 0.0);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // p = 0.5, 0.3, 0.15, 0.05: top_p = 0.75 needs the first two (0.5 < 0.75 <= 0.8).
  const std::vector<float> l = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  const int n = 100000;
  Sampler s(SamplingParams{.top_p = 0.75f}, 12);
  auto f = frequencies(s, l, n);
  expect_distribution({f[1], f[3]}, {0.5 / 0.8, 0.3 / 0.8}, n);
  EXPECT_EQ(f[0] + f[2], 0.0);
}

TEST(Sampler, TopPOverAFlatVocabularyKeepsTheLowestIdsOfATie) {
  // 2000 equal logits: top_p = 0.9 keeps the 1800 lowest ids (ties go by id).
  std::vector<float> l(2000, 0.25f);
  Sampler s(SamplingParams{.top_p = 0.9f}, 13);
  int32_t hi = 0;
  for (int i = 0; i < 1000; i++) hi = std::max(hi, s.sample(l));
  EXPECT_LT(hi, 1800);
  EXPECT_GT(hi, 1750);  // and the kept set reaches up to there: P(fail) = (1750/1800)^1000 ~ 1e-12
}

TEST(Sampler, TopPMatchesAFullSortOfTheVocabulary) {
  // The kept set by the definition: sort everything, keep the shortest prefix with mass >= top_p.
  for (uint64_t seed = 0; seed < 5; seed++) {
    const auto l = random_logits(2000, 200 + seed, 2.f);
    const float top_p = 0.5f + 0.1f * float(seed);
    auto p = softmax(l, 0.7);
    std::vector<int32_t> order(l.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = int32_t(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    std::vector<bool> kept(l.size(), false);
    double cum = 0;
    for (int32_t id : order) {
      if (cum >= top_p) break;
      kept[size_t(id)] = true;
      cum += p[size_t(id)];
    }
    Sampler s(SamplingParams{.temperature = 0.7f, .top_p = top_p}, seed);
    const int n = 5000;
    int top = 0;
    for (int i = 0; i < n; i++) {
      const int32_t id = s.sample(l);
      ASSERT_TRUE(kept[size_t(id)]) << "id " << id << " outside the top-p set, seed " << seed;
      top += id == order[0];
    }
    const double want = p[size_t(order[0])] / cum;
    EXPECT_NEAR(double(top) / n, want, 5 * std::sqrt(want * (1 - want) / n));
  }
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // p = 0.5, 0.3, 0.15, 0.05 and min_p = 0.2: the floor is 0.1, so 0.05 goes.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 100000;
  Sampler s(SamplingParams{.min_p = 0.2f}, 14);
  auto f = frequencies(s, l, n);
  expect_distribution({f[0], f[1], f[2]}, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95}, n);
  EXPECT_EQ(f[3], 0.0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p{.greedy = true, .repetition_penalty = 2.f};
  Sampler s(p, 0);
  const std::vector<float> l = {2.f, 1.9f, -1.f};
  EXPECT_EQ(s.sample(l), 0);
  const std::vector<int32_t> h0 = {0, 0};  // 2 -> 1 (once, even if repeated): 1.9 wins
  EXPECT_EQ(s.sample(l, h0), 1);
  const std::vector<float> neg = {-1.5f, -1.f, -9.f};
  const std::vector<int32_t> h1 = {1};  // -1 -> -2: -1.5 wins
  EXPECT_EQ(s.sample(neg, h1), 0);
  const std::vector<int32_t> bad = {3};
  EXPECT_THROW(s.sample(l, bad), Error);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const auto l = random_logits(50, 15, 0.5f);
  SamplingParams p{.temperature = 0.9f, .top_k = 40, .top_p = 0.95f};
  Sampler a(p, 123), b(p, 123), c(p, 124);
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 200; i++) {
    ra.push_back(a.sample(l));
    rb.push_back(b.sample(l));
    rc.push_back(c.sample(l));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
  EXPECT_EQ(a.draws(), 200u);
}

TEST(Sampler, BatchRowsAreSampledIndependently) {
  std::vector<float> l = {1, 5, 0, /**/ 7, 0, 0, /**/ 0, 0, 9};
  Sampler s(SamplingParams{.greedy = true}, 0);
  EXPECT_EQ(s.sample_batch(l, 3), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_THROW(s.sample_batch(l, 2), Error);
  const std::vector<std::vector<int32_t>> hist = {{1}, {}, {}};  // row 0: 5 -> 0.05 < 1
  Sampler r(SamplingParams{.greedy = true, .repetition_penalty = 100.f}, 0);
  EXPECT_EQ(r.sample_batch(l, 3, hist), (std::vector<int32_t>{0, 0, 2}));
}

TEST(Sampler, BadLogitsAndParamsThrow) {
  Sampler s(SamplingParams{}, 0);
  EXPECT_THROW(s.sample(std::vector<float>{0.f, NAN}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{0.f, INFINITY}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{-INFINITY, -INFINITY}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
  EXPECT_THROW(Sampler(SamplingParams{.temperature = -1.f}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{.top_k = -2}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{.top_p = 0.f}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{.top_p = 1.5f}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{.min_p = 1.f}, 0), Error);
  EXPECT_THROW(Sampler(SamplingParams{.repetition_penalty = 0.f}, 0), Error);
  try {
    Sampler(SamplingParams{.top_p = 2.f}, 0);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
}

// The device path's draw (topk_rows, then sample_top_k) against the whole-row draw: the same tokens, draw by
// draw, for every mix of temperature, top-k, top-p and min-p, on rows with many equal logits (rounded to a
// grid) so the order of ties matters.
TEST(Sampler, TopKCandidatesDrawWhatTheWholeRowDraws) {
  const int64_t V = 3000;
  struct P { float t; int k; float top_p, min_p; };
  for (P q : {P{0.8f, 40, 0.95f, 0.f}, P{1.f, 5, 1.f, 0.f}, P{1.5f, 256, 0.9f, 0.f}, P{0.7f, 50, 1.f, 0.05f},
              P{1.f, 100, 0.5f, 0.02f}}) {
    SamplingParams p;
    p.temperature = q.t, p.top_k = q.k, p.top_p = q.top_p, p.min_p = q.min_p;
    Sampler whole(p, 77), top(p, 77);
    Tensor ids = Tensor::empty({1, q.k}, DType::i32), vals = Tensor::empty({1, q.k}, DType::f32);
    Tensor fin = Tensor::empty({1}, DType::i32), bad = Tensor::empty({1}, DType::i32);
    for (uint64_t row = 0; row < 60; row++) {
      std::vector<float> l = random_logits(V, 1000 + row);
      for (auto& x : l) x = std::round(x * 4.f) / 4.f;
      Tensor t = Tensor::from_floats(l, {1, V}, DType::f32, Device::cpu());
      topk_rows(t, q.k, ids, vals, fin, bad);
      ASSERT_EQ(bad.data<int32_t>()[0], -1);
      ASSERT_TRUE(top.top_k_suffices(fin.data<int32_t>()[0]));
      const int32_t a = whole.sample(l);
      const int32_t b = top.sample_top_k({ids.data<int32_t>(), size_t(q.k)}, {vals.data<float>(), size_t(q.k)},
                                         fin.data<int32_t>()[0]);
      ASSERT_EQ(a, b) << "row " << row << ", temperature " << q.t << ", top_k " << q.k;
    }
    EXPECT_EQ(whole.draws(), top.draws());
  }
  SamplingParams off;  // no top-k, or a penalty, or fewer finite logits than k: the whole row is needed
  off.temperature = 1.f;
  EXPECT_FALSE(Sampler(off, 1).top_k_suffices(100));
  off.top_k = 40;
  EXPECT_FALSE(Sampler(off, 1).top_k_suffices(40));
  EXPECT_TRUE(Sampler(off, 1).top_k_suffices(41));
  off.repetition_penalty = 1.1f;
  EXPECT_FALSE(Sampler(off, 1).top_k_suffices(41));
  Sampler s(SamplingParams{false, 1.f, 2, 1.f, 0.f, 1.f}, 1);
  EXPECT_THROW(s.sample_top_k(std::vector<int32_t>{3, 4}, std::vector<float>{1.f, 2.f}, 10), Error);  // not best first
}
