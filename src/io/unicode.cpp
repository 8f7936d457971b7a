#include "io/unicode.h"

namespace anvil::unicode {

Utf8Step utf8_step(const unsigned char* p, size_t n) {
  unsigned char b0 = p[0];
  if (b0 < 0x80) return {Utf8Status::kValid, 1, b0};
  int need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (excludes overlongs, surrogates)
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) { need = 1; cp = b0 & 0x1F; }
  else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2; cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3; cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Status::kInvalid, 1, 0};
  }
  for (int i = 1; i <= need; ++i) {
    if ((size_t)i >= n) return {Utf8Status::kIncomplete, i, 0};
    unsigned char b = p[i];
    unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return {Utf8Status::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Status::kValid, need + 1, cp};
}

size_t utf8_find_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    if (p[i] < 0x80) { ++i; continue; }
    Utf8Step st = utf8_step(p + i, n - i);
    if (st.status != Utf8Status::kValid) return i;
    i += st.len;
  }
  return std::string_view::npos;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0, n = bytes.size();
  std::string out;
  out.reserve(n);
  while (i < n) {
    Utf8Step st = utf8_step(p + i, n - i);
    if (st.status == Utf8Status::kValid) {
      out.append(bytes.data() + i, st.len);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += st.len;
  }
  return out;
}

bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

ByteLevelMap::ByteLevelMap() {
  for (auto& v : cp_to_byte) v = -1;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + extra++);
    utf8_append(byte_to_utf8[b], cp);
    cp_to_byte[cp] = int16_t(b);
  }
}

void ByteLevelMap::encode(std::string_view in, std::string& out) const {
  for (unsigned char c : in) out += byte_to_utf8[c];
}

bool ByteLevelMap::decode(std::string_view token, std::string& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  size_t i = 0, n = token.size(), start = out.size();
  while (i < n) {
    Utf8Step st = utf8_step(p + i, n - i);
    if (st.status != Utf8Status::kValid || st.cp >= 0x144 || cp_to_byte[st.cp] < 0) {
      out.resize(start);
      return false;
    }
    out += char(cp_to_byte[st.cp]);
    i += st.len;
  }
  return true;
}

const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap m;
  return m;
}

}  // namespace anvil::unicode
