#include "train/documents.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace anvil {

namespace fs = std::filesystem;

void validate(const DocumentOptions& o) {
  ANVIL_CHECK(o.format == "auto" || o.format == "text" || o.format == "jsonl", "prepare", "--format auto|text|jsonl",
              o.format);
  ANVIL_CHECK(o.split == "file" || o.split == "paragraph", "prepare", "--split file|paragraph", o.split);
  ANVIL_CHECK(!o.jsonl_field.empty(), "prepare", "a non-empty --jsonl-field", "''");
}

int64_t utf8_error_offset(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    size_t len;
    unsigned min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xE0) == 0xC0) len = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000;
    else return int64_t(i);
    if (i + len > n) return int64_t(i);
    unsigned cp = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; k++) {
      if ((p[i + k] & 0xC0) != 0x80) return int64_t(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return int64_t(i);  // overlong, surrogate
    i += len;
  }
  return -1;
}

namespace {

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

bool is_jsonl(const std::string& path, const DocumentOptions& o) {
  if (o.format != "auto") return o.format == "jsonl";
  std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson" || ext == ".json";
}

bool looks_binary(std::ifstream& in) {
  char buf[8192];
  in.read(buf, sizeof buf);
  std::streamsize got = in.gcount();
  in.clear();
  in.seekg(0);
  return std::memchr(buf, 0, size_t(got)) != nullptr;
}

}  // namespace

bool for_each_document(const std::string& path, const DocumentOptions& o,
                       const std::function<void(std::string&&, uint64_t)>& on_doc) {
  std::ifstream in(path, std::ios::binary);
  ANVIL_CHECK(in.good(), "prepare", "a readable input file", str("'", path, "': ", std::strerror(errno)));
  if (looks_binary(in)) return false;
  const bool jsonl = is_jsonl(path, o);
  const bool whole_file = !jsonl && o.separator.empty() && o.split == "file";

  std::string line, doc;
  uint64_t bytes = 0;
  int64_t lineno = 0, doc_line = 1;  // doc_line: where the current document starts, for messages
  auto emit = [&]() {
    if (!blank(doc)) {
      int64_t bad = utf8_error_offset(doc);
      ANVIL_CHECK(bad < 0, "prepare", "UTF-8 text",
                  str("an invalid byte in '", path, "' in the document starting at line ", doc_line,
                      " (byte ", bad, " of it)"));
      on_doc(std::move(doc), bytes);
    }
    doc.clear();
    doc_line = lineno + 1;
  };
  while (std::getline(in, line)) {
    lineno++;
    bytes += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (jsonl) {
      if (blank(line)) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        ANVIL_THROW("prepare", "one JSON object per line", str("'", path, "' line ", lineno, ": ", e.what()));
      }
      ANVIL_CHECK(j.is_object() && j.contains(o.jsonl_field) && j[o.jsonl_field].is_string(), "prepare",
                  str("an object with a string field \"", o.jsonl_field, "\" (--jsonl-field)"),
                  str("'", path, "' line ", lineno));
      doc = j[o.jsonl_field].get<std::string>();
      doc_line = lineno;
      emit();
      continue;
    }
    bool boundary = o.separator.empty() ? (o.split == "paragraph" && blank(line)) : line == o.separator;
    if (boundary && !whole_file) {
      emit();
      continue;
    }
    if (!doc.empty()) doc += '\n';
    doc += line;
  }
  ANVIL_CHECK(!in.bad(), "prepare", "a readable input file", str("'", path, "': read error"));
  emit();
  return true;
}

}  // namespace anvil
