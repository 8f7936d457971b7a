// config.json "quantization_config" of Hugging Face FP8 checkpoints: which schemes anvil loads, and how.
//
// Supported (per-tensor or per-output-channel e4m3 weights, 16-bit or FP8 activations):
//   "compressed-tensors" (llm-compressor): format "float-quantized"; config_groups[*].weights
//       {num_bits 8, type "float", strategy "tensor" | "channel"}; input_activations null (weight-only),
//       {strategy "token", dynamic true} or {strategy "tensor", dynamic false} (static: input_scale tensors);
//       "ignore": modules kept 16-bit. Tensors: <module>.weight F8_E4M3, <module>.weight_scale (1) / (OC, 1)
//       [f32 or bf16], <module>.input_scale (1) when static.
//   "fbgemm_fp8" (transformers): per-channel weight_scale (OC, 1), dynamic per-token activations;
//       "modules_to_not_convert". (activation_scale_ub, an upper bound on per-token scales, is not applied.)
//   "fp8" (vLLM / transformers) without weight_block_size: per-tensor weight_scale;
//       activation_scheme "dynamic" or "static" (input_scale); "ignored_layers" / "modules_to_not_convert".
// Anything else — block-wise scales (weight_block_size, weight_scale_inv), other strategies, bit widths or
// formats, an FP8 KV cache scheme, other quant_methods — is an "unsupported quantisation scheme" error naming
// what came.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace anvil {

struct Fp8QuantConfig {
  bool quantized = false;             // config.json has a quantization_config (a supported FP8 one)
  std::string method;                 // "compressed-tensors" | "fbgemm_fp8" | "fp8"
  enum class Scale { tensor, channel, either } weight_scale = Scale::either;  // the weight_scale shape expected
  bool static_input = false;          // activations quantised with the checkpoint's input_scale
  std::vector<std::string> ignore;    // modules the checkpoint keeps 16-bit (as listed)
};

// Reads config["quantization_config"] (absent: quantized = false). `source` names the file in errors.
Fp8QuantConfig parse_fp8_quant_config(const nlohmann::json& config, const std::string& source = "config.json");

}  // namespace anvil
