// CPU AdamW: one pass over the flat buffers, OpenMP-parallel and vectorisable (no branches in the loop).
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/adamw/adamw_math.h"

namespace anvil {

template <class TO>
static void step(float* p, const float* g, float* m, float* v, TO* out, int64_t n, AdamWScalars s) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; i++) {
    adamw_update(s, p[i], g[i], m[i], v[i]);
    if constexpr (!std::is_void_v<TO>) out[i] = from_f32<TO>(p[i]);
  }
}

void adamw_step_cpu(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out) {
  const AdamWScalars s = adamw_scalars(p);
  float *pp = param.data<float>(), *pm = m.data<float>(), *pv = v.data<float>();
  const float* pg = grad.data<float>();
  const int64_t n = param.numel();
  if (!param_out.defined()) return step<void>(pp, pg, pm, pv, nullptr, n, s);
  ANVIL_DISPATCH_FLOAT(param_out.dtype(), T, step<T>(pp, pg, pm, pv, param_out.data<T>(), n, s));
}

}  // namespace anvil
