#include "cli/common.h"

#include <algorithm>
#include <cstdio>

namespace rl::cli {

std::optional<int> parse_args(CLI::App& app, const Args& args) {
  Args reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "redlite %s: %s (see --help)\n", app.get_name().c_str(), e.what());
    return 2;
  }
  return std::nullopt;
}

}  // namespace rl::cli
