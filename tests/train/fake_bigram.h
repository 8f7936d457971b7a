// A tiny CausalLM for trainer tests: a bigram model, logits[t] = W[ids[t]] + b, with hand-written gradients on
// CPU tensors. Deterministic, so a resumed run must reproduce an uninterrupted one bit for bit. Compute dtype
// f32 (weight is the master) or bf16 (a separate rounded copy, as GPU training keeps). Fault hooks: save() can
// throw after writing part of the directory; forward_backward can return NaN with a NaN gradient.
#pragma once
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/rng.h"
#include "io/safetensors.h"
#include "models/model.h"

namespace anvil::train_test {

class FakeBigram final : public CausalLM {
 public:
  FakeBigram(int64_t vocab, DType dtype, uint64_t seed) : V_(vocab), dtype_(dtype) {
    info_.arch = "fake-bigram";
    info_.vocab = vocab;
    info_.width = vocab;
    info_.layers = 1;
    info_.n_params = vocab * vocab + vocab;
    std::vector<float> w(static_cast<size_t>(vocab * vocab)), b(static_cast<size_t>(vocab));
    for (size_t i = 0; i < w.size(); i++) w[i] = 0.1f * rng_normal(seed, i);
    for (size_t i = 0; i < b.size(); i++) b[i] = 0.1f * rng_normal(seed + 1, i);
    add("bigram.weight", Tensor::from_floats(w, {vocab, vocab}, DType::f32), true);
    add("bigram.bias", Tensor::from_floats(b, {vocab}, DType::f32), false);
  }

  const ModelInfo& info() const override { return info_; }
  Device device() const override { return Device::cpu(); }
  DType compute_dtype() const override { return dtype_; }
  std::vector<Param>& params() override { return params_; }

  void sync_weights() override {
    syncs++;
    for (Param& p : params_)
      if (p.weight.data_ptr() != p.master.data_ptr()) p.weight.copy_(round_copy(p.master));
    refresh_derived();
  }
  void refresh_derived() override { refreshes++; }  // nothing derived: counted for the optimizer's tests

  float forward_backward(const Tensor& ids, const Tensor& targets, float grad_weight, const TrainOptions&) override {
    calls_++;
    if (nan_at_call == calls_) {
      params_[1].grad.data<float>()[0] = NAN;
      return NAN;
    }
    return run(ids, targets, grad_weight, true);
  }
  float forward_loss(const Tensor& ids, const Tensor& targets) override { return run(ids, targets, 0, false); }

  std::unique_ptr<InferState> new_state(int, int) override { ANVIL_THROW("FakeBigram", "no inference", "a call"); }
  void step(InferState&, const Tensor&, Tensor&) override { ANVIL_THROW("FakeBigram", "no inference", "a call"); }
  Tensor logits(const Tensor&) override { ANVIL_THROW("FakeBigram", "no inference", "a call"); }

  void save(const std::string& dir) const override {
    std::ofstream(std::filesystem::path(dir) / "config.json") << "{\"model_type\": \"fake-bigram\", \"vocab_size\": "
                                                               << V_ << "}\n";
    if (fail_save) ANVIL_THROW("FakeBigram::save", "free disk space", "ENOSPC (injected)");
    NamedTensors t;
    for (const Param& p : params_) t.emplace_back(p.name, p.weight);  // the compute dtype, as HF checkpoints hold
    save_safetensors((std::filesystem::path(dir) / "model.safetensors").string(), t);
  }

  bool fail_save = false;
  int64_t nan_at_call = -1;
  int syncs = 0, refreshes = 0;  // calls of sync_weights() and refresh_derived()

 private:
  Tensor round_copy(const Tensor& master) const {
    return Tensor::from_floats(master.to_floats(), master.shape(), dtype_);
  }
  void add(const std::string& name, Tensor master, bool decay) {
    Param p;
    p.name = name;
    p.master = master;
    p.weight = dtype_ == DType::f32 ? master : round_copy(master);
    p.grad = Tensor::zeros(master.shape(), DType::f32);
    p.decay = decay;
    params_.push_back(p);
  }
  float run(const Tensor& ids, const Tensor& targets, float gw, bool backward) {
    std::vector<float> W = params_[0].weight.to_floats(), b = params_[1].weight.to_floats();
    const int32_t* x = ids.data<int32_t>();
    const int32_t* y = targets.data<int32_t>();
    int64_t n = ids.numel(), valid = 0;
    for (int64_t i = 0; i < n; i++) valid += y[i] >= 0;
    double loss = 0;
    std::vector<double> p(static_cast<size_t>(V_));
    for (int64_t i = 0; i < n; i++) {
      if (y[i] < 0) continue;
      double mx = -INFINITY, z = 0;
      for (int64_t v = 0; v < V_; v++) mx = std::max(mx, double(W[size_t(x[i] * V_ + v)] + b[size_t(v)]));
      for (int64_t v = 0; v < V_; v++) z += p[size_t(v)] = std::exp(double(W[size_t(x[i] * V_ + v)] + b[size_t(v)]) - mx);
      loss += std::log(z) + mx - double(W[size_t(x[i] * V_ + y[i])] + b[size_t(y[i])]);
      if (!backward) continue;
      float* dW = params_[0].grad.data<float>() + x[i] * V_;
      float* db = params_[1].grad.data<float>();
      for (int64_t v = 0; v < V_; v++) {
        double d = (p[size_t(v)] / z - (v == y[i] ? 1.0 : 0.0)) * gw / double(valid);
        dW[v] += float(d);
        db[v] += float(d);
      }
    }
    return float(loss / double(std::max<int64_t>(valid, 1)));
  }

  int64_t V_;
  DType dtype_;
  ModelInfo info_;
  std::vector<Param> params_;
  int64_t calls_ = 0;
};

}  // namespace anvil::train_test
