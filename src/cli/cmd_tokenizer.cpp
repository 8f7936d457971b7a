// anvil tokenizer train: learn a byte-level BPE tokenizer from text files and write a Hugging Face
// tokenizer.json (io/bpe_trainer.h; the Python `tokenizers` library loads it with identical ids).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <set>

#include "cli/commands.h"
#include "io/bpe_trainer.h"
#include "io/tokenizer.h"
#include "train/fs_util.h"

namespace anvil::cli {
namespace {

int run_tokenizer(int argc, char** argv) {
  CLI::App app{"Tokenizer tools.\n"
               "Example: anvil tokenizer train --input /usr/share/games/fortunes/* --vocab-size 4096 --style neox "
               "--out data/tokenizer.json",
               "anvil tokenizer"};
  app.require_subcommand(1);
  CLI::App* train = app.add_subcommand("train", "learn a byte-level BPE vocabulary from text files");
  std::vector<std::string> inputs;
  BpeTrainOptions o;
  std::string out;
  bool quiet = false;
  train->add_option("--input", inputs, "UTF-8 text files")->required()->check(CLI::ExistingFile);
  train->add_option("--vocab-size", o.vocab_size, "vocabulary size: special tokens + 256 bytes + merges")
      ->required()->check(CLI::Range(258, 1 << 22));
  train->add_option("--style", o.style, "pre-tokenizer and special tokens of: llama3 | neox (GPT-NeoX, Mamba)")
      ->capture_default_str()->check(CLI::IsMember({"llama3", "neox"}));
  train->add_option("--special", o.special_tokens, "special tokens (default: the style's own)");
  train->add_option("--min-frequency", o.min_frequency, "never merge a pair seen fewer times")->capture_default_str();
  train->add_option("--out", out, "output tokenizer.json")->required();
  train->add_flag("--quiet", quiet, "no progress lines");
  CLI11_PARSE(app, argc, argv);
  o.progress = !quiet;

  // Input lists from shell globs often hold binary companions and links to the same file (fortune's .dat and
  // .u8 files): train on each text file once.
  std::vector<std::string> text_files;
  std::set<std::filesystem::path> seen;
  int skipped = 0;
  for (auto& f : inputs) {
    bool binary = read_file_bytes(f).substr(0, 8192).find('\0') != std::string::npos;
    if (!binary && seen.insert(std::filesystem::canonical(f)).second) text_files.push_back(f);
    else skipped++;
  }
  if (skipped && !quiet) std::fprintf(stderr, "tokenizer train: skipped %d binary or duplicate files\n", skipped);
  std::string json = train_bpe_files(text_files, o);
  const auto parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_file_atomic(out, json);
  Tokenizer tok = Tokenizer::from_file(out);  // what every later command will load: check it does
  std::printf("wrote %s: %d tokens (%s style), eos %d\n", out.c_str(), tok.vocab_size(), o.style.c_str(),
              tok.eos_id());
  return 0;
}

Register reg({"tokenizer", "tokenizer tools: train a byte-level BPE tokenizer on text", run_tokenizer});

}  // namespace
}  // namespace anvil::cli
