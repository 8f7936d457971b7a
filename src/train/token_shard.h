// Token shards: anvil's pre-tokenized training data. One file holds a run of whole documents, each followed by
// the tokenizer's EOS id, as fixed-width little-endian integers after a 64-byte header:
//
//   offset size  field
//        0    8  magic "ANVILTOK"
//        8    4  u32 version (1)
//       12    4  u32 token_bytes: 2 (u16) when vocab_size <= 65536, else 4 (u32)
//       16    8  u64 tokenizer_id: FNV-1a 64 of the tokenizer.json bytes (a shard is useless with another one)
//       24    8  u64 n_tokens
//       32    8  u64 n_docs
//       40    4  u32 vocab_size
//       44    4  i32 eos_id
//       48    4  u32 crc32 of the payload (n_tokens * token_bytes bytes)
//       52    8  reserved, zero
//       60    4  u32 crc32 of header bytes [0, 60)
//       64       payload
//
// Writers put the file at "<path>.tmp.<pid>" and rename it, so a shard either exists whole or not at all.
// Readers map the file and check everything (magic, version, sizes, both CRCs): a truncated or corrupted shard
// is an anvil::Error naming the file and the field that is wrong, never garbage tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace anvil {

constexpr int kShardHeaderBytes = 64;
constexpr uint32_t kShardVersion = 1;

struct ShardInfo {
  uint64_t tokenizer_id = 0;
  uint32_t vocab_size = 0;
  int32_t eos_id = -1;
  uint32_t token_bytes = 2;  // derived from vocab_size by shard_token_bytes()
  uint64_t n_tokens = 0, n_docs = 0;
  uint32_t payload_crc = 0;
};

inline uint32_t shard_token_bytes(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Writes one shard atomically. tokens: every id < info.vocab_size (checked); info.n_tokens/payload_crc/
// token_bytes are filled in here.
void write_shard(const std::string& path, const std::vector<int32_t>& tokens, ShardInfo info);

// A validated, memory-mapped shard.
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);
  const std::string& path() const { return path_; }
  const ShardInfo& info() const { return info_; }
  int64_t size() const { return int64_t(info_.n_tokens); }
  // Copies tokens [start, start + n) as i32 into out.
  void read(int64_t start, int64_t n, int32_t* out) const;

 private:
  struct Map;
  std::string path_;
  ShardInfo info_;
  std::shared_ptr<Map> map_;
  const unsigned char* payload_ = nullptr;
};

}  // namespace anvil
