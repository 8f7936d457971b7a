// Llama checkpoints in the Hugging Face layout: config.json + model.safetensors (single or sharded), 16-bit or
// FP8 (io/hf_quant.h), and FP8 quantisation of 16-bit weights at load (WeightFormat::fp8).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "io/hf_quant.h"
#include "io/safetensors.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/quantize/quantize.h"
#include "models/llama/llama.h"

namespace anvil {

namespace {

// The FP8 flavour for weights quantised at load: AMD's FP8 hardware (gfx94x) computes in e4m3fnuz.
DType fp8_dtype_for(Device d) {
  if (d.is_gpu() && backend(d).info().arch.rfind("gfx", 0) == 0) return DType::e4m3fnuz;
  return DType::e4m3fn;
}

// "model.layers.3.self_attn.q_proj.weight" -> "model.layers.3.self_attn.q_proj"
std::string module_of(const std::string& weight_name) { return weight_name.substr(0, weight_name.rfind('.')); }

// One projection's weight_scale from the checkpoint as `rows` f32 values (a per-tensor scale repeated).
std::vector<float> read_weight_scale(const SafetensorsIndex& ckpt, const std::string& mod, int64_t rows,
                                     const Fp8QuantConfig& q, const std::string& dir) {
  const std::string name = mod + ".weight_scale";
  ANVIL_CHECK(!ckpt.contains(mod + ".weight_scale_inv"), "llama::load",
              str("a supported FP8 scheme (per-tensor or per-channel weight_scale, ", q.method, ")"),
              str("unsupported quantisation scheme: block-wise '", mod, ".weight_scale_inv' in ", dir));
  ANVIL_CHECK(ckpt.contains(name), "llama::load", str("tensor '", name, "' (the scale of an FP8 weight)"),
              str("a checkpoint at ", dir, " without it"));
  const SafetensorsEntry& e = ckpt.entry(name);
  ANVIL_CHECK(e.dtype == DType::f32 || e.dtype == DType::bf16 || e.dtype == DType::f16, "llama::load",
              str(name, " stored as f32, bf16 or f16"), dtype_name(e.dtype));
  const int64_t n = shape_numel(e.shape);
  const bool tensor_shape = n == 1 && e.shape.size() <= 1;
  const bool channel_shape = (e.shape == Shape{rows} || e.shape == Shape{rows, 1});
  using S = Fp8QuantConfig::Scale;
  const bool ok = (q.weight_scale != S::channel && tensor_shape) || (q.weight_scale != S::tensor && channel_shape);
  ANVIL_CHECK(ok, "llama::load",
              str(name, " of shape ",
                  q.weight_scale == S::tensor    ? "[] or [1] (per tensor)"
                  : q.weight_scale == S::channel ? str("[", rows, "] or [", rows, ",1] (per channel)")
                                                 : str("[], [1], [", rows, "] or [", rows, ",1]"),
                  " (", q.method, ")"),
              shape_str(e.shape));
  std::vector<float> v = ckpt.get(name).to_floats();
  for (float s : v)
    ANVIL_CHECK(std::isfinite(s) && s > 0, "llama::load", str(name, " positive and finite"), s);
  if (v.size() == 1) v.assign(size_t(rows), v[0]);
  return v;
}

// A static input_scale (one positive f32), or 0 when the scheme is dynamic.
float read_input_scale(const SafetensorsIndex& ckpt, const std::string& mod, const Fp8QuantConfig& q,
                       const std::string& dir) {
  const std::string name = mod + ".input_scale";
  if (!q.static_input) {
    ANVIL_CHECK(!ckpt.contains(name), "llama::load",
                str("no '", name, "' with dynamic activation scales (", q.method, ")"),
                str("one in the checkpoint at ", dir, ": the config and the tensors disagree"));
    return 0.f;
  }
  ANVIL_CHECK(ckpt.contains(name), "llama::load", str("tensor '", name, "' (static activation scales, ", q.method, ")"),
              str("a checkpoint at ", dir, " without it"));
  const SafetensorsEntry& e = ckpt.entry(name);
  ANVIL_CHECK(dtype_is_float(e.dtype) && !dtype_is_fp8(e.dtype) && shape_numel(e.shape) == 1 && e.shape.size() <= 1,
              "llama::load", str(name, ": one f32/bf16/f16 value (shape [] or [1])"),
              str(dtype_name(e.dtype), shape_str(e.shape)));
  const float s = ckpt.get(name).to_floats()[0];
  ANVIL_CHECK(std::isfinite(s) && s > 0, "llama::load", str(name, " positive and finite"), s);
  return s;
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& dir, Device device, DType dtype, bool trainable,
                                             WeightFormat weights, bool fp8_lm_head) {
  const std::string source = (std::filesystem::path(dir) / "config.json").string();
  nlohmann::json j = read_hf_config(dir);
  LlamaConfig cfg = parse_llama_config(j, source);
  const Fp8QuantConfig q = parse_fp8_quant_config(j, source);
  const bool fp8 = q.quantized || weights == WeightFormat::fp8;
  ANVIL_CHECK(!(fp8 && trainable), "llama::load", "FP8 weights for inference only (train from a 16-bit checkpoint)",
              q.quantized ? str("an FP8 checkpoint (", q.method, ") at ", dir, " loaded for training")
                          : std::string("trainable = true with --dtype fp8"));
  // An FP8 checkpoint's codes are copied as they are (safetensors F8_E4M3 = e4m3fn; the kernels decode either
  // flavour on any device); weights quantised here take the device's flavour.
  const DType wdt = !fp8 ? dtype : q.quantized ? DType::e4m3fn : fp8_dtype_for(device);
  SafetensorsIndex ckpt = open_checkpoint(dir);
  // The head is FP8 when asked for, or when an FP8 checkpoint stores it so (its config does not list it among
  // the modules kept 16-bit).
  const bool head_stored_fp8 = fp8 && !cfg.tie_word_embeddings && ckpt.contains("lm_head.weight") &&
                               dtype_is_fp8(ckpt.entry("lm_head.weight").dtype);
  ANVIL_CHECK(!fp8_lm_head || fp8, "llama::load",
              "an FP8 LM head with FP8 weights (--dtype fp8 or an FP8 checkpoint)",
              str("a checkpoint at ", dir, " of 16/32-bit weights, loaded without --dtype fp8"));
  std::unique_ptr<LlamaModel> m(new LlamaModel(cfg, device, dtype, trainable, wdt, fp8_lm_head || head_stored_fp8));

  // FP8: the scale slice of each projection (a row range of its layer's stacked scale vector), and the static
  // input scales of the four GEMMs of each layer (a stack takes the largest of its parts: the same x feeds them,
  // and the largest scale saturates none of their calibrated ranges).
  struct Slot {
    Tensor scale;  // f32 (rows) view
    size_t gemm;   // 4 * layer + {0 qkv, 1 wo, 2 gate_up, 3 down}; 4 * layers: the LM head
  };
  std::map<std::string, Slot> slots;
  std::vector<float> in_scale(4 * m->layers_.size() + 1, 0.f);  // the last one the FP8 head's
  if (m->fp8_head_) slots["lm_head.weight"] = Slot{m->head_scale_, 4 * m->layers_.size()};
  if (fp8) {
    for (size_t l = 0; l < m->layers_.size(); l++) {
      LlamaLayer& ly = m->layers_[l];
      auto rows_of = [](const Param* p, const Tensor& stack_w) {
        return std::pair<int64_t, int64_t>{(static_cast<const char*>(p->weight.data_ptr()) -
                                            static_cast<const char*>(stack_w.data_ptr())) /
                                               int64_t(stack_w.size(1) * dtype_size(stack_w.dtype())),
                                           p->weight.size(0)};
      };
      auto add = [&](const Param* p, const Tensor& stack_w, const Tensor& stack_scale, size_t g) {
        auto [r0, n] = rows_of(p, stack_w);
        slots[p->name] = Slot{stack_scale.slice(0, r0, r0 + n), 4 * l + g};
      };
      add(ly.wq, ly.qkv, ly.qkv_scale, 0), add(ly.wk, ly.qkv, ly.qkv_scale, 0), add(ly.wv, ly.qkv, ly.qkv_scale, 0);
      add(ly.wo, ly.wo->weight, ly.wo_scale, 1);
      add(ly.w_gate, ly.gate_up, ly.gate_up_scale, 2), add(ly.w_up, ly.gate_up, ly.gate_up_scale, 2);
      add(ly.w_down, ly.w_down->weight, ly.down_scale, 3);
    }
  }

  for (auto& p : m->params_) {
    ANVIL_CHECK(ckpt.contains(p.name), "llama::load", str("tensor '", p.name, "' in the checkpoint"),
                str("a checkpoint at ", dir, " without it"));
    const SafetensorsEntry& e = ckpt.entry(p.name);
    ANVIL_CHECK(e.shape == p.weight.shape(), "llama::load", str(p.name, " of shape ", shape_str(p.weight.shape())),
                shape_str(e.shape));
    auto slot = slots.find(p.name);
    if (slot == slots.end() || !dtype_is_fp8(e.dtype)) {
      ANVIL_CHECK(dtype_is_float(e.dtype) && !dtype_is_fp8(e.dtype), "llama::load",
                  str(p.name, " stored as f32, bf16 or f16", slot == slots.end() && fp8 ?
                      " (anvil keeps embeddings and norms 16-bit)" : ""),
                  dtype_name(e.dtype));
    }
    if (slot == slots.end()) {
      // Straight into the fp32 master when training, else into the compute copy: one device copy per tensor.
      Tensor dst = p.master.defined() ? p.master : p.weight;
      load_into(dst, ckpt.get(p.name));
      continue;
    }
    const std::string mod = module_of(p.name);
    if (dtype_is_fp8(e.dtype)) {  // an FP8 checkpoint's weight: codes as stored, scales from their tensors
      ANVIL_CHECK(e.dtype == wdt, "llama::load", str(p.name, " stored as ", dtype_name(wdt), " (F8_E4M3)"),
                  dtype_name(e.dtype));
      std::vector<float> s = read_weight_scale(ckpt, mod, p.weight.size(0), q, dir);
      load_into(p.weight, ckpt.get(p.name));
      slot->second.scale.copy_(Tensor::from_floats(s, {int64_t(s.size())}, DType::f32, Device::cpu()));
      float& in = in_scale[slot->second.gemm];
      in = std::max(in, read_input_scale(ckpt, mod, q, dir));
    } else {
      // A 16-bit weight: quantised here, per output channel. (In an FP8 checkpoint: a module its config keeps
      // 16-bit inside an FP8 stack, e.g. an ignored q_proj; weight_scale must then be absent.)
      ANVIL_CHECK(!ckpt.contains(mod + ".weight_scale"), "llama::load",
                  str("no '", mod, ".weight_scale' next to a ", dtype_name(e.dtype), " weight"),
                  str("one in the checkpoint at ", dir, ": the weight is not FP8"));
      Tensor staged = load_tensor(ckpt.get(p.name), device, e.dtype);  // one projection on the device at a time
      quantize_fp8_per_token(staged, p.weight, slot->second.scale);
    }
  }
  if (fp8) {
    std::vector<Tensor> inputs;
    if (q.quantized && q.static_input) {
      // A GEMM whose weights were all 16-bit in the checkpoint (quantised here) has no calibrated scale: it
      // quantises its activations per token (dynamic) instead.
      for (float s : in_scale) inputs.push_back(s > 0 ? Tensor::from_floats({s}, {1}, DType::f32, device) : Tensor());
    }
    m->build_linears(inputs);
  }
  m->sync_weights();
  return m;
}

void LlamaModel::save(const std::string& dir) const {
  ANVIL_CHECK(!dtype_is_fp8(weight_dtype_), "llama::save", "a 16/32-bit model (FP8 models are not saved)",
              str("FP8 weights (", dtype_name(weight_dtype_), ")"));
  std::filesystem::create_directories(dir);
  NamedTensors tensors;
  for (auto& p : params_) {
    if (cfg_.tie_word_embeddings && &p == lm_head_ && lm_head_ != embed_) continue;
    // Save what the model computes with at full precision: the fp32 master when there is one.
    tensors.emplace_back(p.name, p.master.defined() ? p.master : p.weight);
  }
  save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  LlamaConfig c = cfg_;
  c.dtype = tensors.empty() ? dtype_ : tensors[0].second.dtype();
  save_hf_config(dir + "/config.json", to_json(c));
}

}  // namespace anvil
