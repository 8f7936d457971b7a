// Added tokens of a tokenizer.json (special tokens like <|eot_id|>, and plain added tokens): found in the
// raw text before pre-tokenization, each match becoming its id directly.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace anvil {

class AddedTokens {
 public:
  struct Token {
    std::string content;
    int32_t id;
    bool special, lstrip, rstrip, single_word, normalized;
  };
  // A piece of the input: added token `id`, or text (id -1) that goes through pre-tokenization and BPE.
  struct Segment {
    std::string_view text;
    int32_t id;
  };
  // From the tokenizer.json "added_tokens" array; `file` names the source in errors.
  static AddedTokens from_json(const nlohmann::json& list, const std::string& file);

  // Cuts `text` into segments, as the Python library does: first the tokens with normalized = false, then
  // those with normalized = true inside the remaining text; each set matches the longest token at the
  // leftmost position. lstrip / rstrip swallow neighbouring Unicode whitespace into the token; single_word
  // tokens only match between non-word characters.
  void split(std::string_view text, std::vector<Segment>& out) const;

  int32_t id(std::string_view content) const;   // -1 when not an added token
  const std::string* content(int32_t id) const;  // nullptr when not an added token
  bool is_special(int32_t id) const;
  int32_t max_id() const { return max_id_; }

 private:
  struct Set {
    std::vector<int32_t> by_first_byte[256];  // indices into tokens_, longest first
    bool empty = true;
  };
  void split_with(const Set& set, std::string_view text, std::vector<Segment>& out) const;

  std::vector<Token> tokens_;
  std::unordered_map<std::string, int32_t> by_content_;  // content -> index into tokens_
  std::unordered_map<int32_t, int32_t> by_id_;          // id -> index into tokens_
  Set raw_, normalized_;
  int32_t max_id_ = -1;
};

}  // namespace anvil
