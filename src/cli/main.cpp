// redlite: one binary, one small file per subcommand.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const rl::cli::Args&);
  const char* help;
};

constexpr Command kCommands[] = {
    {"run", rl::cli::cmd_run, "generate text from a prompt"},
    {"chat", rl::cli::cmd_chat, "interactive multi-turn chat"},
    {"eval", rl::cli::cmd_eval,
     "write the logits of every position of a token file (parity checks)"},
    {"tokenize", rl::cli::cmd_tokenize, "print the token ids of a text"},
    {"detokenize", rl::cli::cmd_detokenize, "print the text of token ids"},
    {"info", rl::cli::cmd_info, "describe a GGUF file; dump a tensor"},
    {"mkmodel", rl::cli::cmd_mkmodel, "write a synthetic qwen3next GGUF with random weights"},
    {"bench", rl::cli::cmd_bench, "benchmarks: kernel, decode, prefill"},
    {"selftest", rl::cli::cmd_selftest, "check every GPU kernel against a float64 reference"},
};

void print_usage(std::FILE* out) {
  std::fprintf(
      out,
      "Red Lite: a Qwen3-Next (qwen3next GGUF) inference engine\n\n"
      "usage: redlite <command> [options]    (redlite <command> --help for its options)\n\n"
      "commands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.help);
  std::fprintf(out, "\nThe server is a separate binary: redlite-server --help\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    rl::cli::Args args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "redlite %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "redlite: unknown command '%s' (redlite --help lists them)\n", argv[1]);
  return 2;
}
