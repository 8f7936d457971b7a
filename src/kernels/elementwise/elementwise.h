// elementwise: the small ops the models and the trainer need between the big kernels.
//
// Shapes:  any, contiguous; all tensors of one call have the same number of elements.
// Dtypes:  f32/bf16/f16 unless said; `cast` converts between any float dtypes, FP8 included (with a scale).
#pragma once
#include "core/tensor.h"

namespace anvil {

void add(const Tensor& a, const Tensor& b, Tensor& out);                 // out = a + b (out may alias a or b)
void add_(Tensor& acc, const Tensor& x, float alpha = 1.f);              // acc += alpha * x (acc f32 or x's dtype)
void scale_(Tensor& x, float s);                                          // x *= s
void cast(const Tensor& src, Tensor& dst, float scale = 1.f);            // dst = src / scale, rounded RNE
                                                                          // (saturating for FP8 dst); for FP8 src,
                                                                          // dst = src * scale
void sum_squares(const Tensor& x, Tensor& out);                          // out (1) f32 += sum(x^2) (grad norms)
void amax(const Tensor& x, Tensor& out);                                 // out (1) f32 = max|x| (FP8 scales)

void elementwise_cpu_add(const Tensor& a, const Tensor& b, Tensor& out);
void elementwise_gpu_add(const Tensor& a, const Tensor& b, Tensor& out);

}  // namespace anvil
