// CPU selective scan: channels in parallel (OpenMP), fp32 state and accumulation. The forward walks each
// channel once; the backward keeps that channel's L*N states in a per-thread buffer (L=2048, N=16: 128 KB)
// instead of recomputing from the saved chunk states (the GPU does that; the CPU has the memory).
// The backward parallelises over d, so dA, dD, ddelta_bias rows belong to one thread; dB and dC, summed over
// the channels of a group, go through per-thread buffers added up at the end.
//
// The state loops run over n with unit stride, so that they vectorise: Bm and Cm are first copied to f32 in
// step-major order, (B, G, L, N), shared by the group's channels; exp is cpu::exp_simd instead of a libm call;
// dB and dC are summed step-major and transposed once at the end. Mamba-130m CPU training (f32, batch 1 x 256,
// 2 cores) went from 77-83 to 103-112 tok/s with it (docs/cpu.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/chunked_sum.h"
#include "backends/cpu/simd.h"
#include "core/dispatch.h"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {

inline float sigmoidf(float v) { return 1.f / (1.f + std::exp(-v)); }

// One row's dt: raw = delta + bias, then softplus'd (cpu::softplus_simd, so the loop vectorises: libm's log1pf and
// expf were ~6% of a Mamba-130m CPU step). sg (optional) gets d dt / d delta = e / (1 + e), 1 above 20. The forward
// and the backward both take their dt here, so the backward's recomputed output keeps the forward's bits.
template <class T>
void row_dt(const T* delta, float bias, bool softplus, int64_t L, float* dt, float* sg) {
  for (int64_t t = 0; t < L; t++) dt[t] = to_f32(delta[t]) + bias;
  if (!softplus) {
    if (sg) std::fill(sg, sg + L, 1.f);
    return;
  }
  if (sg) {
#pragma omp simd
    for (int64_t t = 0; t < L; t++) {
      const float e = cpu::exp_simd(dt[t]);
      sg[t] = dt[t] > 20.f ? 1.f : e / (1.f + e);
    }
  }
#pragma omp simd
  for (int64_t t = 0; t < L; t++) dt[t] = cpu::softplus_simd(dt[t]);
}

template <class T>
const T* opt(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }
template <class T>
T* opt_mut(Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }

template <class T>
struct Args {
  const T *u, *delta, *Bm, *Cm, *z;
  const float *A, *D_skip, *delta_bias;
  bool softplus;
  ScanDims s;
};

// x (BG, N, L) in T -> (BG, L, N) in f32: a step's N values contiguous.
template <class T>
std::vector<float> step_major(const T* x, int64_t BG, int64_t N, int64_t L) {
  std::vector<float> out(static_cast<size_t>(BG * L * N));
#pragma omp parallel for collapse(2)
  for (int64_t bg = 0; bg < BG; bg++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t t = 0; t < L; t++) out[size_t((bg * L + t) * N + n)] = to_f32(x[(bg * N + n) * L + t]);
  return out;
}

// One step of a channel's recurrence over its N states, h = exp(dt A) hp + du B (hp may be h), and the step's
// sum_n C h. The sum runs in a fixed order, 4 running sums then (s0 + s1) + (s2 + s3), whatever the vector width:
// the forward and the backward's recomputation of the output then give the same bits. a (optional) receives
// exp(dt A), which the backward's reverse pass needs again; the test sits outside the loops, since a conditional
// store inside stopped them vectorising.
// Built for AVX-512, AVX2 and the x86-64 baseline, picked at load time (backends/cpu/simd.h).
ANVIL_CPU_CLONES float scan_step(int64_t N, const float* A, float dt, float du, const float* Bt, const float* Ct,
                                 const float* hp, float* h, float* a, float* ch) {
  if (a) {
#pragma omp simd
    for (int64_t n = 0; n < N; n++) {
      a[n] = cpu::exp_simd(dt * A[n]);
      h[n] = a[n] * hp[n] + du * Bt[n];
      ch[n] = Ct[n] * h[n];
    }
  } else {
#pragma omp simd
    for (int64_t n = 0; n < N; n++) {
      h[n] = cpu::exp_simd(dt * A[n]) * hp[n] + du * Bt[n];
      ch[n] = Ct[n] * h[n];
    }
  }
  float s[4] = {0.f, 0.f, 0.f, 0.f};
  int64_t n = 0;
  for (; n + 4 <= N; n += 4)
    for (int j = 0; j < 4; j++) s[j] += ch[n + j];
  for (int j = 0; n < N; n++, j++) s[j] += ch[n];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// One step of the reverse pass over a channel's N states (step t: dy, dt, dt u; B, C; the states before and after,
// hp and ht; av = exp(dt A)). q carries d(loss)/dh from step t + 1 to t; dA, dB, dC accumulate; ddt and gB
// (sum_n G B) are added to. Vector lanes are states, so ddt and gB are summed in the order of the vector width.
ANVIL_CPU_CLONES void scan_step_back(int64_t N, const float* A, float dy, float dt, float dtu, const float* Bs,
                                     const float* Cs, const float* hp, const float* ht, const float* av, float* q,
                                     float* dA, float* dBs, float* dCs, float& ddt_out, float& gB_out) {
  float ddt = 0.f, gB = 0.f;
#pragma omp simd reduction(+ : ddt, gB)
  for (int64_t n = 0; n < N; n++) {
    const float G = dy * Cs[n] + q[n];
    dCs[n] += dy * ht[n];
    dBs[n] += G * dtu;
    gB += G * Bs[n];
    const float w = G * hp[n] * av[n];
    ddt += A[n] * w;
    dA[n] += w * dt;
    q[n] = G * av[n];
  }
  ddt_out += ddt;
  gB_out += gB;
}

template <class T>
void fwd(const Args<T>& a, T* out, float* states) {
  const ScanDims s = a.s;
  const int64_t L = s.L, N = s.N, per_group = s.D / s.G, nc = selective_scan_states(L, N),
                every = selective_scan_state_every(N);
  const std::vector<float> Bt = step_major(a.Bm, s.B * s.G, N, L), Ct = step_major(a.Cm, s.B * s.G, N, L);
#pragma omp parallel
  {
    std::vector<float> h(static_cast<size_t>(N)), ch(static_cast<size_t>(N)), dts(static_cast<size_t>(L));
#pragma omp for
    for (int64_t row = 0; row < s.B * s.D; row++) {
      const int64_t b = row / s.D, d = row % s.D, g = d / per_group, base = row * L;
      const float* Bg = Bt.data() + (b * s.G + g) * L * N;
      const float* Cg = Ct.data() + (b * s.G + g) * L * N;
      std::fill(h.begin(), h.end(), 0.f);
      row_dt(a.delta + base, a.delta_bias ? a.delta_bias[d] : 0.f, a.softplus, L, dts.data(), nullptr);
      for (int64_t t = 0; t < L; t++) {
        const float dt = dts[size_t(t)];
        const float uu = to_f32(a.u[base + t]);
        float y = scan_step(N, a.A + d * N, dt, dt * uu, Bg + t * N, Cg + t * N, h.data(), h.data(), nullptr,
                            ch.data());
        if (a.D_skip) y += a.D_skip[d] * uu;
        if (a.z) {
          const float zz = to_f32(a.z[base + t]);
          y *= zz * sigmoidf(zz);
        }
        out[base + t] = from_f32<T>(y);
        if ((t + 1) % every == 0 || t + 1 == L)
          for (int64_t n = 0; n < N; n++) states[(row * nc + t / every) * N + n] = h[n];
      }
    }
  }
}

template <class T>
struct Grads {
  T *du, *ddelta, *dB, *dC, *dz;
  float *dA, *dD, *ddelta_bias;
  T* out;  // the forward's output, recomputed (optional)
  RowStrides z_rows, y_rows;  // where dz's and out's rows start: (B, D, L) or (D, B, L) order
};

template <class T>
void bwd(const Args<T>& a, const T* dout, const Grads<T>& gr) {
  const ScanDims s = a.s;
  const int64_t L = s.L, N = s.N, per_group = s.D / s.G, nBC = s.B * s.G * N * L;
  const std::vector<float> Bt = step_major(a.Bm, s.B * s.G, N, L), Ct = step_major(a.Cm, s.B * s.G, N, L);
  // dB and dC (one buffer: dB then dC, each (B, G, L, N)) sum over the channels of a group: deterministic chunks
  // of channels, at most 16 (2 * nBC floats each).
  auto dBC = cpu::chunked_sum(s.D, 2 * nBC, [&](int64_t d0, int64_t d1, float* dBl) {
    float* dCl = dBl + nBC;
    const size_t LN = static_cast<size_t>(L * N);
    std::vector<float> h(LN), ea(LN), ch(static_cast<size_t>(N)), q(static_cast<size_t>(N)),
        zero(static_cast<size_t>(N), 0.f), dA(static_cast<size_t>(N)), dt(static_cast<size_t>(L)),
        sg(static_cast<size_t>(L)), dy(static_cast<size_t>(L));
    for (int64_t d = d0; d < d1; d++) {
      const int64_t g = d / per_group;
      const float* An = a.A + d * N;
      for (int64_t b = 0; b < s.B; b++) {
        const int64_t base = (b * s.D + d) * L, bc = (b * s.G + g) * L * N;
        const int64_t zr = gr.z_rows.at(b, d), yr = gr.y_rows.at(b, d);
        const float* Bg = Bt.data() + bc;
        const float* Cg = Ct.data() + bc;
        row_dt(a.delta + base, a.delta_bias ? a.delta_bias[d] : 0.f, a.softplus, L, dt.data(), sg.data());
        for (int64_t t = 0; t < L; t++) {
          const float uu = to_f32(a.u[base + t]);
          float y = scan_step(N, An, dt[t], dt[t] * uu, Bg + t * N, Cg + t * N,
                              t > 0 ? &h[(t - 1) * N] : zero.data(), &h[t * N], &ea[t * N], ch.data());
          if (a.D_skip) y += a.D_skip[d] * uu;
          const float go = to_f32(dout[base + t]);
          dy[t] = go;
          if (a.z) {
            const float zz = to_f32(a.z[base + t]), sz = sigmoidf(zz);
            gr.dz[zr + t] = from_f32<T>(go * y * sz * (1.f + zz * (1.f - sz)));
            dy[t] = go * zz * sz;
            if (gr.out) gr.out[yr + t] = from_f32<T>(y * (zz * sz));  // as fwd() rounds it: y *= zz * sigmoid
          } else if (gr.out) {
            gr.out[yr + t] = from_f32<T>(y);
          }
        }
        std::fill(q.begin(), q.end(), 0.f);
        std::fill(dA.begin(), dA.end(), 0.f);
        float dD_acc = 0.f, ddb_acc = 0.f;
        for (int64_t t = L - 1; t >= 0; t--) {
          const float uu = to_f32(a.u[base + t]), dyt = dy[t], dtt = dt[t], dtu = dtt * uu;
          float ddt = 0.f, gB = 0.f;
          scan_step_back(N, An, dyt, dtt, dtu, Bg + t * N, Cg + t * N, t > 0 ? &h[(t - 1) * N] : zero.data(),
                         &h[t * N], &ea[t * N], q.data(), dA.data(), dBl + bc + t * N, dCl + bc + t * N, ddt, gB);
          ddt += gB * uu;
          gr.du[base + t] = from_f32<T>(gB * dtt + (a.D_skip ? dyt * a.D_skip[d] : 0.f));
          const float dd = ddt * sg[t];
          gr.ddelta[base + t] = from_f32<T>(dd);
          dD_acc += dyt * uu;
          ddb_acc += dd;
        }
        for (int64_t n = 0; n < N; n++) gr.dA[d * N + n] += dA[n];
        if (gr.dD) gr.dD[d] += dD_acc;
        if (gr.ddelta_bias) gr.ddelta_bias[d] += ddb_acc;
      }
    }
  }, /*max_chunks=*/16);
  // Back to (B, G, N, L) and the gradients' dtype.
  const int64_t BG = s.B * s.G;
#pragma omp parallel for collapse(2)
  for (int64_t bg = 0; bg < BG; bg++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t t = 0; t < L; t++) {
        const size_t src = size_t((bg * L + t) * N + n);
        gr.dB[(bg * N + n) * L + t] = from_f32<T>(dBC[src]);
        gr.dC[(bg * N + n) * L + t] = from_f32<T>(dBC[size_t(nBC) + src]);
      }
}

template <class T>
Args<T> args(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
             const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias, bool softplus) {
  return {u.data<T>(), delta.data<T>(), Bm.data<T>(), Cm.data<T>(), opt<T>(z), A.data<float>(),
          opt<float>(D_skip), opt<float>(delta_bias), softplus,
          ScanDims{u.size(0), u.size(1), u.size(2), A.size(1), Bm.size(1)}};
}

}  // namespace

void selective_scan_fwd_cpu(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                            bool delta_softplus, Tensor& out, Tensor& states) {
  ANVIL_DISPATCH_FLOAT(u.dtype(), T,
                       fwd<T>(args<T>(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus), out.data<T>(),
                              states.data<float>()));
}

void selective_scan_bwd_cpu(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D_skip, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus, const Tensor& states, Tensor& du,
                            Tensor& ddelta, Tensor& dA, Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz,
                            Tensor& ddelta_bias, Tensor& out) {
  (void)states;  // the CPU keeps every state of a channel instead (see the top of this file)
  ANVIL_DISPATCH_FLOAT(u.dtype(), T, {
    Grads<T> g{du.data<T>(),       ddelta.data<T>(),  dB.data<T>(),         dC.data<T>(), opt_mut<T>(dz),
               dA.data<float>(), opt_mut<float>(dD), opt_mut<float>(ddelta_bias), opt_mut<T>(out),
               row_strides(dz, u), row_strides(out, u)};
    bwd<T>(args<T>(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus), dout.data<T>(), g);
  });
}

template <class T>
static void state_update(float* state, const T* x, const T* dtp, const float* A, const T* Bm, const T* Cm,
                         const float* D_skip, const T* z, const float* dt_bias, bool sp, T* out, ScanDims s) {
  const int64_t N = s.N, per_group = s.D / s.G;
#pragma omp parallel for
  for (int64_t i = 0; i < s.B * s.D; i++) {
    const int64_t b = i / s.D, d = i % s.D, g = d / per_group;
    float step = to_f32(dtp[i]) + (dt_bias ? dt_bias[d] : 0.f);
    if (sp) step = cpu::softplus_simd(step);  // as row_dt: prefill and decode take the same softplus
    const float xx = to_f32(x[i]);
    float y = D_skip ? D_skip[d] * xx : 0.f;
    for (int64_t n = 0; n < N; n++) {
      float& h = state[i * N + n];
      h = std::exp(step * A[d * N + n]) * h + step * to_f32(Bm[(b * s.G + g) * N + n]) * xx;
      y += to_f32(Cm[(b * s.G + g) * N + n]) * h;
    }
    if (z) {
      const float zz = to_f32(z[i]);
      y *= zz * sigmoidf(zz);
    }
    out[i] = from_f32<T>(y);
  }
}

void selective_state_update_cpu(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                                const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                                bool dt_softplus, Tensor& out) {
  const ScanDims s{x.size(0), x.size(1), 1, A.size(1), Bm.size(1)};
  ANVIL_DISPATCH_FLOAT(x.dtype(), T,
                       state_update<T>(state.data<float>(), x.data<T>(), dt.data<T>(), A.data<float>(),
                                       Bm.data<T>(), Cm.data<T>(), opt<float>(D_skip), opt<T>(z),
                                       opt<float>(dt_bias), dt_softplus, out.data<T>(), s));
}

}  // namespace anvil
