// Running a tools/*.py script from a test: the summaries the docs quote are checked on hand-made inputs.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "../io/io_test_util.h"
#include "../io/tokenizer_test_util.h"

namespace anvil::test {

// True when python3 can import `module` (numpy: CI pip-installs it; csv: the standard library).
inline bool python_has(const std::string& module) {
  return std::system(str("python3 -c 'import ", module, "' >/dev/null 2>&1").c_str()) == 0;
}

// What `python3 tools/SCRIPT ARGS` printed (stdout and stderr); fails the test when it exits non-zero.
inline std::string tool_output(const std::string& script, const std::string& args) {
  return tok_test::run_command(str("python3 ", ANVIL_SOURCE_DIR, "/tools/", script, " ", args, " 2>&1"));
}

// `python3 tools/SCRIPT FILE` on a file it must refuse: its non-zero exit status is checked, and what it printed
// is returned.
inline std::string tool_refusal(const TempDir& dir, const std::string& script, const std::string& file) {
  const std::string out = dir.file("refusal.txt");
  const int status = run_status(str("python3 ", ANVIL_SOURCE_DIR, "/tools/", script, " ", file, " >", out, " 2>&1"));
  EXPECT_NE(status, 0) << script << " accepted " << file;
  std::ifstream in(out);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace anvil::test
