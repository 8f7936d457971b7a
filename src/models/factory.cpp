// Model construction: from a recipe's [model] section (create_model) or a Hugging Face directory (load_model).
#include "models/factory.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "io/hf_config.h"
#include "models/llama/llama.h"
#include "models/mamba/mamba.h"

namespace anvil {

namespace fs = std::filesystem;

// A preset is configs/models/<name>.json of the source tree. Searched in: $ANVIL_CONFIG_DIR/models, then
// configs/models under the working directory, then under each ancestor of the executable's directory (so a
// binary in build/ or build/tests/ finds the tree it was built from).
static std::string preset_path(const std::string& name) {
  ANVIL_CHECK(!name.empty() && name.find('/') == std::string::npos && name.find("..") == std::string::npos,
              "model preset", "a preset name like mamba-130m", "'" + name + "'");
  std::vector<fs::path> dirs;
  if (const char* e = std::getenv("ANVIL_CONFIG_DIR")) dirs.push_back(fs::path(e) / "models");
  dirs.push_back(fs::path("configs") / "models");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
      dirs.push_back(p / "configs" / "models");
      if (p == p.parent_path()) break;
    }
  for (auto& d : dirs) {
    fs::path f = d / (name + ".json");
    if (fs::is_regular_file(f, ec)) return f.string();
  }
  std::string avail;
  for (auto& d : dirs)
    if (fs::is_directory(d, ec)) {
      for (auto& e : fs::directory_iterator(d, ec))
        if (e.path().extension() == ".json") avail += (avail.empty() ? "" : ", ") + e.path().stem().string();
      break;
    }
  ANVIL_THROW("model preset", str("a preset in configs/models (", avail.empty() ? "none found" : avail,
              "; or set ANVIL_CONFIG_DIR)"), "'" + name + "'");
}

static nlohmann::json spec_config(const ModelSpec& spec, std::string& source) {
  nlohmann::json j = nlohmann::json::object();
  if (!spec.config_path.empty()) {
    j = read_hf_config(spec.config_path);
    source = spec.config_path;
  } else if (!spec.preset.empty()) {
    source = preset_path(spec.preset);
    j = read_hf_config(source);
  } else {
    source = "[model.hf_config]";
  }
  ANVIL_CHECK(spec.overrides.is_object(), "model config overrides", "a table of config.json fields",
              spec.overrides.type_name());
  for (auto it = spec.overrides.begin(); it != spec.overrides.end(); ++it) j[it.key()] = it.value();
  if (!j.contains("architectures") && !j.contains("model_type") && !spec.arch.empty())
    j["model_type"] = spec.arch;
  return j;
}

std::unique_ptr<CausalLM> create_model(const ModelSpec& spec, Device device, DType dtype, bool trainable,
                                       uint64_t seed) {
  std::string source;
  nlohmann::json j = spec_config(spec, source);
  Architecture a = detect_architecture(j, source);
  if (!spec.arch.empty()) {
    const char* want = a == Architecture::llama ? "llama" : "mamba";
    ANVIL_CHECK(spec.arch == want, "model", str("arch '", spec.arch, "' to match the config ", source),
                str("a ", architecture_name(a), " config"));
  }
  if (a == Architecture::llama) return LlamaModel::create(parse_llama_config(j, source), device, dtype, trainable, seed);
  return MambaModel::create(parse_mamba_config(j, source), device, dtype, trainable, seed);
}

std::unique_ptr<CausalLM> load_model(const std::string& dir, Device device, DType dtype, bool trainable,
                                     WeightFormat weights, bool fp8_lm_head) {
  nlohmann::json j = read_hf_config(dir);
  Architecture a = detect_architecture(j, dir);
  if (a == Architecture::llama) return LlamaModel::load(dir, device, dtype, trainable, weights, fp8_lm_head);
  ANVIL_CHECK(weights == WeightFormat::checkpoint && !fp8_lm_head && !j.contains("quantization_config"),
              "load_model", "FP8 weights for a Llama model (Mamba loads 16/32-bit weights only)",
              str("a Mamba checkpoint at ", dir, weights == WeightFormat::fp8 ? " with --dtype fp8" :
                  fp8_lm_head ? " with an FP8 LM head" : " with a quantization_config"));
  return MambaModel::load(dir, device, dtype, trainable);
}

}  // namespace anvil
