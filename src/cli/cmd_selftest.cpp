// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_selftest(const Args&) { fail("'selftest' is not implemented yet"); }

}  // namespace rl::cli
