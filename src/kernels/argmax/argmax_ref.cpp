// fp64 reference for argmax_rows, written to be read.
#include <cmath>

#include "kernels/argmax/argmax.h"

namespace anvil {

void argmax_rows_ref(const double* logits, int64_t R, int64_t V, int32_t* ids, int32_t* bad) {
  for (int64_t r = 0; r < R; r++) {
    const double* row = logits + r * V;
    int64_t best = -1, first_bad = -1;
    for (int64_t c = 0; c < V; c++) {
      const double l = row[c];
      if (std::isnan(l) || l == INFINITY) {
        if (first_bad < 0) first_bad = 2 * c + (std::isnan(l) ? 0 : 1);
        continue;
      }
      if (l != -INFINITY && (best < 0 || l > row[best])) best = c;
    }
    ids[r] = int32_t(best < 0 ? 0 : best);
    bad[r] = int32_t(first_bad >= 0 ? first_bad : (best < 0 ? 2 * V : -1));
  }
}

}  // namespace anvil
