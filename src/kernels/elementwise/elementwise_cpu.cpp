// CPU elementwise ops: OpenMP over elements, f32 math. The reductions sum fixed 4096-element chunks and then
// the chunk sums in order, so the result does not depend on the thread count.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/fp8_io.h"

namespace anvil {

namespace {
constexpr int64_t kChunk = 4096;

template <class T>
void add_impl(const T* a, const T* b, T* out, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}
template <class TA, class TX>
void add_inplace_impl(TA* acc, const TX* x, float alpha, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) acc[i] = from_f32<TA>(to_f32(acc[i]) + alpha * to_f32(x[i]));
}
template <class T>
void scale_impl(T* x, float s, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) x[i] = from_f32<T>(to_f32(x[i]) * s);
}
void neg_exp_impl(const float* x, float* out, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) out[i] = -std::exp(x[i]);
}
// Two roundings, product then sum: the x86-64 baseline this builds for has no FMA to contract them into.
void addcmul_inplace_impl(float* acc, const float* a, const float* b, float alpha, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) acc[i] += alpha * a[i] * b[i];
}
template <class TS, class TD>
void cast_impl(const TS* src, TD* dst, float factor, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; i++) dst[i] = from_f32<TD>(to_f32(src[i]) * factor);
}
template <class T>
float sum_squares_impl(const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> part(size_t(chunks), 0.f);
#pragma omp parallel for
  for (int64_t k = 0; k < chunks; k++) {
    float s = 0;
    for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); i++) s += to_f32(x[i]) * to_f32(x[i]);
    part[size_t(k)] = s;
  }
  float s = 0;
  for (float p : part) s += p;
  return s;
}
// max|x| over the bit patterns of |x|: non-negative floats order like their bits, and every NaN pattern is
// above inf, so a NaN wins (fmaxf would drop it).
template <class T>
uint32_t amax_bits_impl(const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<uint32_t> part(size_t(chunks), 0);
#pragma omp parallel for
  for (int64_t k = 0; k < chunks; k++) {
    uint32_t m = 0;
    for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); i++)
      m = std::max(m, f32_bits(to_f32(x[i])) & 0x7fffffffu);
    part[size_t(k)] = m;
  }
  uint32_t m = 0;
  for (uint32_t p : part) m = std::max(m, p);
  return m;
}
}  // namespace

void elementwise_add_cpu(const Tensor& a, const Tensor& b, Tensor& out) {
  ANVIL_DISPATCH_FLOAT(a.dtype(), T, add_impl<T>(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()));
}
void elementwise_add_inplace_cpu(Tensor& acc, const Tensor& x, float alpha) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), TX, {
    if (acc.dtype() == DType::f32) add_inplace_impl<float, TX>(acc.data<float>(), x.data<TX>(), alpha, x.numel());
    else add_inplace_impl<TX, TX>(acc.data<TX>(), x.data<TX>(), alpha, x.numel());
  });
}
void elementwise_add_int_cpu(Tensor& x, int32_t v) {
  int32_t* p = x.data<int32_t>();
  // In uint32: int32 overflow would be undefined; the sum wraps as the GPU's does.
  for (int64_t i = 0; i < x.numel(); i++) p[i] = int32_t(uint32_t(p[i]) + uint32_t(v));
}

void elementwise_scale_cpu(Tensor& x, float s) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, scale_impl<T>(x.data<T>(), s, x.numel()));
}
void elementwise_neg_exp_cpu(const Tensor& x, Tensor& out) {
  neg_exp_impl(x.data<float>(), out.data<float>(), x.numel());
}
void elementwise_addcmul_inplace_cpu(Tensor& acc, const Tensor& a, const Tensor& b, float alpha) {
  addcmul_inplace_impl(acc.data<float>(), a.data<float>(), b.data<float>(), alpha, acc.numel());
}
void elementwise_cast_cpu(const Tensor& src, Tensor& dst, float scale) {
  if (src.dtype() == dst.dtype() && scale == 1.f) return void(std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes()));
  const float factor = dtype_is_fp8(src.dtype()) ? scale : 1.f / scale;
  ANVIL_DISPATCH_FLOAT_FP8(src.dtype(), TS, {
    ANVIL_DISPATCH_FLOAT_FP8(dst.dtype(), TD,
                             cast_impl<TS, TD>(src.data<TS>(), dst.data<TD>(), factor, src.numel()));
  });
}
void elementwise_sum_squares_cpu(const Tensor& x, Tensor& out) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, out.data<float>()[0] += sum_squares_impl<T>(x.data<T>(), x.numel()));
}
void elementwise_amax_cpu(const Tensor& x, Tensor& out) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T, out.data<float>()[0] = bits_f32(amax_bits_impl<T>(x.data<T>(), x.numel())));
}

}  // namespace anvil
