// Checking FP8 outputs (add_rms_norm's y, swiglu's out, cast to FP8).
//
// Why not derived_tol: an FP8 output is the kernel's f32 value rounded once into a 3- or 2-bit mantissa.
// The f32 value errs by ~sqrt(k_len) * 2^-24 relative (1e-5 for k_len = 4096), far below half an FP8 ulp
// (2^-4 for e4m3), so the kernel's result and the fp64 reference land on the same FP8 value except when the
// exact result lies within that 1e-5 of a rounding boundary, where either neighbour is right. So: round the
// fp64 reference into the format (round_to) and accept the kernel's value when its code is that value's code
// or an adjacent one ("one FP8 ulp"). Saturation is part of the contract: both sides clamp to +-max.
#pragma once
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"

namespace anvil::test {

// Position of an FP8 code on the number line (sign-magnitude -> integer), so neighbours differ by 1 and
// +0 / -0 coincide.
inline int fp8_code_order(uint8_t code) { return (code & 0x80) ? -int(code & 0x7f) : int(code); }
inline float fp8_code_value(uint8_t code, DType fmt) {
  const uint8_t buf[8] = {code};  // 8 bytes: load_as_f32 may read any dtype's width
  return load_as_f32(buf, fmt, 0);
}

// out: a tensor of dtype `fmt` (any device); ref: the fp64 reference already divided by the scale.
inline Check compare_fp8(const std::string& what, const Tensor& out, const std::vector<double>& ref) {
  const DType fmt = out.dtype();
  Check c;
  const std::vector<float> codes = out.as_dtype(DType::u8).to_floats();  // raw bytes, 0..255
  if (codes.size() != ref.size()) {
    c.ok = false;
    c.detail = str(what, ": ", codes.size(), " elements, reference has ", ref.size());
    return c;
  }
  int worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < codes.size(); i++) {
    uint8_t got = uint8_t(codes[i]), want[8] = {};  // 8 bytes: store_from_f32 may write any dtype's width
    store_from_f32(want, fmt, 0, float(ref[i]));
    int dist = std::isnan(fp8_code_value(got, fmt)) ? 1000 : std::abs(fp8_code_order(got) - fp8_code_order(want[0]));
    if (dist > worst) {
      worst = dist;
      wi = i;
    }
  }
  c.ok = worst <= 1;
  const uint8_t wb = codes.empty() ? 0 : uint8_t(codes[wi]);
  c.detail = str(what, " (", dtype_name(fmt), "): worst distance ", worst, " codes at [", wi, "] got ",
                 fp8_code_value(wb, fmt), " ref ", ref.empty() ? 0.0 : ref[wi], " (allowed: 1 code)");
  return c;
}

}  // namespace anvil::test
