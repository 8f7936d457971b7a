// Storage dtypes and their exact conversions to and from f32 (round to nearest even, saturating FP8).
// Everything here is usable on the host and inside GPU kernels (ANVIL_HD).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__CUDACC__) || defined(__HIP__)
#define ANVIL_HD __host__ __device__ inline __attribute__((always_inline))
#else
#define ANVIL_HD inline
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#include "backends/gpu/vendor/convert.h"  // hardware conversions, device passes only
#endif

namespace anvil {

enum class DType : uint8_t { f32, f16, bf16, e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, i32, i64, u8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i64: return 8;
    default: return 1;
  }
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::e4m3fn: return "e4m3fn";
    case DType::e5m2: return "e5m2";
    case DType::e4m3fnuz: return "e4m3fnuz";
    case DType::e5m2fnuz: return "e5m2fnuz";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}
inline bool dtype_is_float(DType t) { return t != DType::i32 && t != DType::i64 && t != DType::u8; }
inline bool dtype_is_fp8(DType t) {
  return t == DType::e4m3fn || t == DType::e5m2 || t == DType::e4m3fnuz || t == DType::e5m2fnuz;
}
// Unit roundoff (half an ulp at 1.0): the relative error of one rounding into this dtype.
inline double dtype_unit_roundoff(DType t) {
  switch (t) {
    case DType::f32: return 0x1p-24;
    case DType::f16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
    case DType::e4m3fn: case DType::e4m3fnuz: return 0x1p-4;
    case DType::e5m2: case DType::e5m2fnuz: return 0x1p-3;
    default: return 0;
  }
}
// Largest finite value of an FP8 format (the saturation bound of our conversions).
inline float fp8_max(DType t) {
  switch (t) {
    case DType::e4m3fn: return 448.f;
    case DType::e4m3fnuz: return 240.f;
    case DType::e5m2: return 57344.f;
    case DType::e5m2fnuz: return 57344.f;
    default: return 0.f;
  }
}

// Plain 16/8-bit storage types. Kernels convert to f32 in registers; no vendor half/bf16 types are needed,
// which keeps one source for CUDA and HIP 5.x (Debian's hipcc ships no hip_bf16.h).
struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };
struct fp8e4m3 { uint8_t bits; };  // OCP e4m3fn: bias 7, no inf, NaN = S.1111.111
struct fp8e5m2 { uint8_t bits; };  // OCP e5m2: bias 15, IEEE-like inf/NaN

ANVIL_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(f);
#else
  uint32_t u; std::memcpy(&u, &f, 4); return u;
#endif
}
ANVIL_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(u);
#else
  float f; std::memcpy(&f, &u, 4); return f;
#endif
}

// ---- bf16: the top half of an f32, rounded to nearest even; NaN stays a quiet NaN.
ANVIL_HD float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }
ANVIL_HD uint16_t f32_to_bf16(float f) {
#ifdef ANVIL_HW_BF16_CVT
  return anvil_hw_f32_to_bf16(f);
#endif
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// ---- f16 (IEEE binary16), round to nearest even, overflow to inf, subnormals exact.
// Branch-light: shifting the 15 magnitude bits into f32 position and scaling by 2^112 (exact: a power of two)
// rebias normals and turns f16 subnormals (read as f32 subnormals) into their exact value; only inf/NaN need a
// fix-up. The earlier branchy decoder held f16 rms_norm at 25% of copy bandwidth on the H200 (bf16: 64%).
ANVIL_HD float f16_to_f32(uint16_t h) {
#ifdef ANVIL_HW_F16_CVT
  return anvil_hw_f16_to_f32(h);
#endif
  float mag = bits_f32(uint32_t(h & 0x7fffu) << 13) * 0x1p112f;
  if ((h & 0x7c00u) == 0x7c00u) mag = bits_f32(0x7f800000u | (uint32_t(h & 0x3ffu) << 13));
  return bits_f32(f32_bits(mag) | (uint32_t(h & 0x8000u) << 16));
}
ANVIL_HD uint16_t f32_to_f16(float f) {
#ifdef ANVIL_HW_F16_CVT
  return anvil_hw_f32_to_f16(f);
#endif
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: subnormal f16, round (a * 2^24) to an integer, ties to even
    float v = bits_f32(a) * 0x1p24f;
    uint32_t i = uint32_t(v);
    float r = v - float(i);
    if (r > 0.5f || (r == 0.5f && (i & 1u))) i++;
    return uint16_t(sign | i);
  }
  uint32_t m = a + 0xfffu + ((a >> 13) & 1u);  // round mantissa to 10 bits
  return uint16_t(sign | (((m >> 23) - 112u) << 10) | ((m >> 13) & 0x3ffu));
}

// ---- FP8. One generic encoder: E exponent bits, M mantissa bits, exponent bias, the largest finite value,
// and how NaN is spelled. Saturates to +-max (what inference engines do for scaled FP8), RNE otherwise.
struct Fp8Format { int E, M, bias; float max; bool fnuz; bool ieee_inf; };
ANVIL_HD Fp8Format fp8_format_e4m3fn() { return {4, 3, 7, 448.f, false, false}; }
ANVIL_HD Fp8Format fp8_format_e5m2() { return {5, 2, 15, 57344.f, false, true}; }
ANVIL_HD Fp8Format fp8_format_e4m3fnuz() { return {4, 3, 8, 240.f, true, false}; }
ANVIL_HD Fp8Format fp8_format_e5m2fnuz() { return {5, 2, 16, 57344.f, true, false}; }

ANVIL_HD float fp8_to_f32(uint8_t v, Fp8Format f) {
  uint32_t sign = v >> 7, exp = (v >> f.M) & ((1u << f.E) - 1u), man = v & ((1u << f.M) - 1u);
  if (f.fnuz) {
    if (v == 0x80) return bits_f32(0x7fc00000u);  // the one NaN; no negative zero
  } else if (f.ieee_inf) {
    if (exp == (1u << f.E) - 1u) return bits_f32((sign << 31) | (man ? 0x7fc00000u : 0x7f800000u));
  } else if ((v & 0x7f) == 0x7f) {
    return bits_f32(0x7fc00000u);
  }
  float mag;
  if (exp == 0) mag = float(man) * bits_f32(uint32_t(127 + 1 - f.bias - f.M) << 23);
  else mag = bits_f32(((exp + 127u - uint32_t(f.bias)) << 23) | (man << (23 - f.M)));
  return sign ? -mag : mag;
}
ANVIL_HD uint8_t f32_to_fp8(float x, Fp8Format f) {
  uint32_t u = f32_bits(x), sign = u >> 31, a = u & 0x7fffffffu;
  uint8_t nan = f.fnuz ? uint8_t(0x80) : uint8_t((sign << 7) | 0x7f);
  if (a > 0x7f800000u) return nan;
  float mag = bits_f32(a);
  if (mag >= f.max) {  // saturate (inf too)
    uint8_t enc;
    if (f.fnuz) enc = 0x7f;
    else if (f.ieee_inf) enc = 0x7b;
    else enc = 0x7e;
    return uint8_t((sign << 7) | enc);
  }
  int min_normal_exp = 1 - f.bias;
  int e = int(a >> 23) - 127;
  uint32_t q;  // magnitude in units of the format's ulp at this binade, rounded RNE
  int ulp_exp = (e < min_normal_exp ? min_normal_exp : e) - f.M;
  float scaled = mag * bits_f32(uint32_t(127 - ulp_exp) << 23);  // exact: power-of-two scaling
  q = uint32_t(scaled);
  float r = scaled - float(q);
  if (r > 0.5f || (r == 0.5f && (q & 1u))) q++;
  // q is now the value / 2^ulp_exp; encode: q < 2^M at subnormal, else [2^M, 2^(M+1)] (carry bumps exponent)
  uint32_t enc;
  if (q == 0) enc = 0;
  else {
    int be = (e < min_normal_exp ? min_normal_exp : e);
    if (q < (1u << f.M)) enc = q;  // subnormal
    else {
      if (q >= (2u << f.M)) { q >>= 1; be++; }
      enc = (uint32_t(be + f.bias) << f.M) | (q & ((1u << f.M) - 1u));
    }
  }
  if (enc == 0 && f.fnuz) return 0;  // fnuz has no -0
  float back = fp8_to_f32(uint8_t(enc), f);
  if (back > f.max) enc = f.fnuz ? 0x7f : (f.ieee_inf ? 0x7b : 0x7e);
  return uint8_t((sign << 7) | enc);
}

// Convert between a format and its AMD fnuz twin through f32 (exact where both can represent the value).
inline uint8_t fp8_convert(uint8_t v, Fp8Format from, Fp8Format to) { return f32_to_fp8(fp8_to_f32(v, from), to); }

inline Fp8Format fp8_format(DType t) {
  switch (t) {
    case DType::e5m2: return fp8_format_e5m2();
    case DType::e4m3fnuz: return fp8_format_e4m3fnuz();
    case DType::e5m2fnuz: return fp8_format_e5m2fnuz();
    default: return fp8_format_e4m3fn();
  }
}

// Element load/store as f32 for any float dtype (host side helpers; kernels use the typed versions).
inline float load_as_f32(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return float(static_cast<const int32_t*>(p)[i]);
    case DType::i64: return float(static_cast<const int64_t*>(p)[i]);
    case DType::u8: return float(static_cast<const uint8_t*>(p)[i]);
    default: return fp8_to_f32(static_cast<const uint8_t*>(p)[i], fp8_format(t));
  }
}
inline void store_from_f32(void* p, DType t, size_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case DType::u8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
    default: static_cast<uint8_t*>(p)[i] = f32_to_fp8(v, fp8_format(t)); break;
  }
}
// Round an f32 value to the nearest value representable in `t` (identity for f32).
inline float round_to(DType t, float v) {
  uint8_t buf[8];
  store_from_f32(buf, t, 0, v);
  return load_as_f32(buf, t, 0);
}

// Typed device/host element converters used by templated kernels: to_f32(x) / from_f32<T>(v).
ANVIL_HD float to_f32(float x) { return x; }
ANVIL_HD float to_f32(bf16 x) { return bf16_to_f32(x.bits); }
ANVIL_HD float to_f32(f16 x) { return f16_to_f32(x.bits); }
template <class T> ANVIL_HD T from_f32(float v);
template <> ANVIL_HD float from_f32<float>(float v) { return v; }
template <> ANVIL_HD bf16 from_f32<bf16>(float v) { return bf16{f32_to_bf16(v)}; }
template <> ANVIL_HD f16 from_f32<f16>(float v) { return f16{f32_to_f16(v)}; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };

DType dtype_from_name(const std::string& name);  // "bf16", "BF16", "float32", ... ; throws on unknown

}  // namespace anvil
