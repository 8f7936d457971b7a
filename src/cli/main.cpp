// The anvil command. Each subcommand lives in its own file (cli/cmd_*.cpp) and registers itself.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  try {
    return anvil::cli::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil: error: %s\n", e.what());
    return 1;
  }
}
