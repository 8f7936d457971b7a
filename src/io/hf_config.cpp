// Hugging Face config.json parsing and writing for Llama and Mamba.
#include "io/hf_config.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace anvil {

using nlohmann::json;

namespace {

// Typed access to one JSON object with errors that name the key path and the file. A key holding null counts
// as absent, as transformers treats it (e.g. "head_dim": null).
struct Keys {
  const json& j;
  std::string source;
  std::string prefix;  // "rope_scaling." for nested objects

  std::string op() const { return str("config '", source, "'"); }
  const json* find(const char* key) const {
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
  }
  const json& require(const char* key) const {
    const json* v = find(key);
    ANVIL_CHECK(v, op(), str("the required key '", prefix, key, "'"), "no such key");
    return *v;
  }
  int64_t as_int(const char* key, const json& v) const {
    ANVIL_CHECK(v.is_number_integer(), op(), str("'", prefix, key, "' to be an integer"), v.dump());
    return v.get<int64_t>();
  }
  int64_t req_int(const char* key) const { return as_int(key, require(key)); }
  int64_t pos_int(const char* key, int64_t v) const {
    ANVIL_CHECK(v > 0, op(), str("'", prefix, key, "' > 0"), v);
    return v;
  }
  int64_t opt_int(const char* key, int64_t def) const {
    const json* v = find(key);
    return v ? as_int(key, *v) : def;
  }
  double as_num(const char* key, const json& v) const {
    ANVIL_CHECK(v.is_number(), op(), str("'", prefix, key, "' to be a number"), v.dump());
    return v.get<double>();
  }
  double req_num(const char* key) const { return as_num(key, require(key)); }
  double opt_num(const char* key, double def) const {
    const json* v = find(key);
    return v ? as_num(key, *v) : def;
  }
  bool opt_bool(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    ANVIL_CHECK(v->is_boolean(), op(), str("'", prefix, key, "' to be true or false"), v->dump());
    return v->get<bool>();
  }
  std::string opt_str(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    ANVIL_CHECK(v->is_string(), op(), str("'", prefix, key, "' to be a string"), v->dump());
    return v->get<std::string>();
  }
  // bos/pad: absent keeps the default, null means "none".
  std::optional<int64_t> token_id(const char* key, std::optional<int64_t> def) const {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (it->is_null()) return std::nullopt;
    return as_int(key, *it);
  }
  // eos: one id or a list of ids (Llama 3.1 lists three).
  std::vector<int64_t> token_ids(const char* key, std::vector<int64_t> def) const {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (it->is_null()) return {};
    if (!it->is_array()) return {as_int(key, *it)};
    std::vector<int64_t> ids;
    for (const json& v : *it) ids.push_back(as_int(key, v));
    return ids;
  }
  // The weights' dtype: "dtype" (transformers >= 5) or "torch_dtype" (older); float32 when absent.
  DType dtype() const {
    const char* key = find("dtype") ? "dtype" : "torch_dtype";
    std::string name = opt_str(key, "float32");
    try {
      return dtype_from_name(name);
    } catch (const Error&) {
      ANVIL_THROW(op(), str("'", key, "' float32, bfloat16 or float16"), str("'", name, "'"));
    }
  }
  void reject_true(const char* key, const char* why) const {
    ANVIL_CHECK(!opt_bool(key, false), op(), str("'", key, "' false (", why, ")"), "true: unsupported");
  }
  void require_silu(const char* key) const {
    std::string act = opt_str(key, "silu");
    ANVIL_CHECK(act == "silu", op(), str("'", key, "' silu (the only activation anvil implements)"),
                str("'", act, "'"));
  }
};

json eos_json(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}
json opt_json(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// Rope: transformers >= 5 "rope_parameters" {rope_type, rope_theta, ...}; older "rope_theta" at the top level
// plus "rope_scaling" {type or rope_type, ...} or null.
RopeConfig parse_rope(const Keys& top) {
  RopeConfig r;
  r.theta = top.opt_num("rope_theta", 10000.0);
  const char* where = top.find("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* p = top.find(where);
  if (!p) return r;
  ANVIL_CHECK(p->is_object(), top.op(), str("'", where, "' to be an object"), p->dump());
  for (auto& [k, v] : p->items())  // per-layer-type parameters (Gemma 3 style) are no Llama's
    ANVIL_CHECK(!v.is_object(), top.op(), str("flat '", where, "' values"), str("'", k, "': ", v.dump()));
  Keys k{*p, top.source, str(where, ".")};
  r.theta = k.opt_num("rope_theta", r.theta);
  r.type = k.opt_str("rope_type", k.opt_str("type", "default"));
  if (r.type == "llama3") {
    r.factor = k.req_num("factor");
    r.low_freq_factor = k.req_num("low_freq_factor");
    r.high_freq_factor = k.req_num("high_freq_factor");
    r.original_max_position = k.req_num("original_max_position_embeddings");
    ANVIL_CHECK(r.factor > 0 && r.high_freq_factor > r.low_freq_factor && r.low_freq_factor > 0, top.op(),
                str("'", where, "' with factor > 0 and high_freq_factor > low_freq_factor > 0"), p->dump());
  } else {
    ANVIL_CHECK(r.type == "default", top.op(), str("'", where, "' rope type 'default' or 'llama3'"),
                str("'", r.type, "': unsupported"));
  }
  ANVIL_CHECK(r.theta > 0, top.op(), "rope_theta > 0", r.theta);
  return r;
}

json rope_json(const RopeConfig& r, bool with_theta) {
  json o = {{"rope_type", r.type}};
  if (with_theta) o["rope_theta"] = r.theta;
  if (r.type == "llama3") {
    o["factor"] = r.factor;
    o["low_freq_factor"] = r.low_freq_factor;
    o["high_freq_factor"] = r.high_freq_factor;
    o["original_max_position_embeddings"] = int64_t(r.original_max_position);
  }
  return o;
}

}  // namespace

const char* architecture_name(Architecture a) {
  return a == Architecture::llama ? "LlamaForCausalLM" : "MambaForCausalLM";
}

Architecture detect_architecture(const json& j, const std::string& source) {
  const std::string op = str("config '", source, "'");
  ANVIL_CHECK(j.is_object(), op, "a JSON object", j.type_name());
  auto a = j.find("architectures");
  if (a != j.end() && a->is_array() && !a->empty()) {
    std::string got;
    for (const json& v : *a) {
      std::string name = v.is_string() ? v.get<std::string>() : v.dump();
      if (name == "LlamaForCausalLM") return Architecture::llama;
      if (name == "MambaForCausalLM") return Architecture::mamba;
      got += (got.empty() ? "" : ", ") + name;
    }
    ANVIL_THROW(op, "architectures LlamaForCausalLM or MambaForCausalLM", got);
  }
  auto m = j.find("model_type");
  ANVIL_CHECK(m != j.end() && m->is_string(), op, "'architectures' or 'model_type'", "neither key");
  if (*m == "llama") return Architecture::llama;
  if (*m == "mamba") return Architecture::mamba;
  ANVIL_THROW(op, "model_type llama or mamba (LlamaForCausalLM or MambaForCausalLM)", m->get<std::string>());
}

LlamaConfig parse_llama_config(const json& j, const std::string& source) {
  Keys k{j, source, ""};
  ANVIL_CHECK(j.is_object(), k.op(), "a JSON object", j.type_name());
  LlamaConfig c;
  c.vocab_size = k.pos_int("vocab_size", k.req_int("vocab_size"));
  c.hidden_size = k.pos_int("hidden_size", k.req_int("hidden_size"));
  c.intermediate_size = k.pos_int("intermediate_size", k.req_int("intermediate_size"));
  c.num_hidden_layers = k.pos_int("num_hidden_layers", k.req_int("num_hidden_layers"));
  c.num_attention_heads = k.pos_int("num_attention_heads", k.req_int("num_attention_heads"));
  c.num_key_value_heads = k.pos_int("num_key_value_heads", k.opt_int("num_key_value_heads", c.num_attention_heads));
  ANVIL_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, k.op(),
              "num_attention_heads divisible by num_key_value_heads",
              str(c.num_attention_heads, " and ", c.num_key_value_heads));
  if (!k.find("head_dim"))
    ANVIL_CHECK(c.hidden_size % c.num_attention_heads == 0, k.op(),
                "hidden_size divisible by num_attention_heads (no head_dim given)",
                str(c.hidden_size, " and ", c.num_attention_heads));
  c.head_dim = k.pos_int("head_dim", k.opt_int("head_dim", c.hidden_size / c.num_attention_heads));
  ANVIL_CHECK(c.head_dim % 2 == 0, k.op(), "an even head_dim (rope rotates pairs)", c.head_dim);
  c.rms_norm_eps = k.opt_num("rms_norm_eps", c.rms_norm_eps);
  ANVIL_CHECK(c.rms_norm_eps > 0, k.op(), "rms_norm_eps > 0", c.rms_norm_eps);
  c.rope = parse_rope(k);
  c.max_position_embeddings = k.pos_int("max_position_embeddings",
                                        k.opt_int("max_position_embeddings", c.max_position_embeddings));
  c.tie_word_embeddings = k.opt_bool("tie_word_embeddings", c.tie_word_embeddings);
  c.bos_token_id = k.token_id("bos_token_id", c.bos_token_id);
  c.eos_token_ids = k.token_ids("eos_token_id", c.eos_token_ids);
  c.pad_token_id = k.token_id("pad_token_id", c.pad_token_id);
  c.initializer_range = k.opt_num("initializer_range", c.initializer_range);
  c.dtype = k.dtype();
  k.reject_true("attention_bias", "anvil's Llama has no q/k/v/o biases");
  k.reject_true("mlp_bias", "anvil's Llama has no MLP biases");
  k.require_silu("hidden_act");
  return c;
}

MambaConfig parse_mamba_config(const json& j, const std::string& source) {
  Keys k{j, source, ""};
  ANVIL_CHECK(j.is_object(), k.op(), "a JSON object", j.type_name());
  MambaConfig c;
  c.vocab_size = k.pos_int("vocab_size", k.req_int("vocab_size"));
  c.hidden_size = k.pos_int("hidden_size", k.req_int("hidden_size"));
  c.num_hidden_layers = k.pos_int("num_hidden_layers", k.req_int("num_hidden_layers"));
  c.state_size = k.pos_int("state_size", k.opt_int("state_size", c.state_size));
  c.expand = k.pos_int("expand", k.opt_int("expand", c.expand));
  c.intermediate_size = c.expand * c.hidden_size;  // transformers recomputes it and ignores the stored key
  c.conv_kernel = k.pos_int("conv_kernel", k.opt_int("conv_kernel", c.conv_kernel));
  const json* r = k.find("time_step_rank");
  if (!r || (r->is_string() && *r == "auto")) c.time_step_rank = (c.hidden_size + 15) / 16;
  else c.time_step_rank = k.pos_int("time_step_rank", k.as_int("time_step_rank", *r));
  c.use_bias = k.opt_bool("use_bias", c.use_bias);
  c.use_conv_bias = k.opt_bool("use_conv_bias", c.use_conv_bias);
  c.layer_norm_epsilon = k.opt_num("layer_norm_epsilon", c.layer_norm_epsilon);
  ANVIL_CHECK(c.layer_norm_epsilon > 0, k.op(), "layer_norm_epsilon > 0", c.layer_norm_epsilon);
  c.residual_in_fp32 = k.opt_bool("residual_in_fp32", c.residual_in_fp32);
  c.tie_word_embeddings = k.opt_bool("tie_word_embeddings", c.tie_word_embeddings);
  c.pad_vocab_size_multiple = k.pos_int("pad_vocab_size_multiple",
                                        k.opt_int("pad_vocab_size_multiple", c.pad_vocab_size_multiple));
  c.bos_token_id = k.token_id("bos_token_id", c.bos_token_id);
  c.eos_token_ids = k.token_ids("eos_token_id", c.eos_token_ids);
  c.pad_token_id = k.token_id("pad_token_id", c.pad_token_id);
  c.time_step_min = k.opt_num("time_step_min", c.time_step_min);
  c.time_step_max = k.opt_num("time_step_max", c.time_step_max);
  c.time_step_floor = k.opt_num("time_step_floor", c.time_step_floor);
  c.time_step_scale = k.opt_num("time_step_scale", c.time_step_scale);
  c.time_step_init_scheme = k.opt_str("time_step_init_scheme", c.time_step_init_scheme);
  ANVIL_CHECK(c.time_step_init_scheme == "random" || c.time_step_init_scheme == "constant", k.op(),
              "'time_step_init_scheme' random or constant", c.time_step_init_scheme);
  c.initializer_range = k.opt_num("initializer_range", c.initializer_range);
  c.rescale_prenorm_residual = k.opt_bool("rescale_prenorm_residual", c.rescale_prenorm_residual);
  c.dtype = k.dtype();
  k.require_silu("hidden_act");
  return c;
}

json read_hf_config(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "config.json";
  const std::string op = str("config '", p.string(), "'");
  std::ifstream in(p);
  ANVIL_CHECK(in, op, "a readable config.json", "cannot open it");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return json::parse(buf.str());
  } catch (const json::exception& e) {
    ANVIL_THROW(op, "valid JSON", str("bad JSON: ", e.what()));
  }
}

static std::string config_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? (std::filesystem::path(path) / "config.json").string() : path;
}

LlamaConfig load_llama_config(const std::string& path) {
  json j = read_hf_config(path);
  std::string src = config_file(path);
  Architecture a = detect_architecture(j, src);
  ANVIL_CHECK(a == Architecture::llama, str("config '", src, "'"), "a LlamaForCausalLM config", architecture_name(a));
  return parse_llama_config(j, src);
}

MambaConfig load_mamba_config(const std::string& path) {
  json j = read_hf_config(path);
  std::string src = config_file(path);
  Architecture a = detect_architecture(j, src);
  ANVIL_CHECK(a == Architecture::mamba, str("config '", src, "'"), "a MambaForCausalLM config", architecture_name(a));
  return parse_mamba_config(j, src);
}

static std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    default: ANVIL_THROW("to_json(config)", "a weight dtype float32, bfloat16 or float16", dtype_name(t));
  }
}

json to_json(const LlamaConfig& c) {
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = c.rms_norm_eps;
  // Both rope spellings: transformers 4.x reads rope_theta/rope_scaling, 5.x prefers rope_parameters.
  j["rope_theta"] = c.rope.theta;
  j["rope_scaling"] = c.rope.type == "default" ? json(nullptr) : rope_json(c.rope, false);
  j["rope_parameters"] = rope_json(c.rope, true);
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = opt_json(c.bos_token_id);
  j["eos_token_id"] = eos_json(c.eos_token_ids);
  j["pad_token_id"] = opt_json(c.pad_token_id);
  j["initializer_range"] = c.initializer_range;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["dtype"] = torch_dtype_name(c.dtype);  // transformers >= 5
  j["torch_dtype"] = j["dtype"];           // transformers 4.x
  return j;
}

json to_json(const MambaConfig& c) {
  json j;
  j["architectures"] = {"MambaForCausalLM"};
  j["model_type"] = "mamba";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["state_size"] = c.state_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["expand"] = c.expand;
  j["intermediate_size"] = c.intermediate_size;
  j["conv_kernel"] = c.conv_kernel;
  j["time_step_rank"] = c.time_step_rank;
  j["use_bias"] = c.use_bias;
  j["use_conv_bias"] = c.use_conv_bias;
  j["hidden_act"] = "silu";
  j["layer_norm_epsilon"] = c.layer_norm_epsilon;
  j["residual_in_fp32"] = c.residual_in_fp32;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["pad_vocab_size_multiple"] = c.pad_vocab_size_multiple;
  j["bos_token_id"] = opt_json(c.bos_token_id);
  j["eos_token_id"] = eos_json(c.eos_token_ids);
  j["pad_token_id"] = opt_json(c.pad_token_id);
  j["time_step_min"] = c.time_step_min;
  j["time_step_max"] = c.time_step_max;
  j["time_step_floor"] = c.time_step_floor;
  j["time_step_scale"] = c.time_step_scale;
  j["time_step_init_scheme"] = c.time_step_init_scheme;
  j["initializer_range"] = c.initializer_range;
  j["rescale_prenorm_residual"] = c.rescale_prenorm_residual;
  j["dtype"] = torch_dtype_name(c.dtype);  // transformers >= 5
  j["torch_dtype"] = j["dtype"];           // transformers 4.x
  return j;
}

void save_hf_config(const std::string& path, const json& config) {
  const std::string op = str("save_hf_config '", path, "'");
  const std::string tmp = str(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    ANVIL_CHECK(out, op, str("to create '", tmp, "'"), "cannot open it");
    out << config.dump(2) << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      ANVIL_THROW(op, str("to write '", tmp, "'"), "a write error");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    ANVIL_THROW(op, str("to rename '", tmp, "' to '", path, "'"), "a rename error");
  }
}

}  // namespace anvil
