// Perplexity and two-model agreement over windows of a token stream (see perplexity.h).
#include "serve/perplexity.h"

#include <algorithm>
#include <cmath>

namespace anvil {

namespace {

// log-sum-exp of the logits minus the target's logit (double, so 128k-vocabulary sums lose nothing).
double nll_of(const float* logits, int64_t V, int32_t target) {
  double mx = logits[0];
  for (int64_t v = 1; v < V; v++) mx = std::max(mx, double(logits[v]));
  double s = 0;
  for (int64_t v = 0; v < V; v++) s += std::exp(double(logits[v]) - mx);
  return mx + std::log(s) - double(logits[target]);
}

int64_t argmax(const float* v, int64_t n) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

// Runs `model` over one window, calling fn(position, host logits) for every position whose next token is
// scored (all but the window's last).
template <class Fn>
void run_window(CausalLM& model, const int32_t* ids, int64_t n, Fn fn) {
  const int64_t V = model.info().vocab;
  auto st = model.new_state(1, int(n));
  Tensor logits = Tensor::empty({1, V}, DType::f32, model.device());
  for (int64_t t = 0; t + 1 < n; t++) {
    Tensor tok = Tensor::from_floats({float(ids[t])}, {1, 1}, DType::i32, Device::cpu());
    model.step(*st, tok, logits);
    std::vector<float> host = logits.to_floats();
    fn(t, host.data());
  }
}

// The windows of a stream: [begin, end) token ranges of at most ctx tokens (>= 2 so one token is scored).
std::vector<std::pair<int64_t, int64_t>> windows_of(const std::vector<int32_t>& ids, const PerplexityConfig& cfg) {
  ANVIL_CHECK(cfg.ctx >= 2, "perplexity", "a window (ctx) of at least 2 tokens", cfg.ctx);
  int64_t n = int64_t(ids.size());
  if (cfg.max_tokens > 0) n = std::min<int64_t>(n, cfg.max_tokens);
  std::vector<std::pair<int64_t, int64_t>> w;
  for (int64_t b = 0; b + 1 < n; b += cfg.ctx) w.push_back({b, std::min<int64_t>(n, b + cfg.ctx)});
  ANVIL_CHECK(!w.empty(), "perplexity", "a text of at least 2 tokens", str(ids.size(), " tokens"));
  return w;
}

void check_ids(CausalLM& m, const std::vector<int32_t>& ids) {
  const int64_t V = m.info().vocab;
  for (int32_t id : ids)
    ANVIL_CHECK(id >= 0 && id < V, "perplexity", str("token ids in [0, ", V, ") (the model's vocabulary)"), id);
}

}  // namespace

double PerplexityResult::perplexity() const { return std::exp(mean_nll); }

PerplexityResult perplexity(CausalLM& model, const std::vector<int32_t>& ids, const PerplexityConfig& cfg) {
  check_ids(model, ids);
  const int64_t V = model.info().vocab;
  PerplexityResult r;
  double sum = 0;
  for (auto [b_, e] : windows_of(ids, cfg)) {
    const int64_t b = b_;  // a plain copy: lambdas cannot capture structured bindings before C++20 (clang <= 15)
    run_window(model, ids.data() + b, e - b, [&](int64_t t, const float* lg) {
      sum += nll_of(lg, V, ids[size_t(b + t + 1)]);
      r.tokens++;
    });
    r.windows++;
  }
  r.mean_nll = sum / double(r.tokens);
  return r;
}

LmComparison compare_models(CausalLM& ref, CausalLM& test, const std::vector<int32_t>& ids,
                            const PerplexityConfig& cfg, int greedy_tokens, int prompt_len) {
  const int64_t V = ref.info().vocab;
  ANVIL_CHECK(test.info().vocab == V, "compare_models", str("two models with one vocabulary of ", V),
              test.info().vocab);
  check_ids(ref, ids);
  LmComparison c;
  double sum_ref = 0, sum_test = 0;
  for (auto [b_, e] : windows_of(ids, cfg)) {
    const int64_t b = b_;  // see perplexity()
    std::vector<int64_t> ref_top;
    run_window(ref, ids.data() + b, e - b, [&](int64_t t, const float* lg) {
      sum_ref += nll_of(lg, V, ids[size_t(b + t + 1)]);
      ref_top.push_back(argmax(lg, V));
      c.ref.tokens++;
    });
    run_window(test, ids.data() + b, e - b, [&](int64_t t, const float* lg) {
      sum_test += nll_of(lg, V, ids[size_t(b + t + 1)]);
      if (argmax(lg, V) == ref_top[size_t(t)]) c.top1_agree++;
      c.test.tokens++;
    });
    c.ref.windows++, c.test.windows++;
  }
  c.ref.mean_nll = sum_ref / double(c.ref.tokens);
  c.test.mean_nll = sum_test / double(c.test.tokens);

  // Free greedy generation from the same prompt; each model feeds back its own tokens.
  const int64_t P = std::min<int64_t>(prompt_len, int64_t(ids.size()));
  if (greedy_tokens > 0 && P > 0) {
    auto gen = [&](CausalLM& m) {
      auto st = m.new_state(1, int(P + greedy_tokens));
      Tensor logits = Tensor::empty({1, V}, DType::f32, m.device());
      std::vector<float> pv(ids.begin(), ids.begin() + P);
      m.step(*st, Tensor::from_floats(pv, {1, P}, DType::i32, Device::cpu()), logits);
      std::vector<int64_t> out;
      for (int s = 0; s < greedy_tokens; s++) {
        std::vector<float> host = logits.to_floats();
        out.push_back(argmax(host.data(), V));
        if (s + 1 < greedy_tokens)
          m.step(*st, Tensor::from_floats({float(out.back())}, {1, 1}, DType::i32, Device::cpu()), logits);
      }
      return out;
    };
    const auto a = gen(ref), t = gen(test);
    c.greedy_tokens = greedy_tokens;
    while (c.greedy_common < greedy_tokens && a[size_t(c.greedy_common)] == t[size_t(c.greedy_common)])
      c.greedy_common++;
  }
  return c;
}

}  // namespace anvil
