// Shared helpers for the training tests: a scratch directory, a 28-symbol "tokenizer" (a-z, space, EOS) and a
// small deterministic corpus prepared into token shards.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <vector>

#include "core/rng.h"
#include "train/prepare.h"

namespace anvil::train_test {

// A fresh directory under $TMPDIR, removed when the test ends unless it failed (then it is kept to look at).
struct Scratch {
  explicit Scratch(const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("anvil_train_test_" + name + "_" + std::to_string(::getpid())))
                 .string()) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path, ec);
  }
  const std::string path;
};

constexpr int32_t kLetterVocab = 28, kLetterEos = 27;

inline TokenizerRef letter_tokenizer() {
  TokenizerRef t;
  t.id = 0x1234abcd5678ef00ull;
  t.vocab_size = kLetterVocab;
  t.eos_id = kLetterEos;
  t.encode = [](std::string_view s) {
    std::vector<int32_t> ids;
    for (char c : s) ids.push_back(c >= 'a' && c <= 'z' ? c - 'a' : 26);
    return ids;
  };
  return t;
}

// n_docs documents of 4..20 words from a 10-word list, separated by "%" lines, in one file.
inline std::string write_corpus(const std::string& dir, int n_docs, uint64_t seed) {
  static const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away"};
  std::filesystem::create_directories(dir);
  std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  uint64_t k = 0;
  for (int d = 0; d < n_docs; d++) {
    int n = 4 + int(rng_uniform(seed, k++) * 17);
    for (int w = 0; w < n; w++) out << (w ? " " : "") << words[int(rng_uniform(seed, k++) * 10) % 10];
    out << "\n%\n";
  }
  return path;
}

inline std::string make_dataset(const std::string& root, int n_docs = 400, double val_fraction = 0.1,
                                int64_t shard_tokens = 4096) {
  PrepareOptions o;
  o.inputs = {write_corpus(root, n_docs, 7)};
  o.out_dir = root + "/data";
  o.val_fraction = val_fraction;
  o.docs.separator = "%";
  o.seed = 3;
  o.shard_tokens = shard_tokens;
  o.progress = false;
  prepare_dataset(o, letter_tokenizer());
  return o.out_dir;
}

}  // namespace anvil::train_test
