// `anvil prepare`: text → token shards (see train/token_shard.h and train/dataset.h).
//
// Each document is encoded without special tokens and followed by EOS. Documents go to the validation split
// when rng_uniform(seed, document index) < val_fraction, so the split is a pure function of (inputs, seed).
// Encoding runs on all cores over batches of documents (the tokenizer's encode is thread-safe); shards are
// written in document order, each one atomically, and meta.json last.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "train/documents.h"

namespace anvil {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or directories (their regular files, recursively, sorted)
  std::string out_dir;
  double val_fraction = 0.01;
  DocumentOptions docs;
  uint64_t seed = 0;
  int64_t shard_tokens = int64_t(1) << 27;  // 128M tokens: 256 MB u16 shards
  bool progress = true;
};

// What prepare needs from a tokenizer (the command wires io/tokenizer.h's Tokenizer in).
struct TokenizerRef {
  uint64_t id = 0;  // fnv1a64 of the tokenizer.json bytes
  uint32_t vocab_size = 0;
  int32_t eos_id = -1;
  std::function<std::vector<int32_t>(std::string_view)> encode;  // thread-safe, no special tokens
  std::string json_path;  // optional: copied into the dataset as tokenizer.json
};

struct PrepareStats {
  int64_t files = 0, skipped_files = 0;  // skipped: binary files and duplicates (symlinks to the same file)
  int64_t train_docs = 0, val_docs = 0, train_tokens = 0, val_tokens = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

PrepareStats prepare_dataset(const PrepareOptions& opt, const TokenizerRef& tok);

}  // namespace anvil
