// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (Llama 3, GPT-NeoX / Mamba style), with
// ids identical to the Python `tokenizers` library's (checked by tests/io/tokenizer_test.cpp).
//
// Supported tokenizer.json content (anything else throws anvil::Error naming the file and the field):
//   model          BPE: vocab, merges ("a b" strings or [a, b] pairs), unk_token, fuse_unk, ignore_merges;
//                  dropout is ignored (training-time only); byte_fallback and subword prefixes/suffixes refused.
//   added_tokens   special or not, matched in the text before pre-tokenization (longest match at the leftmost
//                  position), with lstrip / rstrip / single_word; normalized ones are matched after the
//                  non-normalized ones, as in the Python library.
//   normalizer     null, or NFC which is accepted but NOT applied: text already in NFC (nearly all text, and
//                  everything the fixtures hold) tokenizes identically; decomposed input may differ.
//   pre_tokenizer  null, Split (regex or literal; Removed / Isolated / MergedWithPrevious / MergedWithNext /
//                  Contiguous; invert), ByteLevel (add_prefix_space, use_regex = the GPT-2 regex), Sequence.
//   post_processor null, ByteLevel (offsets only: no effect on ids), TemplateProcessing (single), Sequence.
//   decoder        null (tokens joined by spaces) or ByteLevel.
// Regexes run on PCRE2 (UTF + UCP, JIT); see io/pretokenizer.h for how they are kept Oniguruma-compatible.
// Known difference: Debian 12's PCRE2 10.42 knows Unicode 14, the Python library's Oniguruma Unicode 15, so
// letters new in Unicode 15 (Kawi, some Cyrillic modifiers) are not \p{L} here and may split differently.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace anvil {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json; errors name `path` and the offending field.
  static Tokenizer from_file(const std::string& path);
  // The same from JSON text; `origin` stands for the file name in errors.
  static Tokenizer from_json_string(std::string_view json_text, const std::string& origin = "<tokenizer json>");
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text (valid UTF-8, else anvil::Error) -> ids. Special-token strings in the text are always recognised;
  // add_special_tokens applies the post-processor template (Llama 3: a leading <|begin_of_text|>).
  // Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids -> text; invalid UTF-8 from partial tokens becomes U+FFFD. Unknown ids are skipped (as the Python
  // library does: models often have more embedding rows than tokens).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  // The raw bytes one token contributes to decode() (byte-level decoded; may be a partial UTF-8 sequence).
  // Empty for unknown ids. Join with StreamDecoder to print only complete characters.
  const std::string& decode_token(int32_t id) const;

  int32_t token_to_id(std::string_view token) const;  // -1 when absent (added tokens first, then the model)
  std::string id_to_token(int32_t id) const;          // "" when absent; byte-level form ("Ġthe")
  // One past the largest id of the model and added tokens: every id encode() returns is below it.
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;  // a special added token (skipped by decode(..., true))
  // Discovered from the post-processor template (bos) and from well-known special token names; -1 if none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  // Ids that end a generation: eos plus chat end-of-turn tokens (<|eot_id|>, <|im_end|>) present in the vocab.
  std::vector<int32_t> stop_ids() const;
  // Overrides for when config.json / generation_config.json name them.
  void set_bos_id(int32_t id);
  void set_eos_id(int32_t id);

  // The Llama 3 chat format: <|begin_of_text|> then, per message,
  // <|start_header_id|>role<|end_header_id|>\n\n{content, trimmed}<|eot_id|>; with add_generation_prompt
  // an open assistant header follows. Encode the result with add_special_tokens = false (BOS is in it).
  // Throws if this tokenizer lacks the Llama 3 header tokens.
  std::string apply_chat_template_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class StreamDecoder;
};

// Incremental decoding for streaming generation: push() returns only complete UTF-8 characters, holding
// back the bytes of a character split across tokens; the concatenation of all push() results and flush()
// equals tokenizer.decode(all ids, skip_special_tokens).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = true);
  std::string push(int32_t id);
  std::string flush();  // the held bytes (an incomplete character becomes U+FFFD); then starts afresh

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool first_ = true;  // for tokenizers without a decoder, which join tokens with spaces
  std::string pending_;
};

}  // namespace anvil
