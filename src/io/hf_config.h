// Hugging Face config.json <-> typed model configs (Llama, Mamba).
//
// Reading follows what transformers does with the same file: absent optional keys take the transformers
// defaults, unknown keys are ignored, and keys that change the math in ways anvil does not implement
// (attention_bias, mlp_bias, a rope type other than default/llama3, an activation other than silu) are errors
// rather than silently different models. Missing required keys are errors naming the key and the file.
//
// Both rope spellings are read: transformers < 5 writes "rope_theta" plus "rope_scaling" (with "type" or
// "rope_type"); transformers >= 5 writes "rope_parameters" holding rope_type and rope_theta. Writing emits
// both, which transformers 4.x and 5.x each load to the same model.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/rope/rope.h"

namespace anvil {

enum class Architecture { llama, mamba };
const char* architecture_name(Architecture a);  // "LlamaForCausalLM", "MambaForCausalLM"

// From "architectures" (first choice) or "model_type". `source` names the file in errors.
Architecture detect_architecture(const nlohmann::json& config, const std::string& source = "config.json");

struct LlamaConfig {
  int64_t vocab_size = 0;           // V
  int64_t hidden_size = 0;          // C
  int64_t intermediate_size = 0;    // D of the SwiGLU MLP
  int64_t num_hidden_layers = 0;    // L
  int64_t num_attention_heads = 0;  // NH
  int64_t num_key_value_heads = 0;  // NKV (default NH)
  int64_t head_dim = 0;             // HD (default C / NH)
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id = 1;
  std::vector<int64_t> eos_token_ids = {2};  // config.json may hold one id or a list
  std::optional<int64_t> pad_token_id;
  double initializer_range = 0.02;
  DType dtype = DType::f32;  // "dtype" (transformers >= 5) or "torch_dtype"; the storage dtype of the weights
};

struct MambaConfig {
  int64_t vocab_size = 0;         // V
  int64_t hidden_size = 0;        // C
  int64_t state_size = 16;        // N
  int64_t num_hidden_layers = 0;  // L
  int64_t expand = 2;
  int64_t intermediate_size = 0;  // D = expand * C
  int64_t conv_kernel = 4;
  int64_t time_step_rank = 0;     // "auto" = ceil(C / 16)
  bool use_bias = false;          // in_proj / out_proj bias
  bool use_conv_bias = true;
  double layer_norm_epsilon = 1e-5;
  bool residual_in_fp32 = true;
  bool tie_word_embeddings = true;
  int64_t pad_vocab_size_multiple = 8;
  std::optional<int64_t> bos_token_id = 0;
  std::vector<int64_t> eos_token_ids = {0};
  std::optional<int64_t> pad_token_id = 0;
  // Initialisation of dt_proj (used when pre-training from scratch).
  double time_step_min = 0.001, time_step_max = 0.1, time_step_floor = 1e-4, time_step_scale = 1.0;
  std::string time_step_init_scheme = "random";  // "random" or "constant"
  double initializer_range = 0.1;
  bool rescale_prenorm_residual = false;
  DType dtype = DType::f32;
};

// Parse an already-loaded config object; `source` names the file in errors.
LlamaConfig parse_llama_config(const nlohmann::json& j, const std::string& source = "config.json");
MambaConfig parse_mamba_config(const nlohmann::json& j, const std::string& source = "config.json");

// `path`: a config.json file or a directory holding one.
nlohmann::json read_hf_config(const std::string& path);
LlamaConfig load_llama_config(const std::string& path);
MambaConfig load_mamba_config(const std::string& path);

// config.json objects that transformers loads back into the same model.
nlohmann::json to_json(const LlamaConfig& c);
nlohmann::json to_json(const MambaConfig& c);
// Writes pretty JSON to `path` atomically (temporary file + rename).
void save_hf_config(const std::string& path, const nlohmann::json& config);

}  // namespace anvil
