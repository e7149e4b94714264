// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_info(const Args&) { fail("'info' is not implemented yet"); }

}  // namespace rl::cli
