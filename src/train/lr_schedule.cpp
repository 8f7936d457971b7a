#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace anvil {

int64_t LrSchedule::decay_steps() const {
  return std::max<int64_t>(1, std::llround(decay_fraction * double(steps)));
}

void LrSchedule::validate() const {
  const char* op = "lr schedule";
  ANVIL_CHECK(kind == "cosine" || kind == "wsd", op, "optim.schedule = \"cosine\" or \"wsd\"", str("\"", kind, "\""));
  ANVIL_CHECK(peak > 0 && std::isfinite(peak), op, "optim.lr > 0", peak);
  ANVIL_CHECK(steps > 0, op, "steps > 0", steps);
  ANVIL_CHECK(warmup >= 0 && warmup <= steps, op, str("optim.warmup_steps in [0, steps = ", steps, "]"), warmup);
  ANVIL_CHECK(min_ratio >= 0 && min_ratio <= 1, op, "optim.min_lr_ratio in [0, 1]", min_ratio);
  if (kind == "wsd") {
    ANVIL_CHECK(decay_fraction > 0 && decay_fraction <= 1, op, "optim.decay_fraction in (0, 1]", decay_fraction);
    ANVIL_CHECK(warmup + decay_steps() <= steps, op,
                str("optim.warmup_steps + decay steps (", decay_steps(), ") <= steps = ", steps), warmup + decay_steps());
  }
}

double LrSchedule::lr(int64_t s) const {
  s = std::clamp<int64_t>(s, 0, steps - 1);
  double min = peak * min_ratio;
  if (s < warmup) return peak * double(s + 1) / double(warmup);
  if (kind == "wsd") {
    int64_t d = decay_steps(), start = steps - d;
    if (s < start) return peak;
    return peak + (min - peak) * double(s - start + 1) / double(d);
  }
  int64_t span = steps - 1 - warmup;
  if (span <= 0) return peak;  // warmup covers every step but the last
  double p = double(s - warmup) / double(span);
  return min + (peak - min) * 0.5 * (1.0 + std::cos(M_PI * p));
}

}  // namespace anvil
