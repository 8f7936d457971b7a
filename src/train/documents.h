// Splitting input files into documents for `anvil prepare`.
//   text files: one document per file, per blank-line-separated paragraph, or per run of lines between
//               separator lines (fortune files separate entries with a line holding only "%");
//   JSON Lines: one document per line, the string field `jsonl_field` of each object.
// Documents are whole UTF-8 strings; empty or whitespace-only ones are dropped. Files with a NUL byte in their
// first 8 KiB are treated as binary (fortune's .dat indexes, for example) and skipped with a warning.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace anvil {

struct DocumentOptions {
  std::string format = "auto";  // auto (by extension: .jsonl .ndjson .json → jsonl) | text | jsonl
  std::string jsonl_field = "text";
  std::string split = "file";   // text files: file | paragraph
  std::string separator;        // non-empty: a line equal to it ends a document (overrides `split`)
};

void validate(const DocumentOptions& o);  // throws naming the bad option

// Calls on_doc(text, bytes_read_so_far_in_this_file) for each document of `path`, in file order.
// Returns false (and calls nothing) for a binary file. Invalid UTF-8 or a bad JSON line → anvil::Error naming
// the file and line.
bool for_each_document(const std::string& path, const DocumentOptions& o,
                       const std::function<void(std::string&& doc, uint64_t bytes_read)>& on_doc);

// Offset of the first byte that breaks UTF-8 well-formedness, or -1 if `s` is valid.
int64_t utf8_error_offset(const std::string& s);

}  // namespace anvil
