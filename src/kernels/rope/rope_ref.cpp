// fp64 reference for rope, written to be read. The angle is the f32 product of the contract (rope.h);
// everything after it is fp64.
#include <cmath>

#include "kernels/rope/rope.h"

namespace anvil {

static double angle_of(int32_t pos, double inv_freq) { return double(float(pos) * float(inv_freq)); }

// Rotates each (i, i + HD/2) pair of every head by sign * angle.
static void rotate_ref(const double* x, const int32_t* pos, const double* inv_freq, double* y, int64_t N, int64_t NH,
                       int64_t HD, double sign) {
  const int64_t half = HD / 2;
  for (int64_t n = 0; n < N; n++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < half; i++) {
        const double a = sign * angle_of(pos[n], inv_freq[i]), c = std::cos(a), s = std::sin(a);
        const int64_t o = (n * NH + h) * HD + i;
        const double x1 = x[o], x2 = x[o + half];
        y[o] = x1 * c - x2 * s;
        y[o + half] = x2 * c + x1 * s;
      }
}

void rope_fwd_ref(const double* x, const int32_t* pos, const double* inv_freq, double* y, int64_t N, int64_t NH,
                  int64_t HD) {
  rotate_ref(x, pos, inv_freq, y, N, NH, HD, 1.0);
}

// The forward is y = R(angle) x with R orthogonal, so dx = R(angle)^T dy = R(-angle) dy.
void rope_bwd_ref(const double* dy, const int32_t* pos, const double* inv_freq, double* dx, int64_t N, int64_t NH,
                  int64_t HD) {
  rotate_ref(dy, pos, inv_freq, dx, N, NH, HD, -1.0);
}

}  // namespace anvil
