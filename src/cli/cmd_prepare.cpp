// anvil prepare: text files → token shards for training (see train/prepare.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "io/tokenizer.h"
#include "train/checksum.h"
#include "train/fs_util.h"
#include "train/prepare.h"
#include "train/progress.h"

namespace anvil::cli {
namespace {

int run_prepare(int argc, char** argv) {
  CLI::App app{"Tokenize text into anvil token shards, split into train/val by document.\n"
               "Example (the fortune corpus, one document per fortune):\n"
               "  anvil prepare --tokenizer tokenizer.json --input /usr/share/games/fortunes --separator % "
               "--out data/fortunes",
               "anvil prepare"};
  std::string tokenizer_path, eos_token;
  PrepareOptions o;
  bool quiet = false;
  app.add_option("--tokenizer", tokenizer_path, "Hugging Face tokenizer.json")->required()->check(CLI::ExistingFile);
  app.add_option("--input", o.inputs, "text or JSON Lines files, or directories (read recursively)")->required();
  app.add_option("--out", o.out_dir, "output directory (shards + meta.json)")->required();
  app.add_option("--val-fraction", o.val_fraction, "fraction of documents held out for validation")
      ->capture_default_str()->check(CLI::Range(0.0, 0.999));
  app.add_option("--format", o.docs.format, "input format (auto: .jsonl/.ndjson/.json are JSON Lines)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--jsonl-field", o.docs.jsonl_field, "JSON Lines: the field holding the text")->capture_default_str();
  app.add_option("--split", o.docs.split, "text files: one document per file or per blank-line paragraph")
      ->capture_default_str()->check(CLI::IsMember({"file", "paragraph"}));
  app.add_option("--separator", o.docs.separator,
                 "text files: a line equal to this ends a document (fortune files: %); overrides --split");
  app.add_option("--seed", o.seed, "seed of the train/val split")->capture_default_str();
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard file (whole documents)")->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--eos-token", eos_token, "the document separator token when the tokenizer names none");
  app.add_flag("--quiet", quiet, "no progress bar");
  CLI11_PARSE(app, argc, argv);
  o.progress = !quiet;

  Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  TokenizerRef ref;
  ref.id = fnv1a64(read_file_bytes(tokenizer_path));
  ref.vocab_size = uint32_t(tok.vocab_size());
  ref.eos_id = eos_token.empty() ? tok.eos_id() : tok.token_to_id(eos_token);
  if (ref.eos_id < 0) {
    std::fprintf(stderr, "anvil prepare: %s\n",
                 eos_token.empty() ? "the tokenizer names no EOS token; pass --eos-token TOKEN"
                                   : ("--eos-token '" + eos_token + "' is not in the vocabulary").c_str());
    return 2;
  }
  ref.json_path = tokenizer_path;
  ref.encode = [&tok](std::string_view s) { return tok.encode(s, /*add_special_tokens=*/false); };

  PrepareStats st = prepare_dataset(o, ref);
  std::printf("prepared %lld files (%lld skipped) into %s in %s (%.1f MB/s)\n", (long long)st.files,
              (long long)st.skipped_files, o.out_dir.c_str(), human_duration(st.seconds).c_str(),
              st.seconds > 0 ? double(st.bytes) / st.seconds / 1e6 : 0.0);
  std::printf("  train: %s tokens, %lld documents\n  val:   %s tokens, %lld documents\n",
              human_count(double(st.train_tokens)).c_str(), (long long)st.train_docs,
              human_count(double(st.val_tokens)).c_str(), (long long)st.val_docs);
  if (o.val_fraction > 0 && st.val_docs == 0)
    std::printf("  note: no document fell in the validation split; raise --val-fraction for validation losses\n");
  return 0;
}

Register reg({"prepare", "tokenize text into token shards for training", run_prepare});

}  // namespace
}  // namespace anvil::cli
