// rope: rotary position embedding in the Hugging Face "rotate_half" layout: for i < HD/2, the pair
// (x[i], x[i + HD/2]) is rotated by angle pos * inv_freq[i]:
//   y[i] = x[i] cos - x[i + HD/2] sin;   y[i + HD/2] = x[i + HD/2] cos + x[i] sin.
//
// Shapes:  x, y, dy, dx: (N, NH, HD) with N = B*T tokens (q or k heads), HD even;  pos: (N) i32 (any value,
//          negative included);  inv_freq: (HD/2) f32 (from rope_inv_freq).  All on one device.
// Dtypes:  x/y f32/bf16/f16 (the same). y may be x (in place).
// Numerics: the angle is the f32 product float(pos) * inv_freq[i], as transformers computes it (at
//          pos = 100000 it differs from the exact angle by up to 4e-3 rad: the reference follows the contract,
//          not the exact math); cos/sin of it in fp32, one rounding into y. (transformers then rounds cos and
//          sin to bf16 before multiplying: we do not, so we are closer to the fp64 result.)
// Gradients: dx = rotation of dy by -angle (dx may be dy, in place). The rotation is linear in x and pos is
//          an integer, so there is nothing else to differentiate.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil {

// rope_theta and Llama 3.1's frequency scaling ("rope_type": "llama3"): wavelengths longer than
// original_max_position / low_freq_factor are divided by `factor`, shorter than .../high_freq_factor kept,
// and those between blended smoothly.
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // "default" or "llama3"
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192;
};
// (HD/2) f32 values, bit-identical to transformers' (5.24) default and llama3 inverse frequencies: the same
// f32 operations in the same order (tests/models/rope_freq_test.cpp pins them). Throws on a bad config.
std::vector<float> rope_inv_freq(const RopeConfig& cfg, int64_t head_dim);

void rope_fwd(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y);
void rope_bwd(const Tensor& dy, const Tensor& pos, const Tensor& inv_freq, Tensor& dx);

void rope_fwd_ref(const double* x, const int32_t* pos, const double* inv_freq, double* y, int64_t N, int64_t NH,
                  int64_t HD);
void rope_bwd_ref(const double* dy, const int32_t* pos, const double* inv_freq, double* dx, int64_t N, int64_t NH,
                  int64_t HD);

// Backends serve both directions: inverse = true rotates by -angle (the backward).
void rope_fwd_cpu(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y, bool inverse);
void rope_fwd_gpu(const Tensor& x, const Tensor& pos, const Tensor& inv_freq, Tensor& y, bool inverse);

}  // namespace anvil
