// Helpers shared by the tokenizer and BPE-trainer tests: fixture paths, JSON-lines reading, running the
// Python reference, and readable mismatch reports.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/tokenizer.h"

namespace anvil::tok_test {

inline std::string fixture_dir() { return std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures/tokenizers"; }

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::vector<nlohmann::json> parse_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// True when `python3 -c "import tokenizers"` works (CI pip-installs it; other machines may not have it).
inline bool python_has_tokenizers() {
  return std::system("python3 -c 'import tokenizers' >/dev/null 2>&1") == 0;
}

// stdout of a shell command; fails the test when it exits non-zero.
inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) { ADD_FAILURE() << "cannot run: " << cmd; return out; }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "command failed: " << cmd;
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

// Compares anvil's encoding of every {"text", "ids", "ids_special"} line with the reference ids.
// Returns the number of mismatching lines (the first few are reported in full, with tokens).
inline int compare_encodings(const Tokenizer& tok, const std::vector<nlohmann::json>& lines, const std::string& what) {
  int bad = 0, checked = 0;
  for (const auto& l : lines) {
    if (!l.contains("ids")) continue;
    std::string text = l["text"].get<std::string>();
    for (bool special : {false, true}) {
      auto want = l[special ? "ids_special" : "ids"].get<std::vector<int32_t>>();
      auto got = tok.encode(text, special);
      ++checked;
      if (got == want) continue;
      if (++bad <= 5) {
        std::string gt, wt;
        for (int32_t id : got) gt += "[" + tok.id_to_token(id) + "]";
        for (int32_t id : want) wt += "[" + tok.id_to_token(id) + "]";
        ADD_FAILURE() << what << ": encode(" << nlohmann::json(text).dump() << ", special=" << special
                      << ")\n  anvil:  " << ids_str(got) << "\n  python: " << ids_str(want) << "\n  anvil tokens:  "
                      << gt << "\n  python tokens: " << wt;
      }
    }
  }
  EXPECT_GT(checked, 0) << what << ": no encodings to compare";
  return bad;
}

}  // namespace anvil::tok_test
