// selective_scan front-ends: argument checks and backend dispatch.
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {

void check_like(const char* op, const char* name, const Tensor& t, const Tensor& ref, const char* ref_name) {
  check_shape(op, name, t, ref.shape());
  check_dtype(op, name, t, ref.dtype());
  check_contiguous(op, name, t);
  check_same_device(op, ref, ref_name, t, name);
}

void check_f32_vec(const char* op, const char* name, const Tensor& t, const Shape& shape, const Tensor& u) {
  check_shape(op, name, t, shape);
  check_dtype(op, name, t, DType::f32);
  check_contiguous(op, name, t);
  check_same_device(op, u, "u", t, name);
}

// A gradient that exists only when its input does; optional even then.
void check_opt_grad(const char* op, const char* name, const Tensor& grad, const Tensor& input, const char* in_name,
                    const Shape& shape, const Tensor& u) {
  if (!grad.defined()) return;
  ANVIL_CHECK(input.defined(), op, str(name, " undefined when ", in_name, " is absent"), grad.describe());
  check_f32_vec(op, name, grad, shape, u);
}

// u (B, D, L), delta, A (D, N), Bm/Cm (B, G, N, L), D_skip, z, delta_bias. Returns N.
int64_t check_inputs(const char* op, const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                     const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias) {
  check_dim(op, "u", u, 3);
  check_dtype_in(op, "u", u, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "u", u);
  ANVIL_CHECK(u.numel() > 0, op, "u (B, D, L) with B, D, L > 0", u.describe());
  const int64_t B = u.size(0), D = u.size(1), L = u.size(2);
  check_like(op, "delta", delta, u, "u");
  check_dim(op, "A", A, 2);
  const int64_t N = A.size(1);
  ANVIL_CHECK(N >= 1 && N <= kSelectiveScanMaxN, op, str("A (D, N) with 1 <= N <= ", kSelectiveScanMaxN),
              A.describe());
  check_f32_vec(op, "A", A, {D, N}, u);
  check_dim(op, "Bm", Bm, 4);
  const int64_t G = Bm.size(1);
  ANVIL_CHECK(G >= 1 && D % G == 0, op, str("Bm (B, G, N, L) with G dividing D=", D), Bm.describe());
  check_shape(op, "Bm", Bm, {B, G, N, L});
  check_dtype(op, "Bm", Bm, u.dtype());
  check_contiguous(op, "Bm", Bm);
  check_same_device(op, u, "u", Bm, "Bm");
  check_like(op, "Cm", Cm, Bm, "Bm");
  if (D_skip.defined()) check_f32_vec(op, "D_skip", D_skip, {D}, u);
  if (z.defined()) check_like(op, "z", z, u, "u");
  if (delta_bias.defined()) check_f32_vec(op, "delta_bias", delta_bias, {D}, u);
  return N;
}

}  // namespace

void selective_scan_fwd(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                        const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias, bool delta_softplus,
                        Tensor& out, Tensor& states) {
  const char* op = "selective_scan_fwd";
  const int64_t N = check_inputs(op, u, delta, A, Bm, Cm, D_skip, z, delta_bias);
  check_like(op, "out", out, u, "u");
  check_f32_vec(op, "states", states, {u.size(0), u.size(1), selective_scan_states(u.size(2), N), N}, u);
  if (u.device().is_cpu())
    return selective_scan_fwd_cpu(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus, out, states);
#ifdef ANVIL_HAS_GPU
  return selective_scan_fwd_gpu(u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus, out, states);
#endif
}

void selective_scan_bwd(const Tensor& dout, const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                        const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& delta_bias,
                        bool delta_softplus, const Tensor& states, Tensor& du, Tensor& ddelta, Tensor& dA,
                        Tensor& dB, Tensor& dC, Tensor& dD, Tensor& dz, Tensor& ddelta_bias, Tensor* out) {
  const char* op = "selective_scan_bwd";
  const int64_t N = check_inputs(op, u, delta, A, Bm, Cm, D_skip, z, delta_bias);
  const int64_t D = u.size(1);
  check_f32_vec(op, "states", states, {u.size(0), D, selective_scan_states(u.size(2), N), N}, u);
  check_like(op, "dout", dout, u, "u");
  check_like(op, "du", du, u, "u");
  check_like(op, "ddelta", ddelta, u, "u");
  check_f32_vec(op, "dA", dA, {D, N}, u);
  check_like(op, "dB", dB, Bm, "Bm");
  check_like(op, "dC", dC, Bm, "Bm");
  check_opt_grad(op, "dD", dD, D_skip, "D_skip", {D}, u);
  check_opt_grad(op, "ddelta_bias", ddelta_bias, delta_bias, "delta_bias", {D}, u);
  // dz and out may also be (D, B, L) buffers seen as (B, D, L): the Mamba backward's weight gradients then read
  // them as (D, B * L) matrices, one product with K = B * L instead of B products.
  auto check_rows_like_u = [&](const char* name, const Tensor& t) {
    check_rows_bdl_or_dbl(op, name, t, u.shape());
    check_dtype(op, name, t, u.dtype());
    check_same_device(op, u, "u", t, name);
  };
  if (z.defined()) check_rows_like_u("dz", dz);
  else ANVIL_CHECK(!dz.defined(), op, "dz undefined when z is absent", dz.describe());
  Tensor no_out;
  Tensor& y = out ? *out : no_out;
  if (out) check_rows_like_u("out", *out);
  if (u.device().is_cpu())
    return selective_scan_bwd_cpu(dout, u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus, states, du,
                                  ddelta, dA, dB, dC, dD, dz, ddelta_bias, y);
#ifdef ANVIL_HAS_GPU
  return selective_scan_bwd_gpu(dout, u, delta, A, Bm, Cm, D_skip, z, delta_bias, delta_softplus, states, du,
                                ddelta, dA, dB, dC, dD, dz, ddelta_bias, y);
#endif
}

void selective_state_update(Tensor& state, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                            const Tensor& Cm, const Tensor& D_skip, const Tensor& z, const Tensor& dt_bias,
                            bool dt_softplus, Tensor& out) {
  const char* op = "selective_state_update";
  check_dim(op, "x", x, 2);
  check_dtype_in(op, "x", x, {DType::f32, DType::bf16, DType::f16});
  check_contiguous(op, "x", x);
  ANVIL_CHECK(x.numel() > 0, op, "x (B, D) with B, D > 0", x.describe());
  const int64_t B = x.size(0), D = x.size(1);
  check_like(op, "dt", dt, x, "x");
  check_dim(op, "A", A, 2);
  const int64_t N = A.size(1);
  ANVIL_CHECK(N >= 1 && N <= kSelectiveScanMaxN, op, str("A (D, N) with 1 <= N <= ", kSelectiveScanMaxN),
              A.describe());
  check_f32_vec(op, "A", A, {D, N}, x);
  check_f32_vec(op, "state", state, {B, D, N}, x);
  check_dim(op, "Bm", Bm, 3);
  const int64_t G = Bm.size(1);
  ANVIL_CHECK(G >= 1 && D % G == 0, op, str("Bm (B, G, N) with G dividing D=", D), Bm.describe());
  check_shape(op, "Bm", Bm, {B, G, N});
  check_dtype(op, "Bm", Bm, x.dtype());
  check_contiguous(op, "Bm", Bm);
  check_same_device(op, x, "x", Bm, "Bm");
  check_like(op, "Cm", Cm, Bm, "Bm");
  if (D_skip.defined()) check_f32_vec(op, "D_skip", D_skip, {D}, x);
  if (z.defined()) check_like(op, "z", z, x, "x");
  if (dt_bias.defined()) check_f32_vec(op, "dt_bias", dt_bias, {D}, x);
  check_like(op, "out", out, x, "x");
  if (x.device().is_cpu())
    return selective_state_update_cpu(state, x, dt, A, Bm, Cm, D_skip, z, dt_bias, dt_softplus, out);
#ifdef ANVIL_HAS_GPU
  return selective_state_update_gpu(state, x, dt, A, Bm, Cm, D_skip, z, dt_bias, dt_softplus, out);
#endif
}

}  // namespace anvil
