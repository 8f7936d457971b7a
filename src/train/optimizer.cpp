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
  }
}

double AdamW::grad_norm() {
  auto& ps = model_.params();
  if (ps.empty()) return 0;
  Tensor acc = Tensor::zeros({1}, DType::f32, ps[0].grad.device());
  for (Param& p : ps) sum_squares(p.grad, acc);
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
  bool all_written = true;  // every compute copy written by adamw_step itself
  auto& ps = model_.params();
  for (size_t i = 0; i < ps.size(); i++) {
    Param& p = ps[i];
    AdamWParams a;
    a.lr = float(lr);
    a.beta1 = float(o.beta1);
    a.beta2 = float(o.beta2);
    a.eps = float(o.eps);
    a.weight_decay = p.decay ? float(o.weight_decay) : 0.f;
    a.step = step_;
    a.grad_scale = float(grad_scale);
    // The kernel works on flat (n) buffers: contiguous views of any parameter shape.
    Tensor w = p.master.view({-1}), g = p.grad.view({-1}), m = m_[i].view({-1}), v = v_[i].view({-1}), out;
    if (separate_copy(p) && p.weight.dtype() != DType::f32 && p.weight.is_contiguous()) out = p.weight.view({-1});
    else all_written = false;  // out stays undefined: no second output
    adamw_step(w, g, m, v, a, out);
  }
  // f32 training (weight is the master) or copies the kernel cannot write: the model refreshes what it derives
  // from the masters (a no-op for plain f32 parameters).
  if (!all_written) model_.sync_weights();
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
