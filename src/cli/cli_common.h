// Option tables and loading shared by the serving subcommands (generate, chat, bench). Each table maps the
// command line straight onto a config struct; the struct's initial values are the defaults shown in --help.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "serve/generate.h"

namespace anvil {
class Tokenizer;
class StreamDecoder;
}  // namespace anvil

namespace anvil::cli {

struct ModelOptions {
  std::string dir;              // Hugging Face directory: config.json, *.safetensors, tokenizer.json
  std::string device = "auto";  // auto = the GPU when there is one, else the CPU
  std::string dtype = "auto";   // auto = bf16 on a GPU, f32 on the CPU
  bool fp8_lm_head = false;     // FP8 models: the LM head quantised at load too
};

// --model, --device, --dtype, --fp8-lm-head.
void add_model_options(CLI::App& app, ModelOptions& o);
// --max-tokens, --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed, --greedy, --stop.
void add_generation_options(CLI::App& app, GenerationConfig& c);
// `anvil generate`'s sampling unless told otherwise: temperature 0.8, top-k 40, top-p 0.95.
SamplingParams generate_default_sampling();

// Parses the subcommand's arguments (argv[0] is its name). Returns -1 to go on, else the exit code: 0 after
// printing --help, 2 after a usage error (unknown option, bad value, missing required option), whose message
// names the option and goes to stderr.
int parse(CLI::App& app, int argc, char** argv);

Device resolve_device(const ModelOptions& o);
DType resolve_dtype(const ModelOptions& o, Device d);

// Throws anvil::Error naming the directory when it does not exist.
void check_model_dir(const std::string& cmd, const std::string& dir);
// Loads DIR/tokenizer.json; a missing file is an anvil::Error that says which file.
Tokenizer load_tokenizer(const std::string& cmd, const std::string& dir);
std::unique_ptr<CausalLM> load_model_for(const ModelOptions& o);

// Ids that end a reply besides the model's eos: the chat end-of-turn tokens the tokenizer knows.
std::vector<int32_t> chat_stop_ids(const Tokenizer& tok);
// Adapts the tokenizer's streaming decoder to generate()'s interface.
Detokenizer detokenizer(StreamDecoder& dec);
// "prompt 12 tok, prefill 35.2 ms (341 tok/s) | 128 tok, 12.31 ms/tok, 81.2 tok/s | stop: eos"
std::string stats_line(const GenerationResult& r);

// "\n", "\t", "\\" escapes in stop strings given on the command line.
std::string unescape(const std::string& s);

}  // namespace anvil::cli
