// decode_stack's phase trace printer (decode_stack_trace.h).
#include "kernels/decode_stack/decode_stack_trace.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace anvil::decode_stack_trace {
namespace {
const char* const kStampNames[kStamps] = {
    "norm (in)",        "gemm q|k|v (warp 0)", "q|k|v: last warp",  "rope + attention",
    "attention: last warp", "stage att",       "gemm o (warp 0)",   "o: last warp",
    "norm (post)",      "gate, up, swiglu: last warp", "stage x (down)", "gemm down (warp 0)",
    "down: last warp"};
}  // namespace

// Per phase: the mean over layers of the mean and of the latest block's time since the previous stamp (a phase
// that ends in a grid barrier ends at the same time on every block, so its max is the barrier's release).
void print(const Tensor& t, int L, int grid, double launch_us) {
  const int64_t* v = t.data<int64_t>();
  auto at = [&](int l, int k, int b) { return double(v[(int64_t(l) * kStamps + k) * grid + b]); };
  const double t0 = double(v[int64_t(L) * kStamps * grid]);
  double total = 0;
  std::fprintf(stderr, "decode_stack trace, %d layers, %d blocks: µs per layer (mean over blocks / latest block)\n",
               L, grid);
  for (int k = 0; k < kStamps; k++) {
    double mean = 0, late = 0;
    for (int l = 0; l < L; l++) {
      double lmax = 0;
      for (int b = 0; b < grid; b++) {
        const double prev = k > 0 ? at(l, k - 1, b) : (l > 0 ? at(l - 1, kStamps - 1, b) : t0);
        const double d = at(l, k, b) - prev;
        mean += d / grid;
        lmax = std::max(lmax, at(l, k, b));
      }
      const double prev_max = [&] {
        double m = 0;
        for (int b = 0; b < grid; b++)
          m = std::max(m, k > 0 ? at(l, k - 1, b) : (l > 0 ? at(l - 1, kStamps - 1, b) : t0));
        return m;
      }();
      late += lmax - prev_max;
    }
    total += mean / L;
    std::fprintf(stderr, "  %-26s %8.2f %8.2f\n", kStampNames[k], mean / L / 1e3, late / L / 1e3);
  }
  std::fprintf(stderr, "  %-26s %8.2f\n", "layer", total / 1e3);
  double first = t0, last = 0;
  for (int b = 0; b < grid; b++) {
    first = std::min(first, double(v[int64_t(L) * kStamps * grid + b]));
    last = std::max(last, at(L - 1, kStamps - 1, b));
  }
  std::fprintf(stderr, "  %-26s %8.2f (µs, first block's start to last block's end)\n", "whole launch",
               (last - first) / 1e3);
  std::fprintf(stderr, "  %-26s %8.2f (µs, events around the counter reset and the launch)\n", "launch", launch_us);
}

}  // namespace anvil::decode_stack_trace
