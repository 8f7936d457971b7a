// UTF-8 helpers and the GPT-2 byte-level alphabet, shared by the tokenizer and the BPE trainer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace anvil::unicode {

// One step of UTF-8 decoding at p[0..n): how many bytes the next item takes and what it is.
// Invalid: `len` is the maximal subpart of a valid sequence (1..3 bytes), which lossy conversion replaces
// by one U+FFFD (the Unicode "substitution of maximal subparts" practice that Rust's from_utf8_lossy and
// Python's errors="replace" follow). Incomplete: p[0..n) is a valid prefix cut short by the end of input.
enum class Utf8Status { kValid, kInvalid, kIncomplete };
struct Utf8Step {
  Utf8Status status;
  int len;
  uint32_t cp;  // the code point when kValid
};
Utf8Step utf8_step(const unsigned char* p, size_t n);

// Byte offset of the first invalid or incomplete sequence, or npos when `s` is valid UTF-8.
size_t utf8_find_invalid(std::string_view s);
// Lossy conversion: each invalid maximal subpart (and an incomplete tail) becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// Appends the UTF-8 encoding of `cp`.
void utf8_append(std::string& out, uint32_t cp);
// Length in bytes of the UTF-8 sequence starting with `lead` (1 for continuation bytes).
inline int utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? (lead < 0xC0 ? 1 : 2) : lead < 0xF0 ? 3 : 4;
}
// Unicode White_Space (what Rust's char::is_whitespace and Oniguruma's \s accept).
bool is_white_space(uint32_t cp);

// The GPT-2 byte-level alphabet: every byte maps to one printable code point (printable Latin-1 bytes to
// themselves, the other 68 to U+0100..U+0143 in byte order), so any byte string becomes a text string.
struct ByteLevelMap {
  std::string byte_to_utf8[256];  // byte -> UTF-8 of its code point (1 or 2 bytes)
  int16_t cp_to_byte[0x144];      // code point -> byte, -1 when not in the alphabet
  ByteLevelMap();
  // Maps every byte of `in` and appends the result to `out`.
  void encode(std::string_view in, std::string& out) const;
  // Inverse of encode; false (out unchanged) when some character of `token` is not in the alphabet.
  bool decode(std::string_view token, std::string& out) const;
};
const ByteLevelMap& byte_level_map();

}  // namespace anvil::unicode
