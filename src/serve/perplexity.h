// Perplexity of a causal LM on a token stream, and the agreement of two models (a 16-bit model and its FP8
// version) on the same stream: the quality check of issue 6 (FP8 within 1% of bf16 perplexity).
//
// The text is cut into windows of `ctx` tokens (the last may be shorter); each window starts a fresh sequence and
// every token but its first is scored given the ones before it in the window: NLL = -log softmax(logits)[next].
// Windows run through the inference path (step(): KV cache, one token per step), so what is measured is what a
// served model computes — for FP8 models the same GEMMs (models/common/linear.h) as generation.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace anvil {

struct PerplexityConfig {
  int ctx = 256;              // tokens per window
  int64_t max_tokens = 0;     // score at most this many tokens of the stream (0 = all)
};

struct PerplexityResult {
  int64_t tokens = 0;         // scored tokens
  int64_t windows = 0;
  double mean_nll = 0;        // nats per scored token
  double perplexity() const;  // exp(mean_nll)
};

struct LmComparison {
  PerplexityResult ref, test;
  int64_t top1_agree = 0;       // scored positions where both models' most likely next token is the same
  // Greedy generation from the first window's first tokens: how many of `greedy_tokens` the two models
  // generate identically before they first differ.
  int64_t greedy_tokens = 0, greedy_common = 0;
};

PerplexityResult perplexity(CausalLM& model, const std::vector<int32_t>& ids, const PerplexityConfig& cfg);
// Steps both models over the same windows (teacher forcing), then `greedy_tokens` of free greedy generation
// from a `prompt_len`-token prompt taken from the start of the stream.
LmComparison compare_models(CausalLM& ref, CausalLM& test, const std::vector<int32_t>& ids,
                            const PerplexityConfig& cfg, int greedy_tokens = 64, int prompt_len = 8);

}  // namespace anvil
