// adamw front-ends: argument checks and backend dispatch.
#include <cmath>
#include <string>

#include "kernels/adamw/adamw.h"

namespace anvil {

namespace {

// param, grad, m, v: f32 of one shape, contiguous, on one device; param_out (if any) bf16/f16 of that shape.
// `prefix` names the tensor in a list ("ts[3]."), empty for adamw_step.
void check_buffers(const char* op, const std::string& prefix, const Tensor& param, const Tensor& grad,
                   const Tensor& m, const Tensor& v, const Tensor& param_out) {
  const std::string pname = prefix + "param";
  check_dtype(op, pname.c_str(), param, DType::f32);
  check_contiguous(op, pname.c_str(), param);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"grad", &grad}, {"m", &m}, {"v", &v}}) {
    const std::string arg = prefix + name;
    check_shape(op, arg.c_str(), *t, param.shape());
    check_dtype(op, arg.c_str(), *t, DType::f32);
    check_contiguous(op, arg.c_str(), *t);
    check_same_device(op, param, pname.c_str(), *t, arg.c_str());
  }
  if (param_out.defined()) {
    const std::string arg = prefix + "param_out";
    check_shape(op, arg.c_str(), param_out, param.shape());
    check_dtype_in(op, arg.c_str(), param_out, {DType::bf16, DType::f16});
    check_contiguous(op, arg.c_str(), param_out);
    check_same_device(op, param, pname.c_str(), param_out, arg.c_str());
  }
}

void check_weight_decay(const char* op, const std::string& what, float wd) {
  ANVIL_CHECK(std::isfinite(wd) && wd >= 0, op, str("a finite ", what, " >= 0"), wd);
}

// The scalars of AdamWParams other than weight_decay.
void check_params(const char* op, const AdamWParams& p) {
  ANVIL_CHECK(p.step >= 1, op, "step >= 1 (1-based, after increment)", p.step);
  ANVIL_CHECK(std::isfinite(p.lr) && p.lr >= 0, op, "a finite lr >= 0", p.lr);
  ANVIL_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op, "beta1 and beta2 in [0, 1)",
              str(p.beta1, ", ", p.beta2));
  ANVIL_CHECK(std::isfinite(p.eps) && p.eps >= 0, op, "a finite eps >= 0", p.eps);
  ANVIL_CHECK(std::isfinite(p.grad_scale), op, "a finite grad_scale", p.grad_scale);
}

}  // namespace

void adamw_step(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p, Tensor& param_out) {
  const char* op = "adamw_step";
  check_buffers(op, "", param, grad, m, v, param_out);
  check_params(op, p);
  check_weight_decay(op, "weight_decay", p.weight_decay);
  if (param.numel() == 0) return;
  if (param.device().is_cpu()) return adamw_step_cpu(param, grad, m, v, p, param_out);
#ifdef ANVIL_HAS_GPU
  return adamw_step_gpu(param, grad, m, v, p, param_out);
#endif
}

void adamw_step_multi(std::vector<AdamWTensor>& ts, const AdamWParams& p) {
  const char* op = "adamw_step_multi";
  ANVIL_CHECK(!ts.empty(), op, "at least one tensor", "an empty list");
  check_params(op, p);
  ANVIL_CHECK(p.weight_decay == 0, op, "AdamWParams::weight_decay = 0 (each AdamWTensor carries its own)",
              p.weight_decay);
  for (size_t i = 0; i < ts.size(); i++) {
    const AdamWTensor& t = ts[i];
    const std::string prefix = str("ts[", i, "].");
    check_buffers(op, prefix, t.param, t.grad, t.m, t.v, t.param_out);
    check_weight_decay(op, prefix + "weight_decay", t.weight_decay);
    if (i > 0) check_same_device(op, ts[0].param, "ts[0].param", t.param, (prefix + "param").c_str());
  }
  if (ts[0].param.device().is_cpu()) return adamw_step_multi_cpu(ts, p);
#ifdef ANVIL_HAS_GPU
  return adamw_step_multi_gpu(ts, p);
#endif
}

void grad_sum_squares_multi(const std::vector<Tensor>& xs, Tensor& out) {
  const char* op = "grad_sum_squares_multi";
  check_shape(op, "out", out, {1});
  check_dtype(op, "out", out, DType::f32);
  ANVIL_CHECK(!xs.empty(), op, "at least one tensor", "an empty list");
  for (size_t i = 0; i < xs.size(); i++) {
    const std::string arg = str("xs[", i, "]");
    check_dtype(op, arg.c_str(), xs[i], DType::f32);
    check_contiguous(op, arg.c_str(), xs[i]);
    check_same_device(op, out, "out", xs[i], arg.c_str());
  }
  if (out.device().is_cpu()) return grad_sum_squares_multi_cpu(xs, out);
#ifdef ANVIL_HAS_GPU
  return grad_sum_squares_multi_gpu(xs, out);
#endif
}

void zero_multi(const std::vector<Tensor>& xs) {
  const char* op = "zero_multi";
  ANVIL_CHECK(!xs.empty(), op, "at least one tensor", "an empty list");
  for (size_t i = 0; i < xs.size(); i++) {
    const std::string arg = str("xs[", i, "]");
    check_contiguous(op, arg.c_str(), xs[i]);
    if (i > 0) check_same_device(op, xs[0], "xs[0]", xs[i], arg.c_str());
  }
  if (xs[0].device().is_cpu()) return zero_multi_cpu(xs);
#ifdef ANVIL_HAS_GPU
  return zero_multi_gpu(xs);
#endif
}

}  // namespace anvil
