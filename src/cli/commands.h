// Subcommand registry: each cli/cmd_<name>.cpp registers one subcommand with its help line.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace anvil::cli {

struct Command {
  std::string name;     // "generate"
  std::string summary;  // one line for `anvil --help`
  std::function<int(int argc, char** argv)> run;  // argv[0] is the subcommand name
};

std::vector<Command>& commands();
struct Register {
  explicit Register(Command c) { commands().push_back(std::move(c)); }
};

int run(int argc, char** argv);

}  // namespace anvil::cli
