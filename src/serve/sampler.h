// Token sampling from next-token logits: greedy, temperature, top-k, top-p (nucleus), min-p and a
// repetition penalty, drawing from the counter-based RNG (core/rng.h) so a seed reproduces a run exactly,
// whatever the device the logits came from.
//
// Logits are host f32 (B, V). On a GPU the generation loop avoids copying them whole: greedy picks stay on the
// device (greedy_pipe.h), and top-k sampling copies back only the k best tokens (topk_rows), from which
// sample_top_k draws what sample() would from the whole row. Other settings copy the row (512 KB at V = 128256).
//
// Host cost per token for V = 128256 (best of 50 on a busy 2-core x86 build machine): greedy 0.25 ms,
// temperature alone 1.1 ms (128k exp), top-k 40 + top-p 0.95 0.64 ms, top-p 0.95 alone 2.0 ms, top-p 0.9 over
// near-uniform logits 9.6 ms (the whole vocabulary is a candidate). 8B decode steps take ~5 ms on an H200.
//
// Order of the transforms (that of Hugging Face's generate): repetition penalty, temperature, top-k, top-p,
// min-p, then one draw from what is left.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace anvil {

struct SamplingParams {
  bool greedy = false;       // argmax (ties: the lowest id); also implied by temperature <= 0 or top_k == 1
  float temperature = 1.f;   // logits are divided by it; > 0 unless greedy
  int top_k = 0;             // keep the k most likely tokens; 0 = all
  float top_p = 1.f;         // keep the smallest set of most likely tokens whose mass reaches top_p; 1 = all
  float min_p = 0.f;         // drop tokens less likely than min_p * p(most likely token); 0 = off
  // > 1 discourages tokens already in the history (prompt + generated): a positive logit is divided by it, a
  // negative one multiplied (the CTRL paper's rule, as transformers does it); 1 = off.
  float repetition_penalty = 1.f;

  bool is_greedy() const { return greedy || temperature <= 0.f || top_k == 1; }
  void validate() const;  // throws anvil::Error naming the bad field
};

class Sampler {
 public:
  // Every draw consumes one number of the stream `seed`; the n-th draw uses rng_uniform(seed, n).
  Sampler(const SamplingParams& params, uint64_t seed);

  // One token from one row of logits (V). `history`: the ids the repetition penalty looks at (may be empty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history = {});
  // One token per row of logits (B, V), row-major; histories: empty or one per row.
  std::vector<int32_t> sample_batch(std::span<const float> logits, int64_t B,
                                    const std::vector<std::vector<int32_t>>& histories = {});

  // With 0 < top_k < the row's finite logits and no repetition penalty, the draw needs only the top_k best
  // tokens: sample_top_k takes them (more likely first, as topk_rows gives them) and the count of finite logits
  // and returns what sample() would for the whole row, consuming the same number from the stream.
  bool top_k_suffices(int64_t finite) const;
  int32_t sample_top_k(std::span<const int32_t> ids, std::span<const float> vals, int64_t finite);

  const SamplingParams& params() const { return params_; }
  uint64_t draws() const { return counter_; }  // numbers consumed so far

 private:
  SamplingParams params_;
  uint64_t seed_;
  uint64_t counter_ = 0;
  struct Cand {
    float logit;
    int32_t id;
    float w;  // exp((logit - max logit) / temperature), in (0, 1]
  };
  int32_t draw(std::span<const float> w, double z);  // an index into w, drawn with probability w[i] / z
  int32_t finish_top_k(float lmax);
  int32_t finish(double z);

  std::vector<float> work_;  // (V) the logits after the repetition penalty
  std::vector<float> wbuf_;  // (V) weights
  std::vector<Cand> cand_;   // the tokens still in the running
};

// The argmax of one row (the lowest id among equal maxima). Throws on NaN / +inf logits.
int32_t argmax_logits(std::span<const float> logits);

}  // namespace anvil
