// fp64 reference for topk_rows, written to be read: a full sort of each row's finite logits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/topk/topk.h"

namespace anvil {

void topk_rows_ref(const double* logits, int64_t R, int64_t V, int k, int32_t* ids, double* vals, int32_t* finite,
                   int32_t* bad) {
  for (int64_t r = 0; r < R; r++) {
    const double* row = logits + r * V;
    std::vector<int64_t> keep;
    int64_t first_bad = -1;
    for (int64_t c = 0; c < V; c++) {
      const double l = row[c];
      if (std::isnan(l) || l == INFINITY) {
        if (first_bad < 0) first_bad = 2 * c + (std::isnan(l) ? 0 : 1);
      } else if (l != -INFINITY) {
        keep.push_back(c);
      }
    }
    std::stable_sort(keep.begin(), keep.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int j = 0; j < k; j++) {
      const bool has = size_t(j) < keep.size();
      ids[r * k + j] = has ? int32_t(keep[size_t(j)]) : -1;
      vals[r * k + j] = has ? row[keep[size_t(j)]] : -INFINITY;
    }
    finite[r] = int32_t(keep.size());
    bad[r] = int32_t(first_bad >= 0 ? first_bad : (keep.empty() ? 2 * V : -1));
  }
}

}  // namespace anvil
