// What the CPU kernels' vector loops share: exp, log and softplus in a form the compiler vectorises, and clones.
#pragma once

// ANVIL_CPU_CLONES on a function: GCC and clang build it three times, for AVX-512, AVX2 and the x86-64 baseline
// (SSE2), and the loader picks one for the CPU it runs on (an ifunc). The rest of the binary stays baseline, so it
// still runs on any x86-64. `avx2` does not include FMA, so that clone rounds every lane as the baseline does;
// `avx512f` does, and the compiler fuses a * b + c there: its results can differ from the others in the last
// bits (the same on every run of one machine). bf16 decode of the Llama-3.2-1B shape on 2 cores: 91-92 ms/token
// with the AVX2 clone, 86 with AVX-512 (docs/cpu.md).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__)
#define ANVIL_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ANVIL_CPU_CLONES
#endif

// exp(x) for the inner loops: no library call, no branch.
//
// Why: std::exp is a call into libm per element, so a loop around it stays scalar. The CPU selective scan
// evaluates one per (channel, step, state); with std::exp it spent ~13% of a Mamba-130m CPU training step in
// __expf_fma alone, and its state loops could not be vectorised at all.
//
// Method (Cody-Waite): x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2; ln2 is split into a high part
// with 9 significant bits (so k * kLn2Hi is exact for |k| <= 2^15) and a low part; exp(r) by its Taylor series to
// degree 7 (truncation r^8 / 8! <= 5e-9 of the result at |r| = 0.347); then k is added to the exponent bits.
// Measured against exp in double over [-87.3, 88.7] (tests/core/simd_test.cpp): at most 1.21 ulp.
// Only multiplies and adds, so a build without FMA (the x86-64 baseline, SSE2) vectorises it too.
//
// Range: below -87.33 (where exp underflows past the normal floats) it returns 0, above 88.7 +inf (exp is finite
// up to 88.72), NaN stays NaN.
// Inputs between exp's denormal range and -87.33 lose their denormal digits: 0 instead of < 1.2e-38.
// Its compares must be if-converted for a loop around it to vectorise: the build passes -fno-trapping-math.

namespace anvil::cpu {

inline float exp_simd(float x) {
  // At kHi, k = 128 with r < 0: p < 1 keeps the exponent field below 255.
  constexpr float kLo = -87.33654f, kHi = 88.7f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kShift = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer in the low mantissa bits
  float xc = x < kLo ? kLo : x;
  xc = xc > kHi ? kHi : xc;
  const float s = xc * kLog2e + kShift;
  const float kf = s - kShift;
  const int k = __builtin_bit_cast(int, s) - __builtin_bit_cast(int, kShift);
  const float r = (xc - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  float e = __builtin_bit_cast(float, __builtin_bit_cast(int, p) + k * (1 << 23));
  e = x < kLo ? 0.f : e;
  e = x > kHi ? __builtin_inff() : e;
  return x != x ? x : e;
}

// log(x) for finite x > 0 in the same form: x = m 2^k with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with
// s = (m - 1) / (m + 1) (|s| <= 0.172) by its series to s^9, plus k ln2 in two parts. Zero and denormal x are
// outside its domain (it takes them as tiny normal numbers).
inline float log_simd(float x) {
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const int bits = __builtin_bit_cast(int, x);
  const int k = (bits - __builtin_bit_cast(int, 0.70710678f)) >> 23;
  const float m = __builtin_bit_cast(float, bits - k * (1 << 23));
  const float s = (m - 1.f) / (m + 1.f), s2 = s * s;
  float p = 2.f / 9.f;
  p = p * s2 + 2.f / 7.f;
  p = p * s2 + 2.f / 5.f;
  p = p * s2 + 2.f / 3.f;
  p = p * s2 + 2.f;
  const float kf = float(k);
  return kf * kLn2Hi + (kf * kLn2Lo + s * p);
}

// softplus(v) = log(1 + exp(v)), v itself above 20 (as the scan's contract has it). log1p(e) is taken as
// log(u) - ((u - 1) - e) / u with u = 1 + e: the second term restores what rounding 1 + e lost, so small e keep
// their relative accuracy.
inline float softplus_simd(float v) {
  const float e = exp_simd(v), u = 1.f + e;
  const float sp = log_simd(u) - ((u - 1.f) - e) / u;
  return v > 20.f ? v : sp;
}

}  // namespace anvil::cpu
