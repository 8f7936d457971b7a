// Learning-rate schedules. `step` is the 0-based index of the optimizer step about to run, in [0, steps).
//
// Both start with a linear warmup: lr(s) = peak * (s + 1) / warmup for s < warmup (the first step never runs
// at lr 0). With min = peak * min_lr_ratio:
//   cosine: after warmup, p = (s - warmup) / (steps - 1 - warmup) goes 0 → 1 and
//           lr = min + (peak - min) * (1 + cos(pi p)) / 2, so the last step runs at min.
//   wsd (warmup-stable-decay): peak until the last D = round(decay_fraction * steps) steps, which decay
//           linearly: lr = peak + (min - peak) * (s - (steps - D) + 1) / D, the last step again at min.
//           Checkpoints taken before the decay are good starting points for continued training.
#pragma once
#include <cstdint>
#include <string>

namespace anvil {

struct LrSchedule {
  std::string kind = "cosine";  // cosine | wsd
  double peak = 3e-4;
  int64_t steps = 1;
  int64_t warmup = 0;
  double decay_fraction = 0.2;  // wsd
  double min_ratio = 0.1;

  void validate() const;  // throws anvil::Error naming the impossible value
  double lr(int64_t step) const;
  int64_t decay_steps() const;  // wsd's D
};

}  // namespace anvil
