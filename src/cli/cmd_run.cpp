// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_run(const Args&) { fail("'run' is not implemented yet"); }

}  // namespace rl::cli
