// Helpers shared by the subcommands: argument parsing with CLI11 and consistent exits.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>

#include "cli/commands.h"

namespace rl::cli {

// Parses args into app. Returns nullopt to go on, or the status to exit with: 0 after --help,
// 2 after a usage error (message on stderr).
std::optional<int> parse_args(CLI::App& app, const Args& args);

}  // namespace rl::cli
