// Running the `anvil` binary from tests: its path comes from ANVIL_BIN (set by ctest); output is stdout and
// stderr together, stdin is /dev/null. Shared by the CLI, bench and loss-parity tests.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace anvil::test {

struct CmdOutput {
  int code = -1;    // exit status, -1 when the command did not exit normally or could not start
  std::string out;  // stdout and stderr together
};

// Runs a shell command line as given (the caller redirects stderr when it wants it).
inline CmdOutput run_shell(const std::string& cmd) {
  CmdOutput r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// `anvil <args>`, with `prefix` (e.g. "cd DIR && OMP_NUM_THREADS=1 ") before it.
inline CmdOutput run_anvil(const std::string& args, const std::string& prefix = "") {
  return run_shell(prefix + "'" + std::getenv("ANVIL_BIN") + "' " + args + " </dev/null 2>&1");
}

// Why the binary cannot be run (the test should skip), or empty when it can.
inline std::string anvil_bin_missing() {
  const char* bin = std::getenv("ANVIL_BIN");
  if (!bin || !*bin) return "ANVIL_BIN is not set";
  if (!std::filesystem::exists(bin)) return std::string("ANVIL_BIN=") + bin + " does not exist (not built)";
  return "";
}

inline bool has(const CmdOutput& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

}  // namespace anvil::test
