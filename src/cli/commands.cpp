#include "cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace anvil::cli {

std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}

static void print_help() {
  std::printf("anvil: train, fine-tune and serve LLMs on NVIDIA GPUs, AMD GPUs and CPUs\n\nusage: anvil <command> [options]\n\ncommands:\n");
  auto cs = commands();
  std::sort(cs.begin(), cs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : cs) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`anvil <command> --help` lists a command's options.\n");
}

int run(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  for (auto& c : commands())
    if (c.name == argv[1]) return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "anvil: unknown command '%s' (expected one of:", argv[1]);
  for (auto& c : commands()) std::fprintf(stderr, " %s", c.name.c_str());
  std::fprintf(stderr, ")\n");
  return 2;
}

}  // namespace anvil::cli
