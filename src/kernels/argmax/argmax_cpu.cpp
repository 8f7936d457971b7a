// argmax_rows on the CPU: one pass per row, the same rules as the reference in f32.
#include <cmath>

#include "kernels/argmax/argmax.h"

namespace anvil {

void argmax_rows_cpu(const Tensor& logits, Tensor& ids, Tensor& bad) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const float* x = logits.data<float>();
  int32_t* out = ids.data<int32_t>();
  int32_t* why = bad.data<int32_t>();
  for (int64_t r = 0; r < R; r++) {
    const float* row = x + r * V;
    int64_t best = -1, first_bad = -1;
    float m = -INFINITY;
    for (int64_t c = 0; c < V; c++) {
      const float l = row[c];
      if (std::isnan(l) || l == INFINITY) {
        if (first_bad < 0) first_bad = 2 * c + (std::isnan(l) ? 0 : 1);
      } else if (l > m) {
        m = l;
        best = c;
      }
    }
    out[r] = int32_t(best < 0 ? 0 : best);
    why[r] = int32_t(first_bad >= 0 ? first_bad : (best < 0 ? 2 * V : -1));
  }
}

}  // namespace anvil
