// Decode benchmark: time one-token steps against the floor set by reading every weight once per step.
//
// Vocabulary: B batch, T prompt length, V vocabulary, C model width.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model.h"
#include "serve/sampler.h"

namespace anvil {

struct DecodeBenchConfig {
  int batch = 1;          // B sequences decoded together
  int prompt_len = 1;     // T tokens prefilled before the timed steps
  int tokens = 128;       // timed one-token steps
  int64_t context = 0;    // cache capacity; 0 = prompt_len + tokens
  uint64_t seed = 0;      // the (random) token ids fed
  bool host_ids = false;  // upload each step's ids inside the timed region (else on the device beforehand)
  // Batch 1 also times generate() itself, `tokens` new tokens with this sampling, once with the device's picks
  // and once with the host sampler (GenerationConfig::sample_on_host).
  SamplingParams sampling;
};

struct DecodeBenchResult {
  int64_t context = 0;
  double prefill_ms = 0;
  std::vector<double> step_ms;  // one per timed step, device synchronised
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  double device_ms = 0;         // GPU: median time between events recorded before and after the step (0 on CPU)
  double tokens_per_s = 0;      // B / median step time
  int64_t weight_bytes = 0;     // read per step, see decode_weight_bytes
  std::string decode_path;      // InferState::decode_path after the run
  // The generation loop: greedy picks on the device feeding the next step, a step ahead of the host
  // (greedy_pipe.h), timed over `loop_tokens` steps after kLoopWarmup; wall ms per step. 0 when not run
  // (tokens < kLoopWarmup + 2).
  static constexpr int kLoopWarmup = 3;
  double loop_ms = 0;
  int loop_tokens = 0;
  // generate() at batch 1: (wall time - prefill) / (new tokens - 1), with the device's picks and with the host
  // sampler; the state's first eager step and graph capture included. 0 when not run (batch > 1, tokens < 2).
  double gen_ms = 0, gen_host_ms = 0;
};

DecodeBenchResult bench_decode(CausalLM& model, const DecodeBenchConfig& cfg);

// Bytes of weights one decode step reads: every parameter once, except an untied input embedding table, of
// which only the B rows of the fed tokens are read. (A tied table is read whole by the LM head.) KV-cache
// and activation traffic are not counted: at short contexts they are small next to the weights (8B Llama
// 3, bf16: 16 GB of weights vs 128 KB of KV cache per token of context).
int64_t decode_weight_bytes(CausalLM& model, int batch);

// Device memory bandwidth in bytes/s from timed device-to-device copies of `bytes` (read + write counted:
// 2 * bytes per copy); the median of `reps` copies after one warm-up.
double measure_copy_bandwidth(Device device, size_t bytes = size_t(1) << 30, int reps = 5);

// q-quantile (0..1) of v by linear interpolation; v is copied.
double quantile(std::vector<double> v, double q);

}  // namespace anvil
