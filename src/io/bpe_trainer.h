// Byte-level BPE training: text in, a tokenizer.json out that anvil's Tokenizer and the Python `tokenizers`
// library both load and encode identically (tests/io/bpe_trainer_test.cpp checks this).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace anvil {

struct BpeTrainOptions {
  int32_t vocab_size = 32000;               // total: special tokens + 256 byte tokens + merges
  std::vector<std::string> special_tokens;  // ids 0..n-1; empty = the style's (see below)
  // "llama3": Split(Llama 3 regex) + ByteLevel(use_regex=false), ignore_merges, TemplateProcessing that
  //           prepends <|begin_of_text|>; default specials <|begin_of_text|> <|end_of_text|>
  //           <|start_header_id|> <|end_header_id|> <|eot_id|>.
  // "neox":   ByteLevel(GPT-2 regex, add_prefix_space=false); default special <|endoftext|>.
  std::string style = "llama3";
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged (training may stop short of vocab_size)
  bool progress = true;       // progress lines on stderr when the corpus exceeds 8 MB
};

// Fills `text` with the next training text; returns false when there is none left.
using TextSource = std::function<bool(std::string& text)>;

// Trains on every text of `next_text`; returns the tokenizer.json text. Deterministic: the same texts and
// options give the same file. Special-token strings inside the texts separate words and are not learnt.
// Merge order: most frequent pair first, ties to the smaller (left id, right id).
std::string train_bpe(const TextSource& next_text, const BpeTrainOptions& opts);
// The same over text files (UTF-8), read in chunks cut at line ends.
std::string train_bpe_files(const std::vector<std::string>& files, const BpeTrainOptions& opts);

}  // namespace anvil
