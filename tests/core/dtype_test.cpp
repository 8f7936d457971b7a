// Exhaustive checks of the 8- and 16-bit conversions against an independent definition: the value a bit
// pattern encodes (computed with ldexp), and round-to-nearest-even found by brute force over all codes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"

using namespace anvil;

namespace {

// Value of an FP8 code from first principles.
double fp8_value(uint8_t v, int E, int M, int bias, bool fnuz, bool ieee) {
  int sign = v >> 7, exp = (v >> M) & ((1 << E) - 1), man = v & ((1 << M) - 1);
  if (fnuz && v == 0x80) return NAN;
  if (!fnuz && ieee && exp == (1 << E) - 1) return man ? NAN : (sign ? -INFINITY : INFINITY);
  if (!fnuz && !ieee && exp == (1 << E) - 1 && man == (1 << M) - 1) return NAN;
  double mag = exp == 0 ? std::ldexp(man, 1 - bias - M) : std::ldexp((1 << M) + man, exp - bias - M);
  return sign ? -mag : mag;
}

struct F8 { const char* name; Fp8Format f; int E, M, bias; bool fnuz, ieee; double max; };
const F8 kFormats[] = {
    {"e4m3fn", fp8_format_e4m3fn(), 4, 3, 7, false, false, 448},
    {"e5m2", fp8_format_e5m2(), 5, 2, 15, false, true, 57344},
    {"e4m3fnuz", fp8_format_e4m3fnuz(), 4, 3, 8, true, false, 240},
    {"e5m2fnuz", fp8_format_e5m2fnuz(), 5, 2, 16, true, false, 57344},
};

// Nearest finite code by brute force, ties to the even code (lowest mantissa bit 0), saturating.
uint8_t fp8_nearest(float x, const F8& f) {
  double best = INFINITY;
  int bestc = -1;
  for (int c = 0; c < 256; c++) {
    double v = fp8_value(uint8_t(c), f.E, f.M, f.bias, f.fnuz, f.ieee);
    if (std::isnan(v) || std::isinf(v)) continue;
    if (f.fnuz && c == 0x80) continue;
    double d = std::fabs(v - double(x));
    if (d < best || (d == best && (c & 1) == 0 && bestc >= 0 && (bestc & 1))) {
      best = d;
      bestc = c;
    }
  }
  // Signed zero: keep the sign of the input where the format has -0.
  if (fp8_value(uint8_t(bestc), f.E, f.M, f.bias, f.fnuz, f.ieee) == 0) return (!f.fnuz && std::signbit(x)) ? 0x80 : 0;
  return uint8_t(bestc);
}

}  // namespace

TEST(Dtype, Fp8DecodeAllCodes) {
  for (const auto& f : kFormats)
    for (int c = 0; c < 256; c++) {
      double want = fp8_value(uint8_t(c), f.E, f.M, f.bias, f.fnuz, f.ieee);
      float got = fp8_to_f32(uint8_t(c), f.f);
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
      else EXPECT_EQ(double(got), want) << f.name << " code " << c;
    }
}

TEST(Dtype, Fp8EncodeRoundTripsEveryCode) {
  for (const auto& f : kFormats)
    for (int c = 0; c < 256; c++) {
      float v = fp8_to_f32(uint8_t(c), f.f);
      if (std::isnan(v) || std::isinf(v)) continue;
      if (f.fnuz && c == 0x80) continue;
      EXPECT_EQ(int(f32_to_fp8(v, f.f)), c) << f.name << " value " << v;
    }
}

TEST(Dtype, Fp8EncodeRoundsToNearestEven) {
  // Every code boundary: midpoints between adjacent codes (ties), and points just either side, plus a dense
  // sweep of random values; compared with the brute-force nearest code.
  for (const auto& f : kFormats) {
    std::vector<float> vals;
    for (int c = 0; c < 128; c++) {
      double a = fp8_value(uint8_t(c), f.E, f.M, f.bias, f.fnuz, f.ieee);
      double b = fp8_value(uint8_t(c + 1), f.E, f.M, f.bias, f.fnuz, f.ieee);
      if (std::isnan(a) || std::isnan(b) || std::isinf(b)) continue;
      double mid = (a + b) / 2;
      for (float v : {float(mid), std::nextafter(float(mid), 0.f), std::nextafter(float(mid), 1e30f)})
        vals.push_back(v), vals.push_back(-v);
    }
    for (int i = 0; i < 20000; i++) vals.push_back(float((rng_uniform(7, i) * 2 - 1) * f.max * 1.2));
    for (float v : vals) EXPECT_EQ(int(f32_to_fp8(v, f.f)), int(fp8_nearest(v, f))) << f.name << " x=" << v;
    // Saturation and NaN.
    EXPECT_EQ(fp8_to_f32(f32_to_fp8(1e30f, f.f), f.f), float(f.max)) << f.name;
    EXPECT_EQ(fp8_to_f32(f32_to_fp8(-INFINITY, f.f), f.f), -float(f.max)) << f.name;
    EXPECT_TRUE(std::isnan(fp8_to_f32(f32_to_fp8(NAN, f.f), f.f))) << f.name;
  }
}

TEST(Dtype, Fp8FnuzConversions) {
  // e4m3fn -> e4m3fnuz: every value within fnuz range survives exactly; larger ones saturate to 240.
  for (int c = 0; c < 256; c++) {
    float v = fp8_to_f32(uint8_t(c), fp8_format_e4m3fn());
    if (std::isnan(v)) continue;
    uint8_t u = fp8_convert(uint8_t(c), fp8_format_e4m3fn(), fp8_format_e4m3fnuz());
    float back = fp8_to_f32(u, fp8_format_e4m3fnuz());
    if (std::fabs(v) <= 240.f && std::fabs(v) >= 0x1p-10f) {
      EXPECT_EQ(back, v) << c;
    }
    if (std::fabs(v) > 240.f) {
      EXPECT_EQ(std::fabs(back), 240.f) << c;
    }
  }
}

// bf16 and f16: every 16-bit pattern decodes to the value its bits define and encodes back to itself;
// RNE checked at every midpoint between adjacent codes.
TEST(Dtype, Bf16Exhaustive) {
  for (uint32_t h = 0; h < 65536; h++) {
    float v = bf16_to_f32(uint16_t(h));
    uint32_t bits = h << 16;
    float want;
    std::memcpy(&want, &bits, 4);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(v));
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(v))));
      continue;
    }
    EXPECT_EQ(v, want);
    EXPECT_EQ(f32_to_bf16(v), uint16_t(h));
    if ((h & 0x7fff) < 0x7f7f) {  // midpoint to the next code (same sign): ties to even
      float next = bf16_to_f32(uint16_t(h + 1));
      float mid = float((double(v) + double(next)) / 2);
      uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
      EXPECT_EQ(f32_to_bf16(mid), even) << "h=" << h;
      EXPECT_EQ(f32_to_bf16(std::nextafter(mid, v)), uint16_t(h)) << "h=" << h;
      EXPECT_EQ(f32_to_bf16(std::nextafter(mid, next)), uint16_t(h + 1)) << "h=" << h;
    }
  }
}

TEST(Dtype, F16Exhaustive) {
  for (uint32_t h = 0; h < 65536; h++) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double want = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? (man ? NAN : INFINITY) : std::ldexp(1024 + man, exp - 25);
    if (sign) want = -want;
    float v = f16_to_f32(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_EQ(double(v), want) << h;
    EXPECT_EQ(f32_to_f16(v), uint16_t(h)) << h;
    if ((h & 0x7fff) < 0x7bff) {
      float next = f16_to_f32(uint16_t(h + 1));
      float mid = float((double(v) + double(next)) / 2);
      uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
      EXPECT_EQ(f32_to_f16(mid), even) << "h=" << h;
      EXPECT_EQ(f32_to_f16(std::nextafter(mid, v)), uint16_t(h)) << "h=" << h;
      EXPECT_EQ(f32_to_f16(std::nextafter(mid, next)), uint16_t(h + 1)) << "h=" << h;
    }
  }
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_f16(65519.f), 0x7bff);
}

TEST(Dtype, Names) {
  EXPECT_EQ(dtype_from_name("BF16"), DType::bf16);
  EXPECT_EQ(dtype_from_name("F8_E4M3"), DType::e4m3fn);
  EXPECT_THROW(dtype_from_name("f128"), Error);
}
