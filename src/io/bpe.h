// The BPE model of a tokenizer.json: vocabulary, ranked merges, and the merge loop that turns one
// pre-tokenized word into ids. Matches the Python `tokenizers` library's BPE (without dropout).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace anvil {

class BpeModel {
 public:
  // From the tokenizer.json "model" object; `file` names the source in errors.
  static BpeModel from_json(const nlohmann::json& model, const std::string& file);

  // Appends the ids of one word (a pre-tokenized piece). byte_level: `word` is raw bytes, looked up as its
  // GPT-2 byte-alphabet form (without building that string); else `word` is matched character by character.
  // A tokenizer always calls with the same byte_level. Thread-safe; results are cached per word.
  void encode_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const;
  // -1 when the token is not in the model's vocabulary.
  int32_t token_to_id(std::string_view token) const;
  // nullptr when `id` is not in the model's vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest model id (the Python library's model vocab size for dense vocabularies).
  int32_t size() const { return int32_t(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank, new_id;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void merge_word(std::string_view word, bool byte_level, std::vector<int32_t>& out) const;

  // Heterogeneous lookup: find(string_view) without building a std::string.
  struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using StrMap = std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>>;
  StrMap vocab_;
  StrMap byte_vocab_;        // tokens made only of byte-alphabet characters, keyed by their bytes
  int32_t byte_id_[256];     // id of each single-byte token, -1 when absent
  std::vector<std::string> id_to_token_;  // "" for holes in a sparse vocabulary
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;  // Llama 3: a word that is itself a token is not merged

  // Word cache: most words repeat, and a hit skips the merge loop (~3x faster encoding of prose).
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  struct Cache {
    std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StrHash, std::equal_to<>> words;
  };
  std::unique_ptr<Cache> cache_ = std::make_unique<Cache>();
};

}  // namespace anvil
