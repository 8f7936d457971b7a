// A prepared dataset directory (written by `anvil prepare`): token shards per split plus meta.json, which is
// written last and lists them, so a directory without meta.json is an unfinished preparation.
//
//   meta.json: {"format": "anvil-tokens", "version": 1, "tokenizer_id": "<16 hex digits>",
//               "vocab_size": V, "eos_id": E,
//               "splits": {"train": {"shards": ["train-00000.tok", ...], "tokens": n, "docs": d},
//                          "val":   {...}}}
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/token_shard.h"

namespace anvil {

struct SplitMeta {
  std::vector<std::string> shards;  // file names relative to the dataset directory
  int64_t tokens = 0, docs = 0;
};

struct DatasetMeta {
  uint64_t tokenizer_id = 0;
  uint32_t vocab_size = 0;
  int32_t eos_id = -1;
  std::map<std::string, SplitMeta> splits;  // "train", "val"
};

DatasetMeta read_dataset_meta(const std::string& dir);
void write_dataset_meta(const std::string& dir, const DatasetMeta& meta);  // atomic
std::string tokenizer_id_hex(uint64_t id);

// All shards of one split read as one token stream (documents packed back to back, EOS-separated).
class TokenStream {
 public:
  // Opens and validates every shard of `split` (size, CRCs, same tokenizer as meta.json). A split with no
  // shards is an empty stream.
  TokenStream(const std::string& dir, const std::string& split);
  const std::string& dir() const { return dir_; }
  const DatasetMeta& meta() const { return meta_; }
  int64_t size() const { return offsets_.back(); }
  // Copies tokens [start, start + n) (possibly spanning shards) as i32.
  void read(int64_t start, int64_t n, int32_t* out) const;

 private:
  std::string dir_;
  DatasetMeta meta_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> offsets_{0};  // offsets_[i]: first stream position of shard i; back(): total
};

}  // namespace anvil
