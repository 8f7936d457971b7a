// Mamba checkpoints in the Hugging Face layout: config.json + model.safetensors (single or sharded).
#include <filesystem>

#include "io/safetensors.h"
#include "models/mamba/mamba.h"

namespace anvil {

std::unique_ptr<MambaModel> MambaModel::load(const std::string& dir, Device device, DType dtype, bool trainable) {
  MambaConfig cfg = load_mamba_config(dir);
  std::unique_ptr<MambaModel> m(new MambaModel(cfg, device, dtype, trainable));
  SafetensorsIndex ckpt = open_checkpoint(dir);
  for (auto& p : m->params_) {
    ANVIL_CHECK(ckpt.contains(p.name), "mamba::load", str("tensor '", p.name, "' in the checkpoint"),
                str("a checkpoint at ", dir, " without it"));
    const SafetensorsEntry& e = ckpt.entry(p.name);
    ANVIL_CHECK(e.shape == p.weight.shape(), "mamba::load", str(p.name, " of shape ", shape_str(p.weight.shape())),
                shape_str(e.shape));
    ANVIL_CHECK(dtype_is_float(e.dtype) && !dtype_is_fp8(e.dtype), "mamba::load",
                str(p.name, " stored as f32, bf16 or f16"), dtype_name(e.dtype));
    // Straight into the fp32 master when training, else into the compute copy: one device copy per tensor.
    Tensor dst = p.master.defined() ? p.master : p.weight;
    load_into(dst, ckpt.get(p.name));
  }
  m->sync_weights();  // compute copies and A = -exp(A_log)
  return m;
}

void MambaModel::save(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  NamedTensors tensors;
  for (auto& p : params_) tensors.emplace_back(p.name, p.master.defined() ? p.master : p.weight);
  save_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  MambaConfig c = cfg_;
  c.dtype = tensors.empty() ? dtype_ : tensors[0].second.dtype();
  save_hf_config(dir + "/config.json", to_json(c));
}

}  // namespace anvil
