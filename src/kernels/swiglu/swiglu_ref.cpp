// fp64 reference for swiglu, written to be read.
#include <cmath>

#include "kernels/swiglu/swiglu.h"

namespace anvil {

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void swiglu_fwd_ref(const double* gu, double* out, int64_t N, int64_t H) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      const double g = gu[n * 2 * H + j], u = gu[n * 2 * H + H + j];
      out[n * H + j] = g * sigmoid(g) * u;
    }
}

// d silu(g)/dg = s + g * s * (1 - s).
void swiglu_bwd_ref(const double* dout, const double* gu, double* dgu, int64_t N, int64_t H) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < H; j++) {
      const double g = gu[n * 2 * H + j], u = gu[n * 2 * H + H + j], d = dout[n * H + j];
      const double s = sigmoid(g);
      dgu[n * 2 * H + j] = d * u * s * (1.0 + g * (1.0 - s));
      dgu[n * 2 * H + H + j] = d * g * s;
    }
}

}  // namespace anvil
