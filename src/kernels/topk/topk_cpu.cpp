// topk_rows on the CPU: a partial sort of each row's finite logits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/topk/topk.h"

namespace anvil {

void topk_rows_cpu(const Tensor& logits, int k, Tensor& ids, Tensor& vals, Tensor& finite, Tensor& bad) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const float* x = logits.data<float>();
  std::vector<int32_t> keep;
  for (int64_t r = 0; r < R; r++) {
    const float* row = x + r * V;
    keep.clear();
    int64_t first_bad = -1;
    for (int64_t c = 0; c < V; c++) {
      const float l = row[c];
      if (std::isnan(l) || l == INFINITY) {
        if (first_bad < 0) first_bad = 2 * c + (std::isnan(l) ? 0 : 1);
      } else if (l != -INFINITY) {
        keep.push_back(int32_t(c));
      }
    }
    const size_t n = std::min(keep.size(), size_t(k));
    std::partial_sort(keep.begin(), keep.begin() + long(n), keep.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int j = 0; j < k; j++) {
      const bool has = size_t(j) < n;
      ids.data<int32_t>()[r * k + j] = has ? keep[size_t(j)] : -1;
      vals.data<float>()[r * k + j] = has ? row[keep[size_t(j)]] : -INFINITY;
    }
    finite.data<int32_t>()[r] = int32_t(keep.size());
    bad.data<int32_t>()[r] = int32_t(first_bad >= 0 ? first_bad : (keep.empty() ? 2 * V : -1));
  }
}

}  // namespace anvil
