// elementwise: the small ops the models and the trainer need between the big kernels.
//
// Shapes:  any, contiguous; all tensors of one call have the same number of elements (N below); the
//          reductions write one f32.
// Dtypes:  f32/bf16/f16 unless said; `cast` converts between any two float dtypes, the four FP8 formats
//          included. All on one device.
// Numerics: f32 math, one rounding into the output dtype. FP8 outputs saturate to +-max (NaN stays NaN);
//          f16 outputs overflow to inf as IEEE says.
#pragma once
#include "core/tensor.h"

namespace anvil {

void add(const Tensor& a, const Tensor& b, Tensor& out);     // out = a + b; all one dtype; out may alias a or b
void add_(Tensor& acc, const Tensor& x, float alpha = 1.f);  // acc += alpha * x; acc f32 or x's dtype
void scale_(Tensor& x, float s);                              // x *= s
// x += v on i32 (decode positions advanced on the device, so a captured step needs no upload); wraps as int32.
void add_int_(Tensor& x, int32_t v);
void neg_exp(const Tensor& x, Tensor& out);  // out = -exp(x); f32 only; out may alias x
// acc += alpha * a * b; f32 only. The product is rounded before the add (the GPU kernel does not fuse them
// into an FMA), so the GPU gives the CPU build's bits and alpha = 1 is exactly acc + fl(a * b).
void addcmul_(Tensor& acc, const Tensor& a, const Tensor& b, float alpha = 1.f);
// dst = src / scale (quantise: a float src into any dst, FP8 or not), or, when src is FP8, dst = src * scale
// (dequantise; also FP8 -> FP8). scale > 0 and finite, a host float. Computed as src * (1/scale) in f32
// (the reciprocal rounded once: within one f32 ulp of the division), then rounded RNE into dst. The same
// dtype with scale 1 is a plain byte copy (the copy-bandwidth yardstick of the perf cases).
void cast(const Tensor& src, Tensor& dst, float scale = 1.f);
void sum_squares(const Tensor& x, Tensor& out);  // out (1) f32 += sum(x^2)  (gradient norms; deterministic)
void amax(const Tensor& x, Tensor& out);         // out (1) f32 = max|x|, 0 when x is empty, NaN if any x is
                                                 // NaN (an FP8 scale from it then shows the problem)

// fp64 references (the spec), over N elements. `cast_ref` takes src already decoded to values and returns
// the unrounded result (the caller rounds into the dst dtype).
void add_ref(const double* a, const double* b, double* out, int64_t N);
void add_inplace_ref(double* acc, const double* x, double alpha, int64_t N);
void scale_ref(double* x, double s, int64_t N);
void add_int_ref(int64_t* x, int64_t v, int64_t N);  // exact; the caller checks the int32 range
void neg_exp_ref(const double* x, double* out, int64_t N);
void addcmul_inplace_ref(double* acc, const double* a, const double* b, double alpha, int64_t N);
void cast_ref(const double* src, double* dst, double scale, bool src_is_fp8, int64_t N);
void sum_squares_ref(const double* x, double* out, int64_t N);
void amax_ref(const double* x, double* out, int64_t N);

// Backend implementations (arguments already checked).
void elementwise_add_cpu(const Tensor& a, const Tensor& b, Tensor& out);
void elementwise_add_inplace_cpu(Tensor& acc, const Tensor& x, float alpha);
void elementwise_scale_cpu(Tensor& x, float s);
void elementwise_add_int_cpu(Tensor& x, int32_t v);
void elementwise_neg_exp_cpu(const Tensor& x, Tensor& out);
void elementwise_addcmul_inplace_cpu(Tensor& acc, const Tensor& a, const Tensor& b, float alpha);
void elementwise_cast_cpu(const Tensor& src, Tensor& dst, float scale);
void elementwise_sum_squares_cpu(const Tensor& x, Tensor& out);
void elementwise_amax_cpu(const Tensor& x, Tensor& out);
void elementwise_add_gpu(const Tensor& a, const Tensor& b, Tensor& out);
void elementwise_add_inplace_gpu(Tensor& acc, const Tensor& x, float alpha);
void elementwise_scale_gpu(Tensor& x, float s);
void elementwise_add_int_gpu(Tensor& x, int32_t v);
void elementwise_neg_exp_gpu(const Tensor& x, Tensor& out);
void elementwise_addcmul_inplace_gpu(Tensor& acc, const Tensor& a, const Tensor& b, float alpha);
void elementwise_cast_gpu(const Tensor& src, Tensor& dst, float scale);
void elementwise_sum_squares_gpu(const Tensor& x, Tensor& out);
void elementwise_amax_gpu(const Tensor& x, Tensor& out);

}  // namespace anvil
