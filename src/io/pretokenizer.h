// Pre-tokenizers of Hugging Face tokenizer.json files: Split (regex or literal) and ByteLevel, alone or in a
// Sequence. They cut text into the pieces ("words") the BPE model encodes one by one.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace anvil {

// A PCRE2 regex compiled with UTF + UCP and JIT, matching like the Oniguruma engine the Python library uses:
// \s also matches U+0085 (Oniguruma's \s is Unicode White_Space; PCRE2's is Z + \t\n\v\f\r), and after an
// empty match the search moves on one character. Thread-safe: matching allocates its own match data.
class Regex {
 public:
  // literal: match `pattern` as plain text (Split's {"String": ...} form). `where` names the source in errors.
  Regex(const std::string& pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  struct Match {
    size_t start, end;
  };
  // Every match in `s` (valid UTF-8), left to right, empty ones included.
  void find_all(std::string_view s, std::vector<Match>& out) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One step of pre-tokenization: turns each piece into zero or more pieces.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind;
  // Split
  std::shared_ptr<Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // ByteLevel: the regex above is the GPT-2 one when use_regex; then bytes are mapped to the alphabet.
  // ByteLevel must be the last step (true of every byte-level tokenizer.json published).
  bool add_prefix_space = false;
};

class PreTokenizer {
 public:
  // From the tokenizer.json "pre_tokenizer" value (null allowed); `file` names the source in errors.
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& file);
  // The pre-tokenizers the BPE trainer writes, as JSON ("llama3" or "neox").
  static nlohmann::json style_json(const std::string& style);
  // Splits `text` into non-empty pieces appended to `out`: views into `text`, or into strings added to
  // `arena` (a piece that gained a prefix space). The pieces stay raw bytes even after a ByteLevel step:
  // the BPE model maps them to the byte alphabet itself (io/bpe.h), which saves a copy per word.
  void run(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena) const;
  // True when a ByteLevel step runs (it is always the last step).
  bool byte_level() const { return byte_level_; }

 private:
  void add(const nlohmann::json& j, const std::string& file, const std::string& field);
  std::vector<PreTokenizerStep> steps_;
  bool byte_level_ = false;
};

// The GPT-2 pre-tokenization regex (ByteLevel with use_regex) and Llama 3's Split regex.
extern const char* const kGpt2Pattern;
extern const char* const kLlama3Pattern;

}  // namespace anvil
