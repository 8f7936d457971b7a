// CPU causal_conv1d: channels in parallel (OpenMP), fp32 accumulation. The backward parallelises over d so
// each thread owns dw[d], dbias[d] and adds every batch into them without atomics.
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/causal_conv1d/causal_conv1d.h"

namespace anvil {
namespace {

inline float sigmoidf(float v) { return 1.f / (1.f + std::exp(-v)); }

// pre[t] for t in [0, L) of one channel.
template <class T>
void channel_pre(const T* xr, const float* wd, float b0, int64_t L, int W, float* pre) {
  for (int64_t t = 0; t < L; t++) {
    float s = b0;
    for (int k = 0; k < W; k++) {
      int64_t src = t - (W - 1) + k;
      if (src >= 0) s += wd[k] * to_f32(xr[src]);
    }
    pre[t] = s;
  }
}

template <class T>
void fwd(const T* x, const float* w, const float* bias, bool silu, T* out, int64_t B, int64_t D, int64_t L, int W) {
#pragma omp parallel
  {
    std::vector<float> pre(static_cast<size_t>(L));
#pragma omp for
    for (int64_t row = 0; row < B * D; row++) {
      const int64_t d = row % D;
      channel_pre(x + row * L, w + d * W, bias ? bias[d] : 0.f, L, W, pre.data());
      for (int64_t t = 0; t < L; t++) {
        float p = pre[size_t(t)];
        out[row * L + t] = from_f32<T>(silu ? p * sigmoidf(p) : p);
      }
    }
  }
}

template <class T>
void bwd(const T* dout, const T* x, const float* w, const float* bias, bool silu, T* dx, int64_t dx_sb,
         int64_t dx_sd, float* dw, float* dbias, int64_t B, int64_t D, int64_t L, int W) {
#pragma omp parallel
  {
    std::vector<float> pre(static_cast<size_t>(L)), dpre(static_cast<size_t>(L));
#pragma omp for
    for (int64_t d = 0; d < D; d++) {
      const float* wd = w + d * W;
      float dwl[4] = {0, 0, 0, 0}, dbl = 0;
      for (int64_t b = 0; b < B; b++) {
        const int64_t row = (b * D + d) * L, dxr = b * dx_sb + d * dx_sd;
        if (silu) channel_pre(x + row, wd, bias ? bias[d] : 0.f, L, W, pre.data());
        for (int64_t t = 0; t < L; t++) {
          float g = to_f32(dout[row + t]);
          if (silu) {
            float p = pre[size_t(t)], s = sigmoidf(p);
            g *= s * (1.f + p * (1.f - s));
          }
          dpre[size_t(t)] = g;
          dbl += g;
        }
        for (int64_t t = 0; t < L; t++) {
          float s = 0;
          for (int k = 0; k < W; k++) {
            int64_t dst = t + (W - 1) - k;
            if (dst < L) s += wd[k] * dpre[size_t(dst)];
          }
          dx[dxr + t] = from_f32<T>(s);
          for (int k = 0; k < W; k++) {
            int64_t src = t - (W - 1) + k;
            if (src >= 0) dwl[k] += dpre[size_t(t)] * to_f32(x[row + src]);
          }
        }
      }
      for (int k = 0; k < W; k++) dw[d * W + k] += dwl[k];
      if (dbias) dbias[d] += dbl;
    }
  }
}

template <class T>
void update(const T* x, T* st, const float* w, const float* bias, bool silu, T* out, int64_t B, int64_t D, int W) {
#pragma omp parallel for
  for (int64_t row = 0; row < B * D; row++) {
    const int64_t d = row % D;
    T* s = st + row * (W - 1);
    float p = bias ? bias[d] : 0.f;
    for (int k = 0; k < W - 1; k++) p += w[d * W + k] * to_f32(s[k]);
    p += w[d * W + W - 1] * to_f32(x[row]);
    out[row] = from_f32<T>(silu ? p * sigmoidf(p) : p);
    for (int k = 0; k + 1 < W - 1; k++) s[k] = s[k + 1];
    s[W - 2] = x[row];
  }
}

const float* opt(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* opt_mut(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

void causal_conv1d_fwd_cpu(const Tensor& x, const Tensor& w, const Tensor& bias, bool silu, Tensor& out) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       fwd<T>(x.data<T>(), w.data<float>(), opt(bias), silu, out.data<T>(), x.size(0), x.size(1),
                              x.size(2), int(w.size(1))));
}
void causal_conv1d_bwd_cpu(const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& bias, bool silu,
                           Tensor& dx, Tensor& dw, Tensor& dbias) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       bwd<T>(dout.data<T>(), x.data<T>(), w.data<float>(), opt(bias), silu, dx.data<T>(),
                              dx.stride(0), dx.stride(1), dw.data<float>(), opt_mut(dbias), x.size(0), x.size(1),
                              x.size(2), int(w.size(1))));
}
void causal_conv1d_update_cpu(const Tensor& x, Tensor& conv_state, const Tensor& w, const Tensor& bias, bool silu,
                              Tensor& out) {
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       update<T>(x.data<T>(), conv_state.data<T>(), w.data<float>(), opt(bias), silu,
                                 out.data<T>(), x.size(0), x.size(1), int(w.size(1))));
}

}  // namespace anvil
