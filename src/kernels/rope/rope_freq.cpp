// rope_inv_freq: the inverse frequencies, computed the way transformers computes them in fp32.
//
// transformers (modeling_rope_utils._compute_llama3_parameters, LlamaRotaryEmbedding's default) builds them
// with f32 tensor ops: exponent 2i/HD in f32, theta ** exponent, a reciprocal, then for llama3 the wavelength
// 2*pi / inv_freq (a reciprocal times f32(2*pi)) and the smoothing arithmetic, each op rounded to f32.
// Doing the llama3 part in double and rounding once at the end differs by one f32 ulp in 4 of the 64
// frequencies at theta 5e5, HD 128 (checked against transformers 5.24), so we repeat the f32 steps: each is
// done in double and rounded to float, which gives exactly the f32 result (53 >= 2*24+2 bits makes double
// rounding of + - * / innocuous) and leaves the compiler nothing to contract into an FMA.
#include <cmath>

#include "kernels/rope/rope.h"

namespace anvil {

namespace {
float f32_add(float a, float b) { return float(double(a) + double(b)); }
float f32_sub(float a, float b) { return float(double(a) - double(b)); }
float f32_mul(float a, float b) { return float(double(a) * double(b)); }
float f32_div(float a, float b) { return float(double(a) / double(b)); }
}  // namespace

std::vector<float> rope_inv_freq(const RopeConfig& cfg, int64_t head_dim) {
  const char* op = "rope_inv_freq";
  ANVIL_CHECK(head_dim > 0 && head_dim % 2 == 0, op, "an even head_dim > 0", head_dim);
  ANVIL_CHECK(cfg.theta > 1, op, "rope_theta > 1", cfg.theta);
  ANVIL_CHECK(cfg.type == "default" || cfg.type == "llama3", op, "rope_type 'default' or 'llama3'",
              "'" + cfg.type + "'");
  std::vector<float> inv(size_t(head_dim / 2));
  for (size_t i = 0; i < inv.size(); i++) {
    const float e = f32_div(float(2 * i), float(head_dim));
    // torch.pow(theta, f32 tensor) returns the correctly rounded f32 power at every theta/HD we compared.
    inv[i] = f32_div(1.f, float(std::pow(cfg.theta, double(e))));
  }
  if (cfg.type == "default") return inv;

  ANVIL_CHECK(cfg.factor > 0, op, "llama3 factor > 0", cfg.factor);
  ANVIL_CHECK(cfg.low_freq_factor > 0 && cfg.high_freq_factor > cfg.low_freq_factor, op,
              "0 < low_freq_factor < high_freq_factor", str(cfg.low_freq_factor, ", ", cfg.high_freq_factor));
  ANVIL_CHECK(cfg.original_max_position > 0, op, "original_max_position_embeddings > 0", cfg.original_max_position);
  // Python scalars meet f32 tensors: each is used as an f32 in the op (torch's scalar type promotion).
  const float factor = float(cfg.factor), low = float(cfg.low_freq_factor), orig = float(cfg.original_max_position);
  const float low_wavelen = float(cfg.original_max_position / cfg.low_freq_factor);
  const float high_wavelen = float(cfg.original_max_position / cfg.high_freq_factor);
  const float span = float(cfg.high_freq_factor - cfg.low_freq_factor);
  const float two_pi = float(2 * M_PI);
  for (float& f : inv) {
    const float wavelen = f32_mul(f32_div(1.f, f), two_pi);  // 2*pi / inv_freq is reciprocal() * 2*pi in torch
    float g = wavelen > low_wavelen ? f32_div(f, factor) : f;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {  // medium frequency: blend
      const float smooth = f32_div(f32_sub(f32_mul(f32_div(1.f, wavelen), orig), low), span);
      g = f32_add(f32_div(f32_mul(f32_sub(1.f, smooth), g), factor), f32_mul(smooth, g));
    }
    f = g;
  }
  return inv;
}

}  // namespace anvil
