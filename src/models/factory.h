// Building a model from a run recipe's [model] section. Implemented in models/factory.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model.h"

namespace anvil {

struct ModelSpec {
  std::string arch;          // "llama" | "mamba"
  std::string config_path;   // a Hugging Face config.json (or the directory holding one); may be empty
  std::string preset;        // a named built-in shape (e.g. "mamba-130m"); may be empty
  // Hugging Face config.json fields given inline in the recipe ([model.config]); applied over the file or
  // preset, or the whole config when neither is given.
  nlohmann::json overrides = nlohmann::json::object();
};

// A freshly initialised model (seeded, so every backend starts from the same weights). trainable: allocate
// fp32 masters and gradients.
std::unique_ptr<CausalLM> create_model(const ModelSpec& spec, Device device, DType dtype, bool trainable,
                                       uint64_t seed);

}  // namespace anvil
