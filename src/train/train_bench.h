// Training-throughput benchmark: full steps (forward + backward + global-norm clip + AdamW on fp32 masters) on
// seeded random tokens, each step timed with the device synchronised, against the targets of TARGETS.md.
//
// Vocabulary: B batch, T sequence length, V vocabulary.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace anvil {

struct TrainBenchConfig {
  int64_t batch = 8;        // B sequences per step
  int64_t seq = 2048;       // T tokens per sequence
  int steps = 10;           // timed steps
  int warmup = 3;           // untimed steps first (allocator cache, cuBLASLt heuristics, page faults)
  bool recompute = false;   // TrainOptions::recompute
  int64_t keep_layers = 1;  // TrainOptions::keep_layers
  double lr = 1e-4;         // AdamW learning rate (the value does not change the time of a step)
  uint64_t seed = 0;        // the random token ids
};

struct TrainBenchResult {
  std::vector<double> step_ms;   // one per timed step
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  double tokens_per_s = 0;       // B*T / median step time
  double flops_per_token = 0;    // ModelInfo::train_flops_per_token(T)
  double first_loss = 0, last_loss = 0;
  int64_t state_bytes = 0;       // weights, fp32 masters, grads and AdamW moments (model_state_bytes)
  int64_t activation_bytes = 0;  // kept for the backward (CausalLM::saved_activation_bytes)
  int64_t peak_bytes = 0;        // GPU: the caching allocator's peak of live bytes (everything the process
                                 // allocated: state, activations, temporaries); CPU: peak resident set (VmHWM)
  bool peak_is_rss = false;
};

// Runs warmup + steps training steps on model (created trainable). Throws anvil::Error on a non-finite loss.
TrainBenchResult bench_train(CausalLM& model, const TrainBenchConfig& cfg);

// Bytes a training run holds whatever the batch: per Param its compute copy, its fp32 master when that is a
// separate tensor, its fp32 gradient, and AdamW's two fp32 moments.
int64_t model_state_bytes(CausalLM& model);

// Peak resident set of this process in bytes (Linux VmHWM), 0 when unknown.
int64_t peak_rss_bytes();

}  // namespace anvil
