// Parsing config.json's quantization_config for FP8 checkpoints (see hf_quant.h for what is supported).
#include "io/hf_quant.h"

#include "core/error.h"

namespace anvil {
namespace {

using json = nlohmann::json;

const char* kSupported =
    "a supported FP8 scheme (compressed-tensors float 8-bit per-tensor/per-channel weights, fbgemm_fp8, or fp8 "
    "without weight_block_size)";

[[noreturn]] void unsupported(const std::string& source, const std::string& what) {
  ANVIL_THROW(source, kSupported, "unsupported quantisation scheme: " + what);
}

std::vector<std::string> string_list(const json& q, const char* key, const std::string& source) {
  std::vector<std::string> out;
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return out;
  ANVIL_CHECK(it->is_array(), source, str("quantization_config.", key, " to be a list of module names"),
              it->type_name());
  for (auto& v : *it) {
    ANVIL_CHECK(v.is_string(), source, str("quantization_config.", key, " entries to be strings"), v.dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

// A compressed-tensors "weights" or "input_activations" entry must be float 8-bit.
void check_float8(const json& a, const std::string& source, const std::string& where) {
  ANVIL_CHECK(a.is_object(), source, str(where, " to be an object"), a.type_name());
  const int bits = a.value("num_bits", 0);
  const std::string type = a.value("type", std::string());
  if (bits != 8 || type != "float") unsupported(source, str(where, " with num_bits ", bits, ", type '", type, "'"));
  if (a.contains("block_structure") && !a["block_structure"].is_null())
    unsupported(source, str(where, ".block_structure ", a["block_structure"].dump()));
  if (a.contains("group_size") && !a["group_size"].is_null())
    unsupported(source, str(where, ".group_size ", a["group_size"].dump()));
}

void parse_compressed_tensors(const json& q, const std::string& source, Fp8QuantConfig& c) {
  const std::string format = q.value("format", std::string("float-quantized"));
  if (format != "float-quantized") unsupported(source, "compressed-tensors format '" + format + "'");
  if (q.contains("kv_cache_scheme") && !q["kv_cache_scheme"].is_null())
    unsupported(source, "compressed-tensors kv_cache_scheme " + q["kv_cache_scheme"].dump());
  auto groups = q.find("config_groups");
  ANVIL_CHECK(groups != q.end() && groups->is_object() && !groups->empty(), source,
              "quantization_config.config_groups with at least one group", groups == q.end() ? "missing"
                                                                                               : groups->dump());
  bool first = true;
  for (auto it = groups->begin(); it != groups->end(); ++it) {
    const std::string g = "config_groups." + it.key();
    ANVIL_CHECK(it->is_object() && it->contains("weights"), source, g + ".weights", it->dump());
    const json& w = (*it)["weights"];
    check_float8(w, source, g + ".weights");
    const std::string ws = w.value("strategy", std::string());
    if (ws != "tensor" && ws != "channel") unsupported(source, str(g, ".weights.strategy '", ws, "'"));
    if (!w.value("symmetric", true)) unsupported(source, g + ".weights.symmetric false (zero points)");
    if (w.value("dynamic", false) == true) unsupported(source, g + ".weights.dynamic true");
    bool stat = false;
    auto in = it->find("input_activations");
    if (in != it->end() && !in->is_null()) {
      check_float8(*in, source, g + ".input_activations");
      const std::string as = in->value("strategy", std::string());
      const bool dyn = in->contains("dynamic") && (*in)["dynamic"].is_boolean() && (*in)["dynamic"].get<bool>();
      if (as == "token" && dyn) stat = false;
      else if (as == "tensor" && !dyn) stat = true;
      else unsupported(source, str(g, ".input_activations strategy '", as, "', dynamic ", in->value("dynamic", json()).dump()));
    }
    auto scale = ws == "tensor" ? Fp8QuantConfig::Scale::tensor : Fp8QuantConfig::Scale::channel;
    if (first) c.weight_scale = scale, c.static_input = stat;
    else if (c.weight_scale != scale || c.static_input != stat)
      unsupported(source, "config_groups with different weight strategies or activation schemes");
    first = false;
  }
  c.ignore = string_list(q, "ignore", source);
}

}  // namespace

Fp8QuantConfig parse_fp8_quant_config(const json& config, const std::string& source) {
  Fp8QuantConfig c;
  auto qit = config.find("quantization_config");
  if (qit == config.end() || qit->is_null()) return c;
  const json& q = *qit;
  ANVIL_CHECK(q.is_object(), source, "quantization_config to be an object", q.type_name());
  ANVIL_CHECK(q.contains("quant_method") && q["quant_method"].is_string(), source,
              "quantization_config.quant_method (a string)", q.contains("quant_method") ? q["quant_method"].dump()
                                                                                        : "missing");
  c.quantized = true;
  c.method = q["quant_method"].get<std::string>();
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null())
    unsupported(source, str("'", c.method, "' with block-wise weight scales (weight_block_size ",
                            q["weight_block_size"].dump(), ")"));
  if (c.method == "compressed-tensors") {
    parse_compressed_tensors(q, source, c);
  } else if (c.method == "fbgemm_fp8") {
    c.weight_scale = Fp8QuantConfig::Scale::channel;
    c.static_input = false;
    c.ignore = string_list(q, "modules_to_not_convert", source);
  } else if (c.method == "fp8") {
    const std::string act = q.value("activation_scheme", std::string("dynamic"));
    if (act != "dynamic" && act != "static") unsupported(source, "fp8 activation_scheme '" + act + "'");
    c.static_input = act == "static";
    c.weight_scale = Fp8QuantConfig::Scale::either;
    c.ignore = string_list(q, "ignored_layers", source);
    for (auto& m : string_list(q, "modules_to_not_convert", source)) c.ignore.push_back(m);
  } else {
    unsupported(source, "quant_method '" + c.method + "'");
  }
  return c;
}

}  // namespace anvil
