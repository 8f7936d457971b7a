#include "train/optimizer.h"

#include <cmath>
#include <map>

#include "io/safetensors.h"
#include "kernels/adamw/adamw.h"
#include "kernels/elementwise/elementwise.h"

namespace anvil {

namespace {

bool separate_copy(const Param& p) { return p.weight.defined() && p.weight.data_ptr() != p.master.data_ptr(); }

}  // namespace

AdamW::AdamW(CausalLM& model) : model_(model) {
  for (Param& p : model_.params()) {
    ANVIL_CHECK(p.master.defined() && p.grad.defined(), "AdamW", "trainable parameters (master and grad)",
                str("'", p.name, "' without them (load the model with trainable = true)"));
    m_.push_back(Tensor::zeros(p.master.shape(), DType::f32, p.master.device()));
    v_.push_back(Tensor::zeros(p.master.shape(), DType::f32, p.master.device()));
    // The kernels work on flat (n) buffers: contiguous views of any parameter shape.
    AdamWTensor t;
    t.param = p.master.view({-1});
    t.grad = p.grad.view({-1});
    t.m = m_.back().view({-1});
    t.v = v_.back().view({-1});
    if (separate_copy(p) && p.weight.dtype() != DType::f32 && p.weight.is_contiguous())
      t.param_out = p.weight.view({-1});
    else if (separate_copy(p))
      copies_unwritten_ = true;  // param_out stays undefined: sync_weights() casts this copy after each step
    ts_.push_back(t);
    grads_.push_back(p.grad);
  }
}

double AdamW::grad_norm() {
  auto& ps = model_.params();
  if (ps.empty()) return 0;
  Tensor acc = Tensor::zeros({1}, DType::f32, ps[0].grad.device());
  grad_sum_squares_multi(grads_, acc);
  return std::sqrt(double(acc.item()));
}

std::string AdamW::first_nonfinite_grad() {
  for (Param& p : model_.params()) {
    Tensor acc = Tensor::zeros({1}, DType::f32, p.grad.device());
    sum_squares(p.grad, acc);
    if (!std::isfinite(acc.item())) return p.name;
  }
  return "";
}

void AdamW::step(const OptimConfig& o, double lr, double grad_scale) {
  step_++;
  auto& ps = model_.params();
  ANVIL_CHECK(ps.size() == ts_.size(), "AdamW::step", str(ts_.size(), " parameters (as at construction)"),
              ps.size());
  if (!ps.empty()) {
    AdamWParams a;  // weight_decay stays 0: each tensor carries its own
    a.lr = float(lr);
    a.beta1 = float(o.beta1);
    a.beta2 = float(o.beta2);
    a.eps = float(o.eps);
    a.step = step_;
    a.grad_scale = float(grad_scale);
    for (size_t i = 0; i < ps.size(); i++) ts_[i].weight_decay = ps[i].decay ? float(o.weight_decay) : 0.f;
    adamw_step_multi(ts_, a);
  }
  // Every compute copy is current when adamw wrote it or it is the master itself: then only the state derived
  // from the masters needs refreshing. sync_weights() casts every parameter again (one launch each: 242 for
  // Mamba-130m), so it runs only for a separate copy adamw could not write (f32 or strided); it refreshes the
  // derived state too.
  if (copies_unwritten_) model_.sync_weights();
  else model_.refresh_derived();
}

void AdamW::save(const std::string& path) const {
  NamedTensors t;
  const auto& ps = model_.params();
  for (size_t i = 0; i < ps.size(); i++) {
    t.emplace_back(ps[i].name + ".exp_avg", m_[i]);
    t.emplace_back(ps[i].name + ".exp_avg_sq", v_[i]);
    if (separate_copy(ps[i])) t.emplace_back(ps[i].name + ".master", ps[i].master);
  }
  save_safetensors(path, t, {{"format", "anvil-adamw"}, {"step", std::to_string(step_)}});
}

bool AdamW::load(const std::string& path) {
  SafetensorsFile f(path);
  auto meta = f.metadata();
  ANVIL_CHECK(meta["format"] == "anvil-adamw" && !meta["step"].empty(), "optimizer state",
              "metadata format = anvil-adamw with a step", str("other metadata in '", path, "'"));
  int64_t step = std::stoll(meta["step"]);
  auto& ps = model_.params();
  bool masters = false;
  for (size_t i = 0; i < ps.size(); i++) {
    for (const char* suffix : {".exp_avg", ".exp_avg_sq"})
      ANVIL_CHECK(f.contains(ps[i].name + suffix), "optimizer state", str("tensor '", ps[i].name, suffix, "'"),
                  str("none in '", path, "' (a checkpoint of another model?)"));
    load_into(m_[i], f.get(ps[i].name + ".exp_avg"));
    load_into(v_[i], f.get(ps[i].name + ".exp_avg_sq"));
    if (f.contains(ps[i].name + ".master")) {
      load_into(ps[i].master, f.get(ps[i].name + ".master"));
      masters = true;
    }
  }
  step_ = step;
  return masters;
}

}  // namespace anvil
