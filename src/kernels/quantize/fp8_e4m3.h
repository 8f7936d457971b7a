// Fast e4m3fn / e4m3fnuz conversions for the quantize kernels (host and device): the same results as the generic
// f32_to_fp8 / fp8_to_f32 of core/dtype.h (checked exhaustively by the quantize cases), in ~10 operations instead
// of a branchy loop, because a memory-bound kernel moving 3 bytes per element has ~10 instructions to spend.
#pragma once
#include <cmath>

#include "core/dtype.h"

namespace anvil {

// f32 -> e4m3 byte: round to nearest even, saturating at +-max (448 fn, 240 fnuz; inf too), NaN -> NaN code.
ANVIL_HD uint8_t e4m3_encode(float v, bool fnuz) {
  const uint32_t u = f32_bits(v), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return fnuz ? uint8_t(0x80) : uint8_t(sign | 0x7f);
  const int bias = fnuz ? 8 : 7;
  const uint32_t max_code = fnuz ? 0x7fu : 0x7eu;
  uint32_t code;
  if (a < uint32_t(127 + 1 - bias) << 23) {
    // Below the smallest normal 2^(1-bias): a multiple of the subnormal step 2^(-bias-2); scaling by its inverse
    // (exact: a power of two) and rounding to an integer (RNE) gives the code, 8 meaning the smallest normal.
    code = uint32_t(rintf(bits_f32(a) * bits_f32(uint32_t(127 + bias + 2) << 23)));
  } else {
    // Normal: keep 3 mantissa bits with round-to-nearest-even on the f32 bits; a carry bumps the exponent.
    const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    code = (r >> 20) - (uint32_t(127 - bias) << 3);
  }
  if (code > max_code) code = max_code;  // saturate (also inf and values that round past the largest finite)
  if (fnuz && code == 0) return 0;       // fnuz has no negative zero (0x80 is its NaN)
  return uint8_t(sign | code);
}

// e4m3 byte -> f32, exact: the 7 magnitude bits placed in the f32 exponent/mantissa give the value times 2^-120
// (fn, bias 7) or 2^-119 (fnuz, bias 8), subnormals included; one multiply by a power of two restores it.
ANVIL_HD float e4m3_decode(uint8_t b, bool fnuz) {
  if (fnuz ? b == 0x80 : (b & 0x7f) == 0x7f) return bits_f32(0x7fc00000u);
  const float mag = bits_f32(uint32_t(b & 0x7f) << 20) * (fnuz ? 0x1p119f : 0x1p120f);
  return (b & 0x80) ? -mag : mag;
}

}  // namespace anvil
