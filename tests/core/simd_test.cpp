// cpu::exp_simd, log_simd and softplus_simd against double math, exp's range ends, and the same values from a
// vectorised loop as from single calls (the compiler must not change the function when it vectorises it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "backends/cpu/simd.h"
#include "core/rng.h"

using namespace anvil;

namespace {
// |got - exp(x)| in units of the last place of the float nearest exp(x).
double ulps(float x, float got) {
  const double ref = std::exp(double(x));
  return std::fabs(double(got) - ref) / std::ldexp(1.0, std::ilogb(float(ref)) - 23);
}
}  // namespace

TEST(ExpSimd, WithinOneAndAHalfUlpOverTheNormalRange) {
  double worst = 0;
  float at = 0;
  int64_t count = 0;
  // ~1e6 relative steps over the range where exp(x) is a normal float (and exp(0) = 1 exactly, below).
  for (float x = -87.3f; x < 88.7f; count++) {
    const double e = ulps(x, cpu::exp_simd(x));
    if (e > worst) worst = e, at = x;
    x = std::fabs(x) < 1e-3f ? x + 1e-5f : x + std::fabs(x) * 2e-5f;
  }
  std::printf("exp_simd: %lld points, worst %.3f ulp at x = %.7g\n", static_cast<long long>(count), worst, at);
  EXPECT_GT(count, 100000);
  EXPECT_LE(worst, 1.5) << "at x = " << at;
  EXPECT_EQ(cpu::exp_simd(0.f), 1.f);
}

TEST(ExpSimd, RangeEndsAndNaN) {
  EXPECT_EQ(cpu::exp_simd(-87.4f), 0.f);
  EXPECT_EQ(cpu::exp_simd(-1e30f), 0.f);
  EXPECT_EQ(cpu::exp_simd(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(cpu::exp_simd(88.8f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::exp_simd(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::exp_simd(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(cpu::exp_simd(-87.33f), 0.f);                   // still a normal float
  EXPECT_LT(ulps(88.69f, cpu::exp_simd(88.69f)), 1.5);      // finite just below the top
  EXPECT_LT(ulps(-87.33f, cpu::exp_simd(-87.33f)), 1.5);
}

TEST(ExpSimd, VectorisedLoopGivesTheSameBitsAsSingleCalls) {
  const size_t n = 4099;  // not a multiple of any vector width: the loop's remainder runs too
  std::vector<float> x(n), vec(n);
  rng_fill_uniform(x.data(), n, 7, -90.0, 90.0);
  x[5] = std::numeric_limits<float>::quiet_NaN();
#pragma omp simd
  for (size_t i = 0; i < n; i++) vec[i] = cpu::exp_simd(x[i]);
  for (size_t i = 0; i < n; i++) {
    volatile float xi = x[i];  // a scalar call the vectoriser cannot merge with the loop's
    const float one = cpu::exp_simd(xi);
    if (std::isnan(one)) EXPECT_TRUE(std::isnan(vec[i])) << i;
    else EXPECT_EQ(vec[i], one) << "x = " << x[i];
  }
}

// |got - ref| in units of the last place of the float nearest ref.
double ulps_of(double ref, float got) {
  return std::fabs(double(got) - ref) / std::ldexp(1.0, std::ilogb(float(ref)) - 23);
}

TEST(LogSimd, WithinThreeUlpOverThePositiveNormals) {
  double worst = 0;
  float at = 0;
  for (float x = 1e-37f; x < 3e38f; x *= 1.0003f) {
    const double ref = std::log(double(x));
    if (ref == 0) continue;
    const double e = ulps_of(ref, cpu::log_simd(x));
    if (e > worst) worst = e, at = x;
  }
  std::printf("log_simd: worst %.3f ulp at x = %.7g\n", worst, at);  // 2.48 at 1.12 when written
  EXPECT_LE(worst, 3.0) << "at x = " << at;
  EXPECT_EQ(cpu::log_simd(1.f), 0.f);
}

TEST(SoftplusSimd, WithinFourAndAHalfUlpAndTheIdentityAbove20) {
  double worst = 0;
  float at = 0;
  for (float v = -80.f; v < 20.f; v += 3e-4f) {
    const double e = ulps_of(std::log1p(std::exp(double(v))), cpu::softplus_simd(v));
    if (e > worst) worst = e, at = v;
  }
  std::printf("softplus_simd: worst %.3f ulp at v = %.7g\n", worst, at);  // 3.9 at -6.5 when written
  EXPECT_LE(worst, 4.5) << "at v = " << at;
  EXPECT_EQ(cpu::softplus_simd(20.5f), 20.5f);
  EXPECT_EQ(cpu::softplus_simd(1e30f), 1e30f);
  EXPECT_TRUE(std::isnan(cpu::softplus_simd(std::numeric_limits<float>::quiet_NaN())));
}

TEST(RngFill, EqualsTheOneAtATimeStream) {
  const size_t n = 10001;
  std::vector<float> a(n), b(n);
  rng_fill_normal(a.data(), n, 42);
  rng_fill_uniform(b.data(), n, 43, -0.5, 2.0);
  for (size_t k = 0; k < n; k++) {
    ASSERT_EQ(a[k], rng_normal(42, k)) << k;
    ASSERT_EQ(b[k], float(-0.5 + 2.5 * rng_uniform(43, k))) << k;
  }
}
