// FP8 as a kernel element type, so one templated kernel writes (or reads) f32/bf16/f16 or any of the four
// FP8 formats: `fp8<DType::e4m3fn>` has to_f32() / from_f32<>() like bf16 and f16 (core/dtype.h), with
// saturating round-to-nearest-even on the way in. Host and device (ANVIL_HD); used by add_rms_norm,
// swiglu and cast. Scaling (y / scale) is the caller's business: these convert values, not quantise them.
#pragma once
#include "core/dispatch.h"
#include "core/dtype.h"
#include "kernels/quantize/fp8_e4m3.h"

namespace anvil {

template <DType D>
struct fp8 { uint8_t bits; };

template <DType D> ANVIL_HD Fp8Format fp8_format_of();
template <> ANVIL_HD Fp8Format fp8_format_of<DType::e4m3fn>() { return fp8_format_e4m3fn(); }
template <> ANVIL_HD Fp8Format fp8_format_of<DType::e5m2>() { return fp8_format_e5m2(); }
template <> ANVIL_HD Fp8Format fp8_format_of<DType::e4m3fnuz>() { return fp8_format_e4m3fnuz(); }
template <> ANVIL_HD Fp8Format fp8_format_of<DType::e5m2fnuz>() { return fp8_format_e5m2fnuz(); }

template <DType D> ANVIL_HD float to_f32(fp8<D> x) { return fp8_to_f32(x.bits, fp8_format_of<D>()); }
// The two e4m3 formats (the ones GEMMs consume) take quantize's ~10-operation codec, which gives the same bytes as
// the generic encoder: the generic one (float-int conversions, a decode back, branches) tripled the one-row
// add_rms_norm's time with an FP8 output (H200, in a graph: 5.1 µs against 2.4 µs for bf16; 3.3 µs with the
// codec). On sm_89+ e4m3fn is one hardware conversion.
template <> ANVIL_HD float to_f32(fp8<DType::e4m3fn> x) { return e4m3_decode(x.bits, false); }
template <> ANVIL_HD float to_f32(fp8<DType::e4m3fnuz> x) { return e4m3_decode(x.bits, true); }
template <> ANVIL_HD fp8<DType::e4m3fn> from_f32<fp8<DType::e4m3fn>>(float v) {
#ifdef ANVIL_HAS_E4M3_CVT  // sm_89+ device code (the vendor header, included first by the GPU sources)
  return {anvil_f32_to_e4m3fn(v)};
#else
  return {e4m3_encode(v, false)};
#endif
}
template <> ANVIL_HD fp8<DType::e5m2> from_f32<fp8<DType::e5m2>>(float v) { return {f32_to_fp8(v, fp8_format_e5m2())}; }
template <> ANVIL_HD fp8<DType::e4m3fnuz> from_f32<fp8<DType::e4m3fnuz>>(float v) { return {e4m3_encode(v, true)}; }
template <> ANVIL_HD fp8<DType::e5m2fnuz> from_f32<fp8<DType::e5m2fnuz>>(float v) {
  return {f32_to_fp8(v, fp8_format_e5m2fnuz())};
}
template <DType D> struct dtype_of<fp8<D>> { static constexpr DType value = D; };

// The element type stores a value in dtype `dtype_of<T>` (true for the FP8 types above).
template <class T> constexpr bool is_fp8_type = false;
template <DType D> constexpr bool is_fp8_type<fp8<D>> = true;

// N elements of T moved as one aligned access (N * sizeof(T) of 2, 4, 8 or 16 bytes): an FP8 output of a
// bf16 kernel stores 8 bytes where its 16-byte input pack of 8 elements was loaded.
template <class T, int N>
struct alignas(sizeof(T) * N) Vec { T v[N]; };
template <class T, int N> ANVIL_HD Vec<T, N> load_vec(const T* p) { return *reinterpret_cast<const Vec<T, N>*>(p); }
template <class T, int N> ANVIL_HD void store_vec(T* p, const Vec<T, N>& v) { *reinterpret_cast<Vec<T, N>*>(p) = v; }

}  // namespace anvil

// ANVIL_DISPATCH_FLOAT_FP8(dtype, T, body): T = float, bf16, f16 or one of the four fp8<> formats.
#define ANVIL_DISPATCH_FLOAT_FP8(dt, T, ...)                                                        \
  switch (dt) {                                                                                     \
    case ::anvil::DType::f32: { using T = float; __VA_ARGS__; break; }                              \
    case ::anvil::DType::bf16: { using T = ::anvil::bf16; __VA_ARGS__; break; }                     \
    case ::anvil::DType::f16: { using T = ::anvil::f16; __VA_ARGS__; break; }                       \
    case ::anvil::DType::e4m3fn: { using T = ::anvil::fp8<::anvil::DType::e4m3fn>; __VA_ARGS__; break; }     \
    case ::anvil::DType::e5m2: { using T = ::anvil::fp8<::anvil::DType::e5m2>; __VA_ARGS__; break; }         \
    case ::anvil::DType::e4m3fnuz: { using T = ::anvil::fp8<::anvil::DType::e4m3fnuz>; __VA_ARGS__; break; } \
    case ::anvil::DType::e5m2fnuz: { using T = ::anvil::fp8<::anvil::DType::e5m2fnuz>; __VA_ARGS__; break; } \
    default: ANVIL_THROW("dispatch", "f32/bf16/f16/e4m3fn/e5m2/e4m3fnuz/e5m2fnuz", ::anvil::dtype_name(dt)); \
  }
// The outputs of add_rms_norm and swiglu: the input dtype T, or the two FP8 formats GEMMs consume (OCP
// e4m3fn on NVIDIA, e4m3fnuz on AMD MI300).
#define ANVIL_DISPATCH_OUT(dt, T, TO, ...)                                                          \
  if ((dt) == ::anvil::DType::e4m3fn) { using TO = ::anvil::fp8<::anvil::DType::e4m3fn>; __VA_ARGS__; } \
  else if ((dt) == ::anvil::DType::e4m3fnuz) { using TO = ::anvil::fp8<::anvil::DType::e4m3fnuz>; __VA_ARGS__; } \
  else { using TO = T; __VA_ARGS__; }
