// Placeholder until the subcommand lands.
#include "cli/commands.h"
#include "util/error.h"

namespace rl::cli {

int cmd_mkmodel(const Args&) { fail("'mkmodel' is not implemented yet"); }

}  // namespace rl::cli
