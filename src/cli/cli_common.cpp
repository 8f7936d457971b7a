#include "cli/cli_common.h"

#include <cstdio>
#include <filesystem>

#include "io/tokenizer.h"

namespace anvil::cli {

void add_model_options(CLI::App& app, ModelOptions& o) {
  app.add_option("--model,-m", o.dir, "model directory (Hugging Face layout: config.json, safetensors, "
                                      "tokenizer.json)")
      ->required();
  app.add_option("--device", o.device, "cpu, gpu, gpu:N or auto (the GPU when there is one)")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype,
                 "compute dtype: f32, bf16, f16 or auto (bf16 on a GPU, f32 on the CPU); fp8 = auto with the "
                 "linear-layer weights quantised to FP8 at load (one scale per output channel; FP8 checkpoints "
                 "stay FP8 with any dtype)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "fp8"}))
      ->capture_default_str();
  app.add_flag("--fp8-lm-head", o.fp8_lm_head,
               "with FP8 weights (--dtype fp8 or an FP8 checkpoint): quantise the LM head too, one scale per output "
               "channel (off: it stays 16-bit, as an FP8 checkpoint's usually is; check the perplexity with "
               "`anvil perplexity --vs fp8 --fp8-lm-head`)");
}

SamplingParams generate_default_sampling() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  return p;
}

void add_generation_options(CLI::App& app, GenerationConfig& c) {
  app.add_option("--max-tokens,-n", c.max_new_tokens, "most tokens to generate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--temperature,-t", c.sampling.temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--top-k", c.sampling.top_k, "sample among the k most likely tokens (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--top-p", c.sampling.top_p, "nucleus sampling: the smallest set with this much mass (1 = all)")
      ->check(CLI::Range(1e-6f, 1.f))
      ->capture_default_str();
  app.add_option("--min-p", c.sampling.min_p, "drop tokens less likely than this times the best one (0 = off)")
      ->check(CLI::Range(0.f, 0.999f))
      ->capture_default_str();
  app.add_option("--repetition-penalty", c.sampling.repetition_penalty,
                 "> 1 discourages tokens already seen (1 = off)")
      ->check(CLI::Range(1e-3f, 100.f))
      ->capture_default_str();
  app.add_option("--seed", c.seed, "random seed: the same seed gives the same text")->capture_default_str();
  app.add_flag("--greedy", c.sampling.greedy, "always take the most likely token");
  app.add_option("--stop", c.stop_strings, "stop when this text appears (repeatable; \\n escapes)")
      ->allow_extra_args(false)
      ->type_name("STR");
}

int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for the options.\n", app.get_name().c_str(), e.what(),
                 app.get_name().c_str());
    return 2;
  }
}

Device resolve_device(const ModelOptions& o) {
  if (o.device == "auto") return gpu_available() ? Device::gpu(0) : Device::cpu();
  return parse_device(o.device);
}

DType resolve_dtype(const ModelOptions& o, Device d) {
  if (o.dtype == "auto" || o.dtype == "fp8") return d.is_gpu() ? DType::bf16 : DType::f32;
  return dtype_from_name(o.dtype);
}

void check_model_dir(const std::string& cmd, const std::string& dir) {
  namespace fs = std::filesystem;
  ANVIL_CHECK(fs::is_directory(dir), cmd,
              "--model to name a model directory (config.json, *.safetensors, tokenizer.json)",
              str("'", dir, "', ", fs::exists(dir) ? "which is not a directory" : "which does not exist"));
}

Tokenizer load_tokenizer(const std::string& cmd, const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  ANVIL_CHECK(std::filesystem::is_regular_file(path), cmd,
              "a tokenizer.json in the model directory (from the model's Hugging Face repository)",
              str("no file '", path, "'"));
  return Tokenizer::from_file(path);
}

std::unique_ptr<CausalLM> load_model_for(const ModelOptions& o) {
  const Device d = resolve_device(o);
  return load_model(o.dir, d, resolve_dtype(o, d), /*trainable=*/false,
                    o.dtype == "fp8" ? WeightFormat::fp8 : WeightFormat::checkpoint, o.fp8_lm_head);
}

std::vector<int32_t> chat_stop_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const char* name : {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"}) {
    const int32_t id = tok.token_to_id(name);
    if (id >= 0) ids.push_back(id);
  }
  return ids;
}

Detokenizer detokenizer(StreamDecoder& dec) {
  return {[&dec](int32_t id) { return dec.push(id); }, [&dec] { return dec.flush(); }};
}

std::string stats_line(const GenerationResult& r) {
  const auto& s = r.stats;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "prompt %lld tok, prefill %.2f ms (%.0f tok/s) | %lld tok, %.2f ms/tok, %.1f tok/s | stop: %s",
                (long long)s.prompt_tokens, s.prefill_ms, s.prefill_tokens_per_s(), (long long)s.new_tokens,
                s.decode_ms_per_token(), s.decode_tokens_per_s(), stop_reason_name(r.stop));
  return buf;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

}  // namespace anvil::cli
